"""Vector search at both ends of the scale: the fixed cost at 10k, and one scope of a million (issue 17, goals 5-6).

Run from the repository root::

    python -m benchmarks.sqlite_ann_bench fixed --n 10000 --queries 300
    python -m benchmarks.sqlite_ann_bench build --n 1000000 --dir /tmp/ann-1m       # once: the file, reused
    python -m benchmarks.sqlite_ann_bench million --dir /tmp/ann-1m --queries 200
    python -m benchmarks.sqlite_ann_bench million --dir /tmp/ann-1m --data real     # real-ish embeddings
    python -m benchmarks.sqlite_ann_bench peers --dir /tmp/ann-1m --peers hnswlib usearch  # once: peers' indexes
    python -m benchmarks.sqlite_ann_bench processes --dir /tmp/ann-1m --procs 3 --queries 100  # memory per process
    python -m benchmarks.sqlite_ann_bench --quick                                    # a smoke run, seconds

``fixed``: one user's ``n`` records; the public vector search, the store
without its guard, and numpy brute force over the same matrix (``einsum``, one
thread, BLAS ``X @ q``, and with numpy >= 2 ``vecdot``, one thread: the loop the
store's own product runs at 64 dimensions or more), interleaved query by query; then where one
search's time goes (thread CPU time of each step run alone, on this thread).
Every side starts from the query's text: numpy's rows get its vector from the
same (lookup) embedder as the store does, awaited, then rank it as given (the
store also normalises and checks it: its own work, counted).

``build``: a file of ``n`` records of one user with the ``sqlite_bench``
corpus (LoCoMo-like sentences, 384-d unit vectors around 1,000 centroids), or
with ``--data real``, real-ish vectors: sums of two all-MiniLM-L6-v2
embeddings of LoCoMo turns, normalised (the performance probe's ``mix``; needs
the LoCoMo embedding cache of ``benchmarks/locomo.py --cache``). The vectors and
200 queries are saved beside it; ground truth is exact top-10 by numpy.

``profile``: each step of one search through the index of the built file
(wall clock and thread CPU time, medians of warm queries).

``million``: opening the file and the first search in a fresh process (and its
resident memory), building the index, then vector search through the index
against the exact scan (recall@10 against numpy), keyword and hybrid, and the
same vectors in FAISS (IVF-Flat, HNSW), hnswlib and usearch when installed
(``pip install faiss-cpu hnswlib usearch``), interleaved where they fit in RAM.

``processes``: ``--procs`` processes open the built file at once, each does
``--queries`` vector searches through the index and reports its memory from
``/proc/<pid>/smaps_rollup`` while all of them are still open (Rss, Pss, private
anonymous pages, the shared segments' and the file's proportional shares) and
its median latency; once with the index's lists private to each process
(``MEMORYPORT_SHARE_INDEX=off``), once shared through tmpfs (``--share`` picks one).

``peers``: builds the peers' indexes over the built file's vectors and saves
them in ``DIR/peers/`` with their build time, so that ``million`` loads them in
seconds instead of rebuilding them (a 1M HNSW build takes tens of minutes on
two cores: build it niced while the machine is busy, compare when it is
quiet). ``million`` saves what it builds there too. Delete the folder to
rebuild.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import ANN_THRESHOLD, SQLiteStore

from .sqlite_bench import BATCH, DIM, Corpus, LookupEmbedder, interleaved, median_ms, table
from .sqlite_bench import numpy_topk as topk  # numpy's brute force, the same in both benchmarks

K = 10
USER = MemoryScope(user_id="bench")
LOCOMO_CACHE = Path(os.environ.get("MEMORYPORT_LOCOMO_CACHE", "/tmp/ann/locomo-cache"))


def rss_mb() -> float:
    """This process's resident memory now (Linux: /proc), else its peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def private_mb() -> tuple[float, float]:
    """(private, file-backed) resident MB of this process (Linux: RssAnon and RssFile), else (nan, nan).

    File-backed pages (the SQLite file mapped by ``mmap_size``) are the OS page
    cache, shared with every other process reading the file; private pages are
    this process's own (Python, numpy arrays, the caches).
    """
    found: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile"):
                    found[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return found.get("RssAnon", float("nan")), found.get("RssFile", float("nan"))


def save(path: Path, text: str) -> None:
    path.write_text(text)


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


# -- goal 6: the fixed cost ---------------------------------------------------------------


async def fixed(n: int, queries: int, folder: Path) -> list[str]:
    corpus = Corpus()
    texts = corpus.texts(n)
    vectors = corpus.vectors(n)
    embedder = LookupEmbedder()
    embedder.put(texts, vectors)
    qtexts = [f"q{i} " + corpus.query(texts[i % n]) for i in range(queries)]
    qvecs = corpus.vectors(queries)
    embedder.put(qtexts, qvecs)
    path = folder / f"fixed-{n}.db"
    memory = SQLiteMemory(path, embedder=embedder, search_mode="vector")
    for i in range(0, n, BATCH):
        await memory.add([MemoryRecord(scope=USER, text=t) for t in texts[i : i + BATCH]])
    store = memory.store
    matrix = vectors.copy()

    async def brute(i: int, blas: bool | str) -> Any:
        # The same work as memoryport's side up to the ranking: the query's text through the same
        # embedder (here a lookup: np.stack of one row), awaited; numpy then ranks its row as given.
        qvec = (await embedder.embed([qtexts[i]]))[0]
        return topk(matrix, qvec, blas=blas)

    methods: dict[str, Callable[[int], Any]] = {
        "memoryport vector search (public API)": lambda i: memory.search(qtexts[i], scope=USER, k=K),
        "memoryport store alone (no guard)": lambda i: store.search(qtexts[i], scope=USER, k=K, filters=None),
        "numpy brute force (einsum, 1 thread)": lambda i: brute(i, blas=False),
        "numpy brute force (X @ q, BLAS)": lambda i: brute(i, blas=True),
    }
    if hasattr(np, "vecdot"):  # numpy >= 2: what the store's product runs at 64 dimensions or more
        methods["numpy brute force (vecdot, 1 thread)"] = lambda i: brute(i, blas="vecdot")
    times = await interleaved(methods, queries)
    base = min(median_ms(t) for name, t in times.items() if name.startswith("numpy"))
    rows = [
        [name, n, median_ms(t), sorted(t)[int(len(t) * 0.95) - 1] * 1000, median_ms(t) / base]
        for name, t in times.items()
    ]
    out = [f"\n### Fixed cost: vector search of {n:,} records, k={K}, {queries} interleaved queries\n"]
    out.append(table(["method", "records", "median ms", "p95 ms", "x best numpy"], rows))
    out += await profile_steps(memory, store, qtexts, qvecs, matrix)
    await memory.aclose()
    return out


async def profile_steps(
    memory: GuardedMemory[SQLiteStore], store: SQLiteStore, qtexts: list[str], qvecs: Any, matrix: Any
) -> list[str]:
    """Thread CPU time of each step of one search, run on this thread (no scheduler waits counted)."""
    from memoryport.adapters.sqlite._rows import record_from_row
    from memoryport.adapters.sqlite._search import rows_by_rid, search_hits
    from memoryport.adapters.sqlite._vectors import embed

    loop = asyncio.get_running_loop()
    rids = list(range(1, K + 1))
    conn = store.db.conn()

    def hop() -> Any:
        return loop.run_in_executor(store._pool, lambda: None)

    steps: dict[str, Callable[[int], Any]] = {
        "public search, whole": lambda i: memory.search(qtexts[i], scope=USER, k=K),
        "embed the query (a lookup, normalised and checked)": lambda i: embed(store.embedder, [qtexts[i]]),  # type: ignore[arg-type]
        "read transaction + exact ranking (numpy)": lambda i: store.db.read(
            lambda c: store.vectors.ranking_job(c, qvecs[i], USER, K, None, 0)()
        ),
        "read transaction + ranking + 10 records and hits": lambda i: store.db.read(
            lambda c: search_hits(store, c, qtexts[i], qvecs[i], "vector", USER, K, None)
        ),
        "10 records by rid, built": lambda i: [record_from_row(r) for r in rows_by_rid(conn, rids).values()],
        "numpy einsum + argpartition alone": lambda i: topk(matrix, qvecs[i], blas=False),
        "numpy vecdot + argpartition alone": lambda i: topk(matrix, qvecs[i], blas="vecdot"),
        "an empty hop to a worker thread and back (wall)": lambda i: hop(),
    }
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(len(qtexts)):
        for name, fn in steps.items():
            wall = "wall" in name
            start = time.perf_counter() if wall else time.thread_time()
            result = fn(i)
            if asyncio.iscoroutine(result) or asyncio.isfuture(result):
                await result
            cpu[name].append((time.perf_counter() if wall else time.thread_time()) - start)
    rows = [[name, median_ms(t)] for name, t in cpu.items()]
    return [
        "\nWhere one search's time goes (median thread CPU ms of each step run alone on the caller's thread; "
        "the hop is wall time):\n",
        table(["step", "ms"], rows),
    ]


# -- goal 5: a million in one scope --------------------------------------------------------


def real_vectors(n: int, rng: np.random.Generator) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Sums of two real MiniLM embeddings of LoCoMo turns, normalised; queries: real embeddings held out."""
    files = sorted(LOCOMO_CACHE.glob("*.npz"))
    if not files:
        raise SystemExit(f"no embedding cache in {LOCOMO_CACHE}: run benchmarks/locomo.py --cache {LOCOMO_CACHE}")
    with np.load(files[0]) as z:
        rows = np.asarray(z["rows"], dtype=np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    order = rng.permutation(len(rows))
    held, pool = rows[order[:200]], rows[order[200:]]
    out = np.empty((n, rows.shape[1]), dtype=np.float32)
    for at in range(0, n, 100_000):
        m = min(100_000, n - at)
        v = pool[rng.integers(0, len(pool), m)] + pool[rng.integers(0, len(pool), m)]
        out[at : at + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out, held


def fresh_folder(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / name).exists():
        raise SystemExit(f"{folder / name} exists; remove it to build again")
    return folder / name


async def build(n: int, folder: Path, data: str) -> None:
    path = fresh_folder(folder, f"{data}.db")
    corpus = Corpus()
    rng = np.random.default_rng(11)
    real = real_vectors(n, rng) if data == "real" else None
    vectors = np.lib.format.open_memmap(folder / f"{data}-vectors.npy", mode="w+", dtype=np.float32, shape=(n, DIM))
    embedder = LookupEmbedder()
    memory = SQLiteMemory(path, embedder=embedder, ann_threshold=None)
    start = time.perf_counter()
    for at in range(0, n, BATCH):
        m = min(BATCH, n - at)
        texts = [f"{at + i} {t}" for i, t in enumerate(corpus.texts(m))]
        vectors[at : at + m] = corpus.vectors(m) if real is None else real[0][at : at + m]
        embedder.table = {}
        embedder.put(texts, vectors[at : at + m])
        await memory.store.add([MemoryRecord(id=f"r{at + i}", scope=USER, text=t) for i, t in enumerate(texts)])
        if at % 100_000 == 0:
            print(f"{at:,} records, {time.perf_counter() - start:.0f} s", flush=True)
    vectors.flush()
    qvecs = corpus.vectors(200) if real is None else real[1]
    qtexts = [corpus.query(corpus.texts(1)[0]) for _ in range(200)]
    np.save(folder / f"{data}-queries.npy", qvecs)
    save(folder / f"{data}-queries.json", json.dumps(qtexts))
    print(f"written in {time.perf_counter() - start:.0f} s", flush=True)
    await memory.aclose()
    await prepare(folder, data)


async def prepare(folder: Path, data: str) -> None:
    """The exact top-10 of the queries (numpy) and the index of the built file, timed."""
    print(f"exact top-{K} of the queries ...", flush=True)
    truth = topk_chunked(NpyRows(folder / f"{data}-vectors.npy"), np.load(folder / f"{data}-queries.npy"))
    np.save(folder / f"{data}-truth.npy", truth)
    memory = SQLiteMemory(folder / f"{data}.db", embedder=LookupEmbedder(), ann_threshold=None)
    start = time.perf_counter()
    built = await memory.store.build_index(USER)
    seconds = time.perf_counter() - start
    save(folder / f"{data}-build.json", json.dumps({"indexed": built, "seconds": seconds}))
    print(f"index of {built:,} vectors built in {seconds:.0f} s", flush=True)
    await memory.aclose()


def index_recall(n: int, data: str, queries: int) -> list[str]:
    """Recall@10 of the index's algorithm (same code and parameters, vectors in RAM, no SQLite) at ``n``."""
    from memoryport.adapters.sqlite import _ann

    rng = np.random.default_rng(11)
    if data == "real":
        vectors, qvecs = real_vectors(n, rng)
    else:
        corpus = Corpus()
        vectors = np.concatenate([corpus.vectors(min(100_000, n - at)) for at in range(0, n, 100_000)])
        qvecs = corpus.vectors(queries)
    qvecs = qvecs[:queries]
    truth = topk_chunked(vectors, qvecs)
    start = time.perf_counter()
    nlist = _ann.nlist_for(n)
    size = min(n, max(40 * nlist, 20_000))
    centroids = _ann.kmeans(vectors[np.sort(rng.choice(n, size, replace=False))], nlist)
    lists = _ann._nearest(vectors, centroids)
    codes = _ann.codes_of(vectors)
    fine, scales = _ann.fine_of(vectors)
    seconds = time.perf_counter() - start
    order = np.argsort(lists, kind="stable")
    bounds = np.searchsorted(lists[order], np.arange(nlist + 1))
    rows = []
    for probe in (0.03, 0.05, 0.08):
        for wide, rerank in ((512, 32), (1024, 32), (2048, 32), (1024, 64)):
            share = max(probe, _ann.MIN_SCAN / n)
            nprobe = min(nlist, max(_ann.MIN_PROBE, int(np.ceil(nlist * share))))
            found, scanned, listed = [], [], []
            for q in qvecs:
                best = np.argpartition(-(centroids @ q), nprobe - 1)[:nprobe]
                cand = np.concatenate([order[bounds[b] : bounds[b + 1]] for b in best])
                scanned.append(len(cand))
                listed.append(len(set(cand.tolist()) & set(truth[len(found)].tolist())) / K)
                near = cand[_ann.shortlist(np.ascontiguousarray(codes[cand].T), q, max(wide, 40 * K))]
                estimate = _ann.mv(fine[near], q) * scales[near]
                pick = near[np.argsort(-estimate, kind="stable")[: max(rerank, 3 * K)]]
                found.append(pick[topk(vectors[pick], q)])
            rows.append(
                [
                    probe,
                    nprobe,
                    wide,
                    rerank,
                    int(np.mean(scanned)),
                    f"{np.mean(listed):.3f}",
                    f"{recall(found, truth):.3f}",
                ]
            )
    return [
        f"\n### Recall@10 of the index's algorithm, {n:,} {data} vectors, {len(qvecs)} queries "
        f"(nlist {nlist}; k-means + assignment + codes {seconds:.0f} s)\n",
        table(
            [
                "probe share",
                "lists scanned",
                "Hamming shortlist",
                "re-ranked exactly",
                "codes scanned",
                "top-10 in the lists",
                "recall@10",
            ],
            rows,
        ),
    ]


class NpyRows:
    """Rows of a 2-d .npy file read on demand (slices only): RAM stays at one chunk, no memory map."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with open(path, "rb") as f:
            major, _ = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(f)
            self.offset = f.tell()
        self.shape, self.dtype = shape, np.dtype(dtype)

    def __len__(self) -> int:
        return int(self.shape[0])

    def __getitem__(self, rows: slice) -> np.ndarray[Any, Any]:
        start, stop, _ = rows.indices(len(self))
        width = int(self.shape[1])
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * width * self.dtype.itemsize)
            flat = np.fromfile(f, dtype=self.dtype, count=(stop - start) * width)
        return flat.reshape(stop - start, width)


def topk_chunked(matrix: Any, q: np.ndarray[Any, Any], chunk: int = 100_000) -> np.ndarray[Any, Any]:
    """Exact top-k of each row of ``q`` (a batch of queries), streaming ``matrix`` once in chunks."""
    queries = np.atleast_2d(q)
    best_scores = np.full((len(queries), K), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), K), dtype=np.int64)
    for at in range(0, len(matrix), chunk):
        scores = queries @ np.asarray(matrix[at : at + chunk]).T  # (queries, chunk)
        ids = np.broadcast_to(np.arange(at, at + scores.shape[1]), scores.shape)
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_ids = np.concatenate([best_ids, ids], axis=1)
        top = np.argpartition(-merged_scores, K - 1, axis=1)[:, :K]
        best_scores = np.take_along_axis(merged_scores, top, axis=1)
        best_ids = np.take_along_axis(merged_ids, top, axis=1)
    order = np.argsort(-best_scores, axis=1)
    out: np.ndarray[Any, Any] = np.take_along_axis(best_ids, order, axis=1)
    return out if q.ndim == 2 else out[0]


OPEN_SCRIPT = """
import asyncio, json, sys, time
import numpy as np
start = time.perf_counter()
from memoryport import SQLiteMemory, MemoryScope
from benchmarks.sqlite_bench import LookupEmbedder
from benchmarks.sqlite_ann_bench import private_mb, rss_mb
path, queries, threshold, mode, text = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
q = np.load(queries)[0]
emb = LookupEmbedder(); emb.put([text], q[None, :])
t0 = time.perf_counter()
limit = None if threshold == "none" else int(threshold)
memory = SQLiteMemory(path, embedder=emb, search_mode=mode, ann_threshold=limit)
t1 = time.perf_counter()
hits = asyncio.run(memory.search(text, scope=MemoryScope(user_id="bench"), k=10))
t2 = time.perf_counter()
times = {"open_ms": (t1 - t0) * 1000, "first_search_ms": (t2 - t1) * 1000}
anon, mapped = private_mb()
print(json.dumps({**times, "rss_mb": rss_mb(), "anon_mb": anon, "file_mb": mapped, "hits": len(hits)}))
memory.close()
"""


PROCESS_SCRIPT = """
import asyncio, json, statistics, sys, time
import numpy as np
from memoryport import SQLiteMemory, MemoryScope
from benchmarks.sqlite_bench import LookupEmbedder
path, qfile, tfile, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
qvecs, qtexts = np.load(qfile)[:n], json.load(open(tfile))[:n]
emb = LookupEmbedder(); emb.put(qtexts, qvecs)
memory = SQLiteMemory(path, embedder=emb, search_mode="vector", ann_threshold=50_000)  # $MEMORYPORT_SHARE_INDEX
scope = MemoryScope(user_id="bench")

async def run():
    times = []
    for text in qtexts:
        t = time.perf_counter()
        await memory.search(text, scope=scope, k=10)
        times.append((time.perf_counter() - t) * 1000)
    return times

times = asyncio.run(run())
rollup = {}
for line in open("/proc/self/smaps_rollup"):
    key, _, value = line.partition(":")
    if value.strip().endswith("kB"):
        rollup[key.strip()] = int(value.split()[0]) / 1024
shared = getattr(memory.store.ann, "shared", None)
print(json.dumps({"median_ms": statistics.median(times), "first_ms": times[0], **rollup,
                  "attached": shared.attached if shared else 0, "published": shared.published if shared else 0}),
      flush=True)
sys.stdin.readline()  # measured while every process is still open: the parent says when to close
memory.close()
"""

SMAPS = ("Rss", "Pss", "Anonymous", "Pss_Anon", "Pss_Shmem", "Pss_File")


def processes(folder: Path, data: str, queries: int, procs: int, shares: Sequence[str]) -> list[str]:
    """``procs`` processes on the file at once, ``queries`` vector searches each: memory per process and summed."""
    path = folder / f"{data}.db"
    out = [f"\n### {procs} processes on one file, {queries} vector searches each (index, k={K})\n"]
    rows: list[list[Any]] = []
    tmpfs: list[str] = []
    for share in shares:
        started = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    PROCESS_SCRIPT,
                    str(path),
                    str(folder / f"{data}-queries.npy"),
                    str(folder / f"{data}-queries.json"),
                    str(queries),
                ],
                env={**os.environ, "MEMORYPORT_SHARE_INDEX": share},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).resolve().parents[1],
            )
            for _ in range(procs)
        ]
        got = []
        for proc in started:
            assert proc.stdout is not None
            got.append(json.loads(proc.stdout.readline()))
        if share == "on" and os.path.isdir("/dev/shm"):
            segments = [e for e in os.scandir("/dev/shm") if e.name.startswith("memoryport-")]
            size = sum(e.stat().st_size for e in segments) / 2**20
            tmpfs.append(f"{procs} processes sharing: {len(segments)} files of memoryport, {size:,.0f} MB")
        for proc in started:
            proc.communicate("\n", timeout=600)
        label = "shared (tmpfs)" if share == "on" else "private (MEMORYPORT_SHARE_INDEX=off)"
        for i, one in enumerate(got):
            rows.append(
                [
                    label,
                    f"process {i + 1}",
                    *[one.get(k, float("nan")) for k in SMAPS],
                    one["published"],
                    one["attached"],
                    one["median_ms"],
                ]
            )
        rows.append(
            [
                label,
                "sum",
                *[sum(one.get(k, 0.0) for one in got) for k in SMAPS],
                sum(o["published"] for o in got),
                sum(o["attached"] for o in got),
                "",
            ]
        )
    out.append(
        table(
            [
                "lists",
                "process",
                "Rss MB",
                "Pss MB",
                "private anon MB",
                "Pss anon",
                "Pss shmem",
                "Pss file",
                "lists decoded to tmpfs",
                "lists mapped from tmpfs",
                "median ms",
            ],
            rows,
        )
    )
    out.append(
        f"\nFrom /proc/<pid>/smaps_rollup after the searches, all processes still open (load at the end: "
        f"{os.getloadavg()[0]:.1f}). Pss divides each shared page among the processes mapping it; the sum of Pss "
        "is what they hold together. Latencies are of processes searching at the same time on this machine, "
        "most of their lists read for the first time (cold)."
    )
    if tmpfs:
        out.append(f"In /dev/shm while they were open: {'; '.join(tmpfs)}.")
    return out


def fresh_process(
    path: Path, queries: Path, threshold: str, mode: str = "vector", text: str = "first query"
) -> dict[str, Any]:
    """Open the file and search once in a new process (``mode``, query ``text``): what a restarted application pays."""
    out = subprocess.run(
        [sys.executable, "-c", OPEN_SCRIPT, str(path), str(queries), threshold, mode, text],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def recall(found: Sequence[Sequence[int]], truth: np.ndarray[Any, Any]) -> float:
    return float(np.mean([len(set(map(int, f)) & set(t.tolist())) / K for f, t in zip(found, truth, strict=False)]))


async def million(folder: Path, data: str, queries: int, exact: bool, peers: Sequence[str]) -> list[str]:
    path = folder / f"{data}.db"
    qvecs = np.load(folder / f"{data}-queries.npy")[:queries]
    qtexts = load_json(folder / f"{data}-queries.json")[:queries]
    truth = np.load(folder / f"{data}-truth.npy")[:queries]
    built = load_json(folder / f"{data}-build.json")
    out = [f"\n### One scope of {built['indexed']:,} records ({data} vectors), k={K}, {queries} queries\n"]
    cold = fresh_process(path, folder / f"{data}-queries.npy", "50000")

    def cold_row(label: str, cold: dict[str, Any]) -> list[Any]:
        return [label, cold["open_ms"], cold["first_search_ms"], cold["rss_mb"], cold["anon_mb"], cold["file_mb"]]

    rows = [cold_row("with the index (ann_threshold=50,000)", cold)]
    for mode in ("keyword", "hybrid"):  # the first keyword search reads the records' lengths (_keyword_large)
        rows.append(
            cold_row(
                f"{mode}, first query", fresh_process(path, folder / f"{data}-queries.npy", "50000", mode, qtexts[0])
            )
        )
    if exact:
        cold_exact = fresh_process(path, folder / f"{data}-queries.npy", "none")
        rows.append(cold_row("exact (ann_threshold=None)", cold_exact))
    out.append("Opening the file and the first vector search, in a fresh process:\n")
    out.append(
        table(["search", "open ms", "first search ms", "resident MB after", "private MB", "file-mapped MB"], rows)
    )
    out.append(
        f"\nIndex build: {built['seconds']:.0f} s for {built['indexed']:,} vectors (k-means, assignment, one write)."
    )

    embedder = LookupEmbedder()
    embedder.put(qtexts, qvecs)
    memories = {
        mode: SQLiteMemory(path, embedder=embedder, search_mode=mode, ann_threshold=ANN_THRESHOLD)
        for mode in ("vector", "keyword", "hybrid")
    }
    rss0, (anon0, file0) = rss_mb(), private_mb()
    await memories["vector"].search(qtexts[0], scope=USER, k=K)
    methods: dict[str, Callable[[int], Any]] = {
        "memoryport vector (index)": lambda i: memories["vector"].search(qtexts[i], scope=USER, k=K),
        "memoryport keyword (FTS5 BM25)": lambda i: memories["keyword"].search(qtexts[i], scope=USER, k=K),
        "memoryport hybrid (index + FTS5)": lambda i: memories["hybrid"].search(qtexts[i], scope=USER, k=K),
    }
    ids: dict[str, list[list[int]]] = {}

    # Records were added in order: record rid - 1 is row rid - 1 of the vectors file.
    position = dict(
        memories["vector"].store.db.read(lambda conn: conn.execute("SELECT id, rid - 1 FROM records").fetchall())
    )

    async def ours(i: int) -> list[int]:
        hits = await memories["vector"].search(qtexts[i], scope=USER, k=K)
        return [int(position[h.record.id]) for h in hits]

    ids["memoryport vector (index)"] = [await ours(i) for i in range(queries)]
    index_rss = rss_mb() - rss0
    anon1, file1 = private_mb()
    notes: list[str] = []
    skipped: list[str] = []
    matrix = None
    if exact or peers:  # 1.5 GB at 1M: only when something is compared with numpy
        matrix = np.ascontiguousarray(np.load(folder / f"{data}-vectors.npy"))
        methods["numpy brute force (X @ q, BLAS)"] = lambda i: topk(matrix, qvecs[i])
    rounds: list[tuple[str, dict[str, Callable[[int], Any]]]] = [("memoryport, all modes", methods)]
    exact_memory = None
    if exact:
        exact_memory = SQLiteMemory(path, embedder=embedder, search_mode="vector", ann_threshold=None)
        await exact_memory.search(qtexts[0], scope=USER, k=K)
        rounds.append(
            (
                "exact scan",
                {
                    "memoryport vector (index)": methods["memoryport vector (index)"],
                    "memoryport vector, exact scan (ann_threshold=None)": lambda i: exact_memory.search(
                        qtexts[i], scope=USER, k=K
                    ),  # type: ignore[union-attr]
                    "numpy brute force (X @ q, BLAS)": methods["numpy brute force (X @ q, BLAS)"],
                },
            )
        )
    rows: list[list[Any]] = []
    for label, group in rounds:
        times = await interleaved(group, queries)
        rows += round_rows(label, times, ids, truth)
        if exact_memory is not None and label == "exact scan":
            await exact_memory.aclose()  # its 1.5 GB block goes before the peers' indexes come
            exact_memory = None
            gc.collect()
    for peer in peers:
        made = make_peer(peer, matrix, truth, qvecs, peer_folder(folder))
        if made is None:
            skipped.append(peer)
            continue
        name, search, note = made
        ids[name] = [list(search(i)) for i in range(queries)]
        notes.append(f"{name}: {note}")
        group = {
            "memoryport vector (index)": methods["memoryport vector (index)"],
            name: search,
            "numpy brute force (X @ q, BLAS)": methods["numpy brute force (X @ q, BLAS)"],
        }
        rows += round_rows(name, await interleaved(group, queries), ids, truth)
        del made, search, group
        gc.collect()
    out.append(
        f"\nSearch latency, interleaved query by query within each round (load at the end: {os.getloadavg()[0]:.1f}):\n"
    )
    out.append(table(["round", "method", "median ms", "p95 ms", "x numpy (round)", "recall@10 vs exact"], rows))
    out.append(
        f"\nResident memory: the index's centroids and lists read by {queries} queries added "
        f"{index_rss:,.0f} MB to this process: {anon1 - anon0:,.0f} MB private (the index's cache, shared by the "
        f"three stores of this process on the file) and {file1 - file0:,.0f} MB of the file's pages mapped (the OS "
        f"page cache, shared with other processes). A fresh process held {cold['rss_mb']:,.0f} MB after one search "
        f"({cold['anon_mb']:,.0f} MB private)."
    )
    out += [f"- {note}" for note in notes]
    if skipped:
        out.append(f"- not installed: {', '.join(skipped)} (`pip install faiss-cpu hnswlib usearch`)")
    for m in memories.values():
        await m.aclose()
    return out


async def profile_index(folder: Path, data: str, queries: int) -> list[str]:
    """Where one search through the index spends its time: each step of ``_ann.search``, wall and thread CPU."""
    import statistics

    from memoryport.adapters.sqlite import _ann

    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def timed(name: str) -> None:
        fn = getattr(_ann, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t, c = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall.setdefault(name, []).append(time.perf_counter() - t)
                cpu.setdefault(name, []).append(time.thread_time() - c)

        setattr(_ann, name, wrapper)

    steps = {
        "centroids_of": "centroids (cached after the first search)",
        "_lists": "probed lists (cached after the first search)",
        "shortlist": "shortlist (Hamming distance of the sign codes)",
        "estimate": "estimate (the shortlist's int8 codes)",
        "rerank": "re-rank: read the best estimates' records and vectors, rank",
        "search": "the whole index search",
    }
    for name in steps:
        timed(name)
    qvecs = np.load(folder / f"{data}-queries.npy")[:queries]
    qtexts = load_json(folder / f"{data}-queries.json")[:queries]
    embedder = LookupEmbedder()
    embedder.put(qtexts, qvecs)
    memory = SQLiteMemory(folder / f"{data}.db", embedder=embedder, search_mode="vector", ann_threshold=ANN_THRESHOLD)
    for i in range(queries):  # warm: centroids, lists and the re-ranked pages
        await memory.search(qtexts[i], scope=USER, k=K)
    wall.clear()
    cpu.clear()
    whole = []
    for i in range(queries):
        start = time.perf_counter()
        await memory.search(qtexts[i], scope=USER, k=K)
        whole.append(time.perf_counter() - start)
    await memory.aclose()
    rows = [
        [label, statistics.median(wall[name]) * 1000, statistics.median(cpu[name]) * 1000]
        for name, label in steps.items()
        if name in wall
    ]
    rows.append(["the public search (whole)", median_ms(whole), float("nan")])
    return [
        f"\n### One indexed search, step by step ({folder.name}, k={K}, {queries} warm queries; medians)\n",
        table(["step", "wall ms", "thread CPU ms"], rows),
    ]


def round_rows(
    label: str, times: dict[str, list[float]], ids: dict[str, list[list[int]]], truth: Any
) -> list[list[Any]]:
    numpy = times.get("numpy brute force (X @ q, BLAS)")
    base = median_ms(numpy) if numpy else float("nan")
    rows = []
    for name, t in times.items():
        if name in ids:
            r = f"{recall(ids[name], truth):.3f}"
        elif "exact" in name or "numpy" in name:
            r = "1 (exact)"
        else:
            r = ""
        rows.append([label, name, median_ms(t), sorted(t)[int(len(t) * 0.95) - 1] * 1000, median_ms(t) / base, r])
    return rows


def make_peer(
    peer: str, matrix: Any, truth: Any, qvecs: Any, saved: Path | None = None
) -> tuple[str, Callable[[int], Any], str] | None:
    """A peer index over the same vectors, tuned to reach recall@10 >= 0.95 where it can.

    With ``saved`` (a folder), an index saved there by an earlier build is loaded
    instead of built, and one that is built is saved there beside a JSON file with
    its build time (the note then says "built in N s, loaded from DIR").
    """
    start = time.perf_counter()
    index_file = saved / f"{peer}.index" if saved is not None else None
    meta_file = saved / f"{peer}.json" if saved is not None else None
    loaded = index_file is not None and meta_file is not None and index_file.exists() and meta_file.exists()

    def built_note() -> str:
        if loaded:
            assert meta_file is not None
            return f"built in {load_json(meta_file)['seconds']:.0f} s, loaded from {saved}"
        seconds = time.perf_counter() - start
        if meta_file is not None:
            meta_file.write_text(json.dumps({"seconds": seconds, "n": len(matrix)}))
        return f"built in {seconds:.0f} s"

    if peer == "faiss-ivf":
        try:
            import faiss
        except ImportError:
            return None
        nlist = 1024
        if loaded:
            index = faiss.read_index(str(index_file))
        else:
            quantizer = faiss.IndexFlatIP(matrix.shape[1])
            index = faiss.IndexIVFFlat(quantizer, matrix.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(matrix[np.random.default_rng(0).choice(len(matrix), min(50_000, len(matrix)), replace=False)])
            index.add(matrix)
            if index_file is not None:
                faiss.write_index(index, str(index_file))
        note = built_note()
        index.nprobe = tune(
            lambda p: setattr(index, "nprobe", p),
            lambda q: index.search(q[None, :], K)[1][0],
            qvecs,
            truth,
            [8, 16, 32, 64, 128],
        )
        return (
            "FAISS IVF-Flat",
            lambda i: index.search(qvecs[i][None, :], K)[1][0],
            f"nlist {nlist}, nprobe {index.nprobe}, {note}",
        )
    if peer == "faiss-hnsw":
        try:
            import faiss
        except ImportError:
            return None
        if loaded:
            index = faiss.read_index(str(index_file))
        else:
            index = faiss.IndexHNSWFlat(matrix.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 80
            index.add(matrix)
            if index_file is not None:
                faiss.write_index(index, str(index_file))
        note = built_note()
        ef = tune(
            lambda e: setattr(index.hnsw, "efSearch", e),
            lambda q: index.search(q[None, :], K)[1][0],
            qvecs,
            truth,
            [32, 64, 128, 256],
        )
        index.hnsw.efSearch = ef
        return (
            "FAISS HNSW",
            lambda i: index.search(qvecs[i][None, :], K)[1][0],
            f"M 32, efC 80, ef {ef}, {note}",
        )
    if peer == "hnswlib":
        try:
            import hnswlib
        except ImportError:
            return None
        index = hnswlib.Index(space="ip", dim=matrix.shape[1])
        if loaded:
            index.load_index(str(index_file), max_elements=len(matrix))
        else:
            index.init_index(max_elements=len(matrix), M=16, ef_construction=100)
            index.add_items(matrix, num_threads=2)
            if index_file is not None:
                index.save_index(str(index_file))
        note = built_note()
        ef = tune(index.set_ef, lambda q: index.knn_query(q, k=K)[0][0], qvecs, truth, [32, 64, 128, 256])
        index.set_ef(ef)
        return (
            "hnswlib HNSW",
            lambda i: index.knn_query(qvecs[i], k=K)[0][0],
            f"M 16, efC 100, ef {ef}, {note}",
        )
    if peer == "usearch":
        try:
            from usearch.index import Index
        except ImportError:
            return None
        index = Index(ndim=matrix.shape[1], metric="ip", dtype="f32", connectivity=16, expansion_add=100)
        if loaded:
            index.load(str(index_file))
        else:
            index.add(np.arange(len(matrix)), matrix, threads=2)
            if index_file is not None:
                index.save(str(index_file))
        note = built_note()

        def set_ef(e: int) -> None:
            index.expansion_search = e

        ef = tune(set_ef, lambda q: index.search(q, K).keys, qvecs, truth, [32, 64, 128, 256])
        set_ef(ef)
        return (
            "usearch HNSW (f32)",
            lambda i: index.search(qvecs[i], K).keys,
            f"M 16, efC 100, ef {ef}, {note}",
        )
    raise SystemExit(f"unknown peer {peer!r}")


def peer_folder(folder: Path) -> Path:
    """Where the peers' built indexes over ``folder``'s vectors are saved (``DIR/peers``)."""
    saved = folder / "peers"
    saved.mkdir(exist_ok=True)
    return saved


def build_peers(folder: Path, data: str, peers: Sequence[str]) -> list[str]:
    """Build (or find) each peer's index over the built file's vectors and save it for ``million``."""
    matrix = np.ascontiguousarray(np.load(folder / f"{data}-vectors.npy"))
    qvecs = np.load(folder / f"{data}-queries.npy")
    truth = np.load(folder / f"{data}-truth.npy")
    out = []
    for peer in peers:
        made = make_peer(peer, matrix, truth, qvecs, peer_folder(folder))
        out.append(f"- {peer}: " + ("not installed" if made is None else f"{made[0]}: {made[2]}"))
        del made
        gc.collect()
    return out


def tune(
    set_param: Callable[[int], Any], search: Callable[[Any], Any], qvecs: Any, truth: Any, values: Sequence[int]
) -> int:
    """The smallest value reaching recall@10 >= 0.95 on the first 50 queries (else the largest)."""
    for value in values:
        set_param(value)
        if recall([list(search(q)) for q in qvecs[:50]], truth[:50]) >= 0.95:
            return value
    return values[-1]


# -- main --------------------------------------------------------------------------------


async def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sqlite_ann_bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "what",
        nargs="?",
        choices=["fixed", "build", "prepare", "million", "recall", "profile", "peers", "processes"],
        default="fixed",
    )
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dir", default=None, help="folder of the built file (build, million)")
    parser.add_argument("--data", choices=["synth", "real"], default="synth")
    parser.add_argument("--no-exact", action="store_true", help="million: skip the exact scan and numpy (1.5 GB each)")
    parser.add_argument("--peers", nargs="*", default=[], help="faiss-ivf faiss-hnsw hnswlib usearch")
    parser.add_argument("--procs", type=int, default=3, help="processes: how many at once")
    parser.add_argument("--share", choices=["both", "on", "off"], default="both", help="processes: lists shared or not")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that the harness runs")
    parser.add_argument("--out", default=None, help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    lines = [
        f"Python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}, command: `python -m benchmarks.sqlite_ann_bench "
        f"{' '.join(argv if argv is not None else sys.argv[1:])}`"
    ]
    if args.quick:
        with tempfile.TemporaryDirectory() as tmp:
            lines += await fixed(2_000, 20, Path(tmp))
            await build(3_000, Path(tmp) / "m", "synth")
            lines += await million(Path(tmp) / "m", "synth", 20, exact=True, peers=[])
            lines += processes(Path(tmp) / "m", "synth", 5, 2, ["off", "on"])
    elif args.what == "fixed":
        with tempfile.TemporaryDirectory() as tmp:
            lines += await fixed(args.n, args.queries, Path(tmp))
    elif args.what == "build":
        await build(args.n, Path(args.dir or "ann-bench"), args.data)
    elif args.what == "recall":
        lines += index_recall(args.n, args.data, args.queries)
    elif args.what == "profile":
        lines += await profile_index(Path(args.dir or "ann-bench"), args.data, args.queries)
    elif args.what == "peers":
        lines += build_peers(Path(args.dir or "ann-bench"), args.data, args.peers)
    elif args.what == "processes":
        shares = ["off", "on"] if args.share == "both" else [args.share]
        lines += processes(Path(args.dir or "ann-bench"), args.data, args.queries, args.procs, shares)
    elif args.what == "prepare":
        await prepare(Path(args.dir or "ann-bench"), args.data)
    else:
        gc.collect()
        lines += await million(Path(args.dir or "ann-bench"), args.data, args.queries, not args.no_exact, args.peers)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        save(Path(args.out), text)
    return text


if __name__ == "__main__":
    asyncio.run(main())
