"""Pools and transactions: one pool per event loop, every transaction scoped for row-level security.

:class:`Database` knows where the server is and how to talk to it; it does not
know the schema. Every statement the store runs goes through :meth:`Database.tx`,
which sets ``memoryport.tenant`` (the RLS key) for that transaction only, so no
query can be written outside a scoped transaction. Reads are retried on a lost
connection (they are idempotent); writes only when nothing can have committed.

Round trips are the cost of a small call (each one waits for the server to be
scheduled), so a transaction runs in psycopg's pipeline mode: ``BEGIN``, the
settings and the first statement go to the server together, and the client
waits only where it needs a result. Connections are not pinged when taken from
the pool; a connection found dead makes the pool check its idle connections
before the call is retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from memoryport._errors import BackendError, UsageError

from ._driver import Dumper, TypeInfo, pg_errors, psycopg, psycopg_pool
from ._rows import Vector

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg_pool import AsyncConnectionPool

__all__ = ["DURABILITY", "Database", "is_connection_error"]

logger = logging.getLogger("memoryport")
T = TypeVar("T")

#: ``durability=`` → PostgreSQL's ``synchronous_commit`` for memoryport's write
#: transactions (``None``: the server's, role's or database's setting, ``on``
#: unless an operator changed it). ``normal`` (``off``): a commit returns before
#: its WAL reaches the disk; a client crash loses nothing committed, a server or
#: OS crash can lose the transactions of the last moments (at most three times
#: ``wal_writer_delay``, 0.6 s by default), never consistency. ``full`` (``on``):
#: every commit waits for the WAL flush, as SQLite's ``full``.
DURABILITY: dict[str | None, str | None] = {None: None, "normal": "off", "full": "on"}

# The connection whose write transaction the current task is inside (see Database.write).
_WRITING: ContextVar[object | None] = ContextVar("memoryport_postgres_writing", default=None)


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
        durability: str | None = None,
        backend: str = "postgres",
    ) -> None:
        self.dsn = dsn
        self.host_pool = host_pool
        self.name = name
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.backend = backend
        self.synchronous_commit = DURABILITY[durability]
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
                kwargs={"application_name": "memoryport"},
                name=f"memoryport-{self.name}",
                timeout=self.connect_timeout,
                # No ping when a connection is taken (a round trip per call): a dead
                # one fails the call's first statement, and the retry checks the pool.
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
        """A transaction with ``memoryport.tenant`` set (or every tenant, ``None``, for maintenance).

        Inside :meth:`write` the connection is already in its transaction: the
        setting changes for the statements that follow (a batch writes each
        user's rows under that user's setting), and the write commits them all.
        """
        cur = self.cursor(conn)
        if _WRITING.get() is conn:
            await cur.execute(*_setting(tenant_key))
            yield cur
            return
        async with conn.transaction():
            if read_only:
                # One snapshot for every statement of a search: a batch is seen whole or not at all.
                await cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                # Row-level security's condition makes the planner expect a handful of
                # rows, so it would read all of a user's rows and sort them where a walk
                # of the (user_id, created_at) index in order stops after k. Statements
                # that must sort (scores) still sort.
                await cur.execute(
                    "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)"
                )
            await cur.execute(*_setting(tenant_key))
            yield cur

    async def read(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a read, retrying on a lost connection (reads are idempotent)."""
        for attempt in range(3):
            pool = await self.pool()
            try:
                async with pool.connection() as conn, conn.pipeline():
                    return await fn(conn)
            except Exception as exc:
                if attempt < 2 and is_connection_error(exc):
                    logger.warning("PostgreSQL: connection lost during %s; retrying", operation)
                    await _recover(pool, attempt)
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def write(self, operation: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run a write transaction; retry deadlocks, and a lost connection only when nothing can have committed."""
        for attempt in range(5):
            pool = await self.pool()
            committing = False
            try:
                async with pool.connection() as conn, conn.pipeline():
                    async with conn.transaction():
                        if self.synchronous_commit is not None:
                            await conn.execute(
                                "SELECT set_config('synchronous_commit', %s, true)", (self.synchronous_commit,)
                            )
                        token = _WRITING.set(conn)
                        try:
                            result = await fn(conn)
                        finally:
                            _WRITING.reset(token)
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
                await _recover(pool, attempt)
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


def _setting(tenant_key: str | None) -> tuple[str, tuple[str, ...]]:
    """The statement setting the RLS key for the rest of the transaction."""
    if tenant_key is None:
        return "SELECT set_config('memoryport.all_tenants', 'on', true)", ()
    return "SELECT set_config('memoryport.tenant', %s, true)", (tenant_key,)


async def _recover(pool: AsyncConnectionPool[Any], attempt: int) -> None:
    """After a lost connection: drop the pool's dead idle connections (a server restart kills them all)."""
    await asyncio.sleep(0.05 * (attempt + 1))
    try:
        await pool.check()
    except Exception as exc:  # the retry reports what is still wrong
        logger.debug("PostgreSQL: checking the pool failed (%s)", type(exc).__name__)
