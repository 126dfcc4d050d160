"""Pools and transactions: one pool per event loop, every transaction scoped for row-level security.

:class:`Database` knows where the server is and how to talk to it; it does not
know the schema. Every statement the store runs goes through :meth:`Database.tx`,
which sets ``memoryport.tenant`` (the RLS key) for that transaction only, so no
query can be written outside a scoped transaction. Reads are retried on a lost
connection (they are idempotent); writes only when nothing can have committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from memoryport._errors import BackendError, UsageError

from ._driver import Dumper, TypeInfo, pg_errors, pg_sql, psycopg, psycopg_pool
from ._rows import Vector

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg_pool import AsyncConnectionPool

__all__ = ["Database", "is_connection_error"]

logger = logging.getLogger("memoryport")
T = TypeVar("T")


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection (not the statement) failed."""
    return isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout)) and not isinstance(
        exc, pg_errors.QueryCanceled
    )


class Database:
    """The server as pools (one per event loop, or the host's) and RLS-scoped transactions."""

    def __init__(
        self,
        dsn: str | None,
        host_pool: AsyncConnectionPool[Any] | None,
        *,
        name: str,
        pool_size: int,
        connect_timeout: float,
        backend: str = "postgres",
    ) -> None:
        self.dsn = dsn
        self.host_pool = host_pool
        self.name = name
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.backend = backend
        self.closed = False
        #: pgvector's type and the binary dumper of :class:`Vector` (set once the schema is read).
        self.vector_type: TypeInfo | None = None
        self.dumper: type[Dumper] | None = None
        self._pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool[Any]] = {}

    async def pool(self) -> AsyncConnectionPool[Any]:
        if self.closed:
            raise UsageError("this PostgresMemory is closed")
        if self.host_pool is not None:
            return self.host_pool
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
                name=f"memoryport-{self.name}",
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
                    backend=self.backend,
                    operation="connect",
                ) from exc
        return pool

    def cursor(self, conn: AsyncConnection[Any]) -> AsyncCursor[Any]:
        """A cursor that sends :class:`Vector` (and lists of them) in pgvector's binary format."""
        cur = conn.cursor()
        if self.dumper is not None and self.vector_type is not None:
            # vector and vector[] (a batch's vectors go as one array parameter)
            self.vector_type.register(cur)
            cur.adapters.register_dumper(Vector, self.dumper)
        return cur

    @asynccontextmanager
    async def tx(
        self, conn: AsyncConnection[Any], tenant_key: str | None, *, read_only: bool = False
    ) -> AsyncIterator[AsyncCursor[Any]]:
        """A transaction with ``memoryport.tenant`` set (or every tenant, ``None``, for maintenance)."""
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
            cur = self.cursor(conn)
            await cur.execute(pg_sql.SQL("; ").join(setup))
            yield cur

    async def read(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a read, retrying on a lost connection (reads are idempotent)."""
        for attempt in range(3):
            pool = await self.pool()
            try:
                async with pool.connection() as conn:
                    return await fn(conn)
            except Exception as exc:
                if attempt < 2 and is_connection_error(exc):
                    logger.warning("PostgreSQL: connection lost during %s; retrying", operation)
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def write(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a write transaction; retry deadlocks, and a lost connection only when nothing can have committed."""
        for attempt in range(5):
            pool = await self.pool()
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
                if not is_connection_error(exc):
                    raise
                if committing:
                    raise BackendError(
                        f"the connection to PostgreSQL was lost while committing {operation}; the transaction "
                        "either committed whole or not at all: check (get/export) before retrying",
                        backend=self.backend,
                        operation=operation,
                    ) from exc
                if attempt >= 2:
                    raise BackendError(
                        f"the connection to PostgreSQL was lost during {operation}; nothing was written",
                        backend=self.backend,
                        operation=operation,
                    ) from exc
                logger.warning("PostgreSQL: connection lost during %s before commit; retrying", operation)
                await asyncio.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection in autocommit mode (for statements that cannot run in a transaction)."""
        pool = await self.pool()
        async with pool.connection() as conn:
            autocommit = conn.autocommit
            await conn.set_autocommit(True)
            try:
                yield conn
            finally:
                await conn.set_autocommit(autocommit)

    async def aclose(self) -> None:
        """Close the pools this store opened (never a pool the host passed in)."""
        if self.closed:
            return
        self.closed = True
        current = asyncio.get_running_loop()
        pools, self._pools = self._pools, {}
        for loop, pool in pools.items():
            if loop is current:
                await pool.close()
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(pool.close(), loop)
                await asyncio.wrap_future(future)
            # A pool of a loop that is gone has no live tasks left to close.
