"""``add`` for the PostgreSQL store: a batch in one transaction, each user's rows under that user's RLS setting.

All or nothing: a taken id, a killed client or a lost connection leaves no part
of the batch behind. The per-user counts BM25 and the HNSW choice read
(``tenants``) move in the same statement. The whole transaction is one round
trip to the server (pipeline mode, see ``_connection.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memoryport._errors import EmbedderMismatch, InvalidInput
from memoryport._records import MemoryRecord
from memoryport.storekit import embed_unit

from ._driver import Jsonb, pg_errors
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
    # Binary parameters: a text array's literal needs every element quoted and
    # escaped on the client (2.5 times the time of the binary format at 10,000 rows).
    arrays = (
        "%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::jsonb[], "
        "%b::timestamptz[], %b::timestamptz[], %b::int[]"
    )
    if vectors is not None:
        cols += ", embedding"
        arrays += ", %b"
    # One statement per user and batch: the columns go as arrays (one plan),
    # and the postings and the user's counts are written by the same statement.
    # Nothing is read back: BEGIN, the settings, every user's statement and
    # COMMIT go to the server in one pipeline, one round trip for the batch.
    # A taken id fails the statement (a unique violation) and so the whole
    # transaction; only then does a probe find which record it was.
    returning = "rid, id, lexemes, doclen"
    rows = f"INSERT INTO {s}.records({cols}) SELECT * FROM unnest({arrays})"
    counts = (
        f"INSERT INTO {s}.tenants(tenant, n, words) SELECT %s, count(*), sum(ins.doclen) FROM ins "
        "HAVING count(*) > 0 ON CONFLICT (tenant) "
        "DO UPDATE SET n = tenants.n + excluded.n, words = tenants.words + excluded.words"
    )
    postings = f"p AS (INSERT INTO {s}.postings(key, rid) SELECT l, ins.rid FROM ins, unnest(ins.lexemes) AS l)"
    insert = f"WITH ins AS ({rows} RETURNING {returning}), {postings} {counts}"
    # The probe skips a taken id instead of failing, so the ids it returns name
    # the one missing (RLS hides whose the id is, and so must we).
    probe = f"{rows} ON CONFLICT (id) DO NOTHING RETURNING id"

    def params_of(key: str) -> list[Any]:
        idx = groups[key]
        group = [records[i] for i in idx]
        params: list[Any] = [
            [r.id for r in group],
            [r.scope.user_id for r in group],
            [r.scope.session_id for r in group],
            [r.scope.agent_id for r in group],
            [r.text for r in group],
            [Jsonb(dict(r.metadata)) for r in group],
            [r.created_at for r in group],
            [r.expires_at for r in group],
            [words(r.text) for r in group],
        ]
        if vectors is not None:
            params.append([Vector(vectors[i]) for i in idx])
        return params

    async def write(conn: AsyncConnection[Any]) -> None:
        # Users in a stable order (no deadlock between two batches); each
        # user's rows under that user's RLS setting, all in one transaction.
        for key in sorted(groups):
            async with store.db.tx(conn, key) as cur:
                await cur.execute(insert, [*params_of(key), key])
        if store._before_commit is not None:
            await conn.execute("SELECT 1")  # (tests) the rows reach the server before the hook runs
            await store._before_commit()

    async def first_taken() -> int | None:
        pool = await store.db.pool()
        async with pool.connection() as conn, conn.transaction(force_rollback=True):
            for key in sorted(groups):
                async with store.db.tx(conn, key) as cur:
                    await cur.execute(probe, params_of(key))
                    stored = {str(row[0]) for row in await cur.fetchall()}
                    missing = [i for i in groups[key] if records[i].id not in stored]
                    if missing:
                        return missing[0]
        return None

    for attempt in range(3):
        try:
            await store.write("add", write)
            return [str(r.id) for r in records]
        except pg_errors.UniqueViolation:
            first = await first_taken()
            if first is not None:
                raise InvalidInput(
                    f"records[{first}].id is already stored; ids must be unique", field=f"records[{first}].id"
                ) from None
            if attempt == 2:
                raise
            # The id was freed meanwhile (a delete committed between the two): write again.
    raise AssertionError("unreachable")  # pragma: no cover
