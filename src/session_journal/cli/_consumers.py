"""`session-journal consumers list | show NAME | reset NAME --to SEQ | remove NAME`: durable
consumers for operators (`store.consumers`).

`reset` and `remove` refuse what an operator may not mean, as `db prune` does: `reset` forward
past events the consumer has not read (`--allow-skip`), `remove` of a consumer with events left
to read (`--allow-unread`), and either while a replica holds the consumer's live lease
(`--allow-held`: it would go on from its own page). `--dry-run` says what would change.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._clock import now_ms
from ..errors import ConsumerChangeRefused, InvalidRecord, LeaseHeld
from ..records import ConsumerStatus
from ..storage.engines import require_database
from ..store import Store
from ._types import Commands


def add_consumers_commands(commands: Commands) -> None:
    """`consumers list`, `show`, `reset` and `remove`."""
    consumers = commands.add_parser("consumers", help="durable consumers").add_subparsers(
        dest="consumers_command", required=True
    )
    listed = consumers.add_parser("list", help="every consumer, one line each (stuck marked)")
    listed.add_argument("--json", action="store_true", help="one JSON document per line")
    listed.set_defaults(handler=_list)

    show = consumers.add_parser("show", help="one consumer's status")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--json", action="store_true", help="as one JSON document")
    show.set_defaults(handler=_show)

    reset = consumers.add_parser("reset", help="move a consumer's position back or forward")
    reset.add_argument("name", metavar="NAME")
    reset.add_argument(
        "--to",
        required=True,
        type=_start,
        metavar="SEQ",
        help="a seq, `beginning` (the oldest retained event) or `now` (the frontier)",
    )
    reset.add_argument(
        "--allow-skip",
        action="store_true",
        help="move forward past events the consumer has not read (they are never handled)",
    )
    _add_common_flags(reset, "reset")
    reset.set_defaults(handler=_reset)

    remove = consumers.add_parser("remove", help="remove a consumer (retention no longer waits)")
    remove.add_argument("name", metavar="NAME")
    remove.add_argument(
        "--allow-unread",
        action="store_true",
        help="remove it although events wait for it (they are never handled by it)",
    )
    _add_common_flags(remove, "remove")
    remove.set_defaults(handler=_remove)


def _add_common_flags(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "--allow-held",
        action="store_true",
        help=f"{verb} it although a replica holds its live lease",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help=f"print what would change; {verb} nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")


def _start(text: str) -> str | int:
    if text in ("beginning", "now"):
        return text
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(
            f"expected a seq (0 or more, in digits), `beginning` or `now`, got {text!r}"
        )
    return int(text)


def _line(status: ConsumerStatus, now: int) -> str:
    """One consumer, as `list` prints it."""
    parts = [
        status.name,
        f"position {status.position}",
        f"lag {status.lag} ({status.lag_seconds:.1f} s)",
    ]
    if status.stuck:
        parts.append(f"STUCK (no ack for more than {_seconds(status.stuck_after_s)} s)")
    if _held(status, now):
        parts.append(f"held by {status.holder} (generation {status.generation})")
    return "  ".join(parts)


def _seconds(value: float) -> str:
    """Seconds as an operator reads them: `300`, `1.5`, `1000000`."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _held(status: ConsumerStatus, now: int) -> bool:
    """Whether a replica holds the consumer's lease, live by this process's clock (the lease's
    own is the database's: a refusal here is advice, the database fences)."""
    expires = status.lease_expires_at_ms
    return status.holder is not None and expires is not None and expires > now


def _dumped(status: ConsumerStatus) -> dict[str, Any]:
    """The status as JSON, its filter as it was registered (without the fields it leaves out)."""
    return {
        **status.model_dump(mode="json"),
        "filter": status.filter.model_dump(mode="json", exclude_none=True),
    }


def _list(url: str, args: argparse.Namespace) -> int:
    """`consumers list`: one line per consumer, by name."""
    require_database(url)
    with Store.open(url) as store:
        found = store.consumers.list()
    now = now_ms()
    for status in found:
        print(json.dumps(_dumped(status)) if args.json else _line(status, now))
    if not found and not args.json:
        print("no consumers")
    return 0


def _show(url: str, args: argparse.Namespace) -> int:
    """`consumers show NAME`: every field of its status, one per line."""
    require_database(url)
    with Store.open(url) as store:
        status = store.consumers.get(args.name)
    if args.json:
        print(json.dumps(_dumped(status)))
        return 0
    for key, value in _dumped(status).items():
        print(f"{key}: {json.dumps(value) if isinstance(value, dict) else value}")
    return 0


