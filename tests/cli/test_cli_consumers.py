"""`session-journal consumers list | show | reset | remove`, text and `--json`, with the
refusals of `reset` (skipping unread events, a held consumer) and `remove` (events waiting, a
held consumer) and `--dry-run`, on both backends."""

from __future__ import annotations

import json

import pytest

from session_journal import ApiEventFilter, Store
from session_journal.cli import main
from tests.integration.test_consumers import age, log_of


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def consumers(store: Store) -> Store:
    """A log of 6 events; `faults` (a filter) at 2, stuck for 10 minutes; `all` at 6."""
    log_of(store, 6)
    store.consumers.register("faults", filter=ApiEventFilter(types=["session_fault"]), start=2)
    store.consumers.register("all", start="now")
    age(store, "faults", 600)
    return store


def test_list_marks_the_stuck_and_the_held(
    consumers: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    url = consumers.url
    consumers.consumers.acquire("all", "host-a:41", ttl_s=60)
    code, out, err = run(capsys, "--url", url, "consumers", "list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("all  position 6  lag 0 (0.0 s)  held by host-a:41 (generation 1)")
    assert lines[1].startswith("faults  position 2  lag 4 (")
    assert lines[1].endswith("STUCK (no ack for more than 300 s)")

    code, out, _ = run(capsys, "--url", url, "consumers", "list", "--json")
    documents = [json.loads(line) for line in out.splitlines()]
    assert [(doc["name"], doc["position"], doc["stuck"]) for doc in documents] == [
        ("all", 6, False),
        ("faults", 2, True),
    ]
    assert documents[1]["filter"] == {"types": ["session_fault"]}


def test_list_of_none(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--url", store.url, "consumers", "list") == (0, "no consumers\n", "")
    assert run(capsys, "--url", store.url, "consumers", "list", "--json") == (0, "", "")


def test_show(consumers: Store, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--url", consumers.url, "consumers", "show", "faults")
    assert code == 0
    fields = dict(line.split(": ", 1) for line in out.splitlines())
    assert (fields["name"], fields["position"], fields["lag"], fields["stuck"]) == (
        "faults",
        "2",
        "4",
        "True",
    )
    assert fields["filter"] == '{"types": ["session_fault"]}'
    code, out, _ = run(capsys, "--url", consumers.url, "consumers", "show", "faults", "--json")
    assert json.loads(out)["stuck_after_s"] == 300.0
    assert run(capsys, "--url", consumers.url, "consumers", "show", "ghost") == (
        1,
        "",
        "session-journal: consumer 'ghost' is not registered\n",
    )


def test_reset_back_and_forward(consumers: Store, capsys: pytest.CaptureFixture[str]) -> None:
    url = consumers.url
    assert run(capsys, "--url", url, "consumers", "reset", "all", "--to", "3", "--dry-run") == (
        0,
        "would reset 'all': position 6 -> 3: seqs 4..6 are read again; nothing was changed\n",
        "",
    )
    assert consumers.consumers.position("all") == 6
    assert run(capsys, "--url", url, "consumers", "reset", "all", "--to", "3") == (
        0,
        "reset 'all': position 6 -> 3: seqs 4..6 are read again\n",
        "",
    )
    assert run(capsys, "--url", url, "consumers", "reset", "all", "--to", "now") == (
        1,
        "",
        "session-journal: consumers reset 'all' --to now: it would skip seqs 4..6, which it has "
        "not read; give --allow-skip to skip them; nothing was changed\n",
    )
    assert consumers.consumers.position("all") == 3
    code, out, _ = run(
        capsys, "--url", url, "consumers", "reset", "all", "--to", "now", "--allow-skip", "--json"
    )
    assert (code, json.loads(out)) == (0, {"name": "all", "from": 3, "to": 6, "dry_run": False})
    assert run(capsys, "--url", url, "consumers", "reset", "all", "--to", "9")[2] == (
        "session-journal: seq 9 is above the frontier 6; nothing was changed\n"
    )
    with pytest.raises(SystemExit) as usage:
        run(capsys, "--url", url, "consumers", "reset", "all", "--to=-1")
    assert usage.value.code == 2


def test_remove_refuses_while_events_wait_or_a_replica_holds_it(
    consumers: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    url = consumers.url
    assert run(capsys, "--url", url, "consumers", "remove", "faults") == (
        1,
        "",
        "session-journal: consumers remove 'faults': seqs 3..6 wait for it (4 seqs); give "
        "--allow-unread to remove it anyway; nothing was changed\n",
    )
    assert run(
        capsys, "--url", url, "consumers", "remove", "faults", "--allow-unread", "--dry-run"
    ) == (0, "would remove 'faults' at position 2; nothing was changed\n", "")
    assert run(capsys, "--url", url, "consumers", "remove", "faults", "--allow-unread") == (
        0,
        "removed 'faults' at position 2\n",
        "",
    )

    lease = consumers.consumers.acquire("all", "host-a:41", ttl_s=60)
    refused = (
        "session-journal: consumers remove 'all': 'host-a:41' holds its lease (generation 1): "
        "a replica is at work and would go on from its own page; stop it first, or give "
        "--allow-held to remove it anyway; nothing was changed\n"
    )
    assert run(capsys, "--url", url, "consumers", "remove", "all") == (1, "", refused)
    code, _, err = run(capsys, "--url", url, "consumers", "reset", "all", "--to", "1")
    assert code == 1 and "'host-a:41' holds its lease" in err
    lease.release()
    assert run(capsys, "--url", url, "consumers", "remove", "all", "--json") == (
        0,
        '{"name": "all", "position": 6, "removed": true}\n',
        "",
    )
    assert [status.name for status in consumers.consumers.list()] == []


def test_reset_to_the_beginning_of_a_pruned_log(
    consumers: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--to 0` is `--to beginning`: the floor of the pruned log; below it is refused."""
    url = consumers.url
    consumers.events.prune(through_seq=4, force=True)  # past `faults` (at 2)
    for to in ("0", "beginning"):
        assert run(capsys, "--url", url, "consumers", "reset", "all", "--to", to, "--dry-run") == (
            0,
            "would reset 'all': position 6 -> 4: seqs 5..6 are read again; nothing was changed\n",
            "",
        )
    assert run(capsys, "--url", url, "consumers", "reset", "all", "--to", "3") == (
        1,
        "",
        "session-journal: seq 3 is below the floor of the pruned log 4: the events up to it are "
        "gone; reset to 4 (--to beginning) or later; nothing was changed\n",
    )
    code, out, _ = run(capsys, "--url", url, "consumers", "reset", "faults", "--to", "0")
    assert (code, out) == (1, "")  # forward from 2 to the floor 4 skips seqs 3..4
    code, out, _ = run(
        capsys, "--url", url, "consumers", "reset", "faults", "--to", "0", "--allow-skip", "--json"
    )
    assert (code, json.loads(out)) == (
        0,
        {"name": "faults", "from": 2, "to": 4, "dry_run": False},
    )
    for bad in ("1_0", "\u0663", "1e3", "-1"):
        with pytest.raises(SystemExit):
            run(capsys, "--url", url, "consumers", "reset", "all", f"--to={bad}")
        assert "expected a seq (0 or more, in digits)" in capsys.readouterr().err
