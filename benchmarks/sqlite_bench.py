"""Speed of SQLiteMemory, side by side with numpy brute force and sqlite-vec, in one run.

Run from the repository root::

    python -m benchmarks.sqlite_bench --sizes 10000 100000 --tenant-others 1000000
    python -m benchmarks.sqlite_bench --quick          # a tiny smoke run
    python -m benchmarks.sqlite_bench --only search --sizes 10000 --plain-hybrid   # + hybrid's floor

What it measures (every figure a median; methods interleaved query by query so
that ratios share the machine's noise):

1. add throughput through the public ``SQLiteMemory.add`` in batches of 10,000,
   keyword-only and with given vectors (a precomputed-vector embedder, so no
   model time is counted);
2. search latency at each size (one user holding every record, k=10): keyword
   (FTS5 BM25), vector (cosine, cached matrix) and hybrid (fused), against numpy
   brute force (``X @ q`` + ``argpartition``) over an in-RAM matrix of the same
   vectors, and sqlite-vec ``vec0`` KNN when it can be loaded;
3. the tenant test: one user's 10,000 records searched inside a file holding
   many other users' records, against the same 10,000 alone.

``--plain-hybrid`` adds, in the same rotation, a hybrid search with every
contextual step off (``PLAIN_OPTIONS``): the two halves' candidates fused and
nothing else, the floor of hybrid search on this machine before any step
that ranks by context.

Texts are sentences drawn from the word frequencies of the LoCoMo conversations
(``../shared/data/locomo``) when present, else from a Zipf law over pseudo-words.
Vectors are 384-d, clustered (1,000 centroids plus noise), unit length.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import SQLiteStore, load_driver

DIM = 384
K = 10
BATCH = 10_000
LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo-dev.json"


# -- data ------------------------------------------------------------------------


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    """Words and their weights: LoCoMo's word counts if available, else Zipf over pseudo-words."""
    if LOCOMO.exists():
        counts: Counter[str] = Counter()
        for sample in json.loads(LOCOMO.read_text()):
            for key, turns in sample["conversation"].items():
                if key.startswith("session_") and isinstance(turns, list):
                    for turn in turns:
                        counts.update(re.findall(r"[a-z']+", turn.get("text", "").lower()))
        words = [w for w, _ in counts.most_common()]
        return words, [float(c) for _, c in counts.most_common()]
    syllables = ["ka", "lo", "mi", "ten", "ra", "su", "vo", "pe", "dan", "ri", "sho", "gu", "ne", "ba", "fi"]
    words = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(30_000)})
    rng.shuffle(words)
    return words, [1.0 / (i + 1) for i in range(len(words))]