def _refuse_if_held(status: ConsumerStatus, args: argparse.Namespace, verb: str) -> None:
    if _held(status, now_ms()) and not args.allow_held:
        raise _held_refusal(status.name, status.holder, status.generation, verb)


def _held_refusal(
    name: str, holder: str | None, generation: int | None, verb: str
) -> ConsumerChangeRefused:
    lease = "its lease" if generation is None else f"its lease (generation {generation})"
    return ConsumerChangeRefused(
        f"consumers {verb} {name!r}: {holder!r} holds {lease}: a replica is at work and would "
        f"go on from its own page; stop it first, or give --allow-held to {verb} it anyway; "
        "nothing was changed"
    )


def _reset(url: str, args: argparse.Namespace) -> int:
    """`consumers reset NAME --to SEQ`: back (its events are read again) or forward (with
    `--allow-skip` when that skips events it has not read). The position checked is the one
    set: `now` and `beginning` are read once, and a lease taken meanwhile refuses the reset
    under the consumer's row lock."""
    require_database(url)
    with Store.open(url) as store:
        status = store.consumers.get(args.name)
        to = _target(store, args.to)
        _refuse_if_held(status, args, "reset")
        if to > status.position and not args.allow_skip:
            raise ConsumerChangeRefused(
                f"consumers reset {status.name!r} --to {args.to}: it would skip seqs "
                f"{status.position + 1}..{to}, which it has not read; give --allow-skip to "
                "skip them; nothing was changed"
            )
        if args.dry_run:
            change = _change(status.position, to)
            text = f"would reset {status.name!r}: {change}; nothing was changed"
            document = {"name": status.name, "from": status.position, "to": to, "dry_run": True}
            _say(args, text, **document)
            return 0
        try:
            after = store.consumers.reset(status.name, to=to, unless_held=not args.allow_held)
        except LeaseHeld as held:
            raise _held_refusal(status.name, held.holder, None, "reset") from None
        change = _change(status.position, after.position)
        document = {"name": status.name, "from": status.position, "to": after.position}
        _say(args, f"reset {status.name!r}: {change}", **document, dry_run=False)
    return 0


def _target(store: Store, to: str | int) -> int:
    """The position `--to` stands for now: `now` the frontier, `beginning` (or 0) the floor of
    the pruned log; a seq below the floor or above the frontier is refused."""
    latest, floor = store.events.latest_seq(), store.events.pruned_through()
    if to == "now":
        return latest
    if to == "beginning" or to == 0:
        return floor
    assert isinstance(to, int)
    if to > latest:
        raise InvalidRecord(f"seq {to} is above the frontier {latest}; nothing was changed")
    if to < floor:
        raise InvalidRecord(
            f"seq {to} is below the floor of the pruned log {floor}: the events up to it are "
            f"gone; reset to {floor} (--to beginning) or later; nothing was changed"
        )
    return to


def _change(before: int, after: int) -> str:
    if after < before:
        return f"position {before} -> {after}: seqs {after + 1}..{before} are read again"
    if after > before:
        return f"position {before} -> {after}: seqs {before + 1}..{after} are skipped"
    return f"position {before}: unchanged"


def _remove(url: str, args: argparse.Namespace) -> int:
    """`consumers remove NAME` (with `--allow-unread` while events wait for it)."""
    require_database(url)
    with Store.open(url) as store:
        status = store.consumers.get(args.name)
        _refuse_if_held(status, args, "remove")
        if status.lag and not args.allow_unread:
            raise ConsumerChangeRefused(
                f"consumers remove {status.name!r}: seqs {status.position + 1}.."
                f"{status.latest_seq} wait for it ({status.lag} seqs); give --allow-unread to "
                "remove it anyway; nothing was changed"
            )
        if args.dry_run:
            text = (
                f"would remove {status.name!r} at position {status.position}; nothing was changed"
            )
            _say(args, text, name=status.name, position=status.position, removed=False)
            return 0
        try:
            store.consumers.remove(status.name, unless_held=not args.allow_held)
        except LeaseHeld as held:
            raise _held_refusal(status.name, held.holder, None, "remove") from None
        text = f"removed {status.name!r} at position {status.position}"
        _say(args, text, name=status.name, position=status.position, removed=True)
    return 0


def _say(args: argparse.Namespace, text: str, **document: object) -> None:
    """What `reset` and `remove` did (or would do): `text`, or with `--json` the document."""
    print(json.dumps(document) if args.json else text)
