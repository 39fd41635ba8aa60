"""Rewrite legacy event bodies in place: `error` -> `legacy_notice`, legacy `turn_ended` -> the
`outcome` shape.

- `{"type":"error","data":{"command_id":C,"message":M}}` (`command_id` may be absent) becomes
  `{"type":"legacy_notice","data":{"original_type":"error","command_id":C or null,"message":M}}`;
- `{"type":"turn_ended","data":{"turn":{"command_id":C,"accepted_ordinal":A,"stop_reason":S,
  "error":E}}}` (no `outcome` key; `error` optional) becomes `{"type":"turn_ended","data":{"turn":
  {"command_id":C,"accepted_ordinal":A,"outcome":{"kind":K,"stop_reason":S,"reason":null,
  "message":E or null}}}}`.

`K` from `S`, case-insensitively: `end_turn`, `max_tokens`, `max_turn_requests`, `refusal` ->
`completed`; `cancelled` -> `cancelled`; any other string or null -> `failed`.

Only `api_events.body` changes, with `UPDATE ... WHERE seq = ...`: `seq`, `session_id`,
`recorded_at_ms`, the row count and `event_sequences` stay exactly as they were. Bodies are read
in batches of `BATCH` by seq range and transformed in Python (never with JSON operators, which
fail on bodies holding `\\u0000` on PostgreSQL), so memory stays bounded whatever the log size.
Bodies already in the new shape, and every other type, are left untouched: re-running is a no-op.

Downgrade rewrites every `legacy_notice` whose `original_type` is `error` back to `error`, and
every `turn_ended` back to the legacy shape (`stop_reason`, and `error` from `outcome.message`).
This loses `outcome.reason`, which has no legacy field, and a `kind` that `stop_reason` does not
imply (an `interrupted` or `rejected` turn comes back as `failed`).

This revision needs a live connection: it cannot be rendered with `--sql` (offline mode), and
says so (`RENDERS_OFFLINE`) so that env.py refuses a range holding it before printing anything.

Level 4; code of level 2 may still use the database (it decodes both shapes).

Revision ID: 0004_outcome_bodies
Revises: 0003_checkpoint_operations
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

revision = "0004_outcome_bodies"
down_revision = "0003_checkpoint_operations"
branch_labels = None
depends_on = None


DOWNGRADE_LOSES = (
    "of turn_ended bodies, outcome.reason and a kind that stop_reason does not imply "
    "(an interrupted or rejected turn comes back as failed)"
)
"""What downgrading this revision loses, in general (`downgrade_loss` says it for a database)."""

RENDERS_OFFLINE = False
"""Whether this revision can be rendered as SQL (`--sql`): no, it rewrites bodies in Python."""

BATCH = 2000
COMPLETED = {"end_turn", "max_tokens", "max_turn_requests", "refusal"}


class JsonText(TypeDecorator[str]):
    """A JSON column exchanged as its exact text (frozen with this revision): no serialising on
    the way in, no parsing on the way out (psycopg would turn `json` into dicts); the `CAST` to
    text returns the stored text unchanged."""

    impl = sa.JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        return None

    def column_expression(self, column: ColumnElement[Any]) -> ColumnElement[str]:
        return sa.cast(column, sa.Text)


def set_schema_levels(schema_level: int, minimum_compatible_level: int) -> None:
    """Record the level this revision brings and the oldest level of code that may still use
    the database after it (frozen here, as every helper of a revision is: history must not
    change when the package's code does)."""
    levels = sa.table(
        "schema_compatibility",
        sa.column("schema_level", sa.Integer),
        sa.column("minimum_compatible_level", sa.Integer),
    )
    op.execute(
        levels.update().values(
            schema_level=schema_level, minimum_compatible_level=minimum_compatible_level
        )
    )


def turn_kind(stop_reason: object) -> str:
    if not isinstance(stop_reason, str):
        return "failed"
    reason = stop_reason.lower()
    if reason in COMPLETED:
        return "completed"
    return "cancelled" if reason == "cancelled" else "failed"


def _parts(text: str) -> tuple[object, dict[str, Any]] | None:
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("data"), dict):
        return None
    return body.get("type"), body["data"]


