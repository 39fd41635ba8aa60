"""Saving, loading and deleting sessions."""

from __future__ import annotations

import base64
import builtins
import functools
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated

from .._arguments import Given, Passed, sequence_of, validate_arguments
from .._validation import Id, check_text, path_argument
from ..errors import InvalidRecord, LifecycleConflict
from ..records import SessionPage, SessionRecord, SessionState
from ..storage.protocols import Transactions, WriteContext
from ._common import lock_session, record_fault_transition

ENDED_STATES = frozenset({SessionState.CLOSED, SessionState.ERROR})
"""The states of a session that has ended: no runtime runs for it and no lifecycle operation
is under way (`closing` and `destroying` are still ending). Only such sessions are removed by
`remove_ended`."""

MAX_REMOVED = 1000
"""The most sessions one `remove_ended` call takes (one transaction)."""

MAX_SESSION_PAGE = 1000
"""The most sessions one `page` holds."""

MAX_CURSOR_CHARS = 1024
"""The longest `before` a page takes (the cursors it gives are far shorter: an id is at most
128 characters)."""

_log = logging.getLogger("session_journal")


class SessionService:
    """`store.sessions`."""

    def __init__(self, transactions: Transactions) -> None:
        self._transactions = transactions

    @validate_arguments(record="session record")
    def save(
        self, record: Given[SessionRecord], *, uow: Passed[WriteContext | None] = None
    ) -> None:
        """Upsert the session in place with its context and checkpoint metadata (a `None`
        checkpoint removes the stored one); a new `last_error` appends one `session_fault`."""

        def work(uow: WriteContext) -> None:
            # Insert first: of two controllers saving the same new session, the second then
            # waits for the first and compares with its error, so the fault is emitted once.
            stored = None if uow.sessions.insert_if_absent(record) else uow.sessions.lock(record.id)
            uow.sessions.upsert(record)
            previous_error = None if stored is None else stored.last_error
            record_fault_transition(
                uow, record, previous_error, self._transactions.options.max_body_bytes
            )
            uow.commit()

        return self._transactions.submit(work, f"save session {record.id!r}", uow)

    @validate_arguments(record="session record")
    def save_lifecycle(
        self, record: Given[SessionRecord], *, uow: Passed[WriteContext | None] = None
    ) -> None:
        """Update `state`, `last_error` and `last_checkpoint_error` of an existing session
        (`SessionNotFound` otherwise); a new `last_error` appends one `session_fault`."""

        def work(uow: WriteContext) -> None:
            stored = lock_session(uow, record.id)
            uow.sessions.update_lifecycle(record)
            record_fault_transition(
                uow, record, stored.last_error, self._transactions.options.max_body_bytes
            )
            uow.commit()

        return self._transactions.submit(work, f"save lifecycle of session {record.id!r}", uow)

    @validate_arguments()
    def get(
        self, session_id: Id, *, uow: Passed[WriteContext | None] = None
    ) -> SessionRecord | None:
        """The session, or `None` when no such session exists."""
        with self._transactions.reading(f"get session {session_id!r}", uow) as read:
            return read.sessions.get(session_id)

    @validate_arguments()
    def list(
        self,
        *,
        workspace_id: Id | None = None,
        project_id: Id | None = None,
        uow: Passed[WriteContext | None] = None,
    ) -> builtins.list[SessionRecord]:
        """Sessions in the workspace and project given (either optional), ordered by id."""
        with self._transactions.reading("list sessions", uow) as read:
            return read.sessions.list(workspace_id=workspace_id, project_id=project_id)

    @validate_arguments()
    def count_by_state(
        self, *, workspace_id: Id | None = None, uow: Passed[WriteContext | None] = None
    ) -> dict[SessionState, int]:
        """How many sessions are in each state, every state included (0 when none), of one
        workspace when `workspace_id` is given; one statement (`GROUP BY`)."""
        with self._transactions.reading("count sessions by state", uow) as read:
            counts = read.sessions.count_by_state(workspace_id)
        return {state: counts.get(state.value, 0) for state in SessionState}

    @validate_arguments()
    def page(
        self,
        *,
        workspace_id: Id | None = None,
        state: SessionState | None = None,
        before: str | None = None,
        limit: int = 50,
        uow: Passed[WriteContext | None] = None,
    ) -> SessionPage:
        """Sessions newest first by `created_at` (then by id, descending), in the workspace and
        state given (either optional), each with its activity snapshot and open checkpoint
        operation, read by one statement (no query per session); at most `limit` (clamped to
        1..`MAX_SESSION_PAGE`). Continue with `before=page.next_before` (an opaque keyset
        cursor; `None` on the last page): sessions created meanwhile never shift a later page.
        `created_at` has the database's resolution (a second on SQLite; the saving
        transaction's start on PostgreSQL): sessions that tie on it come by id. A `before` that
        is not in the form of a page's cursor is `InvalidRecord`; a cursor names a position,
        the sessions below it are listed."""
        size = max(1, min(limit, MAX_SESSION_PAGE))
        keyset = None if before is None else _keyset(before)
        with self._transactions.reading("list sessions by page", uow) as read:
            rows = read.sessions.page(
                workspace_id=workspace_id, state=state, before=keyset, limit=size + 1
            )
        shown = rows[:size]
        more = len(rows) > size
        return SessionPage(
            sessions=[summary for summary, _ in shown],
            next_before=_cursor(shown[-1][1]) if more else None,
        )

    @validate_arguments()
    def list_ended(
        self,
        *,
        updated_before: datetime | None = None,
        after_id: Id | None = None,
        limit: int = MAX_REMOVED,
        uow: Passed[WriteContext | None] = None,
    ) -> builtins.list[str]:
        """Ids of ended sessions (`closed`, `error`: what `remove_ended` takes), by id: those
        after `after_id` (a keyset cursor: the last id of the previous call), and with
        `updated_before` (a timezone-aware time) only those last saved before it. At most
        `limit`, clamped to 1..`MAX_REMOVED`, so a page is one `remove_ended` call. It reads
        the sessions table without an index on the time: an operator's call, not a hot path."""
        if updated_before is not None and updated_before.utcoffset() is None:
            raise InvalidRecord(
                "updated_before must be a timezone-aware datetime (a naive one could be in any "
                f"zone), got {updated_before.isoformat()}"
            )
        with self._transactions.reading("list ended sessions", uow) as read:
            return read.sessions.ids_in_states(
                ENDED_STATES,
                updated_before=updated_before,
                after_id=after_id,
                limit=max(1, min(limit, MAX_REMOVED)),
            )

    @validate_arguments()
    def delete(self, session_id: Id, *, uow: Passed[WriteContext | None] = None) -> bool:
        """Delete the session with its context, checkpoint, events, activity and project-index
        rows (an id used again later, maybe in another workspace, inherits none of them);
        whether it existed. The event frontier (`latest_seq`) does not move."""

        def work(uow: WriteContext) -> bool:
            existed = uow.sessions.delete(session_id)
            if existed:
                uow.project_events.delete_session(session_id)
            uow.commit()
            return existed

        return self._transactions.submit(work, f"delete session {session_id!r}", uow)

    @validate_arguments(session_ids="session ids")
    def remove_ended(
        self,
        session_ids: Annotated[Sequence[Id], sequence_of("session ids")],
        *,
        sessions_dir: Passed[str | os.PathLike[str] | None] = None,
        uow: Passed[WriteContext | None] = None,
    ) -> builtins.list[str]:
        """Remove ended sessions (state `closed` or `error`) with everything of theirs, in one
        transaction: the session row and, by cascade, its workspace context, checkpoint
        metadata, events, activity, checkpoint operation, projection state and transcript;
        and its rows of the project index. Returns the ids of the sessions this call removed
        from the database, sorted; an id of no stored session is no error and is not returned.
        If any session given has not ended, `LifecycleConflict` names it and its state, and
        nothing is removed (no directory either). At most `MAX_REMOVED` ids per call
        (`InvalidRecord` otherwise). The frontier does not move; the removed events leave
        holes that are not expiry.

        With `sessions_dir` (the directory holding one directory per session, named by its
        id), `sessions_dir/<id>` (the session's event files) is deleted for every id given,
        those of no stored session included, so that calling again mends a deletion a crash
        cut short. Only once the rows are gone for good: after this call's commit, or with
        `uow=` after the commit of that unit of work (the `unit_of_work()` block's
        `commit()`, the caller's commit under `store.bind`), never if the removal is rolled
        back (with its savepoint or transaction). A directory that cannot be deleted then is
        a warning logged on `session_journal` naming its path, never an exception: the
        commit has happened."""
        ids = sorted(set(session_ids))
        if len(ids) > MAX_REMOVED:
            raise InvalidRecord(
                f"session ids: at most {MAX_REMOVED} sessions per call, got {len(ids)}; "
                "nothing was removed"
            )
        directory = None if sessions_dir is None else _sessions_dir(sessions_dir)

        def work(uow: WriteContext) -> builtins.list[str]:
            found = {}
            for session_id in ids:  # one lock order: by id
                stored = uow.sessions.lock(session_id)
                if stored is not None:
                    found[session_id] = stored.state
            check_ended(found)
            for session_id in found:
                uow.project_events.delete_session(session_id)
                uow.sessions.delete(session_id)
            if directory is not None:
                # Not now: the event files would be gone while a rollback brings the rows
                # back. Every id given, as the rows of some may have gone in an earlier call
                # whose deletions a crash interrupted.
                uow.after_commit(functools.partial(_remove_directories, directory, ids))
            uow.commit()
            return builtins.list(found)

        return self._transactions.submit(work, f"remove {len(ids)} ended session(s)", uow)


