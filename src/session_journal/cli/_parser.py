"""The command line's arguments: the parser of every sub-command and the checks of
its values (intervals, durations, bounded counts)."""

from __future__ import annotations

import argparse
import importlib.metadata
import math
from collections.abc import Callable

from .. import _maintenance as maintenance
from ..api_events import EVENT_TYPES
from ..errors import SessionJournalError
from ..journal.search import MAX_SEARCH_LIMIT
from ..records import SessionState
from ..services.sessions import MAX_SESSION_PAGE
from ..storage.repositories.events import PRUNED_LEVEL

MIN_INTERVAL_S = 0.01
"""The shortest `events --follow --interval`: 10 ms (shorter is a busy loop on the database)."""


MAX_INTERVAL_S = 3600.0
"""The longest `events --follow --interval`: one hour."""


MAX_EVENTS_LIMIT = 1_000_000_000
"""The largest `events --limit` (the events are read in pages of `MAX_PAGE`)."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line, every sub-command included."""
    parser = argparse.ArgumentParser(
        prog="session-journal", description="Durable sessions and their ordered event log."
    )
    parser.add_argument(
        "--url",
        help="database URL (default: $SESSION_JOURNAL_DATABASE_URL, else "
        "sqlite:///session-journal.db)",
    )
    parser.add_argument(
        "--version", action="version", version=f"session-journal {_installed_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    db = commands.add_parser("db", help="schema migrations").add_subparsers(
        dest="db_command", required=True
    )
    upgrade = db.add_parser("upgrade", help="migrate to REV (default head)")
    upgrade.add_argument("revision", nargs="?", default="head", metavar="[FROM:]REV")
    upgrade.add_argument(
        "--sql",
        action="store_true",
        help="print the SQL that migrates from FROM (default: the database's revision) to REV, "
        "as one transaction, instead of running it; the database is not changed",
    )
    downgrade = db.add_parser(
        "downgrade", help="migrate down to REV (a revision, -N steps back, or base)"
    )
    downgrade.add_argument("revision", metavar="REV")
    downgrade.add_argument(
        "--allow-data-loss",
        action="store_true",
        help="downgrade even if it loses data the database holds (refused otherwise)",
    )
    db.add_parser("history", help="list the revisions, oldest first, the database's marked *")
    db.add_parser("current", help="print the database's revision")
    db.add_parser("check", help="print revision, levels and whether this code may use it")
    prune = db.add_parser(
        "prune", help="delete a prefix of the event log (see the docs, Retention)"
    )
    target = prune.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--through-seq",
        type=_bounded_int(2**63 - 1, minimum=0),
        metavar="N",
        help="delete the events with seq <= N (at most the frontier)",
    )
    target.add_argument(
        "--older-than",
        type=_duration,
        metavar="DURATION",
        help="delete the longest prefix of events all recorded more than DURATION ago "
        "(500ms, 30s, 15m, 12h, 30d, 2w)",
    )
    prune.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would go and any level change; delete nothing (needs no --allow-*)",
    )
    prune.add_argument(
        "--allow-level-change",
        action="store_true",
        help="prune even if it raises minimum_compatible_level (the first prune raises it to "
        f"{PRUNED_LEVEL}: older controllers then refuse the database)",
    )
    prune.add_argument(
        "--allow-empty-log",
        action="store_true",
        help="prune even if it deletes every retained event",
    )
    db.add_parser(
        "stats", help="print sessions, events, pruned_through, the frontier and the size on disk"
    )
    db.add_parser(
        "vacuum",
        help="give back the space of deleted rows (SQLite: VACUUM; PostgreSQL: VACUUM ANALYZE)",
    )

    events = commands.add_parser("events", help="print events, one JSON object per line")
    events.add_argument(
        "--after",
        type=int,
        help="cursor: print events with seq > N (default 0; with --follow, the current frontier)",
    )
    events.add_argument("--session", help="only this session")
    events.add_argument("--workspace", help="only sessions of this workspace")
    events.add_argument(
        "--type",
        action="append",
        dest="types",
        metavar="TYPE",
        help=f"only events of this body type (repeatable: any of them): {', '.join(EVENT_TYPES)}",
    )
    events.add_argument(
        "--limit",
        type=_bounded_int(MAX_EVENTS_LIMIT),
        help=f"print at most N events, 1 to {MAX_EVENTS_LIMIT} (default all)",
    )
    events.add_argument(
        "--follow",
        action="store_true",
        help="keep printing events as they commit until interrupted (Ctrl-C exits 0)",
    )
    events.add_argument(
        "--interval",
        type=_seconds(MIN_INTERVAL_S, MAX_INTERVAL_S),
        default=0.5,
        help="with --follow: the longest time between two reads of the log when no commit "
        f"woke the follower (a safety net), {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds "
        "(default 0.5); events are printed as soon as they commit",
    )

    demo = commands.add_parser("demo", help="run a short scenario and print what a follower sees")
    demo.add_argument(
        "--into-existing",
        action="store_true",
        help="run it even if the database holds sessions the demo did not create",
    )

    journal = commands.add_parser("journal", help="session event files").add_subparsers(
        dest="journal_command", required=True
    )
    verify = journal.add_parser("verify", help="report torn or undecodable lines (exit 1 if any)")
    verify.add_argument("path", help="a session directory or its events.jsonl")
    stats = journal.add_parser("stats", help="print the session's stats (rebuilt if stale)")
    stats.add_argument("path", help="a session directory")

    sessions = commands.add_parser("sessions", help="sessions").add_subparsers(
        dest="sessions_command", required=True
    )
    listed = sessions.add_parser(
        "list", help="list sessions, newest first (a table, or JSON lines with --json)"
    )
    listed.add_argument("--workspace", help="only sessions of this workspace")
    listed.add_argument(
        "--state",
        choices=[state.value for state in SessionState],
        metavar="STATE",
        help=f"only sessions in this state: {', '.join(SessionState)}",
    )
    listed.add_argument(
        "--before",
        metavar="CURSOR",
        help="the sessions after the previous page (the cursor it printed last)",
    )
    listed.add_argument(
        "--limit",
        type=_bounded_int(MAX_SESSION_PAGE),
        default=50,
        metavar="N",
        help=f"at most N sessions, 1 to {MAX_SESSION_PAGE} (default 50)",
    )
    listed.add_argument(
        "--json", action="store_true", help="one JSON object per session instead of a table"
    )
    remove = sessions.add_parser(
        "remove-ended",
        help="remove ended sessions (closed, error) with their events and everything else",
    )
    remove.add_argument("ids", nargs="*", metavar="ID", help="the sessions to remove")
    remove.add_argument(
        "--ended-before",
        type=_duration,
        metavar="DURATION",
        help="instead of IDs: every ended session last saved more than DURATION ago (30d, 12h)",
    )
    remove.add_argument(
        "--sessions-dir",
        metavar="DIR",
        help="also delete DIR/<id>, each removed session's directory, after the commit",
    )
    remove.add_argument(
        "--dry-run", action="store_true", help="print the sessions that would go; remove nothing"
    )
    remove.set_defaults(command_parser=remove)

    search = commands.add_parser("search", help="full-text search of indexed journal events")
    search.add_argument("query")
    search.add_argument("--session", help="only this session")
    search.add_argument(
        "--limit",
        type=_bounded_int(MAX_SEARCH_LIMIT),
        default=20,
        help=f"at most N hits, 1 to {MAX_SEARCH_LIMIT} (default 20)",
    )

    serve = commands.add_parser(
        "serve", help="serve the feed over HTTP (the `web` extra; docs: Serving the feed)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=_bounded_int(65535, minimum=0),
        default=8765,
        help="port to bind (default 8765; 0: any free port, printed at start)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        default=[],
        metavar="H",
        help="a name the Host header may carry besides the bind host, localhost, 127.0.0.1 and "
        "[::1] (repeatable; the name a proxy forwards)",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        dest="cors_origins",
        default=[],
        metavar="ORIGIN",
        help="an origin (https://app.example) whose pages may call the API (repeatable)",
    )
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        help="tokens, one 'TOKEN [WORKSPACE]' a line (default: $SESSION_JOURNAL_WEB_TOKEN)",
    )
    serve.add_argument(
        "--no-token",
        action="store_true",
        help="serve without a token (refused unless the host is a loopback address)",
    )
    serve.add_argument(
        "--page-hidden-close",
        type=_seconds(1.0, 86400.0),
        default=60.0,
        metavar="SECONDS",
        help="the operator page closes its stream when every tab has been hidden this long "
        "(1 to 86400; default 60)",
    )
    serve.add_argument(
        "--no-redact",
        action="store_true",
        help="serve events, transcripts, questions and search hits as stored, secrets included "
        "(by default they are redacted: [REDACTED])",
    )
    _name_the_commands(parser)
    return parser


def _name_the_commands(parser: argparse.ArgumentParser) -> None:
    """Give each group of sub-commands its choices as its name, so that a missing one is
    reported by listing them (`required: {upgrade,downgrade,...}`, not `required: db_command`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.metavar = "{" + ",".join(action.choices) + "}"
            for child in action.choices.values():
                _name_the_commands(child)


def _seconds(low: float, high: float) -> Callable[[str], float]:
    """An argument of seconds from `low` to `high` (NaN and text refused)."""

    def parse(text: str) -> float:
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        # `not a <= x <= b` is also true for NaN, which compares false to everything.
        if not low <= seconds <= high:
            raise argparse.ArgumentTypeError(
                f"must be a number of seconds from {low:g} to {high:g}, got {text!r}"
            )
        return seconds

    return parse


def _duration(text: str) -> int:
    """`--older-than`: a duration in milliseconds (`30d`, `12h`, ...)."""
    try:
        return maintenance.parse_duration_ms(text)
    except SessionJournalError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _bounded_int(maximum: int, *, minimum: int = 1) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {minimum} to {maximum}, got {text!r}"
            )
        return value

    return parse


def _installed_version() -> str:
    try:
        return importlib.metadata.version("session-journal")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout not installed
        return "(not installed)"
