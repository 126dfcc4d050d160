"""The pure ranking helpers: query parsing and reciprocal rank fusion."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryport.adapters.sqlite._fts import like_patterns, match_expression
from memoryport.ranking import (
    STOPWORDS,
    bm25_idf,
    bm25_length_factor,
    query_terms,
    reciprocal_rank_fusion,
)


def test_terms_are_lowercased_distinct_words_in_order() -> None:
    assert query_terms("Tea, TEA and coffee? tea!") == ["tea", "coffee"]


def test_operators_and_syntax_become_plain_words() -> None:
    words = query_terms('"x" AND b OR NOT c NEAR(e f) g* ^h body:k', stopwords=frozenset())
    assert words == ["x", "and", "b", "or", "not", "c", "near", "e", "f", "g", "h", "body", "k"]


def test_stopwords_are_dropped_unless_nothing_else_is_left() -> None:
    assert query_terms("What does Ann like to drink?") == ["ann", "like", "drink"]
    assert query_terms("who is it") == ["who", "is", "it"]
    assert "the" in STOPWORDS and "tea" not in STOPWORDS


def test_symbols_and_emoji_only_give_no_expression() -> None:
    assert query_terms("🍵 !!! ... ___") == []
    assert match_expression("🍵 !!! ... ___") is None
    assert match_expression("") is None


def test_non_ascii_words_are_kept() -> None:
    assert query_terms("Café naïve Straße 東京") == ["café", "naïve", "straße", "東京"]


def test_expression_quotes_every_word() -> None:
    assert match_expression("ann's tea") == '"ann" OR "tea"'
    assert match_expression('a "b" c') == '"b" OR "c"'


def test_like_patterns_escape_wildcards() -> None:
    assert like_patterns("100% x_y") == ["%100%", "%x%", "%y%"]
    assert like_patterns("x\\y") == ["%x%", "%y%"]


@given(st.text(max_size=200))
def test_any_text_gives_a_valid_fts5_expression(text: str) -> None:
    expression = match_expression(text.replace("\x00", ""))
    if expression is None:
        return
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no FTS5")
    conn.execute("INSERT INTO t VALUES ('some words here')")
    conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=60))
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["c"] == pytest.approx(1 / 62)


def test_rrf_orders_best_first_and_breaks_ties_deterministically() -> None:
    assert [key for key, _ in reciprocal_rank_fusion([["a", "b"], ["b", "a"]])] == ["a", "b"]
    assert [key for key, _ in reciprocal_rank_fusion([[3, 1, 2], [2]])] == [2, 3, 1]


def test_rrf_of_nothing_is_empty() -> None:
    assert reciprocal_rank_fusion([[], []]) == []
    assert reciprocal_rank_fusion([]) == []


def test_bm25_idf_favours_rare_words_and_stays_positive() -> None:
    assert bm25_idf(1, 1000) > bm25_idf(10, 1000) > bm25_idf(900, 1000) > 0
    assert bm25_idf(5, 3) > 0  # a count above n (concurrent writes) is clamped


def test_bm25_length_factor_normalises_by_length() -> None:
    assert bm25_length_factor(10, 10.0) == pytest.approx(1.0)
    assert bm25_length_factor(2, 10.0) > 1.0 > bm25_length_factor(40, 10.0)
    assert bm25_length_factor(40, 10.0, b=0.0) == pytest.approx(1.0)


def test_docstring_examples_of_the_ranking_modules() -> None:
    import doctest

    from memoryport import ranking
    from memoryport.adapters.sqlite import _fts

    for module in (ranking, _fts):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
