"""Searches right after an add: what a write costs the user's next searches (an agent adds a memory every turn).

Run from the repository root (``make setup`` first)::

    python -m benchmarks.sqlite_after_add_bench --records 10000 --rounds 30
    python -m benchmarks.sqlite_after_add_bench --quick      # a smoke run, seconds

One user holds ``--records`` records (the ``sqlite_bench`` corpus, keyword-only, or
``--mode hybrid`` with precomputed vectors). Each round adds one record and then
runs ``--searches`` keyword searches (k=10, different queries); the table gives the
median wall time of the first, second, ... search after the add, and of the same
searches with no add between them (the store's caches current). Any write moves
the user's generation, so per-generation caches (the user's timeline, its words in
RAM) are rebuilt or extended after it: this shows what that costs and when. Compare
two versions by running each through ``PYTHONPATH`` in alternation.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from memoryport import MemoryRecord, MemoryScope
from memoryport.adapters.sqlite import SQLiteMemory

try:
    from benchmarks.sqlite_bench import Corpus, LookupEmbedder, records
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from sqlite_bench import Corpus, LookupEmbedder, records  # type: ignore[no-redef]


async def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--searches", type=int, default=4, help="searches after each add")
    parser.add_argument("--mode", choices=["keyword", "hybrid"], default="keyword")
    parser.add_argument("--quick", action="store_true", help="500 records, 3 rounds: checks that the harness runs")
    parser.add_argument("--folder", default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.rounds = 500, 3
    corpus = Corpus()
    n = args.records
    texts = corpus.texts(n)
    extra = corpus.texts(args.rounds)
    queries = [corpus.query(texts[corpus.rng.randrange(n)]) for _ in range(2 * args.rounds * args.searches + 50)]
    embedder = None
    if args.mode == "hybrid":
        embedder = LookupEmbedder()
        embedder.put(texts, corpus.vectors(n))
        embedder.put(extra, corpus.vectors(len(extra)))
        embedder.put(queries, corpus.vectors(len(queries)))
    user = MemoryScope(user_id="bench")
    folder = Path(args.folder or tempfile.mkdtemp(prefix="memoryport-after-add-"))
    try:
        memory = SQLiteMemory(folder / "after-add.db", embedder=embedder, search_mode=args.mode)
        for at in range(0, n, 1000):
            await memory.add(records(lambda i: user, texts[at : at + 1000]))
        asked = iter(queries)
        for _ in range(50):  # warm: the caches built
            await memory.search(next(asked), scope=user, k=10)
        after: list[list[float]] = [[] for _ in range(args.searches)]
        still: list[list[float]] = [[] for _ in range(args.searches)]
        for r in range(args.rounds):
            for j in range(args.searches):  # no add before these: the caches current
                start = time.perf_counter()
                await memory.search(next(asked), scope=user, k=10)
                still[j].append(time.perf_counter() - start)
            await memory.add([MemoryRecord(scope=user, text=extra[r])])
            for j in range(args.searches):
                start = time.perf_counter()
                await memory.search(next(asked), scope=user, k=10)
                after[j].append(time.perf_counter() - start)
        await memory.aclose()
    finally:
        if args.folder is None:  # the temporary folder this run made
            shutil.rmtree(folder, ignore_errors=True)
    lines = [
        f"Python {sys.version.split()[0]}, {n:,} records of one user, {args.mode} search, k=10, "
        f"{args.rounds} rounds, command: `python -m benchmarks.sqlite_after_add_bench "
        f"{' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        "| search | right after an add, median ms | with no add before, median ms |",
        "|---|---|---|",
    ]
    for j in range(args.searches):
        lines.append(
            f"| #{j + 1} | {1e3 * statistics.median(after[j]):.2f} | {1e3 * statistics.median(still[j]):.2f} |"
        )
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    asyncio.run(main())
