"""When a reader served from the store's window has it checked first (`needs_check`): the rule
`SharedTail.page`, a follower's read from memory and the SSE streams' pump share."""

from __future__ import annotations

import pytest

from session_journal.follow import needs_check

HI = 10  # the window's frontier


@pytest.mark.parametrize(
    ("checked", "cursor", "first", "expected"),
    [
        # Checked since the reader's previous read ended: the window answers as it is.
        (True, 3, False, False),
        (True, 3, True, False),
        (True, HI, True, False),
        # Not checked, events held after the cursor: they may be another process's pruned or
        # deleted ones, so the window is checked first.
        (False, 3, False, True),
        (False, HI - 1, False, True),
        # Not checked, at the window's end: nothing held is served, no statement more...
        (False, HI, False, False),
        # ...but a new reader's first page is checked even there (what others did while
        # nobody of this store waited).
        (False, HI, True, True),
        (False, 3, True, True),
    ],
)
def test_a_reader_has_the_window_checked_only_when_it_could_be_served_stale_events(
    checked: bool, cursor: int, first: bool, expected: bool
) -> None:
    assert needs_check(checked, cursor, HI, first=first) is expected
