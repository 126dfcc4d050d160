"""The PostgreSQL port: pools, transactions with row-level security, search, erasure.

Plain storage behind :class:`memoryport.GuardedMemory`; see ``docs/postgres.md``.

(Over 500 lines: the port methods, their SQL and the row-level-security
transactions that wrap every one of them live together so that no query can be
written outside a scoped transaction. The SQLite store was split along its seams
in round two; the same split — schema, keyword postings, vectors, erasure — is
the next step here.)
"""

from __future__ import annotations

import asyncio
import logging
import re
import struct
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from memoryport import ranking
from memoryport._checks import check_int, check_number
from memoryport._embedding import EmbeddingPort
from memoryport._errors import BackendError, EmbedderMismatch, InvalidInput, UsageError
from memoryport._extras import require
from memoryport._filters import Filters
from memoryport._port import Capability, SearchResults
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, SearchMode, utcnow
from memoryport.storekit import embed_unit as _embed

from ._schema import SchemaInfo, hnsw_ddl, migrate, quote_ident, read_schema

if TYPE_CHECKING:
    import numpy.typing as npt
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg_pool import AsyncConnectionPool

    F32 = npt.NDArray[np.float32]
else:
    F32 = Any

psycopg = require("psycopg", extra="postgres", feature="PostgresMemory")
psycopg_pool = require("psycopg_pool", extra="postgres", feature="PostgresMemory", package="psycopg-pool")
from psycopg import errors as pg_errors  # noqa: E402  (after the guarded import above)
from psycopg import sql as pg_sql  # noqa: E402
from psycopg.adapt import Dumper  # noqa: E402
from psycopg.pq import Format  # noqa: E402
from psycopg.types import TypeInfo  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

__all__ = ["PostgresStore"]

logger = logging.getLogger("memoryport")
T = TypeVar("T")

_WORD = re.compile(r"[^\W_]+")
_NEIGHBOUR_SCAN = 16
_COLUMNS = "r.id, r.user_id, r.session_id, r.agent_id, r.text, r.metadata, r.created_at, r.expires_at, r.updated_at"


def tenant(user_id: str | None) -> str:
    """The value of ``memoryport.tenant`` for a user (the RLS key): ``u:<id>`` or ``none``."""
    return "none" if user_id is None else "u:" + user_id


def _words(text: str) -> int:
    return len(_WORD.findall(text))


class _Vector:
    """A float32 row sent to pgvector in its binary format."""

    __slots__ = ("row",)

    def __init__(self, row: F32) -> None:
        self.row = row


def _vector_dumper(oid: int) -> type[Dumper]:
    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            row = np.asarray(obj.row, dtype=">f4")
            return struct.pack(">HH", row.shape[0], 0) + row.tobytes()

    VectorDumper.oid = oid
    return VectorDumper


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def _record(row: Sequence[Any]) -> MemoryRecord:
    # Rows were validated on the way in: construct without re-validating (as SQLite does).
    rid, user, session, agent, text, metadata, created, expires, updated = row
    values: dict[str, Any] = {
        "id": rid,
        "scope": MemoryScope.model_construct(user_id=user, session_id=session, agent_id=agent),
        "text": text,
        "metadata": dict(metadata) if metadata else {},
        "created_at": _utc(created),
        "expires_at": _utc(expires),
    }
    if "updated_at" in MemoryRecord.model_fields:
        values["updated_at"] = _utc(updated)
    return MemoryRecord.model_construct(**values)


