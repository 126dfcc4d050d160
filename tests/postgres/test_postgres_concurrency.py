"""Several processes and pools on one database; a client killed mid-batch; connections lost."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from memoryport import BackendError, MemoryRecord, MemoryScope
from memoryport.adapters.postgres import PostgresMemory

from .support import Server, fresh_schema

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).with_name("worker.py")
PROCS, BATCHES, SIZE = 4, 6, 25


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


async def test_processes_and_pools_lose_nothing_and_never_cross_users(pg: Server) -> None:
    """4 processes x 2 pools add and search at once.

    Every record is stored exactly once, no search or export returns another
    user's record, and no export sees part of a batch.
    """
    schema = fresh_schema()
    first = PostgresMemory(pg.app_dsn, schema=schema)
    await first.add([MemoryRecord(scope=MemoryScope(user_id="setup"), text="schema made")])

    def run_workers() -> list[dict[str, int]]:
        procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), "concurrent", pg.app_dsn, schema, str(p), str(BATCHES), str(SIZE)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(),
            )
            for p in range(PROCS)
        ]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results

    results = await asyncio.to_thread(run_workers)
    assert sum(r["foreign"] for r in results) == 0
    assert sum(r["torn"] for r in results) == 0
    seen: Counter[tuple[int, int, int, int]] = Counter()
    for u in range(3):
        for record in await first.export(MemoryScope(user_id=f"user{u}")):
            m = record.metadata
            assert record.scope.user_id == f"user{(int(m['p']) + int(m['t'])) % 3}"
            seen[(int(m["p"]), int(m["t"]), int(m["b"]), int(m["i"]))] += 1
    expected = {(p, t, b, i) for p in range(PROCS) for t in range(2) for b in range(BATCHES) for i in range(SIZE)}
    assert set(seen) == expected
    assert set(seen.values()) == {1}
    stats = await first.store.stats()
    assert stats["records"] == len(expected) + 1
    await first.aclose()


async def test_a_client_killed_mid_batch_leaves_nothing(pg: Server) -> None:
    schema = fresh_schema()
    memory = PostgresMemory(pg.app_dsn, schema=schema)
    await memory.add([MemoryRecord(scope=MemoryScope(user_id="setup"), text="schema made")])
    proc = await asyncio.to_thread(
        subprocess.Popen,
        [sys.executable, str(WORKER), "hang", pg.app_dsn, schema, "victim", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    line = await asyncio.to_thread(proc.stdout.readline)
    assert line.strip() == "READY", proc.stderr.read() if proc.stderr else ""
    # The batch is written, not committed: kill the client there.
    os.kill(proc.pid, signal.SIGKILL)
    await asyncio.to_thread(proc.wait, 30)
    async with await psycopg.AsyncConnection.connect(pg.admin_dsn, autocommit=True) as admin:
        for _ in range(100):  # the server notices the closed socket and rolls back
            cur = await admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%%' AND usename = %s",
                ("memoryport_app",),
            )
            row = await cur.fetchone()
            if row == (0,):
                break
            await asyncio.sleep(0.05)
        cur = await admin.execute(f"SELECT count(*) FROM {schema}.records WHERE user_id = 'victim'")
        assert await cur.fetchone() == (0,)
        cur = await admin.execute(f"SELECT count(*) FROM {schema}.tenants WHERE tenant = 'u:victim'")
        assert await cur.fetchone() == (0,)
    assert await memory.export(MemoryScope(user_id="victim")) == []
    await memory.aclose()


async def _terminate_app_backends(pg: Server) -> int:
    async with await psycopg.AsyncConnection.connect(pg.admin_dsn, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE usename = %s AND pid <> pg_backend_pid()",
            ("memoryport_app",),
        )
        row = await cur.fetchone()
        return 0 if row is None else int(row[0])


async def test_reads_and_writes_survive_lost_connections(pg: Server) -> None:
    """Every pooled connection killed server-side (as a restart does): the next calls succeed."""
    memory = PostgresMemory(pg.app_dsn, schema=fresh_schema(), pool_size=2)
    try:
        ann = MemoryScope(user_id="ann")
        await memory.add([MemoryRecord(scope=ann, text="ann likes tea")])
        assert await _terminate_app_backends(pg) >= 1
        assert [h.record.text for h in await memory.search("tea", scope=ann)] == ["ann likes tea"]
        assert await _terminate_app_backends(pg) >= 1
        await memory.add([MemoryRecord(scope=ann, text="ann likes cake")])
        assert len(await memory.export(ann)) == 2
    finally:
        await memory.aclose()


async def test_a_host_pool_without_checks_retries_reads_and_writes(pg: Server) -> None:
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(pg.app_dsn, min_size=1, max_size=2, open=False)
    await pool.open(wait=True)
    memory = PostgresMemory(pool, schema=fresh_schema())
    ann = MemoryScope(user_id="ann")
    await memory.add([MemoryRecord(scope=ann, text="ann likes tea")])
    assert await _terminate_app_backends(pg) >= 1
    assert [r.text for r in await memory.export(ann)] == ["ann likes tea"]
    # Writes too: the dead connections met are dropped (the pool is checked) and the add is redone.
    assert await _terminate_app_backends(pg) >= 1
    await memory.add([MemoryRecord(scope=ann, text="ann likes cake")])
    assert sorted(r.text for r in await memory.export(ann)) == ["ann likes cake", "ann likes tea"]
    await memory.aclose()
    assert not pool.closed  # the host's pool is the host's to close
    await pool.close()


async def test_a_write_losing_its_connection_in_flight_is_a_clear_error(pg: Server) -> None:
    """The connection dies with a batch written but not committed: a BackendError says what to check; nothing stays."""
    memory = PostgresMemory(pg.app_dsn, schema=fresh_schema(), pool_size=2)
    try:
        ann = MemoryScope(user_id="ann")
        await memory.add([MemoryRecord(scope=ann, text="first")])

        async def kill() -> None:
            await _terminate_app_backends(pg)

        memory.store._before_commit = kill  # type: ignore[attr-defined]
        with pytest.raises(BackendError, match="committed whole or not at all"):
            await memory.add([MemoryRecord(scope=ann, text=f"batch {i}") for i in range(5)])
        memory.store._before_commit = None  # type: ignore[attr-defined]
        assert [r.text for r in await memory.export(ann)] == ["first"]
        await memory.add([MemoryRecord(scope=ann, text="after")])
        assert [r.text for r in await memory.export(ann)] == ["first", "after"]
    finally:
        await memory.aclose()
