"""Adding one record: SQLiteMemory beside LangGraph's SqliteStore and sqlite-vec, in one run.

Run from the repository root::

    python -m benchmarks.sqlite_add_bench                      # the table (about a minute)
    python -m benchmarks.sqlite_add_bench --profile            # where one add's time goes, per step
    python -m benchmarks.sqlite_add_bench --quick              # a smoke run, seconds

Every system adds one record per call on top of ``--base`` records already in
its file (one user), keyword-only and with a given 384-d vector (a
precomputed-vector embedder: no model time). Calls are interleaved system by
system, rotating the order, so ratios share the machine's noise; medians and p95.

- **memoryport**: the public ``await memory.add([record])`` of ``SQLiteMemory``
  (the guard included), at ``durability="normal"`` and ``"full"``, and with
  ``write_behind=True`` (the add commits one row to the file's log; a thread
  drains it into the tables in batches: docs/sqlite.md, "Write-behind").
- **LangGraph SqliteStore** (``langgraph-checkpoint-sqlite``): ``store.put``;
  with vectors, ``index={"dims": 384, "embed": ...}`` (it stores them with sqlite-vec).
- **raw SQLite / sqlite-vec**: the floor: one transaction of a plain row plus an
  FTS5 row (keyword-only) or a ``vec0`` row (with a vector), WAL + synchronous=NORMAL.

The durability (``journal_mode``, ``synchronous``) each system ran at is read
back from its connection and printed beside the table.

After the table, for the default and ``write_behind=True`` side by side
(interleaved): the records added per CPU second of the process (every thread:
the drain's work counts) in a tight loop of single adds, the log drained at the
end; and what a search costs right after an add (with the log, it drains first).

``--no-fsync`` leaves out the two systems that fsync on every add (memoryport
at ``durability="full"``, LangGraph as shipped): while a call waits ~10 ms for
the disk the core runs other work, and the next call of whichever system comes
after pays cold CPU caches (every system's median doubled in one run here).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import json
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.sqlite_bench import DIM, Corpus, LookupEmbedder, interleaved, remove, scratch, table
from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory

USER = MemoryScope(user_id="u1")


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.95 * len(s)))] * 1000


def pragmas(conn: Any) -> str:
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[int(conn.execute("PRAGMA synchronous").fetchone()[0])]
    return f"{journal}, synchronous={sync}"


# -- the systems -----------------------------------------------------------------------


async def memoryport(
    folder: Path,
    corpus: Corpus,
    base: int,
    with_vectors: bool,
    durability: str,
    name: str,
    page_size: int = 0,
    write_behind: bool = False,
) -> tuple[GuardedMemory[Any], Callable[[str, Any], Any], str]:
    embedder = LookupEmbedder() if with_vectors else None
    path = folder / f"{name}.db"
    remove(path)
    # durability="normal" is the default (also of versions before the setting existed: the "before" runs)
    extra: dict[str, Any] = {} if durability == "normal" else {"durability": durability}
    if page_size:  # likewise: only when asked
        extra["page_size"] = page_size
    if write_behind or "write_behind" in inspect.signature(SQLiteMemory).parameters:
        # Said either way where the option exists (its default changed in session 12); a version without
        # it refuses write_behind=True (the row is skipped).
        extra["write_behind"] = write_behind
    memory = SQLiteMemory(path, embedder=embedder, **extra)
    texts = corpus.texts(base)
    if embedder is not None:
        embedder.put(texts, corpus.vectors(base))
    for i in range(0, base, 1000):
        await memory.add([MemoryRecord(scope=USER, text=t) for t in texts[i : i + 1000]])
    memory.store.checkpoint()  # an empty WAL: its size after the timed adds is what they wrote

    def add(text: str, vector: Any) -> Any:
        if embedder is not None:
            embedder.table[text] = vector
        return memory.add([MemoryRecord(scope=USER, text=text)])

    conn = memory.store.db.conn()
    return memory, add, pragmas(conn)


def langgraph(
    folder: Path, corpus: Corpus, base: int, with_vectors: bool, wal: bool
) -> tuple[Any, Callable[[str, Any], Any], str]:
    from langgraph.store.sqlite import SqliteStore

    from memoryport.adapters.sqlite import load_driver

    path = folder / f"langgraph-{with_vectors}-{wal}.db"
    remove(path)
    # As SqliteStore.from_conn_string connects; the stdlib sqlite3 here cannot load
    # sqlite-vec, so with vectors the connection is pysqlite3's (same SQLite as memoryport's).
    _, driver = load_driver("pysqlite3" if with_vectors else "sqlite3")
    conn = driver.connect(str(path), check_same_thread=False, isolation_level=None)
    if wal:  # the settings memoryport's durability="normal" runs at
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    vectors: dict[str, Any] = {}
    if with_vectors:

        def embed(texts: list[str]) -> list[list[float]]:
            # SqliteStore may hand over the whole value as JSON rather than the field.
            return [vectors[t if t in vectors else json.loads(t)["text"]].tolist() for t in texts]

        store = SqliteStore(conn, index={"dims": DIM, "embed": embed, "fields": ["text"]})
    else:
        store = SqliteStore(conn)
    store.setup()
    texts = corpus.texts(base)
    if with_vectors:
        vectors.update(zip(texts, corpus.vectors(base), strict=True))
    from langgraph.store.base import PutOp

    for i in range(0, base, 1000):
        store.batch([PutOp(("u1",), f"k{j}", {"text": texts[j]}) for j in range(i, min(base, i + 1000))])
    counter = iter(range(base, 10**9))

    def add(text: str, vector: Any) -> Any:
        vectors[text] = vector
        store.put(("u1",), f"k{next(counter)}", {"text": text})

    return store, add, pragmas(conn)


def raw(folder: Path, corpus: Corpus, base: int, with_vectors: bool) -> tuple[Any, Callable[[str, Any], Any], str]:
    from memoryport.adapters.sqlite import load_driver

    if with_vectors:
        import sqlite_vec

        from benchmarks.compare import vec0_connection

        path = folder / "vec0.db"
        remove(path)
        conn = vec0_connection(sqlite_vec, path)
        conn.isolation_level = None
    else:
        path = folder / "raw.db"
        remove(path)
        _, driver = load_driver(None)
        conn = driver.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE docs(rid INTEGER PRIMARY KEY, user_id TEXT, text TEXT)")
    if with_vectors:
        conn.execute(f"CREATE VIRTUAL TABLE idx USING vec0(embedding float[{DIM}])")
        sql = "INSERT INTO idx(rowid, embedding) VALUES (?, ?)"
    else:
        conn.execute("CREATE VIRTUAL TABLE idx USING fts5(body)")
        sql = "INSERT INTO idx(rowid, body) VALUES (?, ?)"
    texts = corpus.texts(base)
    vecs = corpus.vectors(base)
    conn.execute("BEGIN")
    for j, t in enumerate(texts):
        conn.execute("INSERT INTO docs VALUES (?, 'u1', ?)", (j + 1, t))
        conn.execute(sql, (j + 1, vecs[j].tobytes() if with_vectors else t))
    conn.execute("COMMIT")

    def add(text: str, vector: Any) -> Any:
        conn.execute("BEGIN IMMEDIATE")
        rid = conn.execute("INSERT INTO docs(user_id, text) VALUES ('u1', ?)", (text,)).lastrowid
        conn.execute(sql, (rid, vector.tobytes() if with_vectors else text))
        conn.execute("COMMIT")

    return conn, add, pragmas(conn)


# -- the run ---------------------------------------------------------------------------


def wal_kib(obj: Any, calls: int) -> str:
    """memoryport's WAL bytes per add (KiB; its WAL was emptied before the calls, warm-up calls included), else –."""
    if not isinstance(obj, GuardedMemory):
        return "–"
    try:
        size = os.path.getsize(str(obj.store.path) + "-wal")
    except OSError:
        return "–"
    return f"{size / (calls + 3) / 1024:.1f}"  # interleaved() warms each system with 3 calls first


