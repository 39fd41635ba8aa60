"""Relay projection: applying one event costs the same early and late in a long chain.

For SQLite and PostgreSQL, one session receives a chain of N relay events (turns of prompt
queued, started, an agent message, completed: each turn adds two API events and two transcript
items). The first 1,000 and the last 1,000 events are applied one per `store.projection.apply`
call and timed; the events in between are applied untimed in pages of 1,000. SQLite runs with
`synchronous=OFF` here so that fsync time (measured by bench.py) does not hide the per-event
work. Usage: `projection.py [--quick] [--only sqlite|postgresql]` (`--quick`: N = 10,000).
"""

from __future__ import annotations

import argparse
import sys
import time

from _databases import database

from session_journal import SessionRecord, Store, StoreOptions
from session_journal.relay import (
    AgentMessage,
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    ContentBlock,
    PromptCommand,
    PromptOutcome,
    RelayChain,
    RelayEvent,
    RelayObservation,
)

TIMED = 1_000


def chain_of(length: int) -> list[RelayEvent]:
    observations: list[RelayObservation] = []
    while len(observations) < length:
        command = f"prompt-{len(observations)}"
        prompt = PromptCommand(prompt=[ContentBlock(type="text", text="Run the tests " * 10)])
        observations += [
            CommandQueued(command_id=command, command=prompt, created_at_ms=1),
            CommandStarted(command_id=command, started_at_ms=2),
            AgentMessage(message_id=command, text="All tests pass. " * 10),
            CommandCompleted(command_id=command, outcome=PromptOutcome(stop_reason="end_turn")),
        ]
    return RelayChain().extend(observations[:length], recorded_at_ms=100)


def timed(store: Store, events: list[RelayEvent]) -> float:
    started = time.perf_counter()
    for event in events:
        store.projection.apply("session-1", [event])
    return len(events) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    args, _ = parser.parse_known_args()  # make bench passes every script the same BENCH_ARGS
    length = 10_000 if args.quick else 100_000
    events = chain_of(length)
    print(f"{'backend':<11}{'chain':>9}{'first 1,000 ev/s':>18}{'last 1,000 ev/s':>17}{'ratio':>7}")
    for backend in ("sqlite", "postgresql"):
        if args.only not in (None, backend):
            continue
        with database(backend, "projection") as url:
            options = StoreOptions(sqlite_synchronous="OFF")
            with Store.open(url, upgrade=True, options=options) as store:
                store.sessions.save(SessionRecord(id="session-1", project_id="p"))
                first = timed(store, events[:TIMED])
                for start in range(TIMED, length - TIMED, 1_000):
                    store.projection.apply(
                        "session-1", events[start : min(start + 1_000, length - TIMED)]
                    )
                last = timed(store, events[length - TIMED :])
                loaded = store.projection.load("session-1")
                assert loaded is not None and loaded.applied_event_ordinal == length
        print(
            f"{backend:<11}{length:>9,}{first:>18,.0f}{last:>17,.0f}{last / first:>7.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
