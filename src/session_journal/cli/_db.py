"""`session-journal db`: upgrade, downgrade, status, history, check, stats, prune, vacuum."""

from __future__ import annotations

import argparse
import sys

from .. import _maintenance as maintenance
from .. import migrations
from .._clock import now_ms
from ..errors import PruneRefused
from ..storage.engines import parse_url, require_database
from ..storage.repositories.events import PRUNED_LEVEL
from ..store import Store
from ._common import schema_status, shown_url
from ._types import Commands, bounded_int, duration


def add_db_commands(commands: Commands) -> None:
    """`db` and its sub-commands."""
    db = commands.add_parser("db", help="schema migrations").add_subparsers(
        dest="db_command", required=True
    )
    _add_upgrade(db)
    _add_downgrade(db)
    db.add_parser(
        "history", help="list the revisions, oldest first, the database's marked *"
    ).set_defaults(handler=_history)
    db.add_parser("current", help="print the database's revision").set_defaults(handler=_current)
    db.add_parser(
        "check", help="print revision, levels and whether this code may use it"
    ).set_defaults(handler=_check)
    _add_prune(db)
    db.add_parser(
        "stats", help="print sessions, events, pruned_through, the frontier and the size on disk"
    ).set_defaults(handler=_stats)
    db.add_parser(
        "vacuum",
        help="give back the space of deleted rows (SQLite: VACUUM; PostgreSQL: VACUUM ANALYZE)",
    ).set_defaults(handler=_vacuum)


def _add_upgrade(db: Commands) -> None:
    upgrade = db.add_parser("upgrade", help="migrate to REV (default head)")
    upgrade.add_argument("revision", nargs="?", default="head", metavar="[FROM:]REV")
    upgrade.add_argument(
        "--sql",
        action="store_true",
        help="print the SQL that migrates from FROM (default: the database's revision) to REV, "
        "as one transaction, instead of running it; the database is not changed",
    )
    upgrade.set_defaults(handler=_upgrade)


def _upgrade(url: str, args: argparse.Namespace) -> int:
    """`db upgrade [--sql]`."""
    if args.sql:
        # Rendered whole before anything is printed: a refusal prints nothing on stdout. Only
        # SQL goes there (the database is named in a comment), so it can be piped to psql.
        sql = migrations.upgrade_sql(url, args.revision)
        sys.stdout.write(f"-- session-journal db upgrade --sql for {shown_url(url)}\n{sql}")
        return 0
    migrations.upgrade(url, args.revision)
    print(f"database {shown_url(url)} at {schema_status(url).revision}")
    return 0


def _add_downgrade(db: Commands) -> None:
    downgrade = db.add_parser(
        "downgrade", help="migrate down to REV (a revision, -N steps back, or base)"
    )
    downgrade.add_argument("revision", metavar="REV")
    downgrade.add_argument(
        "--allow-data-loss",
        action="store_true",
        help="downgrade even if it loses data the database holds (refused otherwise)",
    )
    downgrade.set_defaults(handler=_downgrade)


def _downgrade(url: str, args: argparse.Namespace) -> int:
    """`db downgrade REV [--allow-data-loss]`."""
    lost = migrations.downgrade(url, args.revision, allow_data_loss=args.allow_data_loss)
    for loss in lost:
        print(f"lost {loss}")
    print(f"database {shown_url(url)} at {schema_status(url).revision or 'base (no schema)'}")
    return 0


def _current(url: str, args: argparse.Namespace) -> int:
    """`db current`."""
    print(schema_status(url).revision or "none (empty database)")
    return 0


def _check(url: str, args: argparse.Namespace) -> int:
    """`db check`: 0 only if this code may use the database."""
    found = schema_status(url)
    print(f"revision: {found.revision or 'none'}")
    print(f"version_table: {found.version_table}")
    print(f"schema_level: {found.schema_level}")
    print(f"minimum_compatible_level: {found.minimum_compatible_level}")
    print(f"code_schema_level: {migrations.SCHEMA_LEVEL}")
    print(f"verdict: {found.verdict}")
    return 0 if found.usable else 1


def _stats(url: str, args: argparse.Namespace) -> int:
    """`db stats`."""
    _print_stats(maintenance.stats(url))
    return 0


def _vacuum(url: str, args: argparse.Namespace) -> int:
    """`db vacuum`."""
    print(_vacuumed(url, maintenance.vacuum(url)))
    return 0


