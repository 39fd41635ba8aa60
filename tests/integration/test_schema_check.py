"""`Store.open` checks the schema revision and the compatibility levels."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from session_journal import SCHEMA_LEVEL, IncompatibleSchema, SchemaOutOfDate, Store, migrations


def execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(sa.text(statement))
    finally:
        engine.dispose()


def test_an_empty_database_is_out_of_date(url: str) -> None:
    with pytest.raises(SchemaOutOfDate, match=r"no schema .*alembic upgrade head"):
        Store.open(url)


def test_an_older_revision_is_out_of_date_until_upgraded(url: str) -> None:
    migrations.upgrade(url, "0001_initial")
    with pytest.raises(SchemaOutOfDate, match=r"0001_initial is older than .*alembic upgrade head"):
        Store.open(url)
    with Store.open(url, upgrade=True) as store:
        assert store.schema.revision == migrations.head()
    with Store.open(url) as store:
        assert store.events.latest_seq() == 0


def pretend_newer_code_migrated(url: str, minimum: int) -> None:
    migrations.upgrade(url)
    execute(
        url,
        "UPDATE session_journal_version SET version_num = '0099_future'",
        f"UPDATE schema_compatibility SET schema_level = 99, minimum_compatible_level = {minimum}",
    )


def test_a_newer_compatible_schema_opens(url: str) -> None:
    pretend_newer_code_migrated(url, minimum=SCHEMA_LEVEL)
    with Store.open(url) as store:
        assert store.schema.usable
        assert store.schema.schema_level == 99
    with Store.open(url, upgrade=True) as store:
        assert store.schema.revision == "0099_future"


def test_a_newer_incompatible_schema_is_refused(url: str) -> None:
    pretend_newer_code_migrated(url, minimum=SCHEMA_LEVEL + 1)
    with pytest.raises(
        IncompatibleSchema, match=rf"level {SCHEMA_LEVEL + 1} .*level {SCHEMA_LEVEL}"
    ):
        Store.open(url)
    with pytest.raises(IncompatibleSchema, match="newer than this code"):
        migrations.upgrade(url)
