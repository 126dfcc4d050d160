"""Bulk add into SQLiteMemory in batches of 1,000, side by side with SQLite peers, in one run.

Run from the repository root (``make setup`` first)::

    python -m benchmarks.sqlite_bulk_bench --records 100000 --runs 3
    python -m benchmarks.sqlite_bulk_bench --quick        # a smoke run, seconds

Issue 17, goal 2: the public ``add`` of batches of 1,000 records at ≥ 60,000
records/s with given vectors (a precomputed-vector embedder, so no model time
is counted) and ≥ 100,000 records/s keyword-only. Beside memoryport it loads
the same records, in the same batches, into:

- the floor: plain SQL into the same shapes (a row and an FTS5 row per record,
  plus a vector BLOB row with vectors), one transaction per batch, WAL and
  ``synchronous=NORMAL`` like memoryport; no checks, ids, bookkeeping;
- sqlite-vec (a ``vec0`` table), LangGraph's ``SqliteStore`` (``batch`` of
  ``PutOp``, with its sqlite-vec index) and LanceDB (``table.add``) when
  installed (``benchmarks/compare.py`` has their setups).

Every system loads a fresh file per run; runs are interleaved system by system
in a rotating order, so the ratios share the machine's noise. Besides the wall
rate, each row gives records per CPU second of the whole process (all its
threads): on a loaded machine the wall rate depends on how much of the 2 cores
the run was given, the CPU rate much less.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.compare import OPTIONAL, Data, LanceDB, LangGraphSqlite, SqliteVec, available
from benchmarks.sqlite_bench import LookupEmbedder, remove, scratch, table, write
from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import load_driver

BATCH = 1_000
PEERS = {"vec0": SqliteVec.label, "langgraph": LangGraphSqlite.label, "lancedb": LanceDB.label}
GOALS = {"keyword-only": 100_000, "with given vectors": 60_000}
USER = "bench"


class Memoryport:
    """The public ``SQLiteMemory.add`` (the guard included), keyword-only or with given vectors."""

    def __init__(
        self, data: Data, folder: Path, n: int, *, vectors: bool, port: bool = False, page_size: int | None = None
    ) -> None:
        self.kind = "with given vectors" if vectors else "keyword-only"
        self.label = f"memoryport, {self.kind}" + (", port alone (no guard)" if port else "")
        if page_size is not None:
            self.label += f", page_size={page_size:,}"
        self.path = folder / f"mp-{int(vectors)}{int(port)}-{page_size or 0}-{n}.db"
        embedder = None
        if vectors:
            embedder = LookupEmbedder()
            embedder.put(data.texts[:n], data.vectors[:n])
        # page_size only when asked: a memoryport from before the setting (an A/B "before" copy) runs too.
        extra: dict[str, Any] = {} if page_size is None else {"page_size": page_size}
        self.memory = SQLiteMemory(self.path, embedder=embedder, **extra)
        scope = MemoryScope(user_id=USER)
        # Fresh records without ids, built outside the timing (as a host holds them before add).
        self.records = [MemoryRecord(scope=scope, text=t) for t in data.texts[:n]]
        self.add: Any = self.memory.add
        if port:  # what the guard costs: the same batches straight into the port, ids given
            self.records = [r.model_copy(update={"id": os.urandom(16).hex()}) for r in self.records]
            self.add = self.memory.store.add

    async def load(self, n: int) -> None:
        for i in range(0, n, BATCH):
            await self.add(self.records[i : i + BATCH])

    async def close(self) -> None:
        await self.memory.aclose()
        remove(self.path)


class Floor:
    """Plain SQL into the shapes memoryport writes: no checks, no ids, no bookkeeping."""

    def __init__(self, data: Data, folder: Path, n: int, *, vectors: bool) -> None:
        self.kind = "with given vectors" if vectors else "keyword-only"
        self.label = f"floor: plain SQL (row + FTS5 row{' + vector row' if vectors else ''})"
        self.data, self.vectors = data, vectors
        self.path = folder / f"floor-{int(vectors)}-{n}.db"
        _, driver = load_driver(None)
        self.conn = driver.connect(str(self.path), isolation_level=None)
        for sql in (
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=NORMAL",
            "CREATE TABLE records(rid INTEGER PRIMARY KEY, user_id TEXT, text TEXT NOT NULL, created_at INTEGER)",
            "CREATE VIRTUAL TABLE records_fts USING fts5(body, content='', tokenize='porter unicode61')",
            "CREATE TABLE vectors(rid INTEGER PRIMARY KEY, vec BLOB NOT NULL)",
        ):
            self.conn.execute(sql)

    async def load(self, n: int) -> None:
        texts, vectors, now = self.data.texts, self.data.vectors, time.time_ns() // 1000
        for i in range(0, n, BATCH):
            end = min(n, i + BATCH)
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT INTO records VALUES (?, ?, ?, ?)", [(j + 1, USER, texts[j], now) for j in range(i, end)]
            )
            self.conn.executemany(
                "INSERT INTO records_fts(rowid, body) VALUES (?, ?)", [(j + 1, texts[j]) for j in range(i, end)]
            )
            if self.vectors:
                self.conn.executemany(
                    "INSERT INTO vectors VALUES (?, ?)", [(j + 1, vectors[j].tobytes()) for j in range(i, end)]
                )
            self.conn.execute("COMMIT")

    async def close(self) -> None:
        self.conn.close()
        remove(self.path)


class Peer:
    """One of ``benchmarks/compare.py``'s peers, its bulk load only (it times itself; we time again)."""

    def __init__(self, cls: type[Any], data: Data, folder: Path, n: int) -> None:
        self.kind = "with given vectors"
        self.label = str(cls.label)
        self.system = cls(data, folder, n)

    async def load(self, n: int) -> None:
        await self.system.load(n)

    async def close(self) -> None:
        await self.system.close()


