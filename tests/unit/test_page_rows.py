"""Splitting the rows of the page statement into the frontier and the events (no database)."""

from __future__ import annotations

import pytest

from session_journal import StorageError
from session_journal.storage.repositories.event_pages import split_frontier

EVENTS = [(3, "s-1", 30, "{}"), (5, "s-2", 50, "{}"), (9, "s-1", 90, "{}")]


def test_the_frontier_row_comes_last_and_the_events_keep_their_order() -> None:
    assert split_frontier([*EVENTS, (12, None, None, None)]) == (12, EVENTS)


def test_an_empty_page_is_the_frontier_alone() -> None:
    assert split_frontier([(12, None, None, None)]) == (12, [])


def test_rows_in_another_order_are_put_in_seq_order() -> None:
    shuffled = [(9, None, None, None), EVENTS[2], EVENTS[0], EVENTS[1]]
    assert split_frontier(shuffled) == (9, EVENTS)


def test_a_missing_frontier_row_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="event_sequences has no 'api_events' row"):
        split_frontier(list(EVENTS))
    with pytest.raises(StorageError, match="event_sequences has no 'api_events' row"):
        split_frontier([])