class Corpus:
    """Deterministic sentences and vectors, generated in chunks."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.words, weights = vocabulary(self.rng)
        self.cum = np.cumsum(np.asarray(weights, dtype=np.float64))
        self.cum /= self.cum[-1]
        self.centroids = self.np_rng.standard_normal((1_000, DIM)).astype(np.float32)

    def texts(self, n: int) -> list[str]:
        lengths = self.np_rng.integers(6, 20, size=n)
        picks = np.searchsorted(self.cum, self.np_rng.random(int(lengths.sum())))
        out, at = [], 0
        for length in lengths:
            out.append(" ".join(self.words[i] for i in picks[at : at + length]))
            at += length
        return out

    def vectors(self, n: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        which = self.np_rng.integers(0, len(self.centroids), size=n)
        v = self.centroids[which] + 0.9 * self.np_rng.standard_normal((n, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return np.ascontiguousarray(v, dtype=np.float32)

    def query(self, text: str) -> str:
        """A natural-language-like query: some words of a stored text plus a common one."""
        words = text.split()
        picked = self.rng.sample(words, min(len(words), self.rng.randint(2, 5)))
        return " ".join([*picked, self.words[self.rng.randint(0, 50)]])


class LookupEmbedder:
    """An EmbeddingPort returning precomputed vectors, so no model time is measured."""

    name = "precomputed-384"
    dim = DIM

    def __init__(self) -> None:
        self.table: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}

    def put(self, texts: Sequence[str], vectors: np.ndarray[Any, np.dtype[np.float32]]) -> None:
        for text, row in zip(texts, vectors, strict=True):
            self.table[text] = row

    async def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        return np.stack([self.table[t] for t in texts])


def records(scope_of: Callable[[int], MemoryScope], texts: Sequence[str]) -> list[MemoryRecord]:
    return [MemoryRecord(scope=scope_of(i), text=t) for i, t in enumerate(texts)]


# -- timing helpers ----------------------------------------------------------------


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


async def interleaved(
    methods: dict[str, Callable[[int], Any]], n: int, cpu: dict[str, list[float]] | None = None
) -> dict[str, list[float]]:
    """Time every method on query i, rotating their order, for i in range(n).

    A method returning a coroutine (a memory's search) is awaited on this loop, as a host would.
    ``cpu``: filled with each call's process CPU time (every thread of the process: the store's
    worker, the numpy thread), which waits for a busy machine's scheduler do not inflate.
    """
    names = list(methods)
    for name in names:  # warm caches (pages, statements, the vector matrix) before timing
        for i in range(min(n, 3)):
            result = methods[name](i)
            if asyncio.iscoroutine(result):
                await result
    times: dict[str, list[float]] = {name: [] for name in names}
    if cpu is not None:
        cpu.update({name: [] for name in names})
    for i in range(n):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            start, start_cpu = time.perf_counter(), time.process_time()
            result = methods[name](i)
            if asyncio.iscoroutine(result):
                await result
            times[name].append(time.perf_counter() - start)
            if cpu is not None:
                cpu[name].append(time.process_time() - start_cpu)
    return times


def numpy_topk(
    matrix: np.ndarray[Any, Any], q: np.ndarray[Any, Any], k: int = K, blas: bool | str = True
) -> np.ndarray[Any, Any]:
    """numpy's brute force: ``blas`` True ``X @ q`` (BLAS gemv, its threads), False ``einsum``'s loop, ``"vecdot"``
    one single-threaded BLAS dot per row (numpy >= 2); then ``argpartition`` and a sort of the k."""
    scores = np.vecdot(matrix, q) if blas == "vecdot" else (matrix @ q if blas else np.einsum("ij,j->i", matrix, q))
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top])]


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(x: Any) -> str:
        if isinstance(x, float):
            return f"{x:,.2f}" if x < 100 else f"{x:,.0f}"
        if isinstance(x, int):
            return f"{x:,}"
        return str(x)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- 1. add throughput -------------------------------------------------------------


async def bench_add(corpus: Corpus, n: int, runs: int, folder: Path) -> list[list[Any]]:
    texts = corpus.texts(n)
    vectors = corpus.vectors(n)
    embedder = LookupEmbedder()
    embedder.put(texts, vectors)
    user = MemoryScope(user_id="bench")
    rates: dict[str, list[float]] = {
        "keyword-only": [],
        "with given vectors": [],
        "keyword-only, port alone (no guard)": [],
    }
    for run in range(runs):
        for kind in rates:  # interleaved: keyword, vectors, port, keyword, ...
            batch = records(lambda i: user, texts)  # fresh records (no ids yet), built outside the timing
            path = folder / f"add-{n}-{run}-{len(kind)}.db"
            memory = SQLiteMemory(path, embedder=embedder if kind == "with given vectors" else None)
            if "port" in kind:
                # What the guard costs: the same batches straight into the port, ids given.
                batch = [r.model_copy(update={"id": f"{run}-{i}"}) for i, r in enumerate(batch)]
                add = memory.store.add
            else:
                add = memory.add
            start = time.perf_counter()
            for i in range(0, n, BATCH):
                await add(batch[i : i + BATCH])
            rates[kind].append(n / (time.perf_counter() - start))
            await memory.aclose()
            remove(path)
    return [[kind, n, statistics.median(r), min(r), max(r), len(r)] for kind, r in rates.items()]


# -- 2. search latency ----------------------------------------------------------------


def sqlite_vec_index(path: Path, vectors: np.ndarray[Any, Any]) -> Callable[[np.ndarray[Any, Any]], Any] | None:
    """A vec0 table over the same vectors, or None when sqlite-vec cannot be loaded here."""
    try:
        import sqlite_vec
    except ImportError:
        return None
    for name in ("pysqlite3", "sqlean", "sqlite3"):
        try:
            _, module = load_driver(name)
            conn = module.connect(str(path))
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            break
        except Exception:
            continue
    else:
        return None
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}] distance_metric=cosine)")
    conn.executemany(
        "INSERT INTO v(rowid, embedding) VALUES (?, ?)", ((i + 1, vectors[i].tobytes()) for i in range(len(vectors)))
    )
    conn.commit()

    def knn(q: np.ndarray[Any, Any]) -> Any:
        return conn.execute(
            "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ?", (q.tobytes(), K)
        ).fetchall()

    return knn


RAW_FTS5 = "raw FTS5 bm25() top-10, same words (floor)"


def raw_fts5(path: Path, driver: str) -> Callable[[str], Any]:
    """The floor of keyword search: FTS5's own ``bm25()`` top-10 for the same words, on its own connection."""
    from memoryport.adapters.sqlite._fts import match_expression

    conn = load_driver(driver)[1].connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA mmap_size = 8589934592")

    def query(text: str) -> Any:
        expression = match_expression(text)
        return conn.execute(
            "SELECT rowid, bm25(records_fts) AS s FROM records_fts WHERE records_fts MATCH ? ORDER BY s LIMIT ?",
            (expression, K),
        ).fetchall()

    return query


