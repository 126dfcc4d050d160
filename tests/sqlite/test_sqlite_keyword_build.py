"""Building a user's word index (``_keyword_user._postings``): FTS5's two lists read as they come equal grouping
its instances in SQL, as the index was built before (the same tokens, postings, occurrences and lengths)."""

from __future__ import annotations

import dataclasses
import importlib
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from memoryport.adapters.sqlite import _keyword_user
from memoryport.adapters.sqlite._keyword_large import _tokenizer, tokens, words_database

WORDS = [
    "tea", "walk", "walking", "walked", "Walks", "garden", "book", "books", "café", "cafe", "naïve", "straße",
    "über", "ÜBER", "42", "x7", "the", "a", "日本語", "ﬁne", "e\u0301te", "don't", "co-op", "3.14", "",
]  # fmt: skip


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(0, 9))]
        if i % 5 == 0 and words:
            words += [words[-1]] * rng.randint(1, 4)  # occurrences above one, at the end of a text
        if i % 11 == 0:
            words = ["...", "!"]  # no token at all
        out.append(rng.choice([" ", ", ", "; "]).join(words))
    return out


def grouped_in_sql(conn: Any, values: list[str]) -> Any:
    """The build as it was: a table keeping texts and lengths, its instances grouped by token in SQL."""
    words = words_database(conn)
    try:
        words.executemany("INSERT INTO words(rowid, body) VALUES (?, ?)", enumerate(values))
        return _keyword_user._grouped(words.execute(_keyword_user._INSTANCES).fetchall(), len(values))
    finally:
        words.close()


def equal(a: Any, b: Any) -> None:
    names, docs, tf, bounds, lengths, tokens = a
    assert names == b[0]
    assert docs.dtype == b[1].dtype and np.array_equal(docs, b[1])
    assert tf.dtype == b[2].dtype and np.array_equal(tf, b[2])
    assert bounds == b[3]
    assert lengths.dtype == b[4].dtype and np.array_equal(lengths, b[4])
    assert tokens == b[5]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [65, 300, 2000])
