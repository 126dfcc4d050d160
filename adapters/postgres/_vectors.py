"""Vector ranking with pgvector: an exact scan of the scope's rows, or the HNSW graph for large scopes.

Cosine similarity (``1 - <=>``), best first. The exact scan reads the scope's
rows through the ``(user_id, created_at)`` index, so its cost follows the
user's size; the HNSW index (``create_hnsw_index``) serves a user who holds
enough of the table that pgvector's post-filtered graph search still finds k.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryport._filters import Filters
from memoryport._records import MemoryScope

from ._rows import F32, Vector
from ._where import filter_sql, live_sql, range_sql, scope_sql, tenant

if TYPE_CHECKING:
    from psycopg import AsyncCursor

    from ._store import PostgresStore

__all__ = ["use_hnsw", "vector_ranking"]


async def vector_ranking(
    store: PostgresStore,
    cur: AsyncCursor[Any],
    qvec: F32,
    scope: MemoryScope,
    limit: int,
    filters: Filters | None,
    now: datetime,
    span: tuple[datetime | None, datetime | None] = (None, None),
) -> list[tuple[int, float]]:
    """(rid, cosine similarity) best first: exact over the scope, or HNSW when the scope dominates the table."""
    where = filter_sql(range_sql(live_sql(scope_sql(scope), now, store.retention), *span), filters)
    vs, s = store.vector_schema, store.quoted_schema
    dist = f"(r.embedding OPERATOR({vs}.<=>) %b)"
    info = store.info
    if info is not None and info.has_hnsw and await use_hnsw(store, cur, scope, limit):
        ef = max(store.ef_search, limit)
        # Row-level security makes the planner expect few rows and prefer a
        # sort over the graph: for this one statement, the graph it is.
        await cur.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), set_config('enable_seqscan', 'off', true)",
            (str(min(ef, 1000)),),
        )
        await cur.execute(
            f"SELECT r.rid, 1.0 - {dist} AS score FROM {s}.records r "
            f"WHERE {where.text} AND r.embedding IS NOT NULL ORDER BY r.embedding OPERATOR({vs}.<=>) %b LIMIT %s",
            [Vector(qvec), *where.params, Vector(qvec), limit],
        )
        rows = await cur.fetchall()
        await cur.execute("SET LOCAL enable_seqscan TO DEFAULT")
        if len(rows) >= limit:
            return [(int(rid), float(score)) for rid, score in rows]
        # Too few survived the scope/filters among the graph's candidates: scan the scope exactly.
    # "+ 0" keeps the planner off the HNSW index: the scope's rows come from
    # the (user_id, created_at) index and are ranked exactly.
    await cur.execute(
        f"SELECT r.rid, 1.0 - {dist} AS score FROM {s}.records r "
        f"WHERE {where.text} AND r.embedding IS NOT NULL ORDER BY {dist} + 0, r.rid LIMIT %s",
        [Vector(qvec), *where.params, Vector(qvec), limit],
    )
    return [(int(rid), float(score)) for rid, score in await cur.fetchall()]


async def use_hnsw(store: PostgresStore, cur: AsyncCursor[Any], scope: MemoryScope, limit: int) -> bool:
    """HNSW only for a large scope holding enough of the table that a filtered graph search finds ``limit``.

    pgvector 0.6 filters HNSW results after the graph search (no iterative
    scan), so a user's share of the table bounds what survives the filter.
    """
    await cur.execute(
        f"SELECT coalesce((SELECT n FROM {store.quoted_schema}.tenants WHERE tenant = %s), 0), "
        "greatest((SELECT reltuples FROM pg_class WHERE oid = %s::regclass), 1)",
        (tenant(scope.user_id), f"{store.quoted_schema}.records"),
    )
    row = await cur.fetchone()
    assert row is not None
    mine, total = int(row[0]), float(row[1])
    if mine < store.exact_below:
        return False
    share = min(1.0, mine / total)
    return share * min(max(store.ef_search, limit), 1000) >= 2 * limit
