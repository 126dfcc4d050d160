"""PostgresMemory: memoryport on PostgreSQL with pgvector, for when one file is not enough.

Needs the ``postgres`` extra (``pip install "memoryport[postgres]"``: psycopg 3
and psycopg-pool). See ``docs/postgres.md`` for the server's setup, the
schema, row-level security, erasure duties and tuning.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from memoryport._embedding import EmbeddingPort
from memoryport._guard import GuardedMemory, GuardOptions, retention_period
from memoryport.ranking import (
    CONTEXT_KEY_WEIGHT,
    CONTEXT_KEY_WINDOW,
    DATE_WEIGHT,
    LENGTH_PIVOT,
    LENGTH_WEIGHT,
    NEIGHBOUR_WEIGHT,
    NEIGHBOUR_WINDOW,
    PREVIOUS_MODE,
    PREVIOUS_WEIGHT,
    SESSION_GAP,
    SESSION_WEIGHT,
    SPEAKER_WEIGHT,
    TIME_WEIGHT,
)

from ._schema import SCHEMA_VERSION
from ._schema import migrate as _migrate
from ._store import PostgresStore

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from typing_extensions import Unpack

__all__ = ["SCHEMA_VERSION", "PostgresMemory", "PostgresStore", "migrate_dsn"]


def PostgresMemory(
    dsn_or_pool: str | AsyncConnectionPool[Any],
    embedder: EmbeddingPort | None = None,
    *,
    schema: str = "memoryport",
    text_search_config: str | None = None,
    pool_size: int = 4,
    candidates: int = 50,
    search_mode: str = "hybrid",
    exact_below: int = 20_000,
    ef_search: int = 100,
    hnsw: bool = False,
    hnsw_m: int = 16,
    hnsw_ef_construction: int = 64,
    context_weight: float = NEIGHBOUR_WEIGHT,
    context_window: int = NEIGHBOUR_WINDOW,
    durability: str | None = None,
    date_weight: float = DATE_WEIGHT,
    previous_weight: float = PREVIOUS_WEIGHT,
    previous_mode: str = PREVIOUS_MODE,
    session_weight: float = SESSION_WEIGHT,
    session_gap: timedelta = SESSION_GAP,
    speaker_weight: float = SPEAKER_WEIGHT,
    time_weight: float = TIME_WEIGHT,
    context_key_weight: float = CONTEXT_KEY_WEIGHT,
    context_key_window: int = CONTEXT_KEY_WINDOW,
    length_weight: float = LENGTH_WEIGHT,
    length_pivot: int = LENGTH_PIVOT,
    **guard: Unpack[GuardOptions],
) -> GuardedMemory[PostgresStore]:
    """Long-term memory in PostgreSQL: full-text and pgvector search, row-level security, real erasure.

    Returns a :class:`~memoryport.GuardedMemory` over a :class:`PostgresStore`
    (``memory.store`` gives it back: ``stats()``, ``create_hnsw_index()``,
    ``vacuum()``, ``schema``, ``rls_enforced``). The schema (default ``memoryport``)
    is created on first use (or by ``memoryport migrate --dsn ...``). Every
    query carries the scope in its WHERE clause, and every transaction sets
    ``memoryport.tenant`` so that row-level security (forced, so it binds the
    tables' owner too) keeps users apart even if a query were built wrong.
    Connect as an ordinary role: a superuser or ``BYPASSRLS`` role skips RLS
    (a WARNING says so). A batch is one transaction.

    Keyword search stems words with the schema's text-search configuration and
    ranks with BM25 over the user's own records; with an ``embedder`` records
    get a pgvector ``vector(dim)`` and search fuses both rankings with the same
    ranking code as :class:`~memoryport.SQLiteMemory`.

    Args:
        dsn_or_pool: a libpq DSN (``"postgresql://app@db.internal/app"``), for
            which memoryport keeps its own pool per event loop, or the host's
            ``psycopg_pool.AsyncConnectionPool`` (used, never closed).
        embedder: an :class:`~memoryport.EmbeddingPort`; its name and dimension
            are recorded in the schema and a different one raises
            :class:`~memoryport.EmbedderMismatch`. Needs the pgvector extension.
        schema: the PostgreSQL schema holding the tables (a lower-case name).
        text_search_config: the text-search configuration of a new schema
            (``"english"`` when ``None``); fixed once the schema exists.
        pool_size: connections of memoryport's own pool (per event loop).
        candidates: how many keyword and vector candidates hybrid search fuses.
        search_mode: with an embedder, ``"hybrid"``, ``"vector"`` or ``"keyword"``.
        exact_below: a user with fewer records gets an exact vector scan of its
            own rows; above, the HNSW index (when built) is used if the user
            holds enough of the table.
        ef_search: ``hnsw.ef_search`` for HNSW searches (pgvector caps it at 1000).
        hnsw, hnsw_m, hnsw_ef_construction: build the HNSW index when the
            embedder is first recorded (off by default: adds into the graph are
            slow; see ``PostgresStore.create_hnsw_index``) and its parameters.
        context_weight, context_window: conversational context, as in
            :class:`~memoryport.SQLiteMemory`.
        durability: what a committed write survives. ``None`` (default): the
            server's ``synchronous_commit`` (``on`` unless an operator changed
            it: each commit waits for the WAL to reach the disk). ``"normal"``
            (``synchronous_commit = off`` for memoryport's writes, SQLite's
            default): a client crash loses nothing committed; a server or OS
            crash can lose the last moments' transactions (at most
            3 × ``wal_writer_delay``, 0.6 s by default), never consistency; a
            one-record add no longer waits for the disk. ``"full"``: ``on``.
        date_weight: the lift of records written on the date a query names,
            as in :class:`~memoryport.SQLiteMemory`.
        previous_weight, previous_mode, session_weight, session_gap, speaker_weight, time_weight: vector
            keys of replies mixed with the previous record's, the lift of a strong match's session, of the turns
            of a speaker the query names and, for a query asking when, of records naming a time, as
            in :class:`~memoryport.SQLiteMemory` (same core ranking, same defaults).
        context_key_weight, context_key_window: contextual keyword keys (the
            query words a record's neighbours hold and it lacks, credited at
            this share of their IDF), as in :class:`~memoryport.SQLiteMemory`.
        length_weight, length_pivot: the lift of longer records (at most
            ``length_weight``, all of it from ``length_pivot`` characters),
            as in :class:`~memoryport.SQLiteMemory`.
        **guard: the guard's options (:class:`~memoryport.GuardOptions`);
            ``retention_days`` also makes the store's own queries skip older records.

    Example:
        <!-- the doctest needs a server -->

        >>> from memoryport import MemoryRecord, MemoryScope
        >>> from memoryport.adapters.postgres import PostgresMemory
        >>> memory = PostgresMemory("postgresql://app@localhost/app")  # doctest: +SKIP
        >>> ann = MemoryScope(user_id="ann")
        >>> _ = memory.add_sync([MemoryRecord(scope=ann, text="Ann drinks green tea")])  # doctest: +SKIP
        >>> [h.record.text for h in memory.search_sync("teas", scope=ann)]  # doctest: +SKIP
        ['Ann drinks green tea']
    """

    store = PostgresStore(
        dsn_or_pool,
        embedder=embedder,
        schema=schema,
        retention=retention_period(guard.get("retention_days")),
        text_search_config=text_search_config,
        pool_size=pool_size,
        candidates=candidates,
        search_mode=search_mode,
        exact_below=exact_below,
        ef_search=ef_search,
        hnsw=hnsw,
        hnsw_m=hnsw_m,
        hnsw_ef_construction=hnsw_ef_construction,
        context_weight=context_weight,
        context_window=context_window,
        durability=durability,
        date_weight=date_weight,
        previous_weight=previous_weight,
        previous_mode=previous_mode,
        session_weight=session_weight,
        session_gap=session_gap,
        speaker_weight=speaker_weight,
        time_weight=time_weight,
        context_key_weight=context_key_weight,
        context_key_window=context_key_window,
        length_weight=length_weight,
        length_pivot=length_pivot,
    )
    return GuardedMemory(store, **guard)


async def migrate_dsn(
    dsn: str,
    *,
    schema: str = "memoryport",
    text_search_config: str | None = None,
    embedder: EmbeddingPort | None = None,
    hnsw: bool = False,
) -> dict[str, Any]:
    """Create or upgrade the schema at ``dsn`` (what ``memoryport migrate --dsn`` runs); return its meta.

    Idempotent and safe to run from several processes at once (an advisory
    lock serialises them).

    Example:
        >>> await migrate_dsn("postgresql://owner@db/app")  # doctest: +SKIP
        {'schema': 'memoryport', 'schema_version': 1, ...}
    """
    from ._driver import psycopg

    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        info = await _migrate(
            conn,
            schema,
            text_search_config=text_search_config,
            embedder_name=None if embedder is None else embedder.name,
            embedder_dim=None if embedder is None else int(embedder.dim),
            hnsw=hnsw,
        )
    return {
        "schema": schema,
        "schema_version": info.version,
        "text_search_config": info.text_search_config,
        "embedder": info.embedder_name,
        "dim": info.embedder_dim,
    }
