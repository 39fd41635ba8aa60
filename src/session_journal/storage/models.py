"""ORM models: one class per table. Alembic revisions are the source of the DDL; `alembic check`
proves these models and the head schema agree."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedColumn, mapped_column
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from ..records import SessionState

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def state_check(states: Iterable[str]) -> str:
    """The `sessions.state` CHECK expression for a list of states."""
    return "state IN (" + ", ".join(f"'{state}'" for state in states) + ")"


class JsonText(TypeDecorator[str]):
    """A JSON column (SQLite `JSON` text, PostgreSQL `json`) exchanged as its exact text.

    Bodies are encoded and decoded by pydantic, so the driver must neither serialise on the way in
    nor parse on the way out: psycopg would turn `json` into dicts, and the `CAST` to text returns
    the stored text unchanged (PostgreSQL `json` keeps it verbatim, key order and `\\u0000`
    included).
    """

    impl = sa.JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        return None

    def column_expression(self, column: ColumnElement[Any]) -> ColumnElement[str]:
        return sa.cast(column, sa.Text)


SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _owning_session(*, primary_key: bool = False) -> MappedColumn[Any]:
    """`session_id` of a row that belongs to a session: deleting the session deletes the row
    (ON DELETE CASCADE). `primary_key` for the tables of one row per session."""
    return mapped_column(
        sa.Text, sa.ForeignKey("sessions.session_id", ondelete="CASCADE"), primary_key=primary_key
    )


def _inserted_at() -> MappedColumn[Any]:
    """A timestamp with time zone that the database sets when the row is inserted."""
    return mapped_column(sa.DateTime(timezone=True), server_default=sa.func.current_timestamp())


class Base(DeclarativeBase):
    """Declarative base whose constraints follow `NAMING_CONVENTION`."""

    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)
    # Every model here maps a Table; DeclarativeBase types `__table__` as any FromClause.
    # Repositories name columns through the class attributes (`SessionRow.state`), typed by
    # `Mapped[...]`, so a renamed column fails mypy.
    __table__: ClassVar[sa.Table]


class SessionRow(Base):
    """`sessions`: one row per agent session."""

    __tablename__ = "sessions"
    __table_args__ = (sa.CheckConstraint(state_check(SessionState), name="state"),)

    session_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.Text)
    state: Mapped[str] = mapped_column(sa.Text)
    native_session_id: Mapped[str | None] = mapped_column(sa.Text)
    last_error: Mapped[str | None] = mapped_column(sa.Text)
    last_checkpoint_error: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = _inserted_at()
    updated_at: Mapped[datetime] = _inserted_at()


class SessionContextRow(Base):
    """`session_contexts`: the workspace a session belongs to."""

    __tablename__ = "session_contexts"

    session_id: Mapped[str] = _owning_session(primary_key=True)
    workspace_id: Mapped[str] = mapped_column(sa.Text, index=True)


class SessionCheckpointRow(Base):
    """`session_checkpoints`: metadata of a session's last checkpoint archive."""

    __tablename__ = "session_checkpoints"

    session_id: Mapped[str] = _owning_session(primary_key=True)
    archive_path: Mapped[str] = mapped_column(sa.Text)
    sha256: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[str] = mapped_column(sa.Text)
    event_frontier: Mapped[int] = mapped_column(sa.BigInteger)


class StoredType(sa.sql.functions.FunctionElement[str]):
    """The `type` tag of a stored event body, as the database reads it (revision 0010): on
    SQLite `json_extract(body, '$.type')` of a body that is valid JSON (NULL otherwise: SQLite
    raises on malformed JSON, and an index must not refuse a row), on PostgreSQL
    `session_journal_event_type(body)`, the SQL function of revision 0010 (`body ->> 'type'`,
    NULL for a body that is not an object; PostgreSQL's JSON operators refuse a body holding the
    escape `\\u0000` anywhere, so such a body is read with it replaced by `\\u0001`, which
    changes no tag the filter can ask for). The index expression and the
    queries' must be the same expression, so both are written here and only here."""

    type = sa.Text()
    name = "stored_type"
    inherit_cache = True


@compiles(StoredType, "sqlite")
def _stored_type_sqlite(element: StoredType, compiler: Any, **kw: Any) -> str:
    body = compiler.process(element.clauses, **kw)
    return f"CASE WHEN json_valid({body}) THEN json_extract({body}, '$.type') END"


@compiles(StoredType, "postgresql")
def _stored_type_postgresql(element: StoredType, compiler: Any, **kw: Any) -> str:
    return f"session_journal_event_type({compiler.process(element.clauses, **kw)})"


class ApiEventRow(Base):
    """`api_events`: the append-only log; `seq` comes from `event_sequences`."""

    __tablename__ = "api_events"

    # On SQLite an INTEGER PRIMARY KEY is the rowid: the table is stored in seq order.
    seq: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=False)
    session_id: Mapped[str] = _owning_session()
    recorded_at_ms: Mapped[int] = mapped_column(sa.BigInteger)
    body: Mapped[str] = mapped_column(JsonText)
    # Whether `body` is exactly the canonical JSON of the body it decodes to (pydantic's
    # `model_dump_json()`), so that a JSON page splices it as stored (revision 0009). Rows of
    # older code, and bodies in another form or that do not decode, are false: decoded on read.
    body_canonical: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false())

    __table_args__ = (
        sa.Index("ix_api_events_session_id_seq", "session_id", "seq"),
        # The type filter (revision 0010): one limited scan per type, in seq order, for the
        # whole log and for one session.
        sa.Index("ix_api_events_type_seq", StoredType(sa.column("body")), "seq"),
        sa.Index(
            "ix_api_events_session_id_type_seq", "session_id", StoredType(sa.column("body")), "seq"
        ),
        # The event rate (revision 0015): the events recorded in a window of time, one range.
        sa.Index("ix_api_events_recorded_at_ms", "recorded_at_ms"),
    )