def test_the_index_read_from_fts5s_lists_equals_the_grouped_one(
    driver: str, seed: int, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = importlib.import_module(driver).connect(":memory:")
    values = texts(n, seed)
    assert len(values) > _keyword_user._FEW  # the new database, not the thread's scratch table
    want = grouped_in_sql(conn, values)
    grouped = _keyword_user._grouped

    def not_here(*args: Any) -> Any:
        raise AssertionError("the lists disagreed: grouped in SQL")

    monkeypatch.setattr(_keyword_user, "_grouped", not_here)  # FTS5's two lists answer, no fallback
    equal(_keyword_user._postings(conn, values), want)
    monkeypatch.setattr(_keyword_user, "_grouped", grouped)


def test_no_token_at_all(driver: str) -> None:
    conn = importlib.import_module(driver).connect(":memory:")
    values = ["...", "", "!?"] * 30
    got = _keyword_user._postings(conn, values)
    equal(got, grouped_in_sql(conn, values))
    assert got[0] == [] and got[3] == [0] and got[5] == 0


class _Lists:
    """Stands in for the private database: the two lists as given."""

    def __init__(self, terms: list[tuple[str, int, int]], instances: str) -> None:
        self.terms, self.instances = terms, instances

    def execute(self, sql: str) -> Any:
        class Rows:
            def __init__(self, rows: list[Any]) -> None:
                self.rows = rows

            def fetchall(self) -> list[Any]:
                return self.rows

            def fetchone(self) -> Any:
                return self.rows[0]

        return Rows(self.terms if "words_terms" in sql else [(self.instances,)])


def test_lists_that_disagree_are_refused() -> None:
    # a: texts 0, 0, 2 (two records); b: text 1
    assert _keyword_user._listed(_Lists([("a", 2, 3), ("b", 1, 1)], "0,0,2,1"), 3) is not None
    assert _keyword_user._listed(_Lists([("a", 2, 3), ("b", 1, 1)], "0,2,0,1"), 3) is None  # not ascending
    assert _keyword_user._listed(_Lists([("a", 2, 2), ("b", 1, 1)], "2,0,1"), 3) is None  # the same, records agree
    assert _keyword_user._listed(_Lists([("a", 2, 3), ("b", 1, 1)], "0,0,2,1,1"), 3) is None  # more instances
    assert _keyword_user._listed(_Lists([("a", 3, 3), ("b", 1, 1)], "0,0,2,1"), 3) is None  # records differ
    assert _keyword_user._listed(_Lists([("a", 2, 3), ("b", 1, 1)], "0,0,2,3"), 3) is None  # no such text
    # a token starting at the text the one before ended with is its own posting
    got = _keyword_user._listed(_Lists([("a", 2, 2), ("b", 2, 3)], "0,2,2,2,3"), 4)
    assert got is not None
    assert got[1].tolist() == [0, 2, 2, 3] and got[2].tolist() == [1.0, 1.0, 2.0, 1.0] and got[3] == [0, 2, 4]


def test_the_scratch_table_keeps_nothing(driver: str) -> None:
    """The thread's scratch table (query words' tokens, an extension's few texts) is left empty after each use: a
    word tokenized before never answers for the next one at its position."""
    conn = importlib.import_module(driver).connect(":memory:")
    assert tokens(conn, ["Walking", "cafés", "don't", "t42"]) == ["walk", "cafe", None, None]
    assert tokens(conn, ["tea", "stone"]) == ["tea", "stone"]
    few = ["tea walk", "walk walk", "Café"]
    equal(_keyword_user._postings(conn, few), grouped_in_sql(conn, few))
    assert tokens(conn, ["river"]) == ["river"]
    scratch = _tokenizer(conn)
    assert scratch.execute("SELECT count(*) FROM words").fetchone()[0] == 0
    assert scratch.execute("SELECT count(*) FROM words_instances").fetchone()[0] == 0
    assert not scratch.in_transaction


def reference_sums(found: list[tuple[Any, Any]], n: int) -> tuple[list[int], list[float]]:
    """Each holder's terms added from 0.0 phrase after phrase, in Python floats (C doubles)."""
    sums: dict[int, float] = {}
    for docs, terms in found:
        for doc, term in zip(docs.tolist(), terms.tolist(), strict=True):
            sums[doc] = sums.get(doc, 0.0) + term
    return sorted(sums), [sums[doc] for doc in sorted(sums)]


@pytest.mark.parametrize("seed", range(8))
def test_the_phrases_terms_are_summed_in_bm25s_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 3000
    for phrases in range(1, 7):
        found = []
        for _ in range(phrases):
            docs = np.sort(rng.choice(n, size=int(rng.integers(1, 900)), replace=False)).astype(np.int32)
            # terms of very different magnitudes: a sum in another order rounds differently
            terms = rng.random(len(docs)) * 10.0 ** rng.integers(-6, 3, size=len(docs))
            found.append((docs, terms))
        if seed % 2:
            found[0][1][0] = 0.0  # a term of 0.0: its record still held, the same sums
        at, score = _keyword_user._summed(found, n)
        want_at, want = reference_sums(found, n)
        assert at.tolist() == want_at
        assert score.tolist() == want  # bit for bit
        assert not _keyword_user.scratch(n, np.float64)[0].any()  # the dense buffer left zero


@pytest.mark.parametrize("seed", range(3))
def test_the_terms_computed_at_the_build_equal_each_tokens_computed_when_asked(driver: str, seed: int) -> None:
    """A built index's BM25 terms (every posting's, computed at once: ``_keyword_user._all_terms``) are bit for bit
    those :meth:`UserWords.postings` computes for one token when asked (an index grown since has no others)."""
    conn = importlib.import_module(driver).connect(":memory:")
    values = texts(500, seed)
    line = SimpleNamespace(texts=values, rids=list(range(7, 7 + len(values))), gen=1, root=None)
    index = _keyword_user.build(conn, line)  # type: ignore[arg-type]
    assert index.scores is not None
    asked = dataclasses.replace(index, scores=None, asked={})
    for token in [*index.terms, "absent"]:
        (docs, terms), (want_docs, want) = index.postings(token), asked.postings(token)
        assert docs.tolist() == want_docs.tolist()
        assert terms.tobytes() == want.tobytes(), token
