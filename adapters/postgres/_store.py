"""The PostgreSQL port: the store's settings and its port methods; each job lives in its own module.

Plain storage behind :class:`memoryport.GuardedMemory`; see ``docs/postgres.md``.

| module | its one job |
|---|---|
| ``_driver.py`` | psycopg and psycopg-pool behind the ``postgres`` extra's error |
| ``_connection.py`` | pools (one per event loop) and transactions scoped for row-level security; retries |
| ``_schema.py`` | tables, RLS policies and migrations under an advisory lock; the embedder's record |
| ``_rows.py`` | records as rows and back; vectors in pgvector's binary format |
| ``_where.py`` | the SQL of scopes, metadata filters (operators included), liveness and time ranges |
| ``_add.py`` | ``add``: a batch in one transaction, per user, with the postings and counts |
| ``_keyword.py`` | keyword ranking: BM25 over the user's postings |
| ``_vectors.py`` | vector ranking: exact scan of the scope or the HNSW graph |
| ``_search.py`` | a search once the query is embedded: recent, keyword, vector, hybrid, context |
| ``_update.py`` | ``update``: texts, metadata and expiry changed in place |
| ``_erasure.py`` | delete and purge (rows, postings, counts); VACUUM |

Every statement runs inside :meth:`Database.tx <._connection.Database.tx>`, so
none can be written outside a transaction that sets the caller's tenant.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from memoryport import ranking
from memoryport._checks import check_duration, check_int, check_number
from memoryport._embedding import EmbeddingPort
from memoryport._errors import EmbedderMismatch, InvalidInput, UsageError
from memoryport._filters import Filters
from memoryport._port import Capability, SearchResults
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, SearchMode, utcnow
from memoryport.storekit import embed_unit

from ._add import add_records
from ._connection import DURABILITY, Database
from ._driver import TypeInfo, psycopg_pool
from ._erasure import delete_records, purge_records, vacuum_tables
from ._graph import PostgresGraphStore
from ._rows import COLUMNS, F32, record_from_row, vector_dumper
from ._schema import SCHEMA_VERSION, SchemaInfo, hnsw_ddl, migrate, quote_ident, read_schema
from ._search import recent, search_hits
from ._update import update_records
from ._where import filter_sql, live_sql, range_sql, scope_sql, tenant

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore"]

logger = logging.getLogger("memoryport")
T = TypeVar("T")


class PostgresStore:
    """The :class:`~memoryport.MemoryPort` over PostgreSQL (plain storage: the guard does the checks).

    Hosts usually build it through :func:`~memoryport.adapters.postgres.PostgresMemory`,
    which returns it guarded; see there for the arguments (``retention`` is the
    guard's ``retention_days`` as a :class:`~datetime.timedelta`). Beyond the port
    it offers ``stats()`` (async), ``create_hnsw_index()``, ``vacuum()``,
    ``schema``, ``embedder`` and ``rls_enforced``, reached as ``memory.store.…``.
    """

    name = "postgres"

    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        *,
        embedder: EmbeddingPort | None = None,
        schema: str = "memoryport",
        retention: timedelta | None = None,
        text_search_config: str | None = None,
        pool_size: int = 4,
        candidates: int = 50,
        search_mode: str = "hybrid",
        exact_below: int = 20_000,
        ef_search: int = 100,
        hnsw: bool = False,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        context_weight: float = ranking.NEIGHBOUR_WEIGHT,
        context_window: int = ranking.NEIGHBOUR_WINDOW,
        connect_timeout: float = 30.0,
        durability: str | None = None,
        date_weight: float = ranking.DATE_WEIGHT,
        previous_weight: float = ranking.PREVIOUS_WEIGHT,
        previous_mode: str = ranking.PREVIOUS_MODE,
        session_weight: float = ranking.SESSION_WEIGHT,
        session_gap: timedelta = ranking.SESSION_GAP,
        speaker_weight: float = ranking.SPEAKER_WEIGHT,
        time_weight: float = ranking.TIME_WEIGHT,
        context_key_weight: float = ranking.CONTEXT_KEY_WEIGHT,
        context_key_window: int = ranking.CONTEXT_KEY_WINDOW,
        length_weight: float = ranking.LENGTH_WEIGHT,
        length_pivot: int = ranking.LENGTH_PIVOT,
    ) -> None:
        if embedder is not None and not isinstance(embedder, EmbeddingPort):
            raise UsageError(f"embedder must be an EmbeddingPort, not {type(embedder).__name__}")
        check_int(pool_size, "pool_size")
        check_int(candidates, "candidates")
        check_int(exact_below, "exact_below", minimum=0)
        check_int(ef_search, "ef_search")
        check_int(hnsw_m, "hnsw_m", minimum=2)
        check_int(hnsw_ef_construction, "hnsw_ef_construction", minimum=4)
        check_int(context_window, "context_window", minimum=0)
        context_weight = check_number(context_weight, "context_weight", minimum=0.0, maximum=1.0)
        date_weight = check_number(date_weight, "date_weight", minimum=0.0, maximum=1.0)
        previous_weight = check_number(previous_weight, "previous_weight", minimum=0.0, maximum=1.0)
        if not isinstance(previous_mode, str) or previous_mode not in ranking.PREVIOUS_MODES:
            raise InvalidInput(
                f"previous_mode must be one of {', '.join(map(repr, ranking.PREVIOUS_MODES))}, not {previous_mode!r}",
                field="previous_mode",
            )
        session_weight = check_number(session_weight, "session_weight", minimum=0.0, maximum=1.0)
        speaker_weight = check_number(speaker_weight, "speaker_weight", minimum=0.0, maximum=1.0)
        time_weight = check_number(time_weight, "time_weight", minimum=0.0, maximum=1.0)
        context_key_weight = check_number(context_key_weight, "context_key_weight", minimum=0.0, maximum=1.0)
        check_int(context_key_window, "context_key_window", minimum=0)
        length_weight = check_number(length_weight, "length_weight", minimum=0.0, maximum=1.0)
        check_int(length_pivot, "length_pivot", minimum=1)
        session_gap = check_duration(session_gap, "session_gap")
        if not (durability is None or (isinstance(durability, str) and durability in DURABILITY)):
            raise InvalidInput(
                f"durability must be 'normal', 'full' or None (the server's setting), not {durability!r}",
                field="durability",
            )
        if search_mode not in ("hybrid", "vector", "keyword"):
            raise InvalidInput("search_mode must be 'hybrid', 'vector' or 'keyword'", field="search_mode")
        self.schema = schema
        #: The schema as a quoted SQL identifier, for the modules' statements.
        self.quoted_schema = quote_ident(schema)
        dsn: str | None = None
        host_pool: AsyncConnectionPool[Any] | None = None
        if isinstance(dsn_or_pool, str):
            if not dsn_or_pool.strip():
                raise UsageError("PostgresMemory needs a DSN such as 'postgresql://user@host/db' or a pool")
            dsn = dsn_or_pool
        elif isinstance(dsn_or_pool, psycopg_pool.AsyncConnectionPool):
            host_pool = dsn_or_pool
        else:
            raise UsageError(
                "PostgresMemory takes a DSN string or a psycopg_pool.AsyncConnectionPool, "
                f"not {type(dsn_or_pool).__name__}"
            )
        self.embedder = embedder
        self.retention = retention
        self.text_search_config = text_search_config
        self.candidates = candidates
        self.search_mode: SearchMode = search_mode  # type: ignore[assignment]  # one of three, checked above
        self.exact_below = exact_below
        self.ef_search = ef_search
        self.hnsw = hnsw
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.context_weight = context_weight
        self.context_window = context_window
        self.date_weight = date_weight
        self.previous_weight = previous_weight
        self.previous_mode = previous_mode
        self.session_weight = session_weight
        self.speaker_weight = speaker_weight
        self.time_weight = time_weight
        self.context_key_weight = context_key_weight
        self.context_key_window = context_key_window
        self.length_weight = length_weight
        self.length_pivot = length_pivot
        # Measurement only (docs/retrieval.md): False keeps hybrid search from letting records into the
        # keyword list by their contextual credit alone.
        self.context_key_admit = True
        self.session_gap = session_gap
        self.rls_enforced: bool | None = None
        caps = {
            Capability.SESSION_SCOPE,
            Capability.AGENT_SCOPE,
            Capability.METADATA,
            Capability.FILTERS,
            Capability.EXPIRY,
            Capability.KEYWORD_SEARCH,
            Capability.GET,
            Capability.DELETE,
            Capability.EXPORT,
            Capability.PURGE,
            Capability.UPDATE,
            Capability.TIME_RANGE,
            Capability.COUNT,
            Capability.FILTER_OPERATORS,
            Capability.GRAPH,
        }
        if embedder is not None:
            caps.add(Capability.VECTOR_SEARCH)
        self.capabilities = frozenset(caps)
        #: Pools and RLS-scoped transactions (``_connection.py``).
        self.durability = durability
        self.db = Database(
            dsn, host_pool, name=schema, pool_size=pool_size, connect_timeout=connect_timeout, durability=durability
        )
        #: The schema's meta once read (first use).
        self.info: SchemaInfo | None = None
        self._ready_lock: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        #: Called inside an add's transaction after its rows are written, before
        #: the commit (tests kill a process there to prove no partial batch stays).
        self._before_commit: Callable[[], Awaitable[None]] | None = None

    # -- connections, schema ------------------------------------------------------

    @property
    def dsn(self) -> str | None:
        return self.db.dsn

    @property
    def pool_size(self) -> int:
        return self.db.pool_size

    @property
    def connect_timeout(self) -> float:
        return self.db.connect_timeout

    @connect_timeout.setter
    def connect_timeout(self, value: float) -> None:
        self.db.connect_timeout = value

    async def ready(self) -> SchemaInfo:
        """Create or check the schema once (first use), then the cached meta."""
        if self.info is not None:
            return self.info
        loop = asyncio.get_running_loop()
        lock = self._ready_lock.setdefault(loop, asyncio.Lock())
        async with lock:
            if self.info is not None:
                return self.info
            pool = await self.db.pool()
            async with pool.connection() as conn:
                info = await read_schema(conn, self.schema)
                await conn.rollback()
                needs = (
                    info is None
                    or info.version < SCHEMA_VERSION
                    or (self.embedder is not None and info.embedder_name is None)
                    or (self.text_search_config is not None and info.text_search_config != self.text_search_config)
                )
                if needs:
                    info = await migrate(
                        conn,
                        self.schema,
                        text_search_config=self.text_search_config,
                        embedder_name=None if self.embedder is None else self.embedder.name,
                        embedder_dim=None if self.embedder is None else int(self.embedder.dim),
                        hnsw=self.hnsw,
                        hnsw_m=self.hnsw_m,
                        hnsw_ef_construction=self.hnsw_ef_construction,
                    )
                assert info is not None
                if info.version > SCHEMA_VERSION:
                    raise UsageError(
                        f"PostgreSQL schema {self.schema!r} has version {info.version}, newer than this "
                        f"memoryport ({SCHEMA_VERSION}); upgrade memoryport"
                    )
                if self.embedder is not None and (
                    info.embedder_name != self.embedder.name or info.embedder_dim != int(self.embedder.dim)
                ):
                    raise EmbedderMismatch(
                        f"PostgreSQL schema {self.schema!r} holds vectors of embedder {info.embedder_name!r} "
                        f"(dim {info.embedder_dim}) and was opened with {self.embedder.name!r} "
                        f"(dim {self.embedder.dim}); open it with the same embedder, or copy the memories "
                        "into a new schema opened with the new one (`memoryport copy`)"
                    )
                if info.vector_schema is not None:
                    vector = await TypeInfo.fetch(conn, f"{quote_ident(info.vector_schema, 'vector schema')}.vector")
                    assert vector is not None
                    self.db.vector_type = vector
                    self.db.dumper = vector_dumper(vector.oid)
                cur = await conn.execute(
                    "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
                )
                row = await cur.fetchone()
                await conn.rollback()
                self.rls_enforced = not (row is not None and row[0])
                if not self.rls_enforced:
                    logger.warning(
                        "PostgreSQL: connected as a superuser or a BYPASSRLS role, so row-level security does not "
                        "apply; only the queries' scope conditions separate users. Connect as an ordinary role "
                        "(see docs/postgres.md)"
                    )
            self.info = info
            return info

    @property
    def vector_schema(self) -> str:
        """The quoted schema of the pgvector extension (its operators are qualified by it)."""
        assert self.info is not None and self.info.vector_schema is not None
        return quote_ident(self.info.vector_schema, "the vector extension's schema")

    async def read(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a read (schema ready first), retried on a lost connection."""
        await self.ready()
        return await self.db.read(operation, fn)

    async def write(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a write transaction (schema ready first); see :meth:`Database.write`."""
        await self.ready()
        return await self.db.write(operation, fn)

    async def aclose(self) -> None:
        """Close the pools this store opened (never a pool the host passed in)."""
        await self.db.aclose()

    # -- the port: writes ------------------------------------------------------

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        return await add_records(self, records)

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        """Change text, metadata and/or expiry in place, all in one transaction; the ids updated, in order."""
        return await update_records(self, changes, scope)

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        return await delete_records(self, ids, scope)

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        return await purge_records(self, now, created_before)

    # -- the port: reads -------------------------------------------------------

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        where = scope_sql(scope).add("r.id = %s", id)

        async def read(conn: AsyncConnection[Any]) -> MemoryRecord | None:
            async with self.db.tx(conn, tenant(scope.user_id), read_only=True) as cur:
                await cur.execute(
                    f"SELECT {COLUMNS} FROM {self.quoted_schema}.records r WHERE {where.text}", where.params
                )
                row = await cur.fetchone()
                return None if row is None else record_from_row(row)

        return await self.read("get", read)

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        where = range_sql(scope_sql(scope), since, until)

        async def read(conn: AsyncConnection[Any]) -> list[MemoryRecord]:
            async with self.db.tx(conn, tenant(scope.user_id), read_only=True) as cur:
                await cur.execute(
                    f"SELECT {COLUMNS} FROM {self.quoted_schema}.records r WHERE {where.text} "
                    "ORDER BY r.created_at, r.rid",
                    where.params,
                )
                return [record_from_row(row) for row in await cur.fetchall()]

        return await self.read("export", read)

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Filters | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        where = filter_sql(range_sql(live_sql(scope_sql(scope), utcnow(), self.retention), since, until), filters)

        async def read(conn: AsyncConnection[Any]) -> int:
            async with self.db.tx(conn, tenant(scope.user_id), read_only=True) as cur:
                await cur.execute(
                    f"SELECT count(*) FROM {self.quoted_schema}.records r WHERE {where.text}", where.params
                )
                row = await cur.fetchone()
                return 0 if row is None else int(row[0])

        return await self.read("count", read)

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Filters | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        await self.ready()
        span = (since, until)
        key = tenant(scope.user_id)
        if not query.strip():

            async def listing(conn: AsyncConnection[Any]) -> list[MemoryHit]:
                async with self.db.tx(conn, key, read_only=True) as cur:
                    return await recent(self, cur, scope, k, filters, span)

            return await self.read("search", listing)
        qvec: F32 | None = None
        mode: SearchMode = "keyword"
        if self.embedder is not None and self.search_mode != "keyword":
            try:
                qvec = (await embed_unit(self.embedder, [query]))[0]
                mode = self.search_mode
            except Exception as exc:
                logger.warning(
                    "PostgreSQL: the embedder failed during search (%s); searching by keywords only",
                    type(exc).__name__,
                )

        async def ranked(conn: AsyncConnection[Any]) -> list[MemoryHit]:
            async with self.db.tx(conn, key, read_only=True) as cur:
                return await search_hits(self, cur, query, qvec, mode, scope, k, filters, span)

        return SearchResults(await self.read("search", ranked), mode=mode)

    def graph_port(self) -> PostgresGraphStore:
        """The entity graph in this schema (hosts hold ``KnowledgeGraph(memory)``; see ``docs/graph.md``)."""
        return PostgresGraphStore(self)

    # -- maintenance -------------------------------------------------------------

    async def stats(self) -> dict[str, Any]:
        """Record counts, schema version, embedder, text-search configuration, RLS."""
        info = await self.ready()

        async def read(conn: AsyncConnection[Any]) -> dict[str, Any]:
            async with self.db.tx(conn, None, read_only=True) as cur:
                await cur.execute(f"SELECT count(*), count(DISTINCT user_id) FROM {self.quoted_schema}.records")
                row = await cur.fetchone()
                assert row is not None
                return {
                    "records": int(row[0]),
                    "users": int(row[1]),
                    "schema": self.schema,
                    "schema_version": info.version,
                    "text_search_config": info.text_search_config,
                    "embedder": info.embedder_name,
                    "dim": info.embedder_dim,
                    "rls_enforced": self.rls_enforced,
                }

        return await self.read("stats", read)

    async def create_hnsw_index(self, *, m: int | None = None, ef_construction: int | None = None) -> bool:
        """Build the HNSW index on the vectors (``CREATE INDEX CONCURRENTLY``: writes go on meanwhile).

        Returns ``False`` when it already existed. Needs the embedder recorded.
        """
        info = await self.ready()
        if info.vector_schema is None:
            raise UsageError(f"schema {self.schema!r} keeps no vectors: open it with an embedder first")
        if info.has_hnsw:
            return False
        ddl = hnsw_ddl(
            self.schema,
            info.vector_schema,
            self.hnsw_m if m is None else m,
            self.hnsw_ef_construction if ef_construction is None else ef_construction,
            concurrently=True,
        )
        async with self.db.autocommit() as conn:  # CREATE INDEX CONCURRENTLY cannot run in a transaction
            await conn.execute(ddl)
            refreshed = await read_schema(conn, self.schema)
        assert refreshed is not None
        self.info = refreshed
        return True

    async def vacuum(self, *, full: bool = False) -> None:
        """``VACUUM (ANALYZE)`` the tables (``FULL``: rewrite them, freeing the dead rows' pages).

        After a delete the rows are dead tuples until VACUUM removes them and
        their index entries; ``full=True`` rewrites the tables so no page keeps
        the erased bytes (it holds an exclusive lock while it works).
        """
        await vacuum_tables(self, full=full)