def feeder(fn: Callable[[str, Any], Any], texts: list[str], vecs: Any) -> Callable[[int], Any]:
    """Call ``fn`` with the next unused text and vector each time (texts are shared, never repeated)."""
    counter = iter(range(len(texts)))

    def run(_: int) -> Any:
        j = next(counter)
        return fn(texts[j], vecs[j])

    return run


async def compare(args: argparse.Namespace, folder: Path) -> str:
    corpus = Corpus()
    out = []
    for with_vectors in (False, True):
        systems: dict[str, tuple[Any, Callable[[str, Any], Any], str]] = {}
        for durability in ("normal",) if args.no_fsync else ("normal", "full"):
            for wb in (False, True):
                label = f"memoryport SQLiteMemory (durability={durability!r}{', write_behind' if wb else ''})"
                try:
                    systems[label] = await memoryport(
                        folder, corpus, args.base, with_vectors, durability, f"mp-{durability}-{wb}", write_behind=wb
                    )
                except Exception as exc:  # a memoryport before durability= or write_behind= existed refuses it
                    print(f"skipped {label}: {exc}", file=sys.stderr)
        for size in args.page_size:
            for wb in (False, True):
                label = f"memoryport SQLiteMemory (page_size={size:,}{', write_behind' if wb else ''})"
                try:
                    systems[label] = await memoryport(
                        folder, corpus, args.base, with_vectors, "normal", f"mp-p{size}-{wb}", size, write_behind=wb
                    )
                except Exception as exc:  # a memoryport before page_size= or write_behind= existed refuses it
                    print(f"skipped {label}: {exc}", file=sys.stderr)
        skipped = []
        for wal, label in (
            (False, "LangGraph SqliteStore (as shipped)"),
            (True, "LangGraph SqliteStore (WAL, NORMAL)"),
        ):
            if args.no_fsync and not wal:
                continue
            try:
                systems[label] = langgraph(folder, corpus, args.base, with_vectors, wal)
            except Exception as exc:  # missing extra or no extension loading: say so
                skipped.append(f"{label}: {type(exc).__name__}: {exc}")
        floor = "sqlite-vec (row + vec0 row)" if with_vectors else "raw SQLite (row + FTS5 row)"
        try:
            systems[floor] = raw(folder, corpus, args.base, with_vectors)
        except Exception as exc:
            skipped.append(f"{floor}: {type(exc).__name__}: {exc}")
        n = args.adds
        texts = corpus.texts((n + 3) * len(systems) + 16)
        vecs = corpus.vectors(len(texts))
        times = await interleaved({label: feeder(s[1], texts, vecs) for label, s in systems.items()}, n)
        base = med(times[next(iter(times))])
        lg = "LangGraph SqliteStore (WAL, NORMAL)"
        lg_med = med(times[lg]) if lg in times else float("nan")
        rows = [
            [
                label,
                med(t),
                p95(t),
                med(t) / base,
                med(t) / lg_med,
                wal_kib(systems[label][0], len(t)),
                systems[label][2],
            ]
            for label, t in times.items()
        ]
        kind = "with a given 384-d vector" if with_vectors else "keyword-only"
        out.append(f"\n### Add one record, {kind}, on top of {args.base:,} records ({n} interleaved calls each)\n")
        out.append(
            table(
                [
                    "system",
                    "median ms",
                    "p95 ms",
                    "x memoryport normal",
                    "x LangGraph (WAL, NORMAL)",
                    "WAL KiB per add",
                    "journal, synchronous",
                ],
                rows,
            )
        )
        out.extend(f"\nskipped: {s}" for s in skipped)
        for obj, _, _ in systems.values():
            if isinstance(obj, GuardedMemory):
                await obj.aclose()
            elif hasattr(obj, "close"):
                obj.close()
            elif hasattr(obj, "conn"):
                obj.conn.close()
        out.append(await drain_costs(args, folder, corpus, with_vectors))
    return "\n".join(out)


