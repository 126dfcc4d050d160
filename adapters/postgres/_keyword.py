"""Keyword ranking: BM25 over the user's own postings and statistics.

The inverted index is the ``postings`` table (one row per user-prefixed stem
and record, a btree; see ``_schema.py`` for why not GIN), so a keyword search
reads the postings of the query's stems for that user alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryport import ranking
from memoryport._filters import Filters
from memoryport._records import MemoryScope

from ._where import filter_sql, live_sql, range_sql, scope_sql, tenant

if TYPE_CHECKING:
    from psycopg import AsyncCursor

    from ._store import PostgresStore

__all__ = ["keyword_ranking"]


async def keyword_ranking(
    store: PostgresStore,
    cur: AsyncCursor[Any],
    query: str,
    scope: MemoryScope,
    limit: int,
    filters: Filters | None,
    now: datetime,
    span: tuple[datetime | None, datetime | None] = (None, None),
    idf: dict[str, float] | None = None,
) -> list[tuple[int, float]]:
    """(rid, BM25) best first, over the scope's user's own statistics (as SQLite's per-user BM25).

    The query's words (:func:`memoryport.ranking.query_terms`, any text is
    safe) go through the schema's text-search configuration, so they are
    stemmed as the records were; OR semantics: a record with any word is a
    candidate, ranked by the summed IDF of its words times BM25's length factor.
    ``idf``: filled with the IDF of each query word found in the user's records
    (one more statement, only when asked).
    """
    terms = ranking.query_terms(query)
    if not terms:
        return []
    s = store.quoted_schema
    # The query's stems, prefixed as the user's records' are (one round trip, no query syntax).
    await cur.execute(
        f"SELECT DISTINCT {s}.tenant_prefix(%s) || l FROM unnest(tsvector_to_array(to_tsvector("
        f"(SELECT value FROM {s}.meta WHERE key = 'text_search_config')::regconfig, %s))) AS l",
        (scope.user_id, " ".join(terms)),
    )
    lexemes = [str(row[0]) for row in await cur.fetchall()]
    if not lexemes:
        return []
    # `hits`: the postings of the query's stems, which are this user's alone
    # (the stems carry the user's prefix), read by the postings' btree.
    # Document frequencies count all of them (the user's statistics, as
    # SQLite's per-user BM25); scores only records in scope, alive and
    # matching the filters.
    where = filter_sql(range_sql(live_sql(scope_sql(scope), now, store.retention), *span), filters)
    k1, b = ranking.BM25_K1, ranking.BM25_B
    sql = f"""
        WITH hits AS MATERIALIZED (
            SELECT p.key, p.rid FROM {s}.postings p WHERE p.key = ANY(%s::text[])
        ),
        st AS (
            SELECT greatest(coalesce(max(t.n), 0), 1)::float8 AS n,
                   coalesce(max(t.words)::float8 / nullif(max(t.n), 0), 1.0) AS avg
            FROM {s}.tenants t WHERE t.tenant = %s
        ),
        idf AS (
            SELECT hits.key, ln((greatest(st.n, count(*)) - count(*) + 0.5) / (count(*) + 0.5) + 1.0) AS idf
            FROM hits CROSS JOIN st GROUP BY hits.key, st.n
        ),
        summed AS (
            SELECT hits.rid, sum(idf.idf) AS idf FROM hits JOIN idf USING (key) GROUP BY hits.rid
        )
        SELECT r.rid, m.idf * %s / (1.0 + %s * (1.0 - %s + %s * r.doclen / st.avg)) AS score
        FROM summed m JOIN {s}.records r ON r.rid = m.rid CROSS JOIN st
        WHERE {where.text}
        ORDER BY score DESC, r.rid DESC
        LIMIT %s
    """
    params = [lexemes, tenant(scope.user_id), k1 + 1.0, k1, b, b, *where.params, limit]
    await cur.execute(sql, params)
    ranked = [(int(rid), float(score)) for rid, score in await cur.fetchall()]
    if idf is not None and ranked:
        idf.update(await _idf(store, cur, terms, scope))
    return ranked


async def _idf(store: PostgresStore, cur: AsyncCursor[Any], terms: list[str], scope: MemoryScope) -> dict[str, float]:
    """The BM25 IDF of each of ``terms`` found in the user's records (each word's own stem), as the ranking's."""
    s = store.quoted_schema
    # Each word's own stem, prefixed as the user's postings are (the prefix computed once), then the
    # number of its postings through the postings' btree: one statement.
    await cur.execute(
        f"""
        WITH pre AS MATERIALIZED (SELECT {s}.tenant_prefix(%s) AS p),
        keys AS MATERIALIZED (
            SELECT q.t, pre.p || l AS key FROM pre, unnest(%s::text[]) AS q(t),
                unnest(tsvector_to_array(to_tsvector(
                    (SELECT value FROM {s}.meta WHERE key = 'text_search_config')::regconfig, q.t))) AS l
        )
        SELECT keys.t, (SELECT count(*) FROM {s}.postings x WHERE x.key = keys.key),
               (SELECT greatest(coalesce(max(t.n), 0), 1) FROM {s}.tenants t WHERE t.tenant = %s)
        FROM keys
        """,
        (scope.user_id, terms, tenant(scope.user_id)),
    )
    out: dict[str, float] = {}
    for term, df, n in await cur.fetchall():
        if df:
            idf = ranking.bm25_idf(int(df), int(n))
            out[str(term)] = min(idf, out.get(str(term), idf))  # a word of two stems: the commoner one's
    return out
