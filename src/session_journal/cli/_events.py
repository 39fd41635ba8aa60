"""`session-journal events` (pages, `--follow`) and `session-journal demo`."""

from __future__ import annotations

import argparse

from ..api_events import ApiEventFilter
from ..demo import DEMO_SESSIONS, run_demo
from ..errors import DemoRefused
from ..services.events import MAX_PAGE
from ..store import Store
from ._common import WAKE_S, Interrupt, interrupt_flag, shown_url


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
            texts, cursor, _, _ = store.events.load_json_events(
                event_filter, after_seq=cursor, limit=min(remaining or MAX_PAGE, MAX_PAGE)
            )
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


def demo_command(url: str, *, into_existing: bool) -> int:
    """`session-journal demo`: run the demo scenario and print its feed; the exit code."""
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
