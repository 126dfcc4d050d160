"""The bulk paths beside the public add: ``copy_memories`` and ``import_knowledge`` into SQLite, per CPU second.

Run from the repository root::

    python -m benchmarks.sqlite_bulk_paths --records 20000 --page-size 4096 16384
    python -m benchmarks.sqlite_bulk_paths --quick            # a smoke run, seconds

Issue 17, goal 2 asks that the knowledge import and ``copy`` use the batched
fast path. With given vectors (a precomputed-vector embedder: no model time),
per page size of the target file, in one run:

- **bulk add**: the public ``add`` in batches of 1,000 (the reference);
- **copy**: ``copy_memories`` from a SQLite file holding the records into a new
  one: its export, its plan (a copy of each record without its id), its checks,
  then the target's ``add`` in batches of ``Limits.max_batch``; the share of
  the CPU spent in those adds is given;
- **knowledge import**: ``import_knowledge`` of a folder of Markdown files (the
  same texts, 50 paragraphs a file), chunks with their metadata, in batches of
  ``batch_size`` (256, the default, and 1,000), with a random-vector embedder.

Records (chunks) per CPU second of the process (every thread), and the adds'
own rate inside each path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.compare import Data
from benchmarks.sqlite_bench import LookupEmbedder, scratch, table
from memoryport import CallableEmbedder, GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory, copy_memories
from memoryport.knowledge import import_knowledge

SCOPE = MemoryScope(user_id="bench")
BATCH = 1_000


class AddTimer:
    """Wraps a memory's ``add``: the process CPU seconds spent inside it."""

    def __init__(self, memory: GuardedMemory[Any]) -> None:
        self.cpu = 0.0
        self.inner = memory.add

        async def add(records: Any, **kwargs: Any) -> list[str]:
            start = time.process_time()
            try:
                return await self.inner(records, **kwargs)
            finally:
                self.cpu += time.process_time() - start

        memory.add = add  # type: ignore[method-assign]


def memory_at(path: Path, embedder: Any, page_size: int) -> GuardedMemory[Any]:
    extra: dict[str, Any] = {} if page_size == 4096 else {"page_size": page_size}
    return SQLiteMemory(path, embedder=embedder, **extra)


async def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--page-size", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--quick", action="store_true", help="2,000 records: checks that it runs")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.quick:
        args.records = 2_000
    n = args.records
    folder = scratch(args.dir)
    data = Data(n, 0, 0)

    def lookup() -> LookupEmbedder:
        embedder = LookupEmbedder()
        embedder.put(data.texts, data.vectors)
        return embedder

    def random_vectors(texts: list[str]) -> Any:
        return np.random.default_rng(len(texts)).standard_normal((len(texts), 384)).astype(np.float32)

    knowledge = folder / "knowledge"
    shutil.rmtree(knowledge, ignore_errors=True)
    knowledge.mkdir()
    for f in range(0, n, 50):
        (knowledge / f"doc{f // 50:05d}.md").write_text(
            f"# Document {f // 50}\n\n" + "\n\n".join(data.texts[f : f + 50])
        )
    rows: list[list[Any]] = []
    for size in args.page_size:
        label = f"page_size={size:,}"
        # bulk add: the reference, and the source of the copy
        source_path = folder / f"source-{size}.db"
        source = memory_at(source_path, lookup(), size)
        records = [MemoryRecord(scope=SCOPE, text=t) for t in data.texts]
        start = time.process_time()
        for i in range(0, n, BATCH):
            await source.add(records[i : i + BATCH])
        took = time.process_time() - start
        rows.append([f"bulk add, batches of {BATCH:,}, {label}", n, n / took, n / took, "100%"])
        # copy into a new file
        target = memory_at(folder / f"copy-{size}.db", lookup(), size)
        timer = AddTimer(target)
        start = time.process_time()
        report = await copy_memories(source, target, SCOPE)
        took = time.process_time() - start
        rows.append(
            [
                f"copy_memories, {label}",
                report.copied,
                report.copied / took,
                report.copied / timer.cpu,
                f"{timer.cpu / took:.0%}",
            ]
        )
        await target.aclose()
        await source.aclose()
        # knowledge import
        for batch_size in (256, 1000):
            memory = memory_at(
                folder / f"knowledge-{size}-{batch_size}.db",
                CallableEmbedder(random_vectors, dim=384, name="random-384"),
                size,
            )
            timer = AddTimer(memory)
            start = time.process_time()
            imported = await import_knowledge(memory, knowledge, scope=SCOPE, batch_size=batch_size)
            took = time.process_time() - start
            chunks = imported.chunks_added
            rows.append(
                [
                    f"import_knowledge, batch_size={batch_size:,}, {label}",
                    chunks,
                    chunks / took,
                    chunks / timer.cpu,
                    f"{timer.cpu / took:.0%}",
                ]
            )
            await memory.aclose()
    if args.dir is None:
        shutil.rmtree(folder, ignore_errors=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    out = (
        f"load average at the end {load}; {n:,} records with given vectors (knowledge: {n // 50:,} files of 50 "
        "paragraphs, random vectors)\n\n"
        + table(["path", "records (chunks)", "per CPU s", "its adds alone, per CPU s", "CPU in add"], rows)
    )
    print(out)
    return out


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