def systems(data: Data, folder: Path, n: int, peers: Sequence[str], page_sizes: Sequence[int] = ()) -> list[Any]:
    out: list[Any] = [
        Memoryport(data, folder, n, vectors=False),
        Memoryport(data, folder, n, vectors=True),
        Memoryport(data, folder, n, vectors=False, port=True),
        Floor(data, folder, n, vectors=False),
        Floor(data, folder, n, vectors=True),
    ]
    for size in page_sizes:  # the same public add into files created with other page sizes
        out += [Memoryport(data, folder, n, vectors=v, page_size=size) for v in (False, True)]
    out += [Peer(OPTIONAL[label][0], data, folder, n) for label in peers]
    return out


async def bench(
    data: Data, n: int, runs: int, folder: Path, peers: Sequence[str], page_sizes: Sequence[int] = ()
) -> list[list[Any]]:
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    kinds: dict[str, str] = {}
    for run in range(runs):
        run_folder = folder / f"run{run}"
        run_folder.mkdir(exist_ok=True)
        made = systems(data, run_folder, n, peers, page_sizes)
        shift = run % len(made)
        for system in made[shift:] + made[:shift]:  # a rotating order: no system always runs first
            c0, w0 = time.process_time(), time.perf_counter()
            await system.load(n)
            w1, c1 = time.perf_counter(), time.process_time()
            wall.setdefault(system.label, []).append(n / (w1 - w0))
            cpu.setdefault(system.label, []).append(n / max(c1 - c0, 1e-9))
            kinds[system.label] = system.kind
            await system.close()
    rows = []
    for label, rates in wall.items():
        goal = GOALS[kinds[label]]
        med = statistics.median(rates)
        public = label.startswith("memoryport") and "port alone" not in label
        rows.append(
            [
                label,
                n,
                med,
                min(rates),
                max(rates),
                statistics.median(cpu[label]),
                f"{med / goal:.2f} of {goal:,}" if public else "–",
                len(rates),
            ]
        )
    return rows


def load_average() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


async def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, nargs="+", default=[100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true", help="memoryport and the floor only")
    parser.add_argument("--peers", nargs="+", choices=sorted(PEERS), default=sorted(PEERS), help="peers to run")
    parser.add_argument(
        "--page-size",
        type=int,
        nargs="+",
        default=[],
        help="also load memoryport files created with these page sizes (SQLiteMemory(page_size=...))",
    )
    parser.add_argument("--quick", action="store_true", help="2,000 records, one run: checks that the harness runs")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", default=None, help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.runs = [2_000], 1
    folder = scratch(args.dir)
    try:
        peers: list[str] = []
        skipped: dict[str, str] = {}
        if not args.no_peers:
            ok, skipped = available(folder)
            peers = [PEERS[p] for p in args.peers if PEERS[p] in ok]
        lines = [
            f"Python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cores, "
            f"load average at the start {load_average()}, "
            f"command: `python -m benchmarks.sqlite_bulk_bench {' '.join(argv if argv is not None else sys.argv[1:])}`",
        ]
        for label in (SqliteVec.label, LangGraphSqlite.label, LanceDB.label):
            if label in skipped:
                lines.append(f"- {label}: skipped ({skipped[label]})")
        print("\n".join(lines), flush=True)
        for n in args.records:
            data = Data(n, 0, 0)
            rows = await bench(data, n, args.runs, folder, peers, args.page_size)
            text = (
                f"\n### Bulk add, batches of {BATCH:,} (records/s; wall: median, min, max of {args.runs} runs; "
                "CPU: records per CPU second of the process)\n\n"
                + table(["system", "records", "median /s", "min /s", "max /s", "per CPU s", "x goal", "runs"], rows)
            )
            print(text, flush=True)
            lines.append(text)
        lines.append(f"\nload average at the end {load_average()}")
        print(lines[-1])
    finally:
        if args.dir is None:  # the temporary folder this run made (its files are removed as it goes)
            shutil.rmtree(folder, ignore_errors=True)
    out = "\n".join(lines) + "\n"
    if args.out:
        write(args.out, out)
    return out


if __name__ == "__main__":
    asyncio.run(main())
