"""Speed of PostgresMemory beside SQLiteMemory on the same data and queries, in one run.

Run from the repository root::

    python -m benchmarks.postgres_bench --sizes 10000 100000 --tenant-others 100000 --procs 4
    python -m benchmarks.postgres_bench --quick                 # a tiny smoke run
    python -m benchmarks.postgres_bench --dsn postgresql://...  # another server (an ordinary role)
    flock /tmp/mp-bigbench.lock nice python -m benchmarks.postgres_bench --sections big throughput \
        --big 1000000 --procs 8 --keep /work/pgbench-1m \
        --pg-setting shared_buffers=2GB --pg-setting maintenance_work_mem=3GB   # the 1M run

Without ``--dsn`` a PostgreSQL 16 + pgvector 0.6 is started from the pgserver
wheel (default settings: shared_buffers 128 MB). Every figure is from one run;
methods are interleaved query by query so that ratios share the machine's noise.

1. add: one record per call (latency) and batches of 1,000 (records/s),
   keyword-only and with given vectors (a precomputed-vector embedder: no model time);
2. search at each size, one user holding every record, k=10: keyword, vector
   (exact) and hybrid, median and p95, PostgreSQL ÷ SQLite;
3. tenant: one user's 10,000 records alone vs among other users' records;
4. HNSW: recall@10 against the exact scan, and latency, for several ef_search;
5. throughput: N client processes at once, each searching and adding for its own users;
6. big (``--big N``): one table of N records, user "big" holding all but the
   10,000 of user "me" spread through them: search at N (user "big"), "me"
   alone vs among the N, and HNSW recall@10 on user "big", in one corpus;
7. big-add (after ``big``, with the same ``--keep``): one-record adds and batches
   of 1,000 into that corpus, for a user whose records are deleted afterwards.

``--keep DIR`` keeps the server's data (``DIR/pgdata``) and the SQLite files
in DIR; a later run with the same DIR reuses every data set already loaded
(the load rates and the HNSW build time of the first run are kept in
``DIR/loads.json``). ``--sections`` picks the parts to run.

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.postgres import PostgresMemory, PostgresStore
from memoryport.adapters.sqlite import SQLiteStore

from ._postgres import start
from .sqlite_bench import Corpus, LookupEmbedder, interleaved, median_ms, records, table

K = 10
BATCH = 1_000
LOAD_BATCH = 10_000


class Embedder(LookupEmbedder):
    """Precomputed vectors; a loaded batch's rows are forgotten (a million of them would not fit)."""

    def __init__(self) -> None:
        super().__init__()
        self.pinned: set[str] = set()  # the queries' texts

    def forget(self, texts: Sequence[str]) -> None:
        for text in texts:
            if text not in self.pinned:
                self.table.pop(text, None)
MODES = ("keyword", "vector", "hybrid")


