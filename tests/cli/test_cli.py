"""The command line: each command once, on both backends."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from session_journal import Store, migrations
from session_journal.cli import main
from session_journal.journal import JournalWriter
from tests.factories import ActivityFactory, SessionFactory, flow_start, user_msg


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_db_upgrade_current_and_check(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--url", url, "db", "check")
    assert code == 1
    assert "revision: none" in out and "alembic upgrade head" in out

    shown = sa.make_url(url).render_as_string(hide_password=True)
    assert run(capsys, "--url", url, "db", "upgrade", "0001_initial")[:2] == (
        0,
        f"database {shown} at 0001_initial\n",
    )
    assert run(capsys, "--url", url, "db", "current")[:2] == (0, "0001_initial\n")
    code, out, _ = run(capsys, "--url", url, "db", "upgrade")
    assert (code, out) == (0, f"database {shown} at {migrations.head()}\n")

    code, out, _ = run(capsys, "--url", url, "db", "check")
    assert code == 0
    assert out.splitlines() == [
        "revision: 0015_recorded_at_index",
        "version_table: session_journal_version",
        "schema_level: 15",
        "minimum_compatible_level: 2",
        "code_schema_level: 15",
        "verdict: up to date",
    ]


def test_events_prints_one_json_object_per_line(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store.open(migrated_url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="a", workspace_id="w1"))
        store.sessions.save(SessionFactory(id="b", workspace_id="w2"))
        for session in ["a", "b", "a"]:
            store.faults.record_startup_fault(session, f"fault of {session}")

    code, out, _ = run(capsys, "--url", migrated_url, "events")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3]
    assert set(lines[0]) == {"seq", "session_id", "recorded_at_ms", "event"}
    assert lines[0]["event"] == {
        "type": "session_fault",
        "data": {"reason": "startup_failed", "message": "fault of a", "command_id": None},
    }
    seqs = lambda *args: [json.loads(x)["seq"] for x in run(capsys, *args)[1].splitlines()]  # noqa: E731
    assert seqs("--url", migrated_url, "events", "--after", "1") == [2, 3]
    assert seqs("--url", migrated_url, "events", "--session", "a") == [1, 3]
    assert seqs("--url", migrated_url, "events", "--workspace", "w2") == [2]
    assert seqs("--url", migrated_url, "events", "--limit", "2") == [1, 2]


def test_events_by_type(migrated_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Store.open(migrated_url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="a", workspace_id="w1"))
        store.faults.record_startup_fault("a", "fault")  # 1: session_fault
        store.activity.record([("a", ActivityFactory())], 5)  # 2: activity_changed
        store.faults.record_startup_fault("a", "again")  # 3: session_fault
    seqs = lambda *args: [json.loads(x)["seq"] for x in run(capsys, *args)[1].splitlines()]  # noqa: E731
    events = ["--url", migrated_url, "events"]
    assert seqs(*events, "--type", "session_fault") == [1, 3]
    assert seqs(*events, "--type", "activity_changed", "--type", "session_fault") == [1, 2, 3]
    assert seqs(*events, "--type", "session_fault", "--type", "session_fault") == [1, 3]
    assert seqs(*events, "--type", "session_fault", "--after", "1", "--session", "a") == [3]
    assert seqs(*events, "--type", "turn_started") == []
    code, out, err = run(capsys, *events, "--type", "nope")
    assert (code, out) == (1, "")
    assert "unknown event types ['nope']; the known types are activity_changed," in err
    assert len(err.splitlines()) == 1


def test_errors_are_one_line_with_exit_1(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--url", url, "events")
    assert (code, out) == (1, "")
    assert err.startswith("session-journal: database schema is out of date")
    assert len(err.splitlines()) == 1

    run(capsys, "--url", url, "db", "upgrade")
    code, _, err = run(capsys, "--url", url, "events", "--session", "../x")
    assert code == 1 and "invalid id '../x'" in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "--url", url, "events", "--after", "-1")
    assert code == 1 and "after_seq must be between 0" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["events", "--after", "soon"])
    assert exit_info.value.code == 2


def test_demo_prints_what_a_follower_sees(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--url", url, "demo")
    assert code == 0
    feed = [json.loads(line) for line in out.splitlines() if not line.startswith("#")]
    assert [(line["session_id"], line["event"]["type"]) for line in feed] == [
        ("demo-alpha", "activity_changed"),
        ("demo-alpha", "activity_changed"),
        ("demo-beta", "activity_changed"),
        ("demo-alpha", "activity_changed"),
        ("demo-beta", "session_fault"),
        ("demo-alpha", "turn_started"),
        ("demo-alpha", "input_required"),
        ("demo-alpha", "input_resolved"),
        ("demo-alpha", "turn_ended"),
        ("demo-alpha", "command_ended"),
        ("demo-alpha", "command_ended"),
        ("demo-alpha", "session_fault"),
    ]
    assert [line["seq"] for line in feed] == list(range(1, 13))
    succeeded, deferred = (feed[9]["event"]["data"]["result"], feed[10]["event"]["data"]["result"])
    assert (succeeded["outcome"], succeeded["related_command_ids"]) == ("succeeded", ["barrier-1"])
    assert (deferred["outcome"], deferred["reason"]) == ("rejected", "checkpoint_deferred")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_follow_through_the_console_script_until_interrupted(
    migrated_url: str, stop: signal.Signals
) -> None:
    env = os.environ | {"SESSION_JOURNAL_DATABASE_URL": migrated_url}
    with Store.open(migrated_url, upgrade=True) as store:
        store.sessions.save(SessionFactory(id="a"))
        store.faults.record_startup_fault("a", "before following")
        follower = subprocess.Popen(
            [sys.executable, "-m", "session_journal", "events", "--follow", "--interval", "0.05"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Append until the follower prints: however long it takes to start, it starts at the
        # frontier of that moment, so it never prints the event from before it started.
        assert follower.stdout is not None
        ready: list[object] = []
        deadline = time.monotonic() + 60
        while not ready and time.monotonic() < deadline:
            store.faults.record_startup_fault("a", "while following")
            ready, _, _ = select.select([follower.stdout], [], [], 0.5)
        line = follower.stdout.readline() if ready else ""
        follower.send_signal(stop)
        _, err = follower.communicate(timeout=20)
    assert follower.returncode == 0
    assert err == ""
    event = json.loads(line)
    assert event["seq"] > 1
    assert event["event"]["data"]["message"] == "while following"


def test_journal_verify_stats_and_search(
    migrated_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "session-1"
    with (
        Store.open(migrated_url, upgrade=True) as store,
        JournalWriter(directory, index=store.index, session_id="session-1") as writer,
    ):
        writer.send(flow_start(1))
        writer.send(user_msg(2, "the deploy failed on staging"))
    assert run(capsys, "journal", "verify", str(directory))[:2] == (0, "2 lines, 0 bad\n")
    code, out, _ = run(capsys, "journal", "stats", str(directory))
    assert code == 0
    assert json.loads(out) == {
        "event_count": 2,
        "message_count": 1,
        "user_message_count": 1,
        "event_bytes": (directory / "events.jsonl").stat().st_size,
        "last_seq": 2,
    }
    code, out, _ = run(
        capsys, "--url", migrated_url, "search", "deploy staging", "--session", "session-1"
    )
    [hit] = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and (hit["session_id"], hit["seq"], hit["kind"]) == (
        "session-1",
        2,
        "user_msg",
    )

    # A file of another name is read itself (not the events.jsonl beside it), nothing stored.
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copy(directory / "events.jsonl", backup / "copy.jsonl")
    (backup / "events.jsonl").write_bytes(b"")
    code, out, _ = run(capsys, "journal", "stats", str(backup / "copy.jsonl"))
    assert (code, json.loads(out)["event_count"]) == (0, 2)
    assert sorted(path.name for path in backup.iterdir()) == ["copy.jsonl", "events.jsonl"]

    first = (directory / "events.jsonl").read_bytes().splitlines(keepends=True)[0]
    wrong_seq = first.replace(b'"seq":1,', b'"seq":"one",', 1)
    assert wrong_seq != first
    with (directory / "events.jsonl").open("ab") as events:
        events.write(b"not json\n" + wrong_seq + b'{"seq":3,"ts"')
    code, out, _ = run(capsys, "journal", "verify", str(directory / "events.jsonl"))
    assert code == 1
    size = (directory / "events.jsonl").stat().st_size
    start = size - 13 - len(wrong_seq) - 9
    assert out.splitlines() == [
        f"offset {start}: undecodable: line: Invalid JSON: expected ident at line 1 column 2 "
        "(9 bytes)",
        f"offset {start + 9}: undecodable: seq: Input should be a valid integer, unable to parse "
        f"string as an integer ({len(wrong_seq)} bytes)",
        f"offset {size - 13}: torn: no newline at the end (13 bytes)",
        "5 lines, 3 bad",
    ]
    (directory / "stats.json").unlink()
    code, out, err = run(capsys, "journal", "stats", str(directory))
    assert (code, out) == (1, "")
    assert err == (
        f"session-journal: {directory / 'events.jsonl'}: 3 of 5 lines are torn or undecodable, "
        f"so no stats (nothing stored); `session-journal journal verify {directory}` lists them\n"
    )
    assert not (directory / "stats.json").exists()
    code, _, err = run(capsys, "journal", "verify", str(tmp_path / "missing"))
    assert code == 1 and err.startswith("session-journal: cannot read")
    missing = tmp_path / "missing" / "foo.jsonl"  # the path given, not foo.jsonl/events.jsonl
    assert run(capsys, "journal", "stats", str(missing)) == (
        1,
        "",
        f"session-journal: no such file or directory: {missing}\n",
    )
    code, _, err = run(capsys, "journal", "stats", str(tmp_path))  # a directory without one
    assert (code, err) == (
        1,
        f"session-journal: directory {tmp_path} has no events.jsonl (looked for "
        f"{tmp_path / 'events.jsonl'})\n",
    )


def test_bad_settings_are_one_line_errors(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSION_JOURNAL_BUSY_TIMEOUT_S", "sixty")
    code, _, err = run(capsys, "--url", url, "db", "check")
    assert code == 1
    expected = "SESSION_JOURNAL_BUSY_TIMEOUT_S must be a number of seconds, got 'sixty'"
    assert err == f"session-journal: {expected}\n"


def test_demo_names_its_database_and_refuses_one_with_foreign_sessions(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = sa.make_url(migrated_url).render_as_string(hide_password=True)
    with Store.open(migrated_url) as store:
        store.sessions.save(SessionFactory(id="production-1"))
    code, out, err = run(capsys, "--url", migrated_url, "demo")
    assert (code, out) == (1, f"# database: {shown}\n")
    assert err == (
        f"session-journal: the database {shown} holds 1 session(s) the demo did not create; "
        "run the demo on another database, or pass --into-existing\n"
    )
    with Store.open(migrated_url) as store:
        assert [record.id for record in store.sessions.list()] == ["production-1"]
        assert store.events.latest_seq() == 0
    code, out, _ = run(capsys, "--url", migrated_url, "demo", "--into-existing")
    assert code == 0 and out.startswith(f"# database: {shown}\n")
    code, _, _ = run(capsys, "--url", migrated_url, "demo", "--into-existing")  # again: fine
    assert code == 0


def test_a_postgres_url_is_refused_naming_postgresql_psycopg(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(capsys, "--url", "postgres://root@127.0.0.1:5432/test", "db", "current") == (
        1,
        "",
        "session-journal: unsupported database 'postgres': SQLAlchemy names PostgreSQL "
        "postgresql; write postgresql+psycopg:// (or postgresql://) instead of postgres://\n",
    )


@pytest.mark.parametrize(
    ("arguments", "usage", "choices"),
    [
        (
            ["db"],
            "session-journal db",
            "upgrade,downgrade,history,current,check,prune,stats,vacuum",
        ),
        (["journal"], "session-journal journal", "verify,stats"),
        (["sessions"], "session-journal sessions", "list,remove-ended"),
        (["consumers"], "session-journal consumers", "list,show,reset,remove"),
        ([], "session-journal", "db,events,demo,journal,sessions,consumers,search,serve"),
    ],
)
def test_a_missing_sub_command_is_named_by_its_choices(
    capsys: pytest.CaptureFixture[str], arguments: list[str], usage: str, choices: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {usage} [-h]")
    assert err.splitlines()[-1] == (
        f"{usage}: error: the following arguments are required: {{{choices}}}"
    )