def _add_prune(db: Commands) -> None:
    prune = db.add_parser(
        "prune", help="delete a prefix of the event log (see the docs, Retention)"
    )
    target = prune.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--through-seq",
        type=bounded_int(2**63 - 1, minimum=0),
        metavar="N",
        help="delete the events with seq <= N (at most the frontier)",
    )
    target.add_argument(
        "--older-than",
        type=duration,
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
    prune.add_argument(
        "--allow-consumers-behind",
        action="store_true",
        help="prune past the positions of durable consumers (by default a prune stops at the "
        "lowest position of the consumers that hold retention back; those passed must be reset)",
    )
    prune.set_defaults(handler=_prune)


def _held_back(consumer: str, through_seq: int, verb: str) -> str:
    """The line of `db prune` that names the consumer holding it back."""
    return (
        f"{verb} at seq {through_seq}: consumer {consumer!r} has not read past it "
        "(--allow-consumers-behind prunes past consumers; they must then be reset)"
    )


def _passed(consumers: list[str], verb: str) -> str:
    """The line of `db prune --allow-consumers-behind` that names the consumers it passes."""
    names = ", ".join(repr(name) for name in consumers)
    return f"{verb} consumer(s) {names}: their next read raises CursorExpired; reset them"


def _prune(url: str, args: argparse.Namespace) -> int:
    """`db prune`: what would go (`--dry-run`), or prune and say what went."""
    if args.older_than is not None:
        target = {"older_than_ms": max(0, now_ms() - args.older_than)}
    else:
        target = {"through_seq": args.through_seq}
    require_database(url)
    with Store.open(url) as store:
        force = args.allow_consumers_behind
        plan = store.events.plan_prune(**target, force=force)
        # Forced: the consumers it passes, which must then be reset.
        passed = [
            status.name
            for status in (store.consumers.list() if force else [])
            if plan.pruned_through <= status.position < plan.through_seq
        ]
        minimum = store.schema.minimum_compatible_level or 0
        # The floor moves, and with it the level (`EventRepository.raise_floor`).
        level_change = None
        if plan.through_seq > plan.pruned_through and minimum < PRUNED_LEVEL:
            level_change = (
                f"minimum_compatible_level {minimum} -> {PRUNED_LEVEL}: controllers older than "
                f"level {PRUNED_LEVEL} will refuse this database"
            )
        retained = store.events.plan_prune(through_seq=plan.latest_seq, force=True).events
        empties = 0 < retained == plan.events
        if args.dry_run:
            print(
                f"would prune {plan.events} event(s) through seq {plan.through_seq} "
                f"(pruned_through {plan.pruned_through}, frontier {plan.latest_seq}); nothing "
                "was deleted"
            )
            if plan.held_back_by is not None:
                print(_held_back(plan.held_back_by, plan.through_seq, "would stop"))
            if passed:
                print(_passed(passed, "would pass"))
            if level_change:
                print(f"would raise {level_change}")
            if empties:
                print(f"would delete every retained event ({retained}): the log would be empty")
            return 0
        if level_change and not args.allow_level_change:
            raise PruneRefused(
                f"db prune would raise {level_change}; give --allow-level-change to prune "
                "anyway (--dry-run shows what would go); nothing was deleted"
            )
        if empties and not args.allow_empty_log:
            raise PruneRefused(
                f"db prune would delete every retained event ({retained}), leaving the log "
                "empty; give --allow-empty-log to prune anyway; nothing was deleted"
            )
        # The prune the plan judged, not a new reading of `--older-than`: events that qualify
        # only now (appended meanwhile with old times) are left for the next prune.
        deleted = store.events.prune(through_seq=plan.through_seq, force=force)
        print(
            f"pruned {deleted} event(s); pruned_through {store.events.pruned_through()}, "
            f"frontier {store.events.latest_seq()}"
        )
        if plan.held_back_by is not None:
            print(_held_back(plan.held_back_by, plan.through_seq, "stopped"))
        if passed:
            print(_passed(passed, "passed"))
        if level_change:
            print(f"raised {level_change}")
    return 0


def _vacuumed(url: str, done: maintenance.VacuumResult) -> str:
    """What `db vacuum` prints: the sizes measured and their change. SQLite's `VACUUM` rewrites
    the file, so the change is what it gave back; PostgreSQL's makes the space of deleted rows
    reusable inside the files without shrinking them (and may grow them: the free space and
    visibility maps), so how much it made reusable cannot be told from their sizes."""
    grown = done.after_bytes - done.before_bytes
    change = f"{grown} bytes more" if grown > 0 else f"{-grown} freed"
    line = (
        f"vacuumed {shown_url(url)}: {done.before_bytes} bytes before, {done.after_bytes} "
        f"after, {change}"
    )
    if parse_url(url).get_backend_name() == "postgresql":
        line += (
            "; PostgreSQL's VACUUM makes the space of deleted rows reusable without giving "
            "it back, so how much it freed cannot be told (VACUUM FULL shrinks the files)"
        )
    return line


def _print_stats(found: maintenance.DatabaseStats) -> None:
    print(f"sessions: {found.sessions}")
    print(f"events: {found.events}")
    print(f"pruned_through: {found.pruned_through}")
    print(f"frontier: {found.latest_seq}")
    print(f"size_on_disk: {found.size_bytes} bytes")
    if found.free_bytes is not None:
        print(f"free: {found.free_bytes} bytes (db vacuum gives them back)")


def _history(url: str, args: argparse.Namespace) -> int:
    """`db history`: one line per revision, oldest first: `* ` marks the database's, `  ` the
    others."""
    current = schema_status(url).revision
    known = migrations.revisions()
    for revision in known:
        mark = "* " if revision.revision == current else "  "
        note = " (current)" if revision.revision == current else ""
        print(f"{mark}{revision.revision}{note}: {revision.summary}")
    if current is None:
        print("  (the database has no revision: no schema)")
    elif current not in {revision.revision for revision in known}:
        print(f"* {current} (current): a revision of newer code")
    return 0