class EventSequenceRow(Base):
    """`event_sequences`: the frontier of each log, which never decreases, and the floor below
    which it was pruned."""

    __tablename__ = "event_sequences"

    name: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    last_seq: Mapped[int] = mapped_column(sa.BigInteger)
    # The highest seq pruned from the log (`store.events.prune`); 0: never pruned. A cursor
    # `0 < after_seq < pruned_through` has missed events (`CursorExpired`).
    pruned_through: Mapped[int] = mapped_column(sa.BigInteger, server_default=sa.text("0"))


class ActivityRow(Base):
    """`api_session_activity`: the latest activity snapshot per session."""

    __tablename__ = "api_session_activity"

    session_id: Mapped[str] = _owning_session(primary_key=True)
    body: Mapped[str] = mapped_column(JsonText)


class SchemaCompatibilityRow(Base):
    """`schema_compatibility`: one row, the schema level and the oldest level that may use it."""

    __tablename__ = "schema_compatibility"

    schema_level: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    minimum_compatible_level: Mapped[int] = mapped_column(sa.Integer)


class CheckpointOperationRow(Base):
    """`checkpoint_operations`: the one checkpoint in flight per session and its owner."""

    __tablename__ = "checkpoint_operations"

    session_id: Mapped[str] = _owning_session(primary_key=True)
    command_id: Mapped[str] = mapped_column(sa.Text)
    related_command_ids: Mapped[str] = mapped_column(JsonText, server_default=sa.text("'[]'"))
    created_at: Mapped[datetime] = _inserted_at()


class MaterializedSessionRow(Base):
    """`materialized_sessions`: the relay frontier of a session and its projection state."""

    __tablename__ = "materialized_sessions"

    session_id: Mapped[str] = _owning_session(primary_key=True)
    applied_event_ordinal: Mapped[int] = mapped_column(sa.BigInteger)
    applied_event_digest: Mapped[str] = mapped_column(sa.Text)
    state: Mapped[str] = mapped_column(JsonText)


class TranscriptItemRow(Base):
    """`transcript_items`: a session's transcript, one row per item, by position."""

    __tablename__ = "transcript_items"

    session_id: Mapped[str] = _owning_session(primary_key=True)
    position: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    stable_id: Mapped[str] = mapped_column(sa.Text)
    body: Mapped[str] = mapped_column(JsonText)


class ProjectEventRow(Base):
    """`project_events`: every persisted journal event, for full-text search. No foreign key:
    journal sessions need not be rows of `sessions`. The full-text parts (an FTS5 table on
    SQLite, a generated `tsv` column with a GIN index on PostgreSQL) live in the migration only
    and are hidden from `alembic check`."""

    __tablename__ = "project_events"
    __table_args__ = (
        sa.UniqueConstraint("session_id", "seq", name="uq_project_events_session_id_seq"),
    )

    # INTEGER PRIMARY KEY on SQLite: the rowid the FTS5 table refers to.
    id: Mapped[int] = mapped_column(SEQ, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(sa.Text)
    seq: Mapped[int] = mapped_column(sa.BigInteger)
    ts: Mapped[str] = mapped_column(sa.Text)
    kind: Mapped[str] = mapped_column(sa.Text)
    turn_id: Mapped[str | None] = mapped_column(sa.Text)
    flow_run_id: Mapped[str | None] = mapped_column(sa.Text)
    text_content: Mapped[str | None] = mapped_column(sa.Text)
    payload_json: Mapped[str] = mapped_column(JsonText)


class ConsumerRow(Base):
    """`consumers`: the durable consumers of the log (`store.consumers`), each a name, the
    filter of the events it reads and the position through which it acked."""

    __tablename__ = "consumers"

    name: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    filter_json: Mapped[str] = mapped_column(JsonText)  # its `ApiEventFilter`, as JSON
    position: Mapped[int] = mapped_column(sa.BigInteger)
    registered_at_ms: Mapped[int] = mapped_column(sa.BigInteger)
    last_ack_at_ms: Mapped[int | None] = mapped_column(sa.BigInteger)
    # How long it may go without acking and still hold retention back (NULL: always).
    max_idle_ms: Mapped[int | None] = mapped_column(sa.BigInteger)
    # Its lease (`acquire`): the replica holding it (NULL: none, or released), the number of
    # leases taken (fencing: an ack of another generation is refused), and when the lease
    # expires by the database's clock (`storage/clock.py`).
    holder: Mapped[str | None] = mapped_column(sa.Text)
    generation: Mapped[int] = mapped_column(sa.BigInteger, server_default=sa.text("0"))
    lease_expires_at_ms: Mapped[int | None] = mapped_column(sa.BigInteger)
    # How long it may go without acking while events wait for it before it counts as stuck.
    stuck_after_ms: Mapped[int] = mapped_column(sa.BigInteger, server_default=sa.text("300000"))
