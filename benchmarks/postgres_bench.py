"""Speed of PostgresMemory beside SQLiteMemory on the same data and queries, in one run.

Run from the repository root::

    python -m benchmarks.postgres_bench --sizes 10000 100000 --tenant-others 100000 --procs 4
    python -m benchmarks.postgres_bench --quick                 # a tiny smoke run
    python -m benchmarks.postgres_bench --dsn postgresql://...  # another server (an ordinary role)

Without ``--dsn`` a PostgreSQL 16 + pgvector 0.6 is started from the pgserver
wheel (default settings: shared_buffers 128 MB). Every figure is from one run;
methods are interleaved query by query so that ratios share the machine's noise.

1. add: one record per call (latency) and batches of 1,000 (records/s),
   keyword-only and with given vectors (a precomputed-vector embedder: no model time);
2. search at each size, one user holding every record, k=10: keyword, vector
   (exact) and hybrid, median and p95, PostgreSQL ÷ SQLite;
3. tenant: one user's 10,000 records alone vs among other users' records;
4. HNSW: recall@10 against the exact scan, and latency, for several ef_search;
5. throughput: N client processes at once, each searching and adding for its own users.

Texts and vectors come from ``benchmarks.sqlite_bench.Corpus`` (LoCoMo's word
frequencies, clustered 384-d unit vectors), as in the SQLite benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.postgres import PostgresMemory, PostgresStore
from memoryport.adapters.sqlite import SQLiteStore

from ._postgres import start
from .sqlite_bench import Corpus, LookupEmbedder, interleaved, median_ms, records, table

K = 10
BATCH = 1_000
MODES = ("keyword", "vector", "hybrid")


def p95_ms(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000


class Pair:
    """The same data in a SQLite file and a PostgreSQL schema."""

    def __init__(self, dsn: str, folder: Path, name: str, embedder: LookupEmbedder | None) -> None:
        self.dsn, self.path, self.schema, self.embedder = dsn, folder / f"{name}.db", name, embedder

    def sqlite(self, mode: str = "hybrid") -> GuardedMemory[SQLiteStore]:
        return SQLiteMemory(self.path, embedder=self.embedder, search_mode=mode)

    def postgres(self, mode: str = "hybrid", **options: Any) -> GuardedMemory[PostgresStore]:
        return PostgresMemory(self.dsn, embedder=self.embedder, schema=self.schema, search_mode=mode, **options)

    async def fill(self, batches: Sequence[list[MemoryRecord]]) -> dict[str, float]:
        """Add the batches to both; records/s of each."""
        rates = {}
        for label, memory in (("sqlite", self.sqlite()), ("postgres", self.postgres())):
            start_t = time.perf_counter()
            for batch in batches:
                await memory.add([r.model_copy() for r in batch])
            rates[label] = sum(len(b) for b in batches) / (time.perf_counter() - start_t)
            await memory.aclose()
        return rates


# -- 1. add -----------------------------------------------------------------------------


async def bench_add(corpus: Corpus, dsn: str, folder: Path, n: int, singles: int) -> list[list[Any]]:
    texts = corpus.texts(n + singles)
    vectors = corpus.vectors(n + singles)
    rows: list[list[Any]] = []
    for label, embedder in (("keyword-only", None), ("with given vectors", LookupEmbedder())):
        if embedder is not None:
            embedder.put(texts, vectors)
        pair = Pair(dsn, folder, f"add_{'v' if embedder else 'k'}", embedder)
        user = MemoryScope(user_id="bench")
        batches = [records(lambda i, u=user: u, texts[i : i + BATCH]) for i in range(0, n, BATCH)]
        rates = await pair.fill(batches)
        memories = {"sqlite": pair.sqlite(), "postgres": pair.postgres()}
        one = texts[n:]
        times = await interleaved(
            {
                name: (lambda i, m=m, u=user, t=one: m.add([MemoryRecord(scope=u, text=t[i])]))
                for name, m in memories.items()
            },
            singles - 3,
        )
        for m in memories.values():
            await m.aclose()
        rows.append(
            [
                label,
                rates["sqlite"],
                rates["postgres"],
                rates["postgres"] / rates["sqlite"],
                median_ms(times["sqlite"]),
                median_ms(times["postgres"]),
                median_ms(times["postgres"]) / median_ms(times["sqlite"]),
            ]
        )
    return rows


# -- 2. search ----------------------------------------------------------------------------


async def bench_search(corpus: Corpus, dsn: str, folder: Path, n: int, queries: int) -> tuple[list[list[Any]], Pair]:
    texts = corpus.texts(n)
    embedder = LookupEmbedder()
    embedder.put(texts, corpus.vectors(n))
    qtexts = [corpus.query(texts[corpus.rng.randrange(n)]) for _ in range(queries)]
    embedder.put(qtexts, corpus.vectors(queries))
    user = MemoryScope(user_id="bench")
    pair = Pair(dsn, folder, f"search_{n}", embedder)
    load = await pair.fill([records(lambda i: user, texts[i : i + 10_000]) for i in range(0, n, 10_000)])
    memories = {(b, mode): (pair.sqlite(mode) if b == "sqlite" else pair.postgres(mode)) for b in ("sqlite", "postgres")
                for mode in MODES}
    times = await interleaved(
        {f"{b}|{mode}": (lambda i, m=m: m.search(qtexts[i], scope=user, k=K)) for (b, mode), m in memories.items()},
        queries,
    )
    for m in memories.values():
        await m.aclose()
    rows = []
    for mode in MODES:
        s, p = times[f"sqlite|{mode}"], times[f"postgres|{mode}"]
        rows.append([mode, n, median_ms(s), p95_ms(s), median_ms(p), p95_ms(p), median_ms(p) / median_ms(s)])
    rows.append(["(load, records/s)", n, load["sqlite"], "", load["postgres"], "", load["postgres"] / load["sqlite"]])
    pair.qtexts = qtexts  # type: ignore[attr-defined]
    pair.user = user  # type: ignore[attr-defined]
    return rows, pair


# -- 3. tenant ----------------------------------------------------------------------------


async def bench_tenant(corpus: Corpus, dsn: str, folder: Path, mine_n: int, others: int, queries: int
                       ) -> list[list[Any]]:
    texts = corpus.texts(mine_n)
    embedder = LookupEmbedder()
    embedder.put(texts, corpus.vectors(mine_n))
    qtexts = [corpus.query(texts[corpus.rng.randrange(mine_n)]) for _ in range(queries)]
    embedder.put(qtexts, corpus.vectors(queries))
    me = MemoryScope(user_id="me")
    alone = Pair(dsn, folder, "tenant_alone", embedder)
    await alone.fill([records(lambda i: me, texts[i : i + 10_000]) for i in range(0, mine_n, 10_000)])
    shared = Pair(dsn, folder, "tenant_shared", embedder)
    mine = records(lambda i: me, texts)
    share = max(1, mine_n * 10_000 // (others + mine_n))  # my records spread through the load
    batches, at, pos = [], 0, 0
    while at < others:
        n = min(10_000 - share, others - at)
        chunk_texts = corpus.texts(n)
        embedder.put(chunk_texts, corpus.vectors(n))
        batch = records(lambda i, base=at: MemoryScope(user_id=f"user{(base + i) % 100}"), chunk_texts)
        batch.extend(mine[pos : pos + share])
        pos += share
        batches.append(batch)
        at += n
    batches += [mine[i : i + 10_000] for i in range(pos, mine_n, 10_000)]
    await shared.fill(batches)
    memories: dict[str, Any] = {}
    for label, pair in (("alone", alone), ("shared", shared)):
        for b in ("sqlite", "postgres"):
            for mode in MODES:
                memories[f"{b}|{mode}|{label}"] = pair.sqlite(mode) if b == "sqlite" else pair.postgres(mode)
    times = await interleaved(
        {key: (lambda i, m=m: m.search(qtexts[i], scope=me, k=K)) for key, m in memories.items()}, queries
    )
    for m in memories.values():
        await m.aclose()
    rows = []
    for b in ("sqlite", "postgres"):
        for mode in MODES:
            a, s = median_ms(times[f"{b}|{mode}|alone"]), median_ms(times[f"{b}|{mode}|shared"])
            rows.append([b, mode, mine_n, others, a, s, s / a])
    return rows


# -- 4. HNSW ----------------------------------------------------------------------------------


async def bench_hnsw(pair: Pair, queries: int, ef_values: Sequence[int]) -> list[list[Any]]:
    qtexts: list[str] = pair.qtexts  # type: ignore[attr-defined]
    user: MemoryScope = pair.user  # type: ignore[attr-defined]
    exact = pair.postgres("vector")
    truth = [[h.record.id for h in await exact.search(q, scope=user, k=K)] for q in qtexts[:queries]]
    start_t = time.perf_counter()
    await exact.store.create_hnsw_index()
    build_s = time.perf_counter() - start_t
    await exact.aclose()
    rows: list[list[Any]] = []
    exact_times = []
    again = pair.postgres("vector", exact_below=10**9)  # exact scan, same data and index present
    for ef in ef_values:
        graph = pair.postgres("vector", ef_search=ef, exact_below=1, candidates=K)
        times = await interleaved(
            {
                "graph": lambda i, m=graph: m.search(qtexts[i], scope=user, k=K),
                "exact": lambda i: again.search(qtexts[i], scope=user, k=K),
            },
            queries,
        )
        exact_times += times["exact"]
        recall = []
        for i, q in enumerate(qtexts[:queries]):
            got = {h.record.id for h in await graph.search(q, scope=user, k=K)}
            recall.append(len(got & set(truth[i])) / K)
        rows.append([ef, statistics.mean(recall), median_ms(times["graph"]), median_ms(times["exact"])])
        await graph.aclose()
    await again.aclose()
    rows.append(["(index build, s)", build_s, "", ""])
    return rows


# -- 5. throughput ------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    """One client process: searches and adds for its own users for ``--seconds``; prints counts."""
    corpus = Corpus(seed=100 + args.worker)
    texts = corpus.texts(2_000)

    async def run() -> dict[str, int]:
        memory: Any = (
            PostgresMemory(args.worker_dsn, schema=args.worker_schema, pool_size=1)
            if args.worker_backend == "postgres"
            else SQLiteMemory(args.worker_path, workers=1)
        )
        me = MemoryScope(user_id=f"user{args.worker % 8}")
        searches = adds = i = 0
        deadline = time.perf_counter() + args.seconds
        while time.perf_counter() < deadline:
            if i % 5 == 4:
                await memory.add([MemoryRecord(scope=me, text=texts[i % len(texts)])])
                adds += 1
            else:
                await memory.search(corpus.query(texts[i % len(texts)]), scope=me, k=K)
                searches += 1
            i += 1
        await memory.aclose()
        return {"searches": searches, "adds": adds}

    print(json.dumps(asyncio.run(run())), flush=True)


def bench_throughput(shared: Pair, procs: int, seconds: float) -> list[list[Any]]:
    rows = []
    for backend in ("sqlite", "postgres"):
        cmd = [sys.executable, "-m", "benchmarks.postgres_bench", "--worker-backend", backend,
               "--worker-dsn", shared.dsn, "--worker-schema", shared.schema, "--worker-path", str(shared.path),
               "--seconds", str(seconds)]
        children = [subprocess.Popen([*cmd, "--worker", str(p)], stdout=subprocess.PIPE, text=True)
                    for p in range(procs)]
        counts = [json.loads((c.communicate(timeout=seconds * 10 + 120)[0] or "{}").strip().splitlines()[-1])
                  for c in children]
        searches = sum(c["searches"] for c in counts) / seconds
        adds = sum(c["adds"] for c in counts) / seconds
        rows.append([backend, procs, searches, adds])
    rows.append(["postgres ÷ sqlite", procs, rows[1][2] / rows[0][2], rows[1][3] / rows[0][3]])
    return rows


# -- main -----------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> str:
    server = start(args.dsn)
    folder = Path(tempfile.mkdtemp(prefix="memoryport-pgbench-"))
    out: list[str] = []

    def emit(text: str) -> None:
        print(text, flush=True)
        out.append(text)

    emit(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
         f"one run; sizes {args.sizes}; k={K}.")
    corpus = Corpus()
    try:
        emit("\n### Add\n")
        rows = await bench_add(corpus, server.dsn, folder, args.add_n, args.singles)
        emit(table(["records", "SQLite batch (rec/s)", "PostgreSQL batch (rec/s)", "ratio",
                    "SQLite one (ms)", "PostgreSQL one (ms)", "ratio"], rows))
        emit("\n### Search (one user holds every record; exact vector scan)\n")
        pairs = []
        search_rows: list[list[Any]] = []
        for n in args.sizes:
            rows, pair = await bench_search(corpus, server.dsn, folder, n, args.queries)
            search_rows += rows
            pairs.append(pair)
        emit(table(["mode", "records", "SQLite median (ms)", "SQLite p95", "PostgreSQL median (ms)",
                    "PostgreSQL p95", "ratio of medians"], search_rows))
        emit("\n### One user's records alone vs among other users' records\n")
        rows = await bench_tenant(corpus, server.dsn, folder, args.tenant_mine, args.tenant_others, args.queries)
        emit(table(["backend", "mode", "user's records", "others' records", "alone (ms)", "among others (ms)",
                    "ratio"], rows))
        emit(f"\n### HNSW at {args.sizes[-1]:,} records (recall@10 against the exact scan)\n")
        rows = await bench_hnsw(pairs[-1], args.queries, args.ef)
        emit(table(["ef_search", "recall@10", "HNSW median (ms)", "exact median (ms)"], rows))
        emit(f"\n### Throughput: {args.procs} client processes at once, 4 keyword searches : 1 add, "
             f"{args.seconds:g} s, each process on its own user of 8 holding {args.tenant_mine:,} records\n")
        busy = Pair(server.dsn, folder, "throughput", None)
        texts = corpus.texts(8 * args.tenant_mine)
        await busy.fill([records(lambda i, b=b: MemoryScope(user_id=f"user{(b + i) % 8}"), texts[b : b + 10_000])
                         for b in range(0, len(texts), 10_000)])
        rows = await asyncio.to_thread(bench_throughput, busy, args.procs, args.seconds)
        emit(table(["backend", "processes", "searches/s", "adds/s"], rows))
    finally:
        server.stop()
    return "\n".join(out)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", default=None, help="an ordinary role's DSN (default: start pgserver)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--add-n", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=100)
    ap.add_argument("--tenant-mine", type=int, default=10_000)
    ap.add_argument("--tenant-others", type=int, default=100_000)
    ap.add_argument("--ef", type=int, nargs="+", default=[40, 100, 200])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    ap.add_argument("--out", type=Path, default=None, help="write the tables here (markdown)")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-backend", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-dsn", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-schema", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-path", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.add_n, args.singles = [2_000], 10, 2_000, 20
        args.tenant_mine, args.tenant_others, args.ef, args.procs, args.seconds = 1_000, 4_000, [40], 2, 2.0
    return args


if __name__ == "__main__":
    arguments = parse(None)
    if arguments.worker is not None:
        worker(arguments)
        sys.exit(0)
    text = asyncio.run(main(arguments))
    if arguments.out:
        arguments.out.write_text(text + "\n", encoding="utf-8")
