"""Marking the event bodies already stored in their canonical form (revision 0009).

Revision 0009 adds `api_events.body_canonical`, false for every row, and records what is left
to mark in the `event_sequences` row `TO_MARK` (`last_seq`: the frontier when it ran;
`pruned_through`: checked through so far); the write path of level 9 marks what it writes. A
revision must not import the package's body models, so the rows stored before are marked here,
by the package, after an upgrade (`migrations.upgrade`), whenever that row is there: in batches
of `MARK_BATCH` rows by seq, each its own short transaction that also moves the row (deleted
with the last batch), a row marked only when its stored body is exactly the canonical JSON of
the body it decodes to. An upgrade interrupted during the backfill finishes it the next time;
unmarked rows are correct meanwhile (a page decodes them), only slower.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..api_events import decode_body
from .models import ApiEventRow, EventSequenceRow

MARK_BATCH = 1000
"""The most rows one transaction of the backfill reads."""

TO_MARK = "api_events_to_mark"
"""The `event_sequences` row of what is left to mark (revision 0009)."""

_PROGRESS = (
    sa.select(EventSequenceRow.last_seq, EventSequenceRow.pruned_through)
    .where(EventSequenceRow.name == TO_MARK)
    .with_for_update()
)
_UNMARKED = (
    sa.select(ApiEventRow.seq, ApiEventRow.body)
    .where(
        ApiEventRow.seq > sa.bindparam("after_seq"),
        ApiEventRow.seq <= sa.bindparam("through_seq"),
        ApiEventRow.body_canonical.is_(False),
    )
    .order_by(ApiEventRow.seq)
    .limit(MARK_BATCH)
)
_MARK = (
    sa.update(ApiEventRow)
    .where(ApiEventRow.seq.in_(sa.bindparam("seqs", expanding=True)))
    .values(body_canonical=True)
)
_CHECKED = (
    sa.update(EventSequenceRow)
    .where(EventSequenceRow.name == TO_MARK)
    .values(pruned_through=sa.bindparam("checked"))
)
_DONE = sa.delete(EventSequenceRow).where(EventSequenceRow.name == TO_MARK)


def is_canonical(body: str) -> bool:
    """Whether `body` is exactly the canonical JSON (`model_dump_json()`) of what it decodes to
    (a body that does not decode is not: its page shows a `LegacyNotice` instead)."""
    return decode_body(body).model_dump_json() == body


def mark_canonical_bodies(engine: Engine) -> int:
    """Go on marking where the last call stopped, until nothing is left (see the module
    docstring); how many rows it marked. Nothing to do (the row is gone) costs one read."""
    marked = 0
    while True:
        with engine.begin() as connection:
            progress = connection.execute(_PROGRESS).one_or_none()
            if progress is None:
                return marked
            through, checked = int(progress[0]), int(progress[1])
            rows = connection.execute(
                _UNMARKED, {"after_seq": checked, "through_seq": through}
            ).all()
            if not rows:
                connection.execute(_DONE)
                return marked
            seqs = [seq for seq, body in rows if is_canonical(body)]
            if seqs:
                connection.execute(_MARK, {"seqs": seqs})
            connection.execute(_CHECKED, {"checked": rows[-1][0]})
            marked += len(seqs)