class _Sql:
    """A WHERE clause and its positional parameters, built piece by piece (values never spliced)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.params: list[Any] = []

    def add(self, part: str, *params: Any) -> _Sql:
        self.parts.append(part)
        self.params.extend(params)
        return self

    @property
    def text(self) -> str:
        return " AND ".join(self.parts) if self.parts else "TRUE"


def scope_sql(scope: MemoryScope, a: str = "r") -> _Sql:
    """The scope's conditions: user equality (``IS NULL`` for none), session and agent where set."""
    q = _Sql()
    if scope.user_id is None:
        q.add(f"{a}.user_id IS NULL")
    else:
        q.add(f"{a}.user_id = %s", scope.user_id)
    if scope.session_id is not None:
        q.add(f"{a}.session_id = %s", scope.session_id)
    if scope.agent_id is not None:
        q.add(f"{a}.agent_id = %s", scope.agent_id)
    return q


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def filter_sql(q: _Sql, filters: Mapping[str, Any] | None, a: str = "r") -> _Sql:
    """Metadata conditions: a plain value is equality; operator dicts as in :mod:`memoryport` filters.

    JSON equality keeps types apart (``1`` vs ``"1"`` vs ``true``; ``1 == 1.0``);
    comparisons hold only between values of the same kind, strings by code point.
    """
    for key, condition in (filters or {}).items():
        ops = dict(condition) if isinstance(condition, Mapping) else {"$eq": condition}
        for op, operand in ops.items():
            value = f"({a}.metadata -> %s)"
            if op == "$eq":
                q.add(f"{value} = %s", key, Jsonb(operand))
            elif op == "$ne":
                q.add(f"{value} IS DISTINCT FROM %s", key, Jsonb(operand))
            elif op == "$in":
                q.add(f"{value} = ANY(%s::jsonb[])", key, [Jsonb(v) for v in operand])
            elif op == "$nin":
                q.add(f"NOT coalesce({value} = ANY(%s::jsonb[]), false)", key, [Jsonb(v) for v in operand])
            elif op == "$exists":
                q.add(f"{'' if operand else 'NOT '}({a}.metadata ? %s)", key)
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                sign = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
                if _kind(operand) == "number":
                    q.add(
                        f"(jsonb_typeof({value}) = 'number' AND ({a}.metadata ->> %s)::numeric {sign} %s::numeric)",
                        key,
                        key,
                        str(operand),
                    )
                else:
                    q.add(
                        f"(jsonb_typeof({value}) = 'string' AND ({a}.metadata ->> %s) COLLATE \"C\" {sign} %s)",
                        key,
                        key,
                        str(operand),
                    )
            else:  # the guard validates operators; never drop one silently
                raise InvalidInput(f"filters[{key!r}]: unknown operator {op!r}", field="filters")
    return q


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout)) and not isinstance(
        exc, pg_errors.QueryCanceled
    )


