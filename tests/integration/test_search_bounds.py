"""Search queries are bounded and refused alike on both backends; their SQL grows linearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from session_journal import InvalidRecord, Store
from session_journal.journal import JournalWriter
from session_journal.journal.index import (
    MAX_QUERY_CHARS,
    MAX_QUERY_WORDS,
    SearchTerm,
    parse_query,
)
from session_journal.storage.repositories.project_events import (
    fts5_match,
    headline_tsquery_sql,
    tsquery_sql,
)
from tests.factories import user_msg


@pytest.fixture
def indexed(store: Store, tmp_path: Path) -> Store:
    with JournalWriter(tmp_path / "s", index=store.index, session_id="s") as writer:
        writer.send(user_msg(1, "the deploy failed on staging"))
        writer.send(user_msg(2, "the fox and the dog"))
        assert writer.flush().persisted
    return store


def seqs(store: Store, query: str) -> list[int]:
    return [hit.seq for hit in store.index.search(query)]


def test_a_query_at_both_limits_is_accepted(indexed: Store) -> None:
    assert (MAX_QUERY_CHARS, MAX_QUERY_WORDS) == (1000, 32)
    words = "deploy " + " ".join(["staging"] * (MAX_QUERY_WORDS - 1))
    assert len(words.split()) == 32
    assert seqs(indexed, words) == [1]
    longest = "deploy" + " " * 987 + "staging"
    assert len(longest) == 1000
    assert seqs(indexed, longest) == [1]


def test_a_query_past_either_limit_is_refused(indexed: Store) -> None:
    too_many = " ".join(["deploy"] * (MAX_QUERY_WORDS + 1))
    with pytest.raises(InvalidRecord, match="has 33 words, over the limit of 32"):
        indexed.index.search(too_many)
    too_long = "deploy" + " " * 994 + "x"
    assert len(too_long) == 1001
    with pytest.raises(InvalidRecord, match="is 1001 characters long, over the limit of 1000"):
        indexed.index.search(too_long)


def test_words_are_counted_as_the_search_splits_them(indexed: Store) -> None:
    # `src/main.py` is one term of three words; `*` and `-` are no words at all.
    assert parse_query("src/main.py * -") == [
        SearchTerm(raw="src/main.py", words=("src", "main", "py"))
    ]
    thirty_two = " ".join(["src/main.py"] * 10) + " x y"
    assert parse_query(thirty_two) == [
        SearchTerm(raw="src/main.py", words=("src", "main", "py")),
        SearchTerm(raw="x", words=("x",)),
        SearchTerm(raw="y", words=("y",)),
    ]
    with pytest.raises(InvalidRecord, match="has 33 words, over the limit of 32"):
        parse_query(thirty_two + " z")


def test_a_lone_surrogate_is_refused_alike_on_both_backends(indexed: Store) -> None:
    for query, position in [("fox \udcff", 4), ("fox\ud800dog", 3), ("\udcff", 0)]:
        with pytest.raises(InvalidRecord) as refused:
            indexed.index.search(query)
        assert str(refused.value) == (
            f"search query {query!r} contains a lone surrogate at position {position}"
        )


def test_nul_characters_are_still_dropped_from_the_query(indexed: Store) -> None:
    assert seqs(indexed, "sta\x00ging") == [1]
    assert seqs(indexed, "\x00") == []


def test_limit_and_session_are_checked(indexed: Store) -> None:
    for limit in [0, -1, True, 1.5, "5", None]:
        with pytest.raises(InvalidRecord, match="limit must be a positive integer"):
            indexed.index.search("the", limit=limit)  # type: ignore[arg-type]
    assert sorted(seqs(indexed, "the")) == [1, 2]
    assert len(indexed.index.search("the", limit=10**30)) == 2  # clamped, not refused
    for session_id in ["", "../s", "s" * 129, 5]:
        with pytest.raises(InvalidRecord, match="session_id"):
            indexed.index.search("the", session_id=session_id)  # type: ignore[arg-type]


def test_a_repeated_word_becomes_one_term() -> None:
    fox = SearchTerm(raw="fox", words=("fox",))
    assert parse_query(" ".join(["fox"] * 32)) == [fox]
    assert parse_query('fox "fox" fox') == [fox]
    assert parse_query("Fox fox") == [SearchTerm("Fox", ("Fox",)), fox]


def test_the_sql_of_a_query_grows_linearly_with_its_distinct_terms() -> None:
    # What the engines cost grows with the operands they are given: 32 repeats of a word are
    # one operand on both backends, and each distinct word one operand (a plain word is not
    # also ORed with itself as "its words").
    repeated = parse_query(" ".join(["fox"] * 32))
    assert fts5_match(repeated) == '"fox"'
    assert tsquery_sql(repeated) == ("phraseto_tsquery('simple', :raw_0)", {"raw_0": "fox"})
    assert headline_tsquery_sql(repeated) == (
        "plainto_tsquery('simple', :hl_0)",
        {"hl_0": "fox"},
    )

    distinct = parse_query(" ".join(f"w{n:02}" for n in range(32)))
    assert fts5_match(distinct) == " ".join(f'"w{n:02}"' for n in range(32))
    sql, params = tsquery_sql(distinct)
    assert sql == " && ".join(f"phraseto_tsquery('simple', :raw_{n})" for n in range(32))
    assert params == {f"raw_{n}": f"w{n:02}" for n in range(32)}
    headline, headline_params = headline_tsquery_sql(distinct)
    assert headline == " || ".join(f"plainto_tsquery('simple', :hl_{n})" for n in range(32))
    assert list(headline_params.values()) == [f"w{n:02}" for n in range(32)]


def test_a_chunk_the_parser_may_keep_whole_is_searched_both_ways() -> None:
    [term] = parse_query("src/main.py")
    assert tsquery_sql([term]) == (
        "(phraseto_tsquery('simple', :raw_0) || phraseto_tsquery('simple', :words_0))",
        {"raw_0": "src/main.py", "words_0": "src main py"},
    )
    # The snippet's query has no phrase operator, and a phrase's repeated words appear once.
    [phrase] = parse_query('"fox fox src/main.py fox"')
    assert headline_tsquery_sql([phrase]) == (
        " || ".join(f"plainto_tsquery('simple', :hl_{n})" for n in range(5)),
        {"hl_0": "fox", "hl_1": "src/main.py", "hl_2": "src", "hl_3": "main", "hl_4": "py"},
    )
