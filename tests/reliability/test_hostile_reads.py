"""Property: reading with hostile arguments returns the exact answer or `InvalidRecord`.

Hypothesis feeds, on SQLite and PostgreSQL:
- cursors, limits and filters (any type, any text, out-of-range integers) to
  `store.events.load` over a known log: a valid call returns exactly the page the log implies
  (events after the cursor that match the filter, at most the clamped limit, the next cursor and
  the frontier); an invalid one raises `InvalidRecord`;
- search queries (any text, lone surrogates and NUL included, operators, long and many-word
  queries), session ids and limits to `store.index.search`: hits within the limit and the
  session, or `InvalidRecord`; queries are bounded at 1,000 characters and 32 words.

No other exception escapes: no driver error, no `StorageError`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from session_journal import ApiEvent, ApiEventFilter, ApiEventPage, InvalidRecord, Store
from session_journal.journal.index import IndexRow, SearchHit
from tests.factories import SessionFactory
from tests.helpers import all_events
from tests.reliability.harness import HYPOTHESIS, any_text

pytestmark = pytest.mark.reliability

# --- reading: cursors, limits, filters ------------------------------------------------------------

ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
LOG_SESSIONS = {"a-1": "w-1", "a-2": "w-1", "b-1": "w-2"}


def valid_id(value: Any) -> bool:
    return isinstance(value, str) and bool(ID.fullmatch(value)) and value not in (".", "..")


def valid_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@pytest.fixture
def log_store(store: Store) -> tuple[Store, list[ApiEvent]]:
    """Twelve events of three sessions in two workspaces."""
    for session, workspace in LOG_SESSIONS.items():
        store.sessions.save(SessionFactory(id=session, workspace_id=workspace))
    for n in range(12):
        store.faults.record_startup_fault(list(LOG_SESSIONS)[n % 3], f"event {n}")
    return store, all_events(store)


ids = st.one_of(
    st.none(),
    st.sampled_from([*LOG_SESSIONS, "w-1", "w-2", "ghost", ".", "..", "a" * 128, "a" * 129]),
    any_text,
    st.integers(),
)
cursors = st.one_of(
    st.none(),
    st.integers(-3, 15),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
)
limits = st.one_of(
    st.integers(-3, 15),
    st.sampled_from([0, 1000, 1001, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)


@HYPOTHESIS
@given(session_id=ids, workspace_id=ids, after_seq=cursors, limit=limits)
def test_loading_with_any_cursor_limit_and_filter_returns_the_exact_page_or_refuses(
    log_store: tuple[Store, list[ApiEvent]],
    session_id: Any,
    workspace_id: Any,
    after_seq: Any,
    limit: Any,
) -> None:
    store, log = log_store
    event_filter = ApiEventFilter.model_construct(session_id=session_id, workspace_id=workspace_id)
    valid = (
        (session_id is None or valid_id(session_id))
        and (workspace_id is None or valid_id(workspace_id))
        and (after_seq is None or (valid_int(after_seq) and 0 <= after_seq < 2**63))
        and valid_int(limit)
    )
    if not valid:
        with pytest.raises(InvalidRecord):
            store.events.load(event_filter, after_seq=after_seq, limit=limit)
        return

    page = store.events.load(event_filter, after_seq=after_seq, limit=limit)
    latest = log[-1].seq
    if after_seq is None:
        assert page == ApiEventPage(events=[], next_after_seq=latest, latest_seq=latest)
        return
    matching = [
        event
        for event in log
        if event.seq > after_seq
        and session_id in (None, event.session_id)
        and workspace_id in (None, LOG_SESSIONS[event.session_id])
    ][: max(1, min(limit, 1000))]
    next_after_seq = matching[-1].seq if matching else max(latest, after_seq)
    assert page == ApiEventPage(events=matching, next_after_seq=next_after_seq, latest_seq=latest)


# --- search ---------------------------------------------------------------------------------------


@pytest.fixture
def indexed_store(store: Store) -> Store:
    rows = [
        IndexRow(
            session_id=session,
            seq=n,
            ts="2026-11-29T12:00:00Z",
            kind="user_msg",
            turn_id=None,
            flow_run_id=None,
            text_content=text,
            payload_json=json.dumps({"text": text}),
        )
        for n, (session, text) in enumerate(
            [
                ("s-1", "please fix the flaky test in src/main.py"),
                ("s-1", "the test passes now"),
                ("s-2", "deploy to alice@example.com, version 3.14"),
            ],
            start=1,
        )
    ]
    store.index.insert(rows)
    return store


queries = st.one_of(
    any_text,
    st.lists(
        st.sampled_from(["fix", "test", '"flaky test"', "OR", "NEAR(", "*", "-", "src/main.py"])
    ).map(" ".join),
    st.integers(1, 40).map(lambda words: " ".join(["test"] * words)),
    st.integers(990, 1010).map(lambda length: "t" * length),
    st.integers(),
    st.none(),
)


@HYPOTHESIS
@given(
    query=queries,
    session_id=st.one_of(st.none(), st.sampled_from(["s-1", "s-2", "../x"]), any_text),
    limit=st.one_of(
        st.integers(-2, 30), st.sampled_from([10**30]), st.booleans(), st.text(max_size=2)
    ),
)
@example(query="fix test", session_id=None, limit=20)
@example(query="lone \ud800 surrogate", session_id=None, limit=20)
@example(query="nul \x00 test", session_id=None, limit=20)
def test_search_with_any_query_returns_hits_or_refuses(
    indexed_store: Store, query: Any, session_id: Any, limit: Any
) -> None:
    try:
        hits = indexed_store.index.search(query, session_id=session_id, limit=limit)
    except InvalidRecord:
        return
    assert isinstance(query, str) and query.strip()
    assert valid_id(session_id) or session_id is None
    assert valid_int(limit) and limit >= 1
    assert len(query) <= 1000
    assert all(isinstance(hit, SearchHit) for hit in hits)
    assert len(hits) <= limit
    assert all(session_id in (None, hit.session_id) for hit in hits)


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("t" * 1000, False),
        ("t" * 1001, True),
        (" ".join(["test"] * 32), False),
        (" ".join(["test"] * 33), True),
    ],
    ids=["1000-chars", "1001-chars", "32-words", "33-words"],
)
def test_search_queries_are_bounded_at_1000_characters_and_32_words(
    indexed_store: Store, query: str, refused: bool
) -> None:
    if refused:
        with pytest.raises(InvalidRecord):
            indexed_store.index.search(query)
    else:
        assert isinstance(indexed_store.index.search(query), list)
