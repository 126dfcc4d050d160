"""``add`` for the PostgreSQL store: a batch in one transaction, each user's rows under that user's RLS setting.

All or nothing: a taken id, a killed client or a lost connection leaves no part
of the batch behind. The per-user counts BM25 and the HNSW choice read
(``tenants``) move in the same transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memoryport._errors import EmbedderMismatch, InvalidInput
from memoryport._records import MemoryRecord
from memoryport.storekit import embed_unit

from ._driver import Jsonb
from ._rows import F32, Vector, words
from ._where import tenant

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from ._store import PostgresStore

__all__ = ["add_records"]


async def add_records(store: PostgresStore, records: Sequence[MemoryRecord]) -> list[str]:
    """Write ``records`` (already checked by the guard) in one transaction; their ids, in order."""
    if not records:
        return []
    info = await store.ready()
    vectors: F32 | None = None
    if store.embedder is not None:
        vectors = await embed_unit(store.embedder, [r.text for r in records])
    elif info.embedder_name is not None:
        raise EmbedderMismatch(
            f"PostgreSQL schema {store.schema!r} keeps vectors of embedder {info.embedder_name!r}; "
            "open it with that embedder to add records"
        )
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[tenant(r.scope.user_id)].append(i)
    s = store.quoted_schema
    cols = "id, user_id, session_id, agent_id, text, metadata, created_at, expires_at, doclen"
    arrays = (
        "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::jsonb[], "
        "%s::timestamptz[], %s::timestamptz[], %s::int[]"
    )
    if vectors is not None:
        cols += ", embedding"
        arrays += ", %b"
    # One statement per user and batch: the columns go as arrays (one round
    # trip, one plan), and a taken id is skipped rather than raising, so the
    # batch can name it (RLS hides whose it is, and so must we).
    insert = (
        f"WITH ins AS (INSERT INTO {s}.records({cols}) SELECT * FROM unnest({arrays}) "
        "ON CONFLICT (id) DO NOTHING RETURNING rid, id, lexemes), "
        f"p AS (INSERT INTO {s}.postings(key, rid) SELECT l, ins.rid FROM ins, unnest(ins.lexemes) AS l) "
        "SELECT id FROM ins"
    )
    upsert = (
        f"INSERT INTO {s}.tenants(tenant, n, words) VALUES (%s, %s, %s) ON CONFLICT (tenant) "
        "DO UPDATE SET n = tenants.n + excluded.n, words = tenants.words + excluded.words"
    )

    async def write(conn: AsyncConnection[Any]) -> None:
        # Users in a stable order (no deadlock between two batches); each
        # user's rows under that user's RLS setting, all in one transaction.
        for key in sorted(groups):
            idx = groups[key]
            group = [records[i] for i in idx]
            doclens = [words(r.text) for r in group]
            params: list[Any] = [
                [r.id for r in group],
                [r.scope.user_id for r in group],
                [r.scope.session_id for r in group],
                [r.scope.agent_id for r in group],
                [r.text for r in group],
                [Jsonb(dict(r.metadata)) for r in group],
                [r.created_at for r in group],
                [r.expires_at for r in group],
                doclens,
            ]
            if vectors is not None:
                params.append([Vector(vectors[i]) for i in idx])
            async with store.db.tx(conn, key) as cur:
                await cur.execute(insert, params)
                stored = {str(x[0]) for x in await cur.fetchall()}
                if len(stored) != len(group):
                    first = next(i for i in idx if records[i].id not in stored)
                    raise InvalidInput(
                        f"records[{first}].id is already stored; ids must be unique", field=f"records[{first}].id"
                    )
                await cur.execute(upsert, (key, len(group), sum(doclens)))
        if store._before_commit is not None:
            await store._before_commit()

    await store.write("add", write)
    return [str(r.id) for r in records]
