"""What a file's page size costs the reads: searches and a cold first vector search, 4 KiB against larger pages.

Run from the repository root::

    python -m benchmarks.sqlite_page_size_bench --records 20000 --queries 60 --page-size 4096 16384
    python -m benchmarks.sqlite_page_size_bench --quick          # a smoke run, seconds

``SQLiteMemory(page_size=...)`` sets the page size of a new file (issue 17,
goal 2: 16 KiB pages load vectors in bulk ~1.4x as fast per CPU second,
``sqlite_bulk_bench --page-size``; a single add's cost is in ``sqlite_add_bench
--page-size``). This loads the same records with given vectors into one file
per page size, then times, interleaved query by query (rotating order): the
public keyword, vector and hybrid search (k=10) and ``get`` by id; and, per
file, a fresh open plus its first vector search (the vectors read into RAM),
several times alternated. Medians of wall ms and of process CPU ms per call.
The hits must be the same in every file (checked: the run fails otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.compare import Data
from benchmarks.sqlite_bench import LookupEmbedder, interleaved, remove, scratch, table
from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory

USER = MemoryScope(user_id="bench")
BATCH = 1_000
MODES = ("keyword", "vector", "hybrid")


def embedder_for(data: Data) -> LookupEmbedder:
    embedder = LookupEmbedder()
    embedder.put(data.texts, data.vectors)
    embedder.put(data.queries, data.query_vectors)
    return embedder


async def build(path: Path, data: Data, page_size: int) -> list[str]:
    remove(path)
    memory = SQLiteMemory(path, embedder=embedder_for(data), page_size=page_size)
    ids: list[str] = []
    for i in range(0, len(data.texts), BATCH):
        ids += await memory.add([MemoryRecord(scope=USER, text=t) for t in data.texts[i : i + BATCH]])
    memory.store.checkpoint()
    await memory.aclose()
    return ids


async def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--page-size", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--cold", type=int, default=5, help="fresh opens + first vector search per file")
    parser.add_argument("--quick", action="store_true", help="2,000 records, 6 queries: checks that it runs")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.queries, args.cold = 2_000, 6, 2
    folder = scratch(args.dir)
    data = Data(args.records, 0, args.queries)
    sizes = list(args.page_size)
    paths = {size: folder / f"pages-{size}.db" for size in sizes}
    ids = {size: await build(paths[size], data, size) for size in sizes}
    memories: dict[tuple[int, str], GuardedMemory[Any]] = {
        (size, mode): SQLiteMemory(paths[size], embedder=embedder_for(data), search_mode=mode)
        for size in sizes
        for mode in MODES
    }
    methods: dict[str, Any] = {}
    hits: dict[tuple[str, int], list[list[str]]] = {}
    for (size, mode), memory in memories.items():

        def search(i: int, memory: GuardedMemory[Any] = memory, mode: str = mode, size: int = size) -> Any:
            async def run() -> None:
                found = await memory.search(data.queries[i % len(data.queries)], scope=USER, k=10)
                hits.setdefault((mode, size), []).append([h.record.text for h in found])

            return run()

        methods[f"{mode} search, page_size={size:,}"] = search
        if mode == "hybrid":

            def get(i: int, memory: GuardedMemory[Any] = memory, size: int = size) -> Any:
                return memory.get(ids[size][(i * 7919) % len(ids[size])], scope=USER)

            methods[f"get by id, page_size={size:,}"] = get
    cpu: dict[str, list[float]] = {}
    wall = await interleaved(methods, args.queries, cpu)
    for mode in MODES:
        first = hits[(mode, sizes[0])]
        for size in sizes[1:]:
            if hits[(mode, size)] != first:
                raise SystemExit(f"{mode} search: other hits at page_size={size} than at {sizes[0]}")
    for memory in memories.values():
        await memory.aclose()
    cold_wall: dict[int, list[float]] = {size: [] for size in sizes}
    cold_cpu: dict[int, list[float]] = {size: [] for size in sizes}
    for rep in range(args.cold):
        for size in sizes[rep % len(sizes) :] + sizes[: rep % len(sizes)]:
            w, c = time.perf_counter(), time.process_time()
            memory = SQLiteMemory(paths[size], embedder=embedder_for(data), search_mode="vector")
            await memory.search(data.queries[rep % len(data.queries)], scope=USER, k=10)
            cold_wall[size].append(time.perf_counter() - w)
            cold_cpu[size].append(time.process_time() - c)
            await memory.aclose()
    rows = [[label, statistics.median(t) * 1e3, statistics.median(cpu[label]) * 1e3] for label, t in wall.items()]
    rows += [
        [
            f"open + first vector search, page_size={size:,}",
            statistics.median(cold_wall[size]) * 1e3,
            statistics.median(cold_cpu[size]) * 1e3,
        ]
        for size in sizes
    ]
    for size in sizes:
        remove(paths[size])
    if args.dir is None:
        shutil.rmtree(folder, ignore_errors=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    out = (
        f"load average at the end {load}; {args.records:,} records with given vectors, one user, "
        f"{args.queries} queries interleaved; same hits in every file: yes\n\n"
        + table(["call", "median ms (wall)", "median ms (process CPU)"], rows)
    )
    print(out)
    return out


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
