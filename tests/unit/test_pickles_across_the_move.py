"""Objects pickled by the code before the layout of 0.2.0 (modules moved into `storage/` and
private helpers renamed, see CHANGELOG.md) unpickle, equal, with the code after it: the public
classes kept their `__module__`, and the moved internal ones load through their old paths
(`session_journal._moved`) for one release, warning (`DeprecationWarning`) as they load.

`pickled_before_0.2.0.bin` holds `pickle.dumps(objects())` as the code at commit c9d87ef made
it (`PYTHONPATH=<that checkout>/src python tests/unit/test_pickles_across_the_move.py` writes
it); `objects()` builds the same values with either code."""

from __future__ import annotations

import pickle
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import session_journal
from session_journal import (
    ApiEvent,
    ApiEventFilter,
    ApiEventPage,
    CheckpointMetadata,
    CheckpointOperation,
    OutcomeReason,
    SessionFault,
    SessionRecord,
    SessionState,
    StoreOptions,
)
from tests.helpers import forget_old_paths, old_path_deprecated

PICKLED = Path(__file__).with_name("pickled_before_0.2.0.bin")


@pytest.fixture(autouse=True)
def no_old_path_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    forget_old_paths(monkeypatch)


def objects() -> dict[str, Any]:
    """One value of each class a user may pickle, and of the moved internal value classes."""
    from session_journal.services.events import JsonEvents, PrunePlan

    # The old path, on purpose (what the code before the move imported); it warns in a process
    # that has not imported it yet.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from session_journal.repositories.events import LogVersion
        from session_journal.repositories.sessions import StoredLifecycle

    errors = {
        name: getattr(session_journal, name)("what went wrong")
        for name in sorted(session_journal.__all__)
        if isinstance(getattr(session_journal, name), type)
        and issubclass(getattr(session_journal, name), session_journal.SessionJournalError)
        and name not in {"DataLossRefused", "CursorExpired", "LeaseHeld"}
    }
    errors["DataLossRefused"] = session_journal.DataLossRefused("0007", "0005", ("floor",))
    errors["CursorExpired"] = session_journal.CursorExpired(pruned_through=9, cursor=4)
    if hasattr(session_journal, "LeaseHeld"):  # added since the file was made
        errors["LeaseHeld"] = session_journal.LeaseHeld("projector", "host-1:42", 1_700_000_000)
    event = ApiEvent(
        seq=7,
        session_id="s-1",
        recorded_at_ms=1_700_000_000_000,
        event=SessionFault(reason=OutcomeReason.STARTUP_FAILED, message="no runtime"),
    )
    checkpoint = CheckpointMetadata(
        archive_path="a.tar",
        sha256="0" * 64,
        created_at="2026-12-03T10:00:00Z",
        event_frontier=7,
    )
    return {
        "errors": errors,
        "record": SessionRecord(
            id="s-1", project_id="p", state=SessionState.RUNNING, checkpoint=checkpoint
        ),
        "operation": CheckpointOperation(session_id="s-1", command_id="c-1"),
        "event": event,
        "page": ApiEventPage(events=[event], next_after_seq=7, latest_seq=9, pruned_through=2),
        "filter": ApiEventFilter(session_id="s-1", types=["session_fault"]),
        # The file holds 0.1's defaults: a default changed since is given as it was then.
        "options": StoreOptions(busy_timeout_s=5.0, follow_window_bytes=16 * 1024 * 1024),
        "plan": PrunePlan(through_seq=3, events=2, pruned_through=1, latest_seq=9),
        "json events": JsonEvents(["{}"], 7, 9, 2),
        "log version": LogVersion(9, 2, 4),
        "lifecycle": StoredLifecycle(SessionState.RUNNING, None),
    }


def comparable(value: Any) -> Any:
    """Exceptions compare by class and arguments; everything else by `==`."""
    if isinstance(value, BaseException):
        return (type(value), value.args, str(value))
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    return value


def test_objects_pickled_before_the_move_unpickle_equal() -> None:
    with old_path_deprecated("session_journal.repositories"):
        before = pickle.loads(PICKLED.read_bytes())
    now = objects()
    # Errors added since the file was made have nothing pickled to compare with.
    assert set(before["errors"]) <= set(now["errors"])
    now["errors"] = {name: now["errors"][name] for name in before["errors"]}
    assert comparable(before) == comparable(now)


def test_the_public_classes_kept_their_module() -> None:
    with old_path_deprecated("session_journal.repositories"):
        before = pickle.loads(PICKLED.read_bytes())
    public = {name: value for name, value in before.items() if name in PUBLIC_MODULES}
    for name, value in public.items():
        assert type(value).__module__ == PUBLIC_MODULES[name], name
    for error in before["errors"].values():
        assert type(error).__module__ == "session_journal.errors"


PUBLIC_MODULES = {
    "record": "session_journal.records",
    "operation": "session_journal.records",
    "event": "session_journal.api_events",
    "page": "session_journal.api_events",
    "filter": "session_journal.api_events",
    "options": "session_journal.config",
    "plan": "session_journal.services.events",
    "json events": "session_journal.services.events",
}


if __name__ == "__main__":  # writes the file with whatever code is on the path
    PICKLED.write_bytes(pickle.dumps(objects(), protocol=4))
    sys.stdout.write(f"wrote {PICKLED}\n")
