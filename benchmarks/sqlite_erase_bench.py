"""What a true erasure costs in SQLiteMemory: delete, VACUUM and checkpoint, by file size.

    python -m benchmarks.sqlite_erase_bench                 # 10k, 100k, 1M keyword-only; 10k, 100k with vectors
    python -m benchmarks.sqlite_erase_bench --sizes 10000 --vector-sizes 10000   # quick

Each erase (delete by id, erasing a user, purge, or a write that removes expired
records) rebuilds the file with ``VACUUM`` and checkpoints the WAL, because page
rebalancing leaves erased bytes in the unused space of live pages, which
``secure_delete`` does not zero. Measured here side by side on one file:

- ``add 1``: adding one record (a write that erases nothing), the reference;
- ``delete 1 by id``: the whole erasure of one record, as a host calls it;
- ``erase a user``: one user's records (1% of the file) in one call;
- ``VACUUM + checkpoint``: the same rebuild run by hand on a plain connection,
  i.e. the part of the above that the rebuild costs;
- the file size, and the peak size of the ``-wal`` during the rebuild (the rebuilt
  file passes through the WAL, so the disk needs about twice the file's size).

Records: 100 users, texts of 8-40 words; vectors (when on) are 384-d float32 from
a cheap deterministic embedder (the cost measured is storage, not embedding).
Medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import load_driver

WORDS = [
    "tea",
    "coffee",
    "garden",
    "river",
    "walk",
    "music",
    "piano",
    "friend",
    "city",
    "train",
    "morning",
    "evening",
    "book",
    "letter",
    "sister",
]
USERS = 100
DIM = 384


def embedder() -> CallableEmbedder:
    def embed(texts: list[str]) -> Any:
        rng = np.random.default_rng(len(texts))
        return rng.standard_normal((len(texts), DIM), dtype=np.float32)

    return CallableEmbedder(embed, dim=DIM, name=f"random-{DIM}")


async def build(path: Path, n: int, vectors: bool) -> SQLiteMemory:
    rng = random.Random(n)
    memory = SQLiteMemory(path, embedder=embedder() if vectors else None)
    for start in range(0, n, 10_000):
        await memory.add(
            [
                MemoryRecord(
                    scope=MemoryScope(user_id=f"user{i % USERS}"),
                    text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) + f" n{i}",
                    metadata={"i": i},
                )
                for i in range(start, min(n, start + 10_000))
            ]
        )
    return memory


class WalPeak:
    """The largest size the -wal file reaches while this is running (polled every 5 ms)."""

    def __init__(self, path: Path) -> None:
        self.wal = Path(str(path) + "-wal")
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.wal.stat().st_size)
            except FileNotFoundError:
                pass
            time.sleep(0.005)

    def __enter__(self) -> WalPeak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def measure(n: int, vectors: bool, repeat: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="memoryport-erase-"))
    path = folder / "e.db"
    try:
        memory = await build(path, n, vectors)
        memory.store.checkpoint()
        size = path.stat().st_size
        times: dict[str, list[float]] = {
            "add 1": [],
            "delete 1 by id": [],
            "erase a user": [],
            "VACUUM + checkpoint": [],
        }
        peak = 0
        for r in range(repeat):
            scope = MemoryScope(user_id=f"user{r}")
            start = time.perf_counter()
            [rid] = await memory.add([MemoryRecord(scope=scope, text=f"one more record {r}")])
            times["add 1"].append(time.perf_counter() - start)
            start = time.perf_counter()
            with WalPeak(path) as wal:
                assert await memory.delete([rid], scope=scope) == 1
            peak = max(peak, wal.peak)
            times["delete 1 by id"].append(time.perf_counter() - start)
            start = time.perf_counter()
            assert await memory.delete(scope=scope) > 0
            times["erase a user"].append(time.perf_counter() - start)
        driver = memory.store.driver_name
        await memory.aclose()
        conn = load_driver(driver)[1].connect(str(path), isolation_level=None)
        for _ in range(repeat):
            start = time.perf_counter()
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            times["VACUUM + checkpoint"].append(time.perf_counter() - start)
        conn.close()
        return {
            "n": n,
            "vectors": vectors,
            "size_mb": size / 1e6,
            "wal_peak_mb": peak / 1e6,
            "driver": driver,
            **{k: statistics.median(v) for k, v in times.items()},
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| records | vectors | file MB | add 1 (ms) | delete 1 by id (s) | erase a user, 1% (s) "
        "| of which VACUUM + checkpoint (s) | -wal peak MB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']:,} | {'384-d' if r['vectors'] else 'no'} | {r['size_mb']:.0f} | {r['add 1'] * 1000:.1f} "
            f"| {r['delete 1 by id']:.2f} | {r['erase a user']:.2f} | {r['VACUUM + checkpoint']:.2f} "
            f"| {r['wal_peak_mb']:.0f} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--vector-sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        rows.append(await measure(n, False, args.repeat))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    for n in args.vector_sizes:
        rows.append(await measure(n, True, args.repeat))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(f"\nSQLite driver {rows[0]['driver'] if rows else '?'}, {os.cpu_count()} CPUs")
    print(table(rows))


if __name__ == "__main__":
    asyncio.run(main())