class _Retry(Exception):
    """A transaction to run again (deadlock, serialization failure, connection lost before commit)."""


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
        if search_mode not in ("hybrid", "vector", "keyword"):
            raise InvalidInput("search_mode must be 'hybrid', 'vector' or 'keyword'", field="search_mode")
        self.schema = schema
        self._s = quote_ident(schema)
        if isinstance(dsn_or_pool, str):
            if not dsn_or_pool.strip():
                raise UsageError("PostgresMemory needs a DSN such as 'postgresql://user@host/db' or a pool")
            self.dsn: str | None = dsn_or_pool
            self._host_pool: AsyncConnectionPool[Any] | None = None
        elif isinstance(dsn_or_pool, psycopg_pool.AsyncConnectionPool):
            self.dsn = None
            self._host_pool = dsn_or_pool
        else:
            raise UsageError(
                "PostgresMemory takes a DSN string or a psycopg_pool.AsyncConnectionPool, "
                f"not {type(dsn_or_pool).__name__}"
            )
        self.embedder = embedder
        self.retention = retention
        self.text_search_config = text_search_config
        self.pool_size = pool_size
        self.candidates = candidates
        self.search_mode: SearchMode = search_mode  # type: ignore[assignment]  # one of three, checked above
        self.exact_below = exact_below
        self.ef_search = ef_search
        self.hnsw = hnsw
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.context_weight = context_weight
        self.context_window = context_window
        self.connect_timeout = connect_timeout
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
        }
        if embedder is not None:
            caps.add(Capability.VECTOR_SEARCH)
        self.capabilities = frozenset(caps)
        self._pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool[Any]] = {}
        self._info: SchemaInfo | None = None
        self._dumper: type[Dumper] | None = None
        self._vector_type: TypeInfo | None = None
        self._ready_lock: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._closed = False
        #: Called inside an add's transaction after its rows are written, before
        #: the commit (tests kill a process there to prove no partial batch stays).
        self._before_commit: Callable[[], Awaitable[None]] | None = None

    # -- pools and transactions ---------------------------------------------

    async def _pool(self) -> AsyncConnectionPool[Any]:
        if self._closed:
            raise UsageError("this PostgresMemory is closed")
        if self._host_pool is not None:
            return self._host_pool
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            # One pool per event loop: psycopg's async connections belong to the
            # loop that made them, and the *_sync twins run on their own loop.
            pool = psycopg_pool.AsyncConnectionPool(
                self.dsn,
                min_size=1,
                max_size=max(1, self.pool_size),
                open=False,
                # A connection is checked when taken from the pool: after a server
                # restart the pool replaces its dead connections instead of failing.
                check=psycopg_pool.AsyncConnectionPool.check_connection,
                kwargs={"application_name": "memoryport"},
                name=f"memoryport-{self.schema}",
                timeout=self.connect_timeout,
            )
            self._pools[loop] = pool
            try:
                await pool.open(wait=True, timeout=self.connect_timeout)
            except Exception as exc:
                del self._pools[loop]
                await pool.close()
                raise BackendError(
                    f"cannot connect to PostgreSQL ({type(exc).__name__}): check the DSN and that the server is up",
                    backend=self.name,
                    operation="connect",
                ) from exc
        return pool

    async def _ready(self) -> SchemaInfo:
        """Create or check the schema once (first use), then the cached meta."""
        if self._info is not None:
            return self._info
        loop = asyncio.get_running_loop()
        lock = self._ready_lock.setdefault(loop, asyncio.Lock())
        async with lock:
            if self._info is not None:
                return self._info
            pool = await self._pool()
            async with pool.connection() as conn:
                info = await read_schema(conn, self.schema)
                await conn.rollback()
                needs = (
                    info is None
                    or info.version < _schema_version()
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
                if info.version > _schema_version():
                    raise UsageError(
                        f"PostgreSQL schema {self.schema!r} has version {info.version}, newer than this "
                        f"memoryport ({_schema_version()}); upgrade memoryport"
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
                    self._vector_type = vector
                    self._dumper = _vector_dumper(vector.oid)
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
            self._info = info
            return info

    @property
    def _vs(self) -> str:
        assert self._info is not None and self._info.vector_schema is not None
        return quote_ident(self._info.vector_schema, "the vector extension's schema")

    @asynccontextmanager
    async def _tx(
        self, conn: AsyncConnection[Any], tenant_key: str | None, *, read_only: bool = False
    ) -> AsyncIterator[AsyncCursor[Any]]:
        """A transaction with ``memoryport.tenant`` set (or every tenant for maintenance)."""
        async with conn.transaction():
            setup: list[pg_sql.Composable] = []
            if read_only:
                # One snapshot for every statement of a search: a batch is seen whole or not at all.
                setup.append(pg_sql.SQL("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
                # Row-level security's condition makes the planner expect a handful of
                # rows, so it would read all of a user's rows and sort them where a walk
                # of the (user_id, created_at) index in order stops after k. Statements
                # that must sort (scores) still sort.
                setup.append(pg_sql.SQL("SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off"))
            if tenant_key is None:
                setup.append(pg_sql.SQL("SELECT set_config('memoryport.all_tenants', 'on', true)"))
            else:
                setup.append(
                    pg_sql.SQL("SELECT set_config('memoryport.tenant', {}, true)").format(pg_sql.Literal(tenant_key))
                )
            cur = conn.cursor()
            if self._dumper is not None and self._vector_type is not None:
                # vector and vector[] (a batch's vectors go as one array parameter)
                self._vector_type.register(cur)
                cur.adapters.register_dumper(_Vector, self._dumper)
            await cur.execute(pg_sql.SQL("; ").join(setup))
            yield cur

    async def _read(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a read, retrying on a lost connection (reads are idempotent)."""
        await self._ready()
        for attempt in range(3):
            pool = await self._pool()
            try:
                async with pool.connection() as conn:
                    return await fn(conn)
            except Exception as exc:
                if attempt < 2 and _is_connection_error(exc):
                    logger.warning("PostgreSQL: connection lost during %s; retrying", operation)
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _write(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a write transaction; retry deadlocks, and a lost connection only when nothing can have committed."""
        await self._ready()
        for attempt in range(5):
            pool = await self._pool()
            committing = False
            try:
                async with pool.connection() as conn:
                    async with conn.transaction():
                        result = await fn(conn)
                        committing = True
                    return result
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure):
                if attempt == 4:
                    raise
                await asyncio.sleep(0.02 * (attempt + 1))
            except Exception as exc:
                if not _is_connection_error(exc):
                    raise
                if committing:
                    raise BackendError(
                        f"the connection to PostgreSQL was lost while committing {operation}; the transaction "
                        "either committed whole or not at all: check (get/export) before retrying",
                        backend=self.name,
                        operation=operation,
                    ) from exc
                if attempt >= 2:
                    raise BackendError(
                        f"the connection to PostgreSQL was lost during {operation}; nothing was written",
                        backend=self.name,
                        operation=operation,
                    ) from exc
                logger.warning("PostgreSQL: connection lost during %s before commit; retrying", operation)
                await asyncio.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the pools this store opened (never a pool the host passed in)."""
        if self._closed:
            return
        self._closed = True
        current = asyncio.get_running_loop()
        pools, self._pools = self._pools, {}
        for loop, pool in pools.items():
            if loop is current:
                await pool.close()
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(pool.close(), loop)
                await asyncio.wrap_future(future)
            # A pool of a loop that is gone has no live tasks left to close.

    # -- the port: writes ------------------------------------------------------

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        if not records:
            return []
        info = await self._ready()
        vectors: F32 | None = None
        if self.embedder is not None:
            vectors = await _embed(self.embedder, [r.text for r in records])
        elif info.embedder_name is not None:
            raise EmbedderMismatch(
                f"PostgreSQL schema {self.schema!r} keeps vectors of embedder {info.embedder_name!r}; "
                "open it with that embedder to add records"
            )
        groups: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(records):
            groups[tenant(r.scope.user_id)].append(i)
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
            f"WITH ins AS (INSERT INTO {self._s}.records({cols}) SELECT * FROM unnest({arrays}) "
            "ON CONFLICT (id) DO NOTHING RETURNING rid, id, lexemes), "
            f"p AS (INSERT INTO {self._s}.postings(key, rid) SELECT l, ins.rid FROM ins, unnest(ins.lexemes) AS l) "
            "SELECT id FROM ins"
        )
        upsert = (
            f"INSERT INTO {self._s}.tenants(tenant, n, words) VALUES (%s, %s, %s) ON CONFLICT (tenant) "
            "DO UPDATE SET n = tenants.n + excluded.n, words = tenants.words + excluded.words"
        )

        async def write(conn: AsyncConnection[Any]) -> None:
            # Users in a stable order (no deadlock between two batches); each
            # user's rows under that user's RLS setting, all in one transaction.
            for key in sorted(groups):
                idx = groups[key]
                group = [records[i] for i in idx]
                doclens = [_words(r.text) for r in group]
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
                    params.append([_Vector(vectors[i]) for i in idx])
                async with self._tx(conn, key) as cur:
                    await cur.execute(insert, params)
                    stored = {str(x[0]) for x in await cur.fetchall()}
                    if len(stored) != len(group):
                        first = next(i for i in idx if records[i].id not in stored)
                        raise InvalidInput(
                            f"records[{first}].id is already stored; ids must be unique", field=f"records[{first}].id"
                        )
                    await cur.execute(upsert, (key, len(group), sum(doclens)))
            if self._before_commit is not None:
                await self._before_commit()

        await self._write("add", write)
        return [str(r.id) for r in records]

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        where = scope_sql(scope)
        if ids is not None:
            where.add("r.id = ANY(%s)", list(ids))
        key = tenant(scope.user_id)

        async def write(conn: AsyncConnection[Any]) -> int:
            async with self._tx(conn, key) as cur:
                await cur.execute(
                    f"WITH del AS (DELETE FROM {self._s}.records r WHERE {where.text} "
                    f"RETURNING r.rid, r.doclen, r.lexemes), {self._unpost('del')} SELECT doclen FROM del",
                    where.params,
                )
                rows = await cur.fetchall()
                if rows:
                    await self._count(cur, {key: (len(rows), sum(int(r[0]) for r in rows))})
                return len(rows)

        return await self._write("delete", write)

    def _unpost(self, rows: str) -> str:
        """A CTE deleting the postings of the records in CTE ``rows`` (which returns rid and lexemes)."""
        return (
            f"unposted AS (DELETE FROM {self._s}.postings p USING "
            f"(SELECT {rows}.rid, unnest({rows}.lexemes) AS key FROM {rows}) AS gone "
            "WHERE p.key = gone.key AND p.rid = gone.rid)"
        )

    async def _count(self, cur: AsyncCursor[Any], removed: Mapping[str, tuple[int, int]]) -> None:
        """Lower the per-user counts after a delete; a user with nothing left loses its row too."""
        for key in sorted(removed):
            n, words = removed[key]
            await cur.execute(
                f"UPDATE {self._s}.tenants SET n = n - %s, words = words - %s WHERE tenant = %s",
                (n, words, key),
            )
            await cur.execute(f"DELETE FROM {self._s}.tenants WHERE tenant = %s AND n <= 0", (key,))

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        async def write(conn: AsyncConnection[Any]) -> int:
            async with self._tx(conn, None) as cur:
                await cur.execute(
                    f"WITH del AS (DELETE FROM {self._s}.records r WHERE (r.expires_at IS NOT NULL AND "
                    "r.expires_at <= %s) OR r.created_at < %s RETURNING r.rid, r.user_id, r.doclen, r.lexemes), "
                    f"{self._unpost('del')} SELECT user_id, doclen FROM del",
                    (now, created_before),
                )
                rows = await cur.fetchall()
                removed: dict[str, tuple[int, int]] = {}
                for user, doclen in rows:
                    n, words = removed.get(tenant(user), (0, 0))
                    removed[tenant(user)] = (n + 1, words + int(doclen))
                await self._count(cur, removed)
                return len(rows)

        return await self._write("purge", write)

    # -- the port: reads -------------------------------------------------------

    @staticmethod
    def _range(q: _Sql, since: datetime | None, until: datetime | None, a: str = "r") -> _Sql:
        if since is not None:
            q.add(f"{a}.created_at >= %s", since)
        if until is not None:
            q.add(f"{a}.created_at < %s", until)
        return q

    def _live(self, q: _Sql, now: datetime, a: str = "r") -> _Sql:
        q.add(f"({a}.expires_at IS NULL OR {a}.expires_at > %s)", now)
        if self.retention is not None:
            q.add(f"{a}.created_at >= %s", now - self.retention)
        return q

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        where = scope_sql(scope).add("r.id = %s", id)

        async def read(conn: AsyncConnection[Any]) -> MemoryRecord | None:
            async with self._tx(conn, tenant(scope.user_id), read_only=True) as cur:
                await cur.execute(f"SELECT {_COLUMNS} FROM {self._s}.records r WHERE {where.text}", where.params)
                row = await cur.fetchone()
                return None if row is None else _record(row)

        return await self._read("get", read)

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        where = self._range(scope_sql(scope), since, until)

        async def read(conn: AsyncConnection[Any]) -> list[MemoryRecord]:
            async with self._tx(conn, tenant(scope.user_id), read_only=True) as cur:
                await cur.execute(
                    f"SELECT {_COLUMNS} FROM {self._s}.records r WHERE {where.text} "
                    "ORDER BY r.created_at, r.rid",
                    where.params,
                )
                return [_record(row) for row in await cur.fetchall()]

        return await self._read("export", read)

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
        await self._ready()
        span = (since, until)
        if not query.strip():
            return await self._read("search", lambda conn: self._recent(conn, scope, k, filters, span))
        qvec: F32 | None = None
        mode: SearchMode = "keyword"
        if self.embedder is not None and self.search_mode != "keyword":
            try:
                qvec = (await _embed(self.embedder, [query]))[0]
                mode = self.search_mode
            except Exception as exc:
                logger.warning(
                    "PostgreSQL: the embedder failed during search (%s); searching by keywords only",
                    type(exc).__name__,
                )
        hits = await self._read(
            "search", lambda conn: self._search(conn, query, qvec, mode, scope, k, filters, span)
        )
        return SearchResults(hits, mode=mode)

    async def _recent(
        self,
        conn: AsyncConnection[Any],
        scope: MemoryScope,
        k: int,
        filters: Filters | None,
        span: tuple[datetime | None, datetime | None],
    ) -> list[MemoryHit]:
        where = filter_sql(self._range(self._live(scope_sql(scope), utcnow()), *span), filters)
        async with self._tx(conn, tenant(scope.user_id), read_only=True) as cur:
            await cur.execute(
                f"SELECT {_COLUMNS} FROM {self._s}.records r WHERE {where.text} "
                "ORDER BY r.created_at DESC, r.rid DESC LIMIT %s",
                [*where.params, k],
            )
            rows = await cur.fetchall()
        return SearchResults(
            [MemoryHit(record=_record(row), score=1.0 / (1 + i), signal="recent") for i, row in enumerate(rows)],
            mode="recent",
        )

    async def _search(
        self,
        conn: AsyncConnection[Any],
        query: str,
        qvec: F32 | None,
        mode: str,
        scope: MemoryScope,
        k: int,
        filters: Filters | None,
        span: tuple[datetime | None, datetime | None] = (None, None),
    ) -> list[MemoryHit]:
        now = utcnow()
        limit = max(k, self.candidates)
        async with self._tx(conn, tenant(scope.user_id), read_only=True) as cur:
            if qvec is None or mode == "keyword":
                keyword = await self._keyword(cur, query, scope, limit, filters, now, span)
                scored = list(ranking.normalise(keyword).items())
                signal = "keyword"
            elif mode == "vector":
                scored = await self._vector(cur, qvec, scope, k, filters, now, span)
                signal = "vector"
            else:
                keyword = await self._keyword(cur, query, scope, limit, filters, now, span)
                vector = await self._vector(cur, qvec, scope, limit, filters, now, span)
                scored = ranking.fuse(keyword, vector)
                signal = "hybrid"
            if signal == "vector":
                ranked = scored[:k]
            else:
                neighbours = await self._neighbours(cur, scope, [rid for rid, _ in scored], filters, now, span)
                ranked = ranking.spread_to_neighbours(
                    scored, neighbours, weight=self.context_weight, only_scored=signal == "keyword"
                )[:k]
            rows = await self._rows(cur, [rid for rid, _ in ranked])
        return [
            MemoryHit(record=_record(rows[rid]), score=score, signal=signal) for rid, score in ranked if rid in rows
        ]

    async def _rows(self, cur: AsyncCursor[Any], rids: Sequence[int]) -> dict[int, Sequence[Any]]:
        if not rids:
            return {}
        await cur.execute(
            f"SELECT r.rid, {_COLUMNS} FROM {self._s}.records r WHERE r.rid = ANY(%s)",
            (list(rids),),
        )
        return {int(row[0]): row[1:] for row in await cur.fetchall()}

    async def _keyword(
        self,
        cur: AsyncCursor[Any],
        query: str,
        scope: MemoryScope,
        limit: int,
        filters: Filters | None,
        now: datetime,
        span: tuple[datetime | None, datetime | None] = (None, None),
    ) -> list[tuple[int, float]]:
        """(rid, BM25) best first, over the scope's user's own statistics (as SQLite's per-user BM25).

        The query's words (:func:`memoryport.ranking.query_terms`, any text is
        safe) go through the schema's text-search configuration, so they are
        stemmed as the records were; OR semantics: a record with any word is a
        candidate, ranked by the summed IDF of its words times BM25's length factor.
        """
        terms = ranking.query_terms(query)
        if not terms:
            return []
        s = self._s
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
        where = filter_sql(self._range(self._live(scope_sql(scope), now), *span), filters)
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
        return [(int(rid), float(score)) for rid, score in await cur.fetchall()]

    async def _vector(
        self,
        cur: AsyncCursor[Any],
        qvec: F32,
        scope: MemoryScope,
        limit: int,
        filters: Filters | None,
        now: datetime,
        span: tuple[datetime | None, datetime | None] = (None, None),
    ) -> list[tuple[int, float]]:
        """(rid, cosine similarity) best first: exact over the scope, or HNSW when the scope dominates the table."""
        where = filter_sql(self._range(self._live(scope_sql(scope), now), *span), filters)
        vs, s = self._vs, self._s
        dist = f"(r.embedding OPERATOR({vs}.<=>) %b)"
        if self._info is not None and self._info.has_hnsw and await self._use_hnsw(cur, scope, limit):
            ef = max(self.ef_search, limit)
            # Row-level security makes the planner expect few rows and prefer a
            # sort over the graph: for this one statement, the graph it is.
            await cur.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('enable_seqscan', 'off', true)",
                (str(min(ef, 1000)),),
            )
            await cur.execute(
                f"SELECT r.rid, 1.0 - {dist} AS score FROM {s}.records r "
                f"WHERE {where.text} AND r.embedding IS NOT NULL ORDER BY r.embedding OPERATOR({vs}.<=>) %b LIMIT %s",
                [_Vector(qvec), *where.params, _Vector(qvec), limit],
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
            [_Vector(qvec), *where.params, _Vector(qvec), limit],
        )
        return [(int(rid), float(score)) for rid, score in await cur.fetchall()]

    async def _use_hnsw(self, cur: AsyncCursor[Any], scope: MemoryScope, limit: int) -> bool:
        """HNSW only for a large scope holding enough of the table that a filtered graph search finds ``limit``.

        pgvector 0.6 filters HNSW results after the graph search (no iterative
        scan), so a user's share of the table bounds what survives the filter.
        """
        await cur.execute(
            f"SELECT coalesce((SELECT n FROM {self._s}.tenants WHERE tenant = %s), 0), "
            "greatest((SELECT reltuples FROM pg_class WHERE oid = %s::regclass), 1)",
            (tenant(scope.user_id), f"{self._s}.records"),
        )
        row = await cur.fetchone()
        assert row is not None
        mine, total = int(row[0]), float(row[1])
        if mine < self.exact_below:
            return False
        share = min(1.0, mine / total)
        return share * min(max(self.ef_search, limit), 1000) >= 2 * limit

    async def _neighbours(
        self,
        cur: AsyncCursor[Any],
        scope: MemoryScope,
        rids: Sequence[int],
        filters: Filters | None,
        now: datetime,
        span: tuple[datetime | None, datetime | None] = (None, None),
    ) -> dict[int, list[tuple[int, int]]]:
        """rid -> (rid, distance) of the live records of its exact scope written just before and after it."""
        window = self.context_window
        if not rids or not self.context_weight or window < 1:
            return {}
        s = self._s
        user = "n.user_id IS NULL" if scope.user_id is None else "n.user_id = %s"
        user_params = [] if scope.user_id is None else [scope.user_id]
        cond = filter_sql(self._range(self._live(_Sql(), now, "w"), *span, "w"), filters, "w")

        def side(op: str, order: str) -> tuple[str, list[Any]]:
            # The user's nearest records on this side (index range scan), then
            # those of the same session and agent, alive and matching the filters.
            text = (
                f"ARRAY(SELECT w.rid FROM (SELECT n.* FROM {s}.records n WHERE {user} "
                f"AND (n.created_at, n.rid) {op} (c.created_at, c.rid) "
                f"ORDER BY n.created_at {order}, n.rid {order} LIMIT {_NEIGHBOUR_SCAN}) w "
                "WHERE w.session_id IS NOT DISTINCT FROM c.session_id AND w.agent_id IS NOT DISTINCT FROM c.agent_id "
                f"AND {cond.text} ORDER BY w.created_at {order}, w.rid {order} LIMIT {int(window)})"
            )
            return text, [*user_params, *cond.params]

        before, bparams = side("<", "DESC")
        after, aparams = side(">", "ASC")
        await cur.execute(
            f"SELECT c.rid, {before}, {after} FROM {s}.records c WHERE c.rid = ANY(%s)",
            [*bparams, *aparams, list(rids)],
        )
        out: dict[int, list[tuple[int, int]]] = {}
        for rid, b, a in await cur.fetchall():
            out[int(rid)] = [(int(x), d) for lst in (b or [], a or []) for d, x in enumerate(lst, 1)]
        return out

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Filters | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        where = filter_sql(self._range(self._live(scope_sql(scope), utcnow()), since, until), filters)

        async def read(conn: AsyncConnection[Any]) -> int:
            async with self._tx(conn, tenant(scope.user_id), read_only=True) as cur:
                await cur.execute(f"SELECT count(*) FROM {self._s}.records r WHERE {where.text}", where.params)
                row = await cur.fetchone()
                return 0 if row is None else int(row[0])

        return await self._read("count", read)

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        """Change text, metadata and/or expiry in place, all in one transaction; the ids updated, in order.

        A new text is re-embedded (before the transaction: a failing embedder
        changes nothing) and re-indexed (its postings follow its new stems).
        """
        if not changes:
            return []
        info = await self._ready()
        texts = [c for c in changes if "text" in c.changed]
        vectors: dict[str, _Vector] = {}
        if texts and self.embedder is not None:
            rows = await _embed(self.embedder, [str(c.text) for c in texts])
            vectors = {c.id: _Vector(rows[i]) for i, c in enumerate(texts)}
        elif texts and info.embedder_name is not None:
            raise EmbedderMismatch(
                f"PostgreSQL schema {self.schema!r} keeps vectors of embedder {info.embedder_name!r}; "
                "open it with that embedder to change texts"
            )
        key = tenant(scope.user_id)
        now = utcnow()

        async def write(conn: AsyncConnection[Any]) -> list[str]:
            done: list[str] = []
            words = 0
            async with self._tx(conn, key) as cur:
                for change in changes:
                    sets: list[str] = ["updated_at = greatest(%s, r.created_at)"]
                    params: list[Any] = [now]
                    if "text" in change.changed:
                        sets += ["text = %s", "doclen = %s"]
                        params += [change.text, _words(str(change.text))]
                        if change.id in vectors:
                            sets.append("embedding = %b")
                            params.append(vectors[change.id])
                    if "metadata" in change.changed:
                        sets.append("metadata = %s")
                        params.append(Jsonb(dict(change.metadata or {})))
                    if "expires_at" in change.changed:
                        sets.append("expires_at = %s")
                        params.append(change.expires_at)
                    where = self._live(scope_sql(scope, "o"), now, "o").add("o.id = %s", change.id)
                    s = self._s
                    await cur.execute(
                        f"WITH old AS (SELECT o.rid, o.doclen, o.lexemes FROM {s}.records o "
                        f"WHERE {where.text} FOR UPDATE), "
                        f"upd AS (UPDATE {s}.records r SET {', '.join(sets)} FROM old WHERE r.rid = old.rid "
                        "RETURNING r.id, r.rid, r.doclen - old.doclen AS words, r.lexemes AS new, old.lexemes AS old), "
                        # Only the stems that changed: a posting kept stays put (no delete and re-insert of one key).
                        f"unposted AS (DELETE FROM {s}.postings p USING (SELECT upd.rid, unnest(upd.old) AS key, "
                        "upd.new FROM upd) AS gone WHERE p.key = gone.key AND p.rid = gone.rid "
                        "AND NOT (gone.key = ANY(gone.new))), "
                        f"posted AS (INSERT INTO {s}.postings(key, rid) SELECT k, upd.rid "
                        "FROM upd, unnest(upd.new) AS k WHERE NOT (k = ANY(upd.old))) "
                        "SELECT id, words FROM upd",
                        [*where.params, *params],
                    )
                    row = await cur.fetchone()
                    if row is not None:
                        done.append(str(row[0]))
                        words += int(row[1])
                if words:
                    await cur.execute(
                        f"UPDATE {self._s}.tenants SET words = words + %s WHERE tenant = %s", (words, key)
                    )
            return done

        return await self._write("update", write)

    # -- maintenance -------------------------------------------------------------

    async def stats(self) -> dict[str, Any]:
        """Record counts, schema version, embedder, text-search configuration, RLS."""
        info = await self._ready()

        async def read(conn: AsyncConnection[Any]) -> dict[str, Any]:
            async with self._tx(conn, None, read_only=True) as cur:
                await cur.execute(f"SELECT count(*), count(DISTINCT user_id) FROM {self._s}.records")
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

        return await self._read("stats", read)

    async def create_hnsw_index(self, *, m: int | None = None, ef_construction: int | None = None) -> bool:
        """Build the HNSW index on the vectors (``CREATE INDEX CONCURRENTLY``: writes go on meanwhile).

        Returns ``False`` when it already existed. Needs the embedder recorded.
        """
        info = await self._ready()
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
        pool = await self._pool()
        async with pool.connection() as conn:
            autocommit = conn.autocommit
            await conn.set_autocommit(True)  # CREATE INDEX CONCURRENTLY cannot run in a transaction
            try:
                await conn.execute(ddl)
                refreshed = await read_schema(conn, self.schema)
            finally:
                await conn.set_autocommit(autocommit)
        assert refreshed is not None
        self._info = refreshed
        return True

    async def vacuum(self, *, full: bool = False) -> None:
        """``VACUUM (ANALYZE)`` the tables (``FULL``: rewrite them, freeing the dead rows' pages).

        After a delete the rows are dead tuples until VACUUM removes them and
        their index entries; ``full=True`` rewrites the tables so no page keeps
        the erased bytes (it holds an exclusive lock while it works).
        """
        await self._ready()
        pool = await self._pool()
        async with pool.connection() as conn:
            autocommit = conn.autocommit
            await conn.set_autocommit(True)  # VACUUM cannot run in a transaction
            try:
                for table in ("records", "postings", "tenants"):
                    await conn.execute(
                        f"VACUUM ({'FULL, ' if full else ''}ANALYZE) {self._s}.{table}"
                    )
            finally:
                await conn.set_autocommit(autocommit)


def _schema_version() -> int:
    from ._schema import SCHEMA_VERSION

    return SCHEMA_VERSION


