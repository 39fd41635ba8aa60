"""Marking the event bodies already stored in their canonical form (revision 0009).

Revision 0009 adds `api_events.body_canonical`, false for every row; the write path of level 9
sets it for what it writes. A revision must not import the package's body models, so the rows
stored before are marked here, by the package, right after an upgrade that crossed 0009
(`migrations.upgrade`): in batches of `MARK_BATCH` rows by seq, each its own short
transaction, a row marked only when its stored body is exactly the canonical JSON of the body
it decodes to. Unmarked rows stay correct (a page decodes them), only slower; marking again is
a no-op for them. A backfill interrupted midway is finished by calling it again.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .api_events import decode_body
from .models import ApiEventRow

MARK_BATCH = 1000
"""The most rows one transaction of the backfill reads."""

_UNMARKED = (
    sa.select(ApiEventRow.seq, ApiEventRow.body)
    .where(ApiEventRow.seq > sa.bindparam("after_seq"), ApiEventRow.body_canonical.is_(False))
    .order_by(ApiEventRow.seq)
    .limit(MARK_BATCH)
)
_MARK = (
    sa.update(ApiEventRow)
    .where(ApiEventRow.seq.in_(sa.bindparam("seqs", expanding=True)))
    .values(body_canonical=True)
)


def is_canonical(body: str) -> bool:
    """Whether `body` is exactly the canonical JSON (`model_dump_json()`) of what it decodes to
    (a body that does not decode is not: its page shows a `LegacyNotice` instead)."""
    return decode_body(body).model_dump_json() == body


def mark_canonical_bodies(engine: Engine) -> int:
    """Mark the stored rows whose body is canonical; how many it marked. Every batch reads
    the next rows by seq, so rows appended meanwhile (marked by their writer already) or
    deleted meanwhile change nothing."""
    marked, after = 0, 0
    while True:
        with engine.begin() as connection:
            rows = connection.execute(_UNMARKED, {"after_seq": after}).all()
            if not rows:
                return marked
            seqs = [seq for seq, body in rows if is_canonical(body)]
            if seqs:
                connection.execute(_MARK, {"seqs": seqs})
            marked += len(seqs)
            after = rows[-1][0]
