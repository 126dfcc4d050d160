"""FTS5 and LIKE query strings built from :func:`memoryport.ranking.query_terms`.

Every word is quoted, so no user input can raise an FTS5 syntax error or a
stray ``%`` widen a ``LIKE``.

Example:
    >>> match_expression('what did "Ann" say AND NEAR(')
    '"ann" OR "say" OR "near"'
"""

from __future__ import annotations

from memoryport.ranking import query_terms

__all__ = ["like_patterns", "match_expression"]


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
