"""`session-journal events` (pages, `--follow`) and `session-journal demo`."""

from __future__ import annotations

import argparse

from ..api_events import EVENT_TYPES, ApiEventFilter
from ..demo import DEMO_SESSIONS, run_demo
from ..errors import DemoRefused
from ..services.events import MAX_PAGE
from ..store import Store
from ._common import WAKE_S, Interrupt, interrupt_flag, shown_url
from ._types import (
    MAX_EVENTS_LIMIT,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    Commands,
    bounded_int,
    seconds,
)


def add_events_command(commands: Commands) -> None:
    """`events`."""
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
        type=bounded_int(MAX_EVENTS_LIMIT),
        help=f"print at most N events, 1 to {MAX_EVENTS_LIMIT} (default all)",
    )
    events.add_argument(
        "--follow",
        action="store_true",
        help="keep printing events as they commit until interrupted (Ctrl-C exits 0)",
    )
    events.add_argument(
        "--interval",
        type=seconds(MIN_INTERVAL_S, MAX_INTERVAL_S),
        default=0.5,
        help="with --follow: the longest time between two reads of the log when no commit "
        f"woke the follower (a safety net), {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds "
        "(default 0.5); events are printed as soon as they commit",
    )
    events.set_defaults(handler=events_command)


def events_command(url: str, args: argparse.Namespace) -> int:
    # Checked by the store (InvalidRecord, one line); repeated types are merged here.
    """`session-journal events`: print a page, or follow (`--follow`); the exit code."""
    types = None if args.types is None else tuple(sorted(set(args.types)))
    event_filter = ApiEventFilter.model_construct(
        session_id=args.session, workspace_id=args.workspace, types=types
    )
    remaining = args.limit
    with interrupt_flag(args.follow) as interrupt, Store.open(url) as store:
        if args.follow:
            _follow(store, event_filter, args, interrupt)
            return 0
        cursor = 0 if args.after is None else args.after
        while remaining is None or remaining > 0:
            # The JSON path: each event's JSON from the stored text, nothing decoded for a
            # canonical body (the same bytes as `model_dump_json()` of the typed event).
            page = store.events.load_json_events(
                event_filter, after_seq=cursor, limit=min(remaining or MAX_PAGE, MAX_PAGE)
            )
            texts, cursor = page.events, page.next_after_seq
            if not texts:
                break
            print("\n".join(texts))
            if remaining is not None:
                remaining -= len(texts)
    return 0


def _follow(
    store: Store, event_filter: ApiEventFilter, args: argparse.Namespace, interrupt: Interrupt
) -> None:
    """Print events as they commit until Ctrl-C (or `--limit` events). The follower wakes on
    each commit; it looks at the Ctrl-C flag every `WAKE_S` without reading the log, and reads
    the log again at least every `--interval` seconds even if nothing woke it."""
    remaining = args.limit
    limit = min(remaining or MAX_PAGE, MAX_PAGE)
    with store.events.follow(event_filter, after_seq=args.after, limit=limit) as follower:
        follower.reread_s = args.interval
        while (remaining is None or remaining > 0) and not interrupt.requested:
            page = follower.next_page(timeout=WAKE_S)
            if page is None:  # nothing yet: look at the Ctrl-C flag again
                continue
            for event in page.events[:remaining]:
                print(event.model_dump_json(), flush=True)
            if remaining is not None:
                remaining -= min(remaining, len(page.events))


def add_demo_command(commands: Commands) -> None:
    """`demo`."""
    demo = commands.add_parser("demo", help="run a short scenario and print what a follower sees")
    demo.add_argument(
        "--into-existing",
        action="store_true",
        help="run it even if the database holds sessions the demo did not create",
    )
    demo.set_defaults(handler=demo_command)


def demo_command(url: str, args: argparse.Namespace) -> int:
    """`session-journal demo`: run the demo scenario and print its feed; the exit code."""
    into_existing = args.into_existing
    print(f"# database: {shown_url(url)}")
    with Store.open(url, upgrade=True) as store:
        foreign = [s.id for s in store.sessions.list() if s.id not in DEMO_SESSIONS]
        if foreign and not into_existing:
            raise DemoRefused(
                f"the database {shown_url(url)} holds {len(foreign)} session(s) the demo did not "
                "create; run the demo on another database, or pass --into-existing"
            )
        events = run_demo(store, lambda line: print(f"# {line}"))
    print(f"# a client following the feed sees {len(events)} new events:")
    for event in events:
        print(event.model_dump_json())
    return 0
