"""Pure ranking helpers of the SQLite backend: query parsing and rank fusion.

Nothing here touches SQLite or numpy, so retrieval quality can be tuned (and
unit-tested) in isolation:

- :func:`query_terms` splits a user's text into the words sent to FTS5;
- :func:`match_expression` turns those words into an FTS5 ``MATCH`` string in
  which every word is quoted, so no input can raise an FTS5 syntax error;
- :func:`like_patterns` does the same for the ``LIKE`` fallback;
- :func:`bm25_idf` and :func:`bm25_length_factor` score a user's records
  when FTS5's own ``bm25()`` would cost too much (a user in a big shared file);
- :func:`reciprocal_rank_fusion` fuses the keyword and vector rankings.

Example:
    >>> match_expression('what did "Ann" say AND NEAR(')
    '"ann" OR "say" OR "near"'
    >>> reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=60)[0][0]
    1
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

__all__ = [
    "BM25_B",
    "BM25_K1",
    "RRF_K",
    "STOPWORDS",
    "bm25_idf",
    "bm25_length_factor",
    "like_patterns",
    "match_expression",
    "query_terms",
    "reciprocal_rank_fusion",
]

K = TypeVar("K", bound=Hashable)

RRF_K = 60
"""The constant of reciprocal rank fusion (Cormack et al., 2009 use 60)."""

# Function words carry little BM25 weight but match most records: with OR
# semantics each costs a full scan of its posting list (a 100k-record search
# went from 47 to 9 ms without them). Tune here; an all-stopword query keeps them.
_STOPWORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself yourselves s t d ll
    m re ve don
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
"""English function words dropped from keyword queries (unless the query has nothing else)."""

# A word is a run of letters, digits or combining marks. FTS5's unicode61
# tokenizer splits on everything else too (punctuation, symbols, emoji, "_"),
# so each quoted word here is one FTS5 token or, at worst, a phrase of a few.
_WORD = re.compile(r"[^\W_]+")


def query_terms(query: str, *, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """The distinct words of ``query``, lower-cased, in order of first appearance, minus stopwords.

    Operators (``AND``, ``NEAR``), quotes, ``*``, ``^``, ``col:`` and symbols
    are not special: they are split off or kept as plain words. Words in
    ``stopwords`` are dropped unless every word is one (``"who is it"`` keeps all).

    Example:
        >>> query_terms("Tea? tea, TEA and col:green*")
        ['tea', 'col', 'green']
        >>> query_terms("to be or not to be")
        ['to', 'be', 'or', 'not']
    """
    seen: dict[str, None] = {}
    for word in _WORD.findall(query):
        seen.setdefault(word.lower(), None)
    words = list(seen)
    content = [w for w in words if w not in stopwords]
    return content or words


def match_expression(query: str) -> str | None:
    """An FTS5 ``MATCH`` expression: every word quoted, joined by ``OR``.

    ``OR`` (ranked by BM25) suits recall: a memory that shares some of the
    question's words is a candidate, and records sharing more or rarer words
    rank higher. Returns ``None`` when the query has no words (only symbols or
    emoji), which callers treat as "no keyword hits".

    Example:
        >>> match_expression('say "hi" ^NOT*')
        '"say" OR "hi"'
        >>> match_expression("🍵 !!") is None
        True
    """
    terms = query_terms(query)
    if not terms:
        return None
    # Words contain no '"' (see _WORD), but double any anyway: the quoting is
    # what guarantees a valid expression, not the word pattern.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def like_patterns(query: str) -> list[str]:
    """``LIKE`` patterns (escape character ``\\``), one per word, for the no-FTS5 fallback.

    Example:
        >>> like_patterns("100% tea")
        ['%100%', '%tea%']
    """
    out = []
    for term in query_terms(query):
        escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        out.append(f"%{escaped}%")
    return out


BM25_K1 = 1.2
"""BM25 term-frequency saturation (FTS5's ``bm25()`` uses 1.2 too)."""
BM25_B = 0.75
"""BM25 length normalisation (FTS5's ``bm25()`` uses 0.75 too)."""


def bm25_idf(df: int, n: int) -> float:
    """BM25's inverse document frequency of a word found in ``df`` of ``n`` records (always > 0).

    Example:
        >>> round(bm25_idf(1, 1000), 2), round(bm25_idf(900, 1000), 2)
        (6.51, 0.11)
    """
    n = max(n, df)
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


def bm25_length_factor(length: int, avg_length: float, *, k1: float = BM25_K1, b: float = BM25_B) -> float:
    """BM25's weight of one occurrence of a word in a record of ``length`` words.

    The score of a record is ``factor * sum(idf of the query words it contains)``
    when each word occurs once (what short memories mostly are).

    Example:
        >>> bm25_length_factor(10, 10.0)
        1.0
        >>> bm25_length_factor(5, 10.0) > bm25_length_factor(20, 10.0)
        True
    """
    norm = 1.0 - b + b * (length / avg_length if avg_length > 0 else 1.0)
    return (k1 + 1.0) / (1.0 + k1 * norm)


def reciprocal_rank_fusion(rankings: Iterable[Sequence[K]], *, k: int = RRF_K) -> list[tuple[K, float]]:
    """Fuse rankings (best first) into one: ``score(d) = sum(1 / (k + rank_i(d)))``.

    Ranks start at 1. Rank fusion needs no calibration between BM25 scores and
    cosine similarities, which live on unrelated scales. Ties are broken by the
    best single rank, then by first appearance, so the result is deterministic.

    Args:
        rankings: each a sequence of keys, best first; a key absent from a
            ranking contributes nothing from it.
        k: the smoothing constant; larger values flatten the head.

    Returns:
        ``(key, score)`` pairs, best first.

    Example:
        >>> reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=1)
        [('b', 0.8333333333333333), ('a', 0.5), ('c', 0.3333333333333333)]
    """
    scores: dict[K, float] = {}
    best: dict[K, int] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            if rank < best.get(key, 1 << 62):
                best[key] = rank
    order = {key: i for i, key in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], best[kv[0]], order[kv[0]]))
