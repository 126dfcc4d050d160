"""Per-call cost of the two ways to run SQLite off the event loop, side by side.

    python -m benchmarks.sqlite_threads_bench

aiosqlite runs one thread per connection and queues calls to it; SQLiteMemory
uses a small thread pool whose threads each hold their own connection
(``loop.run_in_executor``). Both run the same indexed point query; "sequential"
awaits one call at a time, "8 at once" gathers 8 callers.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiosqlite

CALLS = 2_000
ROUNDS = 5


async def main() -> str:
    path = str(Path(tempfile.mkdtemp(prefix="memoryport-threads-")) / "x.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"text {i}") for i in range(10_000)])
    conn.commit()
    conn.close()
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(4)
    local = threading.local()

    def point(i: int) -> object:
        c = getattr(local, "conn", None)
        if c is None:
            c = local.conn = sqlite3.connect(path, check_same_thread=False)
        return c.execute("SELECT b FROM t WHERE a = ?", (i % 10_000,)).fetchone()

    results: dict[str, list[float]] = {}
    async with aiosqlite.connect(path) as db:

        async def one(i: int) -> None:
            async with db.execute("SELECT b FROM t WHERE a = ?", (i % 10_000,)) as cur:
                await cur.fetchone()

        async def gather8(call: object) -> None:
            for start in range(0, CALLS, 8):
                await asyncio.gather(*(call(i) for i in range(start, start + 8)))  # type: ignore[operator]

        cases = {
            "aiosqlite, sequential": lambda: _seq(one),
            "thread pool, sequential": lambda: _seq(lambda i: loop.run_in_executor(pool, point, i)),
            "aiosqlite, 8 at once": lambda: gather8(one),
            "thread pool, 8 at once": lambda: gather8(lambda i: loop.run_in_executor(pool, point, i)),
        }
        for _ in range(ROUNDS):  # interleaved rounds
            for name, case in cases.items():
                start = time.perf_counter()
                await case()
                results.setdefault(name, []).append((time.perf_counter() - start) / CALLS * 1e6)
    pool.shutdown()
    shutil.rmtree(Path(path).parent, ignore_errors=True)
    lines = ["| way | µs per call (median of 5 rounds of 2,000) |", "|---|---|"]
    lines += [f"| {name} | {statistics.median(v):.0f} |" for name, v in results.items()]
    text = "\n".join(lines)
    print(text)
    return text


async def _seq(call: object) -> None:
    for i in range(CALLS):
        await call(i)  # type: ignore[operator]


if __name__ == "__main__":
    asyncio.run(main())