def _dump(tag: str, data: dict[str, Any]) -> str:
    # ASCII escapes keep any text (a lone surrogate included) storable on both backends.
    return json.dumps({"type": tag, "data": data}, separators=(",", ":"))


def upgrade_body(text: str) -> str | None:
    """The new body, or `None` to leave the stored one as it is."""
    parts = _parts(text)
    if parts is None:
        return None
    tag, data = parts
    if tag == "error":
        notice = {
            "original_type": "error",
            "command_id": data.get("command_id"),
            "message": data.get("message"),
        }
        return _dump("legacy_notice", notice)
    turn = data.get("turn")
    if tag != "turn_ended" or not isinstance(turn, dict) or "outcome" in turn:
        return None
    outcome = {
        "kind": turn_kind(turn.get("stop_reason")),
        "stop_reason": turn.get("stop_reason"),
        "reason": None,
        "message": turn.get("error"),
    }
    new_turn = {
        "command_id": turn.get("command_id"),
        "accepted_ordinal": turn.get("accepted_ordinal"),
        "outcome": outcome,
    }
    return _dump("turn_ended", {"turn": new_turn})


def downgrade_body(text: str) -> str | None:
    """The legacy body, or `None` to leave the stored one as it is."""
    parts = _parts(text)
    if parts is None:
        return None
    tag, data = parts
    if tag == "legacy_notice" and data.get("original_type") == "error":
        return _dump(
            "error", {"command_id": data.get("command_id"), "message": data.get("message")}
        )
    turn = data.get("turn")
    if (
        tag != "turn_ended"
        or not isinstance(turn, dict)
        or not isinstance(turn.get("outcome"), dict)
    ):
        return None
    outcome = turn["outcome"]
    legacy = {
        "command_id": turn.get("command_id"),
        "accepted_ordinal": turn.get("accepted_ordinal"),
        "stop_reason": outcome.get("stop_reason"),
        "error": outcome.get("message"),
    }
    return _dump("turn_ended", {"turn": legacy})


EVENTS = sa.table("api_events", sa.column("seq", sa.BigInteger), sa.column("body", JsonText))


def batches(connection: sa.Connection) -> Iterator[list[tuple[int, str]]]:
    """Every `(seq, body text)`, `BATCH` rows at a time in seq order."""
    read = (
        sa.select(EVENTS.c.seq, EVENTS.c.body)
        .where(EVENTS.c.seq > sa.bindparam("after"))
        .order_by(EVENTS.c.seq)
        .limit(BATCH)
    )
    after = -1
    while rows := connection.execute(read, {"after": after}).all():
        yield [(seq, body) for seq, body in rows]
        after = rows[-1][0]


def rewrite(transform: Callable[[str], str | None]) -> None:
    """Apply `transform` to every body, `BATCH` rows at a time in seq order."""
    if context.is_offline_mode():
        raise RuntimeError(
            "0004_outcome_bodies rewrites event bodies in Python and cannot run with --sql; "
            "render up to 0003_checkpoint_operations offline and run this revision online"
        )
    write = (
        sa.update(EVENTS)
        .where(EVENTS.c.seq == sa.bindparam("old_seq"))
        .values(body=sa.bindparam("new_body"))
    )
    connection = op.get_bind()
    for rows in batches(connection):
        changed = [
            {"old_seq": seq, "new_body": new}
            for seq, body in rows
            if (new := transform(body)) is not None
        ]
        if changed:
            connection.execute(write, changed)


def loses_something(text: str) -> bool:
    """Whether downgrading the body and upgrading it again would not give it back."""
    legacy = downgrade_body(text)
    if legacy is None:
        return False
    return json.loads(upgrade_body(legacy) or legacy) != json.loads(text)


def downgrade_loss(connection: sa.Connection) -> str | None:
    """What downgrading this revision would lose in the database at `connection`, or `None`:
    the bodies that the downgrade and a later upgrade would not give back as they are."""
    count = sum(loses_something(body) for rows in batches(connection) for _, body in rows)
    if not count:
        return None
    return (
        f"{count} turn_ended body(ies) would lose outcome.reason or a kind that stop_reason "
        "does not imply"
    )


def upgrade() -> None:
    rewrite(upgrade_body)
    set_schema_levels(4, 2)


def downgrade() -> None:
    rewrite(downgrade_body)
    set_schema_levels(3, 2)