def p95_ms(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000


class Pair:
    """The same data in a SQLite file and a PostgreSQL schema."""

    def __init__(self, dsn: str, folder: Path, name: str, embedder: Embedder | None) -> None:
        self.dsn, self.path, self.schema, self.embedder = dsn, folder / f"{name}.db", name, embedder

    def sqlite(self, mode: str = "hybrid") -> GuardedMemory[SQLiteStore]:
        return SQLiteMemory(self.path, embedder=self.embedder, search_mode=mode)

    def postgres(self, mode: str = "hybrid", **options: Any) -> GuardedMemory[PostgresStore]:
        return PostgresMemory(self.dsn, embedder=self.embedder, schema=self.schema, search_mode=mode, **options)

    async def fill(self, batches: Sequence[list[MemoryRecord]]) -> dict[str, float]:
        """Add the batches to both; records/s of each."""
        return await self.fill_once(lambda: iter(batches), sum(len(b) for b in batches), forget=False)

    async def fill_once(
        self, batches: Callable[[], Iterator[list[MemoryRecord]]], n: int, *, forget: bool = True
    ) -> dict[str, float]:
        """Load both unless a kept run already did (the same ``n`` records); records/s of each.

        ``batches`` is called once per backend (a generator: a million
        records and their vectors are never all in memory at once).
        """
        key = f"{self.schema}:{n}"
        rates: dict[str, float] = KEPT.setdefault(key, {})
        for label in ("sqlite", "postgres"):
            if label in rates and await self.count(label) == n:
                continue  # loaded by a kept run (each backend on its own: an interrupted run resumes)
            await self.drop(label)
            memory: Any = self.sqlite() if label == "sqlite" else self.postgres()
            start_t = time.perf_counter()
            for batch in batches():
                await memory.add([r.model_copy() for r in batch])
                if forget and self.embedder is not None:
                    self.embedder.forget([r.text for r in batch])
            rates[label] = n / (time.perf_counter() - start_t)
            await memory.aclose()
            save_kept()
        return dict(rates)

    async def count(self, backend: str) -> int:
        if backend == "sqlite":
            if not self.path.exists():
                return -1
            m: Any = self.sqlite()
            n = int(m.store.stats()["records"])
        else:
            m = self.postgres()
            n = int((await m.store.stats())["records"])
        await m.aclose()
        return n

    async def drop(self, backend: str) -> None:
        """Remove what a previous, unfinished run left of this data set."""
        if backend == "sqlite":
            _remove_files(self.path)
            return
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def _remove_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


#: Load rates (and HNSW build times) of the data sets a kept run loaded: ``--keep DIR/loads.json``.
KEPT: dict[str, Any] = {}
KEPT_FILE: list[Path] = []


def save_kept() -> None:
    if KEPT_FILE:
        KEPT_FILE[0].write_text(json.dumps(KEPT, indent=1), encoding="utf-8")


# -- 1. add -----------------------------------------------------------------------------


async def bench_add(corpus: Corpus, dsn: str, folder: Path, n: int, singles: int
                    ) -> tuple[list[list[Any]], list[list[Any]]]:
    """Batches and single records; the single ones also at both durabilities of each backend."""
    texts = corpus.texts(n + singles)
    vectors = corpus.vectors(n + singles)
    rows: list[list[Any]] = []
    durable: list[list[Any]] = []
    for label, embedder in (("keyword-only", None), ("with given vectors", Embedder())):
        if embedder is not None:
            embedder.put(texts, vectors)
        pair = Pair(dsn, folder, f"add_{'v' if embedder else 'k'}", embedder)
        user = MemoryScope(user_id="bench")
        batches = [records(lambda i, u=user: u, texts[i : i + BATCH]) for i in range(0, n, BATCH)]
        rates = await pair.fill(batches)
        memories: dict[str, Any] = {
            "sqlite": pair.sqlite(),
            "postgres": pair.postgres(),
            "sqlite full": SQLiteMemory(pair.path, embedder=embedder, durability="full"),
            "postgres normal": pair.postgres(durability="normal"),
        }
        one = texts[n:]
        times = await interleaved(
            {
                name: (lambda i, m=m, u=user, t=one: m.add([MemoryRecord(scope=u, text=t[i])]))
                for name, m in memories.items()
            },
            (singles - 3) // 2,
        )
        for m in memories.values():
            await m.aclose()
        ms = {name: median_ms(t) for name, t in times.items()}
        rows.append(
            [
                label,
                rates["sqlite"],
                rates["postgres"],
                rates["postgres"] / rates["sqlite"],
                ms["sqlite"],
                ms["postgres"],
                ms["postgres"] / ms["sqlite"],
            ]
        )
        durable.append(
            [
                label,
                ms["sqlite"],
                ms["postgres normal"],
                ms["postgres normal"] / ms["sqlite"],
                ms["sqlite full"],
                ms["postgres"],
                ms["postgres"] / ms["sqlite full"],
            ]
        )
    return rows, durable


# -- 2. search ----------------------------------------------------------------------------


async def bench_search(corpus: Corpus, dsn: str, folder: Path, n: int, queries: int) -> tuple[list[list[Any]], Pair]:
    texts = corpus.texts(n)
    embedder = Embedder()
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
    embedder = Embedder()
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


# -- 6. one corpus of N records: search at N, a user among N, HNSW at N -------------------------


async def emit_sizes(dsn: str, pair: Pair, emit: Callable[[str], None]) -> None:
    """On-disk size of a data set: the SQLite file (with -wal) and PostgreSQL's largest relations."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT c.relname, c.relkind, pg_total_relation_size(c.oid), pg_relation_size(c.oid) FROM pg_class c "
            "WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'i') ORDER BY 3 DESC LIMIT 8",
            (pair.schema,),
        )
        rel = await cur.fetchall()
    mb = 1024 * 1024
    sqlite_bytes = sum(p.stat().st_size for p in pair.path.parent.glob(pair.path.name + "*"))
    rows: list[list[Any]] = [["SQLite file (+ -wal, -shm)", "file", sqlite_bytes / mb]]
    rows += [
        [name, "table (with its indexes and TOAST)" if kind == "r" else "index", (total if kind == "r" else own) / mb]
        for name, kind, total, own in rel
    ]
    emit(f"\n### On-disk size of the {pair.schema} data set\n")
    emit(table(["relation", "kind", "MB"], rows))


async def bench_big(dsn: str, folder: Path, n: int, mine_n: int, queries: int, ef_values: Sequence[int],
                    emit: Callable[[str], None]) -> None:
    """User "big" holds n - mine_n records, user "me" mine_n spread through them; "me" also alone."""
    embedder = Embedder()
    big, me = MemoryScope(user_id="big"), MemoryScope(user_id="me")
    mine_corpus = Corpus(seed=13)
    mine_texts = mine_corpus.texts(mine_n)
    mine_vectors = mine_corpus.vectors(mine_n)
    ask = Corpus(seed=12)
    # Held-out queries from the stored vectors' distribution (the data's centroids, fresh noise).
    # Queries from other centroids are unrelated to every stored vector: all nearly equidistant, a
    # case no index is built for (HNSW recall@10 0.08-0.15 at 1M in such a run, against the exact scan).
    ask.centroids = Corpus(seed=14).centroids
    qtexts = [ask.query(t) for t in ask.texts(queries)]
    embedder.put(qtexts, ask.vectors(queries))
    embedder.pinned.update(qtexts)
    alone = Pair(dsn, folder, f"alone_{mine_n}", embedder)
    shared = Pair(dsn, folder, f"big_{n}", embedder)
    share = max(1, mine_n * LOAD_BATCH // n)  # "me"'s records per batch, spread through the load

    def mine(lo: int, hi: int) -> list[MemoryRecord]:
        embedder.put(mine_texts[lo:hi], mine_vectors[lo:hi])
        return records(lambda i: me, mine_texts[lo:hi])

    def alone_batches() -> Iterator[list[MemoryRecord]]:
        for lo in range(0, mine_n, LOAD_BATCH):
            yield mine(lo, min(mine_n, lo + LOAD_BATCH))

    def shared_batches() -> Iterator[list[MemoryRecord]]:
        corpus = Corpus(seed=14)
        at, pos, others = 0, 0, n - mine_n
        while at < others or pos < mine_n:
            k = min(LOAD_BATCH - share, others - at)
            texts = corpus.texts(k) if k > 0 else []
            if k > 0:
                embedder.put(texts, corpus.vectors(k))
            batch = records(lambda i: big, texts)
            take = share if at + k < others else mine_n - pos
            batch.extend(mine(pos, min(mine_n, pos + take)))
            pos = min(mine_n, pos + take)
            at += max(k, 0)
            yield batch

    loads = {"alone": await alone.fill_once(alone_batches, mine_n)}
    loads["shared"] = await shared.fill_once(shared_batches, n)
    emit(f"\n### Load of {n:,} records with 384-d vectors (batches of {LOAD_BATCH:,})\n")
    emit(table(["data set", "SQLite (records/s)", "PostgreSQL (records/s)", "ratio"],
               [[f"{n:,} (big + me)", loads["shared"]["sqlite"], loads["shared"]["postgres"],
                 loads["shared"]["postgres"] / loads["shared"]["sqlite"]]]))

    # Search at n: user "big" holds all but mine_n; PostgreSQL's vectors by exact scan.
    exact = {"exact_below": 10**9}
    memories = {(b, mode): (shared.sqlite(mode) if b == "sqlite" else shared.postgres(mode, **exact))
                for b in ("sqlite", "postgres") for mode in MODES}
    times = await interleaved(
        {f"{b}|{mode}": (lambda i, m=m: m.search(qtexts[i], scope=big, k=K)) for (b, mode), m in memories.items()},
        queries,
    )
    for m in memories.values():
        await m.aclose()
    rows = []
    for mode in MODES:
        sq, pg = times[f"sqlite|{mode}"], times[f"postgres|{mode}"]
        rows.append([mode, n - mine_n, median_ms(sq), p95_ms(sq), median_ms(pg), p95_ms(pg),
                     median_ms(pg) / median_ms(sq)])
    emit(f"\n### Search at {n:,} records (user \"big\" holds {n - mine_n:,}; exact vector scan)\n")
    emit(table(["mode", "user's records", "SQLite median (ms)", "SQLite p95", "PostgreSQL median (ms)",
                "PostgreSQL p95", "ratio of medians"], rows))

    # "me" alone vs among the others.
    memories2: dict[str, Any] = {}
    for label, pair in (("alone", alone), ("shared", shared)):
        for b in ("sqlite", "postgres"):
            for mode in MODES:
                memories2[f"{b}|{mode}|{label}"] = pair.sqlite(mode) if b == "sqlite" else pair.postgres(mode)
    times = await interleaved(
        {key: (lambda i, m=m: m.search(qtexts[i], scope=me, k=K)) for key, m in memories2.items()}, queries
    )
    for m in memories2.values():
        await m.aclose()
    rows = []
    for b in ("sqlite", "postgres"):
        for mode in MODES:
            a, sh = times[f"{b}|{mode}|alone"], times[f"{b}|{mode}|shared"]
            rows.append([b, mode, mine_n, n - mine_n, median_ms(a), median_ms(sh), median_ms(sh) / median_ms(a),
                         p95_ms(a), p95_ms(sh)])
    emit(f"\n### One user's {mine_n:,} records alone vs among {n - mine_n:,} others\n")
    emit(table(["backend", "mode", "user's records", "others' records", "alone median (ms)",
                "among others median (ms)", "ratio", "alone p95", "among others p95"], rows))

    # HNSW over user "big" (a share of 1 - mine_n/n of the table) against the exact scan.
    scan = shared.postgres("vector", **exact)
    truth: list[list[str | None]] = []
    exact_times: list[float] = []
    for q in qtexts:  # (each exact scan of a large user is slow: timed once, here)
        start_t = time.perf_counter()
        truth.append([h.record.id for h in await scan.search(q, scope=big, k=K)])
        exact_times.append(time.perf_counter() - start_t)
    key = f"hnsw:{shared.schema}"
    start_t = time.perf_counter()
    if await scan.store.create_hnsw_index():
        KEPT[key] = time.perf_counter() - start_t
        save_kept()
    build_s = KEPT.get(key)
    rows = []
    for ef in ef_values:
        graph = shared.postgres("vector", ef_search=ef, exact_below=1, candidates=K)
        times = await interleaved({"graph": lambda i, m=graph: m.search(qtexts[i], scope=big, k=K)}, queries)
        recall = []
        for i, q in enumerate(qtexts):
            got = {h.record.id for h in await graph.search(q, scope=big, k=K)}
            recall.append(len(got & set(truth[i])) / K)
        rows.append([ef, statistics.mean(recall), min(recall), median_ms(times["graph"]), p95_ms(times["graph"]),
                     median_ms(exact_times)])
        await graph.aclose()
    await scan.aclose()
    rows.append(["(index build, s)", build_s if build_s is not None else "", "", "", "", ""])
    emit(f"\n### HNSW at {n:,} records: user \"big\" ({n - mine_n:,}), recall@10 against the exact scan\n")
    emit(table(["ef_search", "recall@10 (mean)", "recall@10 (worst query)", "HNSW median (ms)", "HNSW p95",
                "exact median (ms)"], rows))
    await emit_sizes(dsn, shared, emit)


async def bench_big_add(dsn: str, folder: Path, n: int, singles: int, emit: Callable[[str], None]) -> None:
    """Adds into the kept ``big`` corpus of ``n`` records (run ``big`` first): one record per call and
    batches of 1,000, with given vectors, for a user "adder" whose records are deleted afterwards."""
    embedder = Embedder()
    shared = Pair(dsn, folder, f"big_{n}", embedder)
    for label in ("sqlite", "postgres"):
        if await shared.count(label) < n:
            raise SystemExit(f"big-add needs the big section's {n:,} records kept in {folder} (run --sections big)")
    adder = MemoryScope(user_id="adder")
    corpus = Corpus(seed=16)
    batches = 3
    texts = corpus.texts(singles + batches * 2 * BATCH)
    embedder.put(texts, corpus.vectors(len(texts)))
    memories = {"sqlite": shared.sqlite(), "postgres": shared.postgres()}
    added: dict[str, list[str]] = {b: [] for b in memories}
    one = texts[:singles]

    async def add(b: str, batch: list[MemoryRecord]) -> None:
        added[b] += await memories[b].add(batch)

    try:
        times = await interleaved(
            {b: (lambda i, b=b: add(b, [MemoryRecord(scope=adder, text=one[i])])) for b in memories},
            (singles - 3) // 2,
        )
        rates: dict[str, list[float]] = {b: [] for b in memories}
        for i in range(batches):
            for j, b in enumerate(memories):
                lo = singles + (2 * i + j) * BATCH
                batch = records(lambda _: adder, texts[lo : lo + BATCH])
                start_t = time.perf_counter()
                await add(b, batch)
                rates[b].append(BATCH / (time.perf_counter() - start_t))
    finally:
        for b, m in memories.items():  # by id: a whole-user erasure would VACUUM the SQLite file
            for at in range(0, len(added[b]), 500):
                await m.delete(added[b][at : at + 500], scope=adder)
            await m.aclose()
    sq, pg = times["sqlite"], times["postgres"]
    sq_rate, pg_rate = statistics.median(rates["sqlite"]), statistics.median(rates["postgres"])
    emit(f"\n### Add into a store of {n:,} records (with given vectors; user \"adder\", deleted after)\n")
    emit(table(["add", "SQLite", "PostgreSQL", "ratio"], [
        ["one record, median (ms)", median_ms(sq), median_ms(pg), median_ms(pg) / median_ms(sq)],
        ["one record, p95 (ms)", p95_ms(sq), p95_ms(pg), p95_ms(pg) / p95_ms(sq)],
        [f"batch of {BATCH:,}, median of {batches} (records/s)", sq_rate, pg_rate, pg_rate / sq_rate],
    ]))


# -- main -----------------------------------------------------------------------------------------


SECTIONS = ("add", "search", "tenant", "hnsw", "throughput", "big", "big-add")


async def main(args: argparse.Namespace) -> str:
    settings = dict(item.split("=", 1) for item in args.pg_setting)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        folder = args.keep
        KEPT_FILE.append(folder / "loads.json")
        if KEPT_FILE[0].exists():
            KEPT.update(json.loads(KEPT_FILE[0].read_text(encoding="utf-8")))
        server = start(args.dsn, pgdata=None if args.dsn else str(folder / "pgdata"), settings=settings)
    else:
        folder = Path(tempfile.mkdtemp(prefix="memoryport-pgbench-"))
        server = start(args.dsn, settings=settings)
    out: list[str] = []

    def emit(text: str) -> None:
        print(text, flush=True)
        out.append(text)
        if args.out:  # as it goes: a long run's finished parts are kept if a later one fails
            args.out.write_text("\n".join(out) + "\n", encoding="utf-8")

    sections = set(args.sections)
    emit(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
         f"one run; sections {' '.join(s for s in SECTIONS if s in sections)}; k={K}; "
         f"load average at start {os.getloadavg()[0]:.1f}; server settings {settings or 'defaults'}.")
    corpus = Corpus()
    try:
        if "add" in sections:
            emit("\n### Add\n")
            rows, durable = await bench_add(corpus, server.dsn, folder, args.add_n, args.singles)
            emit(table(["records", "SQLite batch (rec/s)", "PostgreSQL batch (rec/s)", "ratio",
                        "SQLite one (ms)", "PostgreSQL one (ms)", "ratio"], rows))
            emit("\n### One-record add by durability\n")
            emit(table(["records", "SQLite normal (ms)", "PostgreSQL normal (ms)", "ratio",
                        "SQLite full (ms)", "PostgreSQL on (ms)", "ratio"], durable))
        pairs = []
        if sections & {"search", "hnsw"}:
            emit("\n### Search (one user holds every record; exact vector scan)\n")
            search_rows: list[list[Any]] = []
            for n in args.sizes:
                rows, pair = await bench_search(corpus, server.dsn, folder, n, args.queries)
                search_rows += rows
                pairs.append(pair)
            emit(table(["mode", "records", "SQLite median (ms)", "SQLite p95", "PostgreSQL median (ms)",
                        "PostgreSQL p95", "ratio of medians"], search_rows))
        if "tenant" in sections:
            emit("\n### One user's records alone vs among other users' records\n")
            rows = await bench_tenant(corpus, server.dsn, folder, args.tenant_mine, args.tenant_others, args.queries)
            emit(table(["backend", "mode", "user's records", "others' records", "alone (ms)", "among others (ms)",
                        "ratio"], rows))
        if "hnsw" in sections:
            emit(f"\n### HNSW at {args.sizes[-1]:,} records (recall@10 against the exact scan)\n")
            rows = await bench_hnsw(pairs[-1], args.queries, args.ef)
            emit(table(["ef_search", "recall@10", "HNSW median (ms)", "exact median (ms)"], rows))
        if "big" in sections:
            await bench_big(server.dsn, folder, args.big, args.tenant_mine, args.queries, args.ef, emit)
        if "big-add" in sections:
            await bench_big_add(server.dsn, folder, args.big, args.singles, emit)
        if "throughput" in sections:
            emit(f"\n### Throughput: {args.procs} client processes at once, 4 keyword searches : 1 add, "
                 f"{args.seconds:g} s, each process on its own user of 8 holding {args.tenant_mine:,} records; "
                 f"load average {os.getloadavg()[0]:.1f}\n")
            busy = Pair(server.dsn, folder, "throughput", None)
            texts = Corpus(seed=15).texts(8 * args.tenant_mine)
            await busy.fill_once(
                lambda: iter([records(lambda i, b=b: MemoryScope(user_id=f"user{(b + i) % 8}"), texts[b : b + 10_000])
                              for b in range(0, len(texts), 10_000)]),
                len(texts),
                forget=False,
            )
            rows = await asyncio.to_thread(bench_throughput, busy, args.procs, args.seconds)
            emit(table(["backend", "processes", "searches/s", "adds/s"], rows))
        emit(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}.")
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
    ap.add_argument("--sections", nargs="+", choices=SECTIONS, default=["add", "search", "tenant", "hnsw",
                                                                         "throughput"])
    ap.add_argument("--big", type=int, default=1_000_000, help="records of the 'big' section's corpus")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the server's data and the SQLite files here; reuse what a run already loaded")
    ap.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                    help="a server setting for the pgserver started here (ALTER SYSTEM; repeatable)")
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
        args.big = 5_000
    return args


if __name__ == "__main__":
    arguments = parse(None)
    if arguments.worker is not None:
        worker(arguments)
        sys.exit(0)
    text = asyncio.run(main(arguments))
    if arguments.out:
        arguments.out.write_text(text + "\n", encoding="utf-8")