#: numpy >= 2: one single-threaded BLAS dot per row (what vector search's product runs at 64 dimensions or more).
NUMPY_VECDOT = "numpy brute force (vecdot, 1 thread)"

#: ``--plain-hybrid``: hybrid search with every contextual step off, so only the fusion of the two halves'
#: candidates is left (what hybrid search costs before the steps that rank by context).
PLAIN_HYBRID = "hybrid, contextual steps off (fusion only)"
PLAIN_OPTIONS: dict[str, Any] = {
    "context_weight": 0.0,
    "context_key_weight": 0.0,
    "previous_weight": 0.0,
    "session_weight": 0.0,
    "date_weight": 0.0,
    "speaker_weight": 0.0,
    "time_weight": 0.0,
    "length_weight": 0.0,
}


async def bench_search(
    corpus: Corpus, n: int, queries: int, folder: Path, with_vec0: bool, plain: bool = False
) -> tuple[list[list[Any]], dict[str, Any]]:
    texts = corpus.texts(n)
    vectors = corpus.vectors(n)
    embedder = LookupEmbedder()
    embedder.put(texts, vectors)
    qtexts = [corpus.query(texts[corpus.rng.randrange(n)]) for _ in range(queries)]
    qvecs = corpus.vectors(queries)
    embedder.put(qtexts, qvecs)
    user = MemoryScope(user_id="bench")
    path = folder / f"search-{n}.db"
    writer = SQLiteMemory(path, embedder=embedder)
    for i in range(0, n, BATCH):
        await writer.add(records(lambda i: user, texts[i : i + BATCH]))
    await writer.aclose()
    hybrid = SQLiteMemory(path, embedder=embedder, search_mode="hybrid")
    vector = SQLiteMemory(path, embedder=embedder, search_mode="vector")
    keyword = SQLiteMemory(path, embedder=embedder, search_mode="keyword")
    bare = SQLiteMemory(path, embedder=embedder, search_mode="hybrid", **PLAIN_OPTIONS) if plain else None
    start = time.perf_counter()
    await vector.search(qtexts[0], scope=user, k=K)
    cold = time.perf_counter() - start
    await hybrid.search(qtexts[0], scope=user, k=K)
    if bare is not None:
        await bare.search(qtexts[0], scope=user, k=K)
    matrix = vectors.copy()  # numpy's own in-RAM copy of the same vectors
    knn = sqlite_vec_index(folder / f"vec0-{n}.db", vectors) if with_vec0 else None

    def run(memory: GuardedMemory[SQLiteStore]) -> Callable[[int], Any]:
        return lambda i: memory.search(qtexts[i], scope=user, k=K)

    methods: dict[str, Callable[[int], Any]] = {
        "keyword (FTS5 BM25)": run(keyword),
        "vector (cosine)": run(vector),
        "hybrid (score fusion + neighbours)": run(hybrid),
        "numpy brute force (X @ q, BLAS)": lambda i: numpy_topk(matrix, qvecs[i]),
        "numpy brute force (einsum, 1 thread)": lambda i: numpy_topk(matrix, qvecs[i], blas=False),
    }
    if hasattr(np, "vecdot"):
        methods[NUMPY_VECDOT] = lambda i: numpy_topk(matrix, qvecs[i], blas="vecdot")
    if bare is not None:
        methods[PLAIN_HYBRID] = run(bare)
    if knn is not None:
        methods["sqlite-vec vec0 KNN"] = lambda i: knn(qvecs[i])
    raw = raw_fts5(path, keyword.store.driver_name)
    methods[RAW_FTS5] = lambda i: raw(qtexts[i])
    cpu: dict[str, list[float]] = {}
    times = await interleaved(methods, queries, cpu)
    # Recall of the vector path against numpy (both exact: expect 1.0).
    agree = []
    for i in range(min(queries, 20)):
        ours = [h.record.text for h in await vector.search(qtexts[i], scope=user, k=K)]
        ref = [texts[j] for j in numpy_topk(matrix, qvecs[i])]
        agree.append(len(set(ours) & set(ref)) / K)
    for m in (hybrid, vector, keyword, *([bare] if bare is not None else [])):
        await m.aclose()
    # Ratios are to the faster numpy variant of this run.
    base = min(median_ms(t) for name, t in times.items() if name.startswith("numpy"))
    rows = [
        [name, n, median_ms(t), sorted(t)[int(len(t) * 0.95) - 1] * 1000, median_ms(t) / base]
        for name, t in times.items()
    ]
    med = {name: median_ms(t) for name, t in times.items()}
    used = {name: median_ms(t) for name, t in cpu.items()}
    info = {
        "cold_vector_ms": cold * 1000,
        "recall_vs_numpy": statistics.mean(agree),
        "floors": [
            n,
            med[RAW_FTS5],
            med["keyword (FTS5 BM25)"],
            med["keyword (FTS5 BM25)"] / med[RAW_FTS5],
            med["vector (cosine)"],
            med["hybrid (score fusion + neighbours)"],
            med["hybrid (score fusion + neighbours)"] / max(med["keyword (FTS5 BM25)"], med["vector (cosine)"]),
        ],
        "floors_cpu": [
            n,
            used[RAW_FTS5],
            used["keyword (FTS5 BM25)"],
            used["keyword (FTS5 BM25)"] / max(used[RAW_FTS5], 1e-9),
            used["vector (cosine)"],
            used["hybrid (score fusion + neighbours)"],
            used["hybrid (score fusion + neighbours)"]
            / max(used["keyword (FTS5 BM25)"], used["vector (cosine)"], 1e-9),
        ],
    }
    if bare is not None:
        slower = max(med["keyword (FTS5 BM25)"], med["vector (cosine)"])
        info["plain"] = [
            n,
            slower,
            med["hybrid (score fusion + neighbours)"],
            med["hybrid (score fusion + neighbours)"] / slower,
            med[PLAIN_HYBRID],
            med[PLAIN_HYBRID] / slower,
        ]
    return rows, info


