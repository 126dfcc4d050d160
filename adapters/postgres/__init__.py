"""PostgresMemory: memoryport on PostgreSQL with pgvector, for when one file is not enough.

Needs the ``postgres`` extra (``pip install "memoryport[postgres]"``: psycopg 3
and psycopg-pool). See ``docs/postgres.md`` for the server's setup, the
schema, row-level security, erasure duties and tuning.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from memoryport._embedding import EmbeddingPort
from memoryport._errors import InvalidInput, UsageError
from memoryport._events import EventSink
from memoryport._guard import GuardedMemory
from memoryport._records import DEFAULT_LIMITS, Limits
from memoryport._sync import run_sync
from memoryport.ranking import NEIGHBOUR_WEIGHT, NEIGHBOUR_WINDOW

from ._schema import SCHEMA_VERSION
from ._schema import migrate as _migrate
from ._store import PostgresStore

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["SCHEMA_VERSION", "PostgresMemory", "PostgresStore", "migrate_dsn"]


def _positive_int(value: object, field: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInput(f"{field} must be an integer of at least {minimum}", field=field)
    return value


class PostgresMemory(GuardedMemory):
    """Long-term memory in PostgreSQL: full-text and pgvector search, row-level security, real erasure.

    A guard over a :class:`PostgresStore`. The schema (default ``memoryport``)
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
        retention_days: hide records older than this; :meth:`purge` deletes them.
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
            slow; see :meth:`create_hnsw_index`) and its parameters.
        context_weight, context_window: conversational context, as in
            :class:`~memoryport.SQLiteMemory`.
        limits, sink, capture_content: see :class:`~memoryport.GuardedMemory`.

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

    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        embedder: EmbeddingPort | None = None,
        retention_days: float | None = None,
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
        limits: Limits = DEFAULT_LIMITS,
        sink: EventSink | None = None,
        capture_content: bool = False,
    ) -> None:
        if embedder is not None and not isinstance(embedder, EmbeddingPort):
            raise UsageError(f"embedder must be an EmbeddingPort, not {type(embedder).__name__}")
        if retention_days is not None and not retention_days > 0:
            raise InvalidInput("retention_days must be a positive number or None", field="retention_days")
        _positive_int(pool_size, "pool_size")
        _positive_int(candidates, "candidates")
        _positive_int(exact_below, "exact_below", 0)
        _positive_int(ef_search, "ef_search")
        _positive_int(hnsw_m, "hnsw_m", 2)
        _positive_int(hnsw_ef_construction, "hnsw_ef_construction", 4)
        _positive_int(context_window, "context_window", 0)
        if isinstance(context_weight, bool) or not isinstance(context_weight, (int, float)) or not (
            0.0 <= context_weight <= 1.0
        ):
            raise InvalidInput("context_weight must be a number from 0 to 1", field="context_weight")
        store = PostgresStore(
            dsn_or_pool,
            embedder=embedder,
            schema=schema,
            retention=None if retention_days is None else timedelta(days=retention_days),
            text_search_config=text_search_config,
            pool_size=pool_size,
            candidates=candidates,
            search_mode=search_mode,
            exact_below=exact_below,
            ef_search=ef_search,
            hnsw=hnsw,
            hnsw_m=hnsw_m,
            hnsw_ef_construction=hnsw_ef_construction,
            context_weight=float(context_weight),
            context_window=context_window,
        )
        self._store = store
        super().__init__(
            store, retention_days=retention_days, limits=limits, sink=sink, capture_content=capture_content
        )

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the tables."""
        return self._store.schema

    @property
    def embedder(self) -> EmbeddingPort | None:
        """The embedder, or ``None`` (keyword search only)."""
        return self._store.embedder

    @property
    def rls_enforced(self) -> bool | None:
        """Whether row-level security binds the connected role (``None`` before first use).

        ``False`` for a superuser or ``BYPASSRLS`` role: then only the queries'
        scope conditions separate users.
        """
        return self._store.rls_enforced

    async def stats(self) -> dict[str, Any]:
        """Record and user counts, schema version, embedder, text-search configuration, RLS.

        Example:
            >>> (await memory.stats())["records"]  # doctest: +SKIP
            42
        """
        return await self._store.stats()

    def stats_sync(self) -> dict[str, Any]:
        """Blocking twin of :meth:`stats`."""
        return run_sync(self._store.stats(), method="stats")

    async def create_hnsw_index(self, *, m: int | None = None, ef_construction: int | None = None) -> bool:
        """Build the HNSW index on the vectors; ``False`` if it was there already.

        Without it, vector search scans the user's own rows exactly (fast up to
        tens of thousands of records per user). Build it when users grow past
        that, best after a bulk load: building is far cheaper than inserting
        into the graph record by record, and each add afterwards also updates
        the graph (slower adds). ``CREATE INDEX CONCURRENTLY``: writes go on.

        Example:
            >>> await memory.create_hnsw_index()  # doctest: +SKIP
            True
        """
        return await self._store.create_hnsw_index(m=m, ef_construction=ef_construction)

    async def vacuum(self, *, full: bool = False) -> None:
        """VACUUM the tables: dead rows and their index entries go (``full``: the tables are rewritten).

        Part of a data-deletion request: after ``delete`` the erased rows stay
        as dead tuples until a VACUUM; see ``docs/postgres.md`` for WAL,
        replicas and backups.

        Example:
            >>> await memory.delete(scope=MemoryScope(user_id="ann"))  # doctest: +SKIP
            >>> await memory.vacuum(full=True)  # doctest: +SKIP
        """
        await self._store.vacuum(full=full)

    def vacuum_sync(self, *, full: bool = False) -> None:
        """Blocking twin of :meth:`vacuum`."""
        run_sync(self._store.vacuum(full=full), method="vacuum")

    def __repr__(self) -> str:
        return f"PostgresMemory(schema={self.schema!r}, embedder={getattr(self.embedder, 'name', None)!r})"


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
    from ._store import psycopg

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
