"""Deleting records: their rows, their postings and their users' counts, in one transaction; VACUUM after.

A deleted row is a dead tuple until VACUUM removes it and its index entries
(``vacuum(full=True)`` rewrites the tables so no page keeps the erased bytes);
``docs/postgres.md`` says what else PostgreSQL keeps (WAL, replicas, backups).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryport._records import MemoryScope

from ._graph import erase_graph
from ._where import scope_sql, tenant

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor

    from ._store import PostgresStore

__all__ = ["delete_records", "lower_counts", "purge_records", "unpost", "vacuum_tables"]


def unpost(s: str, rows: str) -> str:
    """A CTE deleting the postings (schema ``s``) of the records in CTE ``rows`` (which returns rid and lexemes)."""
    return (
        f"unposted AS (DELETE FROM {s}.postings p USING "
        f"(SELECT {rows}.rid, unnest({rows}.lexemes) AS key FROM {rows}) AS gone "
        "WHERE p.key = gone.key AND p.rid = gone.rid)"
    )


async def lower_counts(s: str, cur: AsyncCursor[Any], removed: Mapping[str, tuple[int, int]]) -> None:
    """Lower the per-user counts after a delete; a user with nothing left loses its row too."""
    for key in sorted(removed):
        n, words = removed[key]
        await cur.execute(
            f"UPDATE {s}.tenants SET n = n - %s, words = words - %s WHERE tenant = %s",
            (n, words, key),
        )
        await cur.execute(f"DELETE FROM {s}.tenants WHERE tenant = %s AND n <= 0", (key,))


async def delete_records(store: PostgresStore, ids: Sequence[str] | None, scope: MemoryScope) -> int:
    """Delete the scope's records (those of ``ids`` only, when given); how many went."""
    where = scope_sql(scope)
    if ids is not None:
        where.add("r.id = ANY(%s)", list(ids))
    key = tenant(scope.user_id)
    s = store.quoted_schema

    async def write(conn: AsyncConnection[Any]) -> int:
        async with store.db.tx(conn, key) as cur:
            await cur.execute(
                f"WITH del AS (DELETE FROM {s}.records r WHERE {where.text} "
                f"RETURNING r.rid, r.doclen, r.lexemes), {unpost(s, 'del')} SELECT doclen FROM del",
                where.params,
            )
            rows = await cur.fetchall()
            if rows:
                await lower_counts(s, cur, {key: (len(rows), sum(int(r[0]) for r in rows))})
            if ids is None and scope.user_id is not None and scope.session_id is None and scope.agent_id is None:
                await erase_graph(cur, s, scope.user_id)  # erasing a user erases their entity graph too
            return len(rows)

    return await store.write("delete", write)


async def purge_records(store: PostgresStore, now: datetime, created_before: datetime | None) -> int:
    """Delete every user's records expired at ``now`` or created before ``created_before``."""
    s = store.quoted_schema

    async def write(conn: AsyncConnection[Any]) -> int:
        async with store.db.tx(conn, None) as cur:
            await cur.execute(
                f"WITH del AS (DELETE FROM {s}.records r WHERE (r.expires_at IS NOT NULL AND "
                "r.expires_at <= %s) OR r.created_at < %s RETURNING r.rid, r.user_id, r.doclen, r.lexemes), "
                f"{unpost(s, 'del')} SELECT user_id, doclen FROM del",
                (now, created_before),
            )
            rows = await cur.fetchall()
            removed: dict[str, tuple[int, int]] = {}
            for user, doclen in rows:
                n, words = removed.get(tenant(user), (0, 0))
                removed[tenant(user)] = (n + 1, words + int(doclen))
            await lower_counts(s, cur, removed)
            return len(rows)

    return await store.write("purge", write)


async def vacuum_tables(store: PostgresStore, *, full: bool = False) -> None:
    """``VACUUM (ANALYZE)`` the store's tables (``FULL``: rewrite them)."""
    await store.ready()
    async with store.db.autocommit() as conn:  # VACUUM cannot run in a transaction
        for table in ("records", "postings", "tenants", "graph_entities", "graph_aliases", "graph_facts"):
            await conn.execute(f"VACUUM ({'FULL, ' if full else ''}ANALYZE) {store.quoted_schema}.{table}")