# -- 3. tenant test --------------------------------------------------------------------


async def fill(memory: GuardedMemory[SQLiteStore], chunks: Iterator[list[MemoryRecord]]) -> None:
    for chunk in chunks:
        await memory.add(chunk)


async def bench_tenant(
    corpus: Corpus, mine_n: int, others: int, queries: int, folder: Path, reps: int = 1, keep: Path | None = None
) -> list[list[Any]]:
    """One user's records alone and among ``others``; ``keep``: build the two files there once, reuse them after."""
    if keep is not None:
        folder = keep
        folder.mkdir(parents=True, exist_ok=True)
    alone_path, shared_path = folder / "tenant-alone.db", folder / "tenant-shared.db"
    saved = folder / "tenant-queries.json"
    me = MemoryScope(user_id="me")
    embedder = LookupEmbedder()
    if keep is not None and saved.exists():
        kept = json.loads(saved.read_text())
        if (kept["mine"], kept["others"]) != (mine_n, others) or len(kept["queries"]) < queries:
            raise SystemExit(f"{folder} holds a tenant test of other sizes; use another --keep folder")
        qtexts = kept["queries"][:queries]
        embedder.put(qtexts, np.asarray(kept["vectors"][:queries], dtype=np.float32))
    else:
        for path in (alone_path, shared_path):
            remove(path)
        qtexts = await build_tenant(corpus, embedder, mine_n, others, queries, alone_path, shared_path, me)
        if keep is not None:
            vectors = [embedder.table[q].tolist() for q in qtexts]
            saved.write_text(json.dumps({"mine": mine_n, "others": others, "queries": qtexts, "vectors": vectors}))
    modes = {}
    for label, path in (("alone", alone_path), ("shared", shared_path)):
        for mode in ("keyword", "vector", "hybrid"):
            modes[(label, mode)] = SQLiteMemory(path, embedder=embedder, search_mode=mode)
            await modes[(label, mode)].search(qtexts[0], scope=me, k=K)  # warm the vector cache
    methods: dict[str, Callable[[int], Any]] = {
        f"{mode}|{label}": (lambda i, m=m: m.search(qtexts[i], scope=me, k=K)) for (label, mode), m in modes.items()
    }
    # Interleaved query by query, repeated: every figure is a median over reps x queries.
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(reps):
        for name, samples in (await interleaved(methods, queries)).items():
            times[name] += samples
    for m in modes.values():
        await m.aclose()
    rows = []
    for mode in ("keyword", "vector", "hybrid"):
        a, s = median_ms(times[f"{mode}|alone"]), median_ms(times[f"{mode}|shared"])
        rows.append([mode, mine_n, others, a, s, s / a])
    return rows