async def drain_costs(args: argparse.Namespace, folder: Path, corpus: Corpus, with_vectors: bool) -> str:
    """The default and ``write_behind=True`` side by side: records per CPU second of a tight loop of single
    adds (every thread of the process counted, the log drained at the end of each block), and a search's
    time right after an add (with the log: the drain it pays first)."""
    kind = "with a given 384-d vector" if with_vectors else "keyword-only"
    systems: dict[str, tuple[GuardedMemory[Any], Callable[[str, Any], Any], str]] = {}
    for wb in (False, True):
        label = "write_behind=True" if wb else "write_behind=False"
        try:
            systems[label] = await memoryport(
                folder, corpus, args.base, with_vectors, "normal", f"drain-{wb}", write_behind=wb
            )
        except Exception as exc:  # a memoryport without write_behind=
            print(f"skipped {label}: {exc}", file=sys.stderr)
    if len(systems) < 2:
        for memory, _, _ in systems.values():
            await memory.aclose()
        return ""
    n = args.adds
    block = max(10, n // 4)
    texts = corpus.texts(2 * (4 * block + 2 * n) + 16)
    vecs = corpus.vectors(len(texts))
    feeds = {label: feeder(s[1], texts[i::2], vecs[i::2]) for i, (label, s) in enumerate(systems.items())}
    # Records per CPU second: blocks of single adds, alternated, each ended by a read (which drains the log).
    cpu: dict[str, float] = dict.fromkeys(systems, 0.0)
    added: dict[str, int] = dict.fromkeys(systems, 0)
    for b in range(4):
        for label in list(systems)[b % 2 :] + list(systems)[: b % 2]:
            memory = systems[label][0]
            start = time.process_time()
            for i in range(block):
                await feeds[label](i)
            await memory.count(USER)  # drains what the log still holds: its work counts
            cpu[label] += time.process_time() - start
            added[label] += block
    # A search right after an add: with the log, the drain first. Three words of a base record each (given
    # vectors of their own: hybrid with vectors, keyword without).
    queries = [" ".join(t.split()[:3]) for t in corpus.texts(min(64, args.base))]
    if with_vectors:
        for memory, _, _ in systems.values():
            memory.store.embedder.put(queries, corpus.vectors(len(queries)))
    after: dict[str, list[float]] = {label: [] for label in systems}
    for i in range(n):
        for label in list(systems)[i % 2 :] + list(systems)[: i % 2]:
            memory = systems[label][0]
            await feeds[label](i)
            start = time.perf_counter()
            await memory.search(queries[i % len(queries)], scope=USER, k=10)
            after[label].append(time.perf_counter() - start)
    for memory, _, _ in systems.values():
        await memory.aclose()
    rows = [[label, added[label] / cpu[label], med(after[label]), p95(after[label])] for label in systems]
    head = f"\n### The drain's cost, {kind}, on top of {args.base:,} records\n"
    return head + table(
        [
            "SQLiteMemory, durability='normal'",
            f"records per CPU second ({4 * block // 2} single adds each, all threads)",
            f"search right after an add, median ms ({n})",
            "p95 ms",
        ],
        rows,
    )


class TimedConn:
    """A connection whose statements time themselves, wall and this thread's CPU (for the per-step profile)."""

    def __init__(self, conn: Any, steps: dict[str, list[tuple[float, float]]]) -> None:
        self._conn = conn
        self._steps = steps

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def _timed(self, method: str, sql: str, *args: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        result = getattr(self._conn, method)(sql, *args)
        took = (time.perf_counter() - wall, time.thread_time() - cpu)
        self._steps.setdefault(" ".join(sql.split())[:70], []).append(took)
        return result

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed("execute", sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._timed("executemany", sql, *args)


class NullStore:
    """A store that stores nothing: the guard in front of it is the guard's own cost."""

    name = "null"
    capabilities = frozenset({"session_scope", "agent_scope", "metadata", "expiry"})

    async def add(self, records: Any) -> list[str]:
        return [r.id for r in records]

    async def search(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    async def get(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def delete(self, *args: Any, **kwargs: Any) -> int:
        return 0

    async def export(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    async def purge(self, *args: Any, **kwargs: Any) -> int:
        return 0


def _row(name: str, times: list[tuple[float, float]], n: int) -> list[Any]:
    return [
        name,
        statistics.median(t[0] for t in times) * 1e6,
        statistics.median(t[1] for t in times) * 1e6,
        round(len(times) / n, 2),
    ]


async def profile(args: argparse.Namespace, folder: Path) -> str:
    """Where one add's time goes: whole calls in rotation, then every statement of the public add.

    Wall time and this thread's CPU time (``time.thread_time``: what the add
    itself computed, without waiting for the scheduler of a shared machine).
    """
    corpus = Corpus()
    out = []
    for with_vectors in (False, True):
        memory, _, _ = await memoryport(folder, corpus, args.base, with_vectors, "normal", "profile")
        store: Any = memory.store
        wb_memory, _, _ = await memoryport(
            folder, corpus, args.base, with_vectors, "normal", "profile-wb", write_behind=True
        )
        wb_store: Any = wb_memory.store
        null = GuardedMemory(NullStore())  # type: ignore[arg-type]  # a duck-typed store
        floor_conn, floor_add, _ = raw(folder, corpus, args.base, with_vectors)
        n = args.adds
        texts = corpus.texts(9 * n + 8)
        vecs = corpus.vectors(len(texts))
        floor = feeder(floor_add, texts[8 * n :], vecs[8 * n :])
        try:
            lg_store, lg_add, _ = langgraph(folder, corpus, args.base, with_vectors, True)
            lg_put: Callable[[int], Any] | None = feeder(lg_add, texts[7 * n : 8 * n], vecs[7 * n : 8 * n])
        except Exception:  # without the extra: no row
            lg_store, lg_put = None, None
        if with_vectors:
            store.embedder.put(texts, vecs)
            wb_store.embedder.put(texts, vecs)
        # Without ids: the guard makes one per record, as for a host's add.
        recs = iter([MemoryRecord(scope=USER, text=t) for t in texts])
        with_ids = iter([MemoryRecord(scope=USER, text=t, id=f"p{i}") for i, t in enumerate(texts)])
        stages: dict[str, list[tuple[float, float]]] = {
            k: []
            for k in (
                "public add (guard + port)",
                "port add (no guard; the record has an id)",
                "public add, write_behind=True (guard + one log row)",
                "port add, write_behind=True (no guard; one log row)",
                "LangGraph SqliteStore put (WAL, NORMAL)",
                "guard alone (over a store that stores nothing)",
                "port add on a worker thread (the hop, as with durability='full')",
                "empty hop to a worker thread and back",
                "the floor: " + ("a row + a vec0 row" if with_vectors else "a row + an FTS5 row") + ", plain SQL",
            )
        }
        names = list(stages)
        for i in range(n):
            # Rotating the order: the call right after a hop runs on a colder core.
            for name in names[i % len(names) :] + names[: i % len(names)]:
                wall, cpu = time.perf_counter(), time.thread_time()
                if name.startswith("LangGraph"):
                    if lg_put is None:
                        continue
                    lg_put(i)
                elif name.startswith("public add, write_behind"):
                    await wb_memory.add([next(recs)])
                elif name.startswith("port add, write_behind"):
                    await wb_store.add([next(with_ids)])
                elif name.startswith("public add"):
                    await memory.add([next(recs)])
                elif name.startswith("port add (no guard"):
                    await store.add([next(with_ids)])
                elif name.startswith("guard alone"):
                    await null.add([next(recs)])
                elif name.startswith("port add on a worker"):
                    r = next(with_ids)
                    v = await store.embedder.embed([r.text]) if with_vectors else None
                    await store._run(functools.partial(store._add, [r], [r.id], v), write=True)
                elif name.startswith("empty hop"):
                    await store._run(lambda: None)
                else:
                    floor(i)
                stages[name].append((time.perf_counter() - wall, time.thread_time() - cpu))
        # Every statement of the public add (on the caller's thread, as a small add runs).
        steps: dict[str, list[tuple[float, float]]] = {}
        whole: list[tuple[float, float]] = []
        real = store.db.writer()
        store.db._writer = TimedConn(real, steps)
        for _ in range(n):
            wall, cpu = time.perf_counter(), time.thread_time()
            await memory.add([next(recs)])
            whole.append((time.perf_counter() - wall, time.thread_time() - cpu))
        store.db._writer = real
        # The same for a write_behind add (its drain thread, which would run on the same connection, not woken).
        wb_steps: dict[str, list[tuple[float, float]]] = {}
        wb_whole: list[tuple[float, float]] = []
        wb_real = wb_store.db.writer()
        wb_store.db._writer = TimedConn(wb_real, wb_steps)
        await wb_memory.count(USER)  # the log drained before timing; then the drain thread is not woken
        wb_store._logged_more = lambda n: None
        for _ in range(n):
            wall, cpu = time.perf_counter(), time.thread_time()
            await wb_memory.add([next(recs)])
            wb_whole.append((time.perf_counter() - wall, time.thread_time() - cpu))
        wb_store.db._writer = wb_real
        await wb_memory.aclose()
        await memory.aclose()
        if lg_store is not None:
            lg_store.conn.close()
        floor_conn.close()
        kind = "with a given vector" if with_vectors else "keyword-only"
        out.append(f"\n### Where one add's time goes, {kind}, on top of {args.base:,} records ({n} calls; µs)\n")
        rows = [_row(k, v, n) for k, v in stages.items() if v]
        rows.append(_row("= public add, statements timed (below)", whole, n))
        rows += [_row(f"`{k}`", v, n) for k, v in steps.items()]
        per_add = [k for k, v in steps.items() if len(v) >= n // 2]
        rows.append(
            [
                f"= the {len(per_add)} statements of every add",
                sum(statistics.median(t[0] for t in steps[k]) for k in per_add) * 1e6,
                sum(statistics.median(t[1] for t in steps[k]) for k in per_add) * 1e6,
                1,
            ]
        )
        rows.append(_row("= public add with write_behind=True, statements timed (below)", wb_whole, n))
        rows += [_row(f"`{k}`", v, n) for k, v in wb_steps.items()]
        out.append(table(["step", "median µs (wall)", "median µs (thread CPU)", "per add"], rows))
    return "\n".join(out)


async def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=10_000, help="records in each file before timing")
    parser.add_argument("--adds", type=int, default=300, help="interleaved single adds per system")
    parser.add_argument("--profile", action="store_true", help="per-step profile of one add instead")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    parser.add_argument(
        "--no-fsync",
        action="store_true",
        help="only the systems that do not fsync per add (an fsync's wait leaves the next call's CPU caches cold)",
    )
    parser.add_argument(
        "--page-size",
        type=int,
        nargs="+",
        default=[],
        help="also time memoryport (durability='normal') in files created with these page sizes",
    )
    parser.add_argument("--folder", help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.quick:
        args.base, args.adds = 200, 10
    folder = scratch(args.folder)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    head = (
        f"Python {platform.python_version()}, {os.cpu_count()} cores, load average {load:.1f} at the start "
        "(the machine is shared)"
    )
    try:
        body = await (profile(args, folder) if args.profile else compare(args, folder))
    finally:
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
    return head + "\n" + body


if __name__ == "__main__":
    print(asyncio.run(main(sys.argv[1:])))