def check_ended(states: Mapping[str, SessionState]) -> None:
    """`LifecycleConflict` naming every session of `states` (id -> state) that has not ended,
    if any: `remove_ended` removes all the sessions it is given or none."""
    running = {sid: state for sid, state in states.items() if state not in ENDED_STATES}
    if running:
        listed = ", ".join(f"{sid!r} ({state.value})" for sid, state in running.items())
        raise LifecycleConflict(
            f"remove ended sessions: {len(running)} session(s) have not ended: {listed}; "
            "only closed or error sessions are removed; nothing was removed"
        )


def _cursor(keyset: tuple[str, str]) -> str:
    """The opaque cursor of a keyset: its JSON, base64url without padding."""
    return base64.urlsafe_b64encode(json.dumps(list(keyset)).encode()).decode().rstrip("=")


def _keyset(cursor: str) -> tuple[str, str]:
    refused = InvalidRecord(f"before is not a cursor that sessions.page gave: {cursor[:80]!r}")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise refused
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, UnicodeDecodeError):
        raise refused from None
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or not all(isinstance(part, str) and part for part in decoded)
    ):
        raise refused
    try:  # text both databases can compare: no NUL, no lone surrogate
        return check_text(decoded[0]), check_text(decoded[1])
    except ValueError:
        raise refused from None


def _sessions_dir(value: object) -> Path:
    directory = Path(
        path_argument(value, "sessions_dir", "a path of a directory", "nothing was removed")
    )
    if not directory.is_dir():
        raise InvalidRecord(
            f"sessions_dir {str(directory)!r} is not a directory; nothing was removed"
        )
    return directory.absolute()  # the deletions may come later (a commit of the caller's)


def _remove_directories(directory: Path, session_ids: builtins.list[str]) -> None:
    """After the commit that removed the sessions' rows: delete each session's directory under
    `directory` (the ids are validated `Id`s: one path component, never `.` or `..`; `rmtree`
    refuses a symbolic link rather than follow it); a missing one is passed over. One that
    cannot be deleted is a warning naming its path (the rows are gone by then: calling
    `remove_ended` again with the same ids deletes it)."""
    for session_id in session_ids:
        target = directory / session_id
        try:
            shutil.rmtree(target)
        except FileNotFoundError:
            continue
        except OSError as error:
            _log.warning(
                "remove ended sessions: the directory %s of session %r was not deleted (%s); "
                "its session is removed from the database: call remove_ended again to delete it",
                target,
                session_id,
                error.strerror or error,
            )