async def build_tenant(
    corpus: Corpus,
    embedder: LookupEmbedder,
    mine_n: int,
    others: int,
    queries: int,
    alone_path: Path,
    shared_path: Path,
    me: MemoryScope,
) -> list[str]:
    """Write the tenant test's two files; return the queries (their vectors are in ``embedder``)."""
    texts = corpus.texts(mine_n)
    vectors = corpus.vectors(mine_n)
    embedder.put(texts, vectors)
    qtexts = [corpus.query(texts[corpus.rng.randrange(mine_n)]) for _ in range(queries)]
    embedder.put(qtexts, corpus.vectors(queries))
    alone = SQLiteMemory(alone_path, embedder=embedder)
    await alone.add(records(lambda i: me, texts))
    shared = SQLiteMemory(shared_path, embedder=embedder)
    # My records are spread through the file among 1,000 other users' records.
    other_vectors = corpus.vectors(20_000)
    mine = records(lambda i: me, texts)
    per_chunk = max(1, -(-mine_n * BATCH // (others + mine_n)))  # my share of each batch
    at = pos = 0
    while at < others:
        n = min(BATCH - per_chunk, others - at)
        chunk_texts = corpus.texts(n)
        embedder.put(chunk_texts, other_vectors[np.arange(at, at + n) % len(other_vectors)])
        chunk = records(lambda i, base=at: MemoryScope(user_id=f"user{(base + i) % 1000}"), chunk_texts)
        chunk.extend(mine[pos : pos + per_chunk])
        pos += per_chunk
        await shared.add(chunk)
        embedder.table = {t: embedder.table[t] for t in (*texts, *qtexts)}  # keep RAM flat
        at += n
    for i in range(pos, len(mine), BATCH):
        await shared.add(mine[i : i + BATCH])
    await alone.aclose()
    await shared.aclose()
    embedder.table = {t: embedder.table[t] for t in qtexts}
    return qtexts


def remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def scratch(folder: str | None) -> Path:
    path = Path(folder or tempfile.mkdtemp(prefix="memoryport-bench-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def write(path: str, text: str) -> None:
    Path(path).write_text(text)


# -- main --------------------------------------------------------------------------------


async def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sqlite_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--add-sizes", type=int, nargs="+", default=None, help="default: --sizes without 1M")
    parser.add_argument("--tenant-others", type=int, default=100_000)
    parser.add_argument("--tenant-mine", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--reps", type=int, default=1, help="tenant test: interleaved passes over the queries")
    parser.add_argument("--keep", default=None, help="tenant test: build its files in this folder once, reuse them")
    parser.add_argument("--runs", type=int, default=3, help="add-throughput runs per kind")
    parser.add_argument("--vec0-max", type=int, default=100_000, help="largest size compared with sqlite-vec")
    parser.add_argument("--only", choices=["add", "search", "tenant"], nargs="+", default=["add", "search", "tenant"])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that the harness runs")
    parser.add_argument(
        "--plain-hybrid", action="store_true", help="search: also hybrid with every contextual step off (its floor)"
    )
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", default=None, help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.tenant_mine, args.tenant_others, args.queries, args.runs = [2_000], 2_000, 5_000, 8, 1
    add_sizes = args.add_sizes or [s for s in args.sizes if s <= 100_000]
    folder = scratch(args.dir)
    corpus = Corpus()
    out: list[str] = []

    def emit(text: str) -> None:
        print(text, flush=True)
        out.append(text)

    probe = SQLiteMemory(folder / "probe.db")
    probe_sqlite = f"{probe.store.stats()['sqlite_version']} ({probe.store.driver_name})"
    emit(
        f"Python {platform.python_version()}, SQLite {probe_sqlite}, numpy {np.__version__}, "
        f"{os.cpu_count()} cores, text source: {'LoCoMo word counts' if LOCOMO.exists() else 'Zipf pseudo-words'}, "
        f"command: `python -m benchmarks.sqlite_bench {' '.join(argv if argv is not None else sys.argv[1:])}`"
    )
    await probe.aclose()
    try:
        if "add" in args.only:
            rows = []
            for n in add_sizes:
                rows += await bench_add(corpus, n, args.runs, folder)
            emit("\n### Add throughput (records/s, batches of 10,000, through the public API unless said)\n")
            emit(table(["kind", "records", "median /s", "min /s", "max /s", "runs"], rows))
        if "search" in args.only:
            await search_section(args, corpus, folder, emit)
        if "tenant" in args.only:
            keep = Path(args.keep) if args.keep else None
            rows = await bench_tenant(
                corpus, args.tenant_mine, args.tenant_others, args.queries, folder, args.reps, keep
            )
            emit(
                f"\n### Tenant test: one user's {args.tenant_mine:,} records alone vs among "
                f"{args.tenant_others:,} others' (k={K}, {args.queries} queries x {args.reps} interleaved passes)\n"
            )
            emit(table(["mode", "my records", "other records", "alone ms", "shared ms", "ratio"], rows))
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    text = "\n".join(out) + "\n"
    if args.out:
        write(args.out, text)
    return text


async def search_section(args: argparse.Namespace, corpus: Corpus, folder: Path, emit: Callable[[str], None]) -> None:
    rows: list[list[Any]] = []
    infos: list[list[Any]] = []
    floors: list[list[Any]] = []
    plains: list[list[Any]] = []
    floors_cpu: list[list[Any]] = []
    for n in args.sizes:
        r, info = await bench_search(
            corpus, n, args.queries, folder, with_vec0=n <= args.vec0_max, plain=args.plain_hybrid
        )
        rows += r
        infos.append([n, info["cold_vector_ms"], info["recall_vs_numpy"]])
        floors.append(info["floors"])
        floors_cpu.append(info["floors_cpu"])
        if "plain" in info:
            plains.append(info["plain"])
        for f in (folder / f"search-{n}.db", folder / f"vec0-{n}.db"):
            remove(f)
    emit(f"\n### Search latency, one user holding every record, k={K}, {DIM}-d ({args.queries} queries)\n")
    emit(table(["method", "records", "median ms", "p95 ms", "x best numpy"], rows))
    emit("\nFirst vector search after opening (reads the scope's vectors into RAM), and recall@10 vs numpy:\n")
    emit(table(["records", "cold first search ms", "recall@10 vs numpy"], infos))
    emit("\nKeyword against its floor (raw FTS5 bm25() top-10, same words, same file) and hybrid against its halves:\n")
    emit(
        table(
            ["records", "raw FTS5 ms", "keyword ms", "keyword / raw", "vector ms", "hybrid ms", "hybrid / slower half"],
            floors,
        )
    )
    emit(
        "\nThe same calls in process CPU time (medians; every thread of the process: waits for a busy machine's"
        " scheduler do not count, but OpenBLAS's helper threads spin after each product and their CPU lands on"
        " whichever call comes next, so read this table from a run with OPENBLAS_NUM_THREADS=1):\n"
    )
    header = ["records", "raw FTS5 CPU ms", "keyword CPU ms", "keyword / raw", "vector CPU ms", "hybrid CPU ms"]
    emit(table([*header, "hybrid / slower half"], floors_cpu))
    if plains:
        emit(
            "\nHybrid with every contextual step off (neighbours, contextual keys, previous turn, sessions, dates,"
            " speakers, when, length): the two halves' candidates fused, nothing else (wall medians):\n"
        )
        emit(
            table(
                ["records", "slower half ms", "hybrid ms", "hybrid / slower half", "fusion only ms",
                 "fusion only / slower half"],
                plains,
            )
        )


if __name__ == "__main__":
    asyncio.run(main())
