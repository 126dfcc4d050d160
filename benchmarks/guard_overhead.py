"""The guard's fixed cost per call, by operation (issue 17, goals 1 and 6).

Run from the repository root::

    python -m benchmarks.guard_overhead                     # the tables (a minute or two)
    python -m benchmarks.guard_overhead --quick             # a smoke run, seconds
    python -m benchmarks.guard_overhead --against DIR       # also a copy of memoryport put first on PYTHONPATH

Every figure is this thread's CPU time per call (``time.thread_time``), the
median over the calls, so that a shared machine's scheduler does not inflate it.

**Over a store that does nothing** (:class:`NullStore`: ``add_with_ids`` as
SQLite has it, ten fixed hits from ``search``): each operation through
:class:`~memoryport.GuardedMemory` and the same call made on the store alone;
the difference is the guard's own cost. Two ways:

- *hot*: ``--calls`` calls of one operation in a row (caches warm: the floor);
- *cold*: each call right after a pass over a 16 MB array, operations in
  rotation: what a call pays after a vector search over 10k records (or any
  other work) has filled the CPU caches with something else, as in the add
  and search benchmarks, where systems are interleaved call by call.

**Over SQLiteMemory** (one user's ``--records`` records with given 384-d vectors,
no model time): a one-record add and a k=10 vector search, public API against
the store alone, interleaved call by call; the difference is the guard's share
of a real call.

``--against DIR`` runs this benchmark in child processes, alternately with
``DIR`` first on ``PYTHONPATH`` ("before": e.g. ``git archive`` of an older
commit arranged as ``DIR/memoryport/{core, adapters, contracts}``) and without
it ("after"), ``--rounds`` times each, and prints the medians side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.sqlite_bench import Corpus, LookupEmbedder, scratch, table
from memoryport import (
    GuardedMemory,
    MemoryHit,
    MemoryRecord,
    MemoryScope,
    SearchResults,
    SQLiteMemory,
)

USER = MemoryScope(user_id="u1")
K = 10
_THRASH = np.ones(4 << 20, dtype=np.float32)  # 16 MB: more than the last-level cache of the machines we run on


def thrash() -> None:
    """Fill the CPU caches with something else (a pass over 16 MB)."""
    _THRASH.sum()


class NullStore:
    """A store that does nothing: the guard in front of it is the guard's own cost."""

    name = "null"
    capabilities = frozenset(
        {"session_scope", "agent_scope", "metadata", "expiry", "filters", "get", "delete", "export", "count"}
    )

    def __init__(self) -> None:
        records = [
            MemoryRecord(scope=USER, text=f"note {i} about tea", id=f"r{i}", metadata={"kind": "fact"})
            for i in range(K)
        ]
        self.hits = [MemoryHit(record=r, score=1.0 - i / 100, signal="vector") for i, r in enumerate(records)]
        self.records = records

    async def add(self, records: Any) -> list[str]:
        return [r.id for r in records]

    async def add_with_ids(self, records: Any, ids: Any) -> Any:
        return ids

    async def search(self, query: str, *, scope: Any, k: int, filters: Any = None) -> SearchResults:
        return SearchResults(self.hits[:k], mode="vector")

    async def get(self, record_id: str, *, scope: Any) -> MemoryRecord:
        return self.records[0]

    async def delete(self, ids: Any, *, scope: Any) -> int:
        return 1

    async def export(self, scope: Any) -> list[MemoryRecord]:
        return list(self.records)

    async def count(self, scope: Any, *, filters: Any, since: Any, until: Any) -> int:
        return K

    async def purge(self, *, now: Any, created_before: Any) -> int:
        return 0


Call = Callable[[], Awaitable[Any]]


def null_operations(memory: GuardedMemory[Any], store: NullStore, records: int) -> dict[str, tuple[Call, Call]]:
    """Each operation as (through the guard, on the store alone), with fresh records where the guard needs them.

    The records are built beforehand (``records`` of each kind): building one is the caller's cost, not the guard's.
    """
    fresh = iter([MemoryRecord(scope=USER, text=f"a new note {i} about tea") for i in range(records)])
    given = iter(
        [MemoryRecord(scope=USER, text=f"note {i}", id=f"g{i}", metadata={"kind": "fact"}) for i in range(records)]
    )
    one = [store.records[0]]
    ids = ["r0"]
    hundred = [MemoryRecord(scope=USER, text=f"bulk note {i}") for i in range(100)]
    hundred_ids = [f"b{i}" for i in range(100)]
    return {
        "add 1 record": (lambda: memory.add([next(fresh)]), lambda: store.add_with_ids(one, ids)),
        "add 1 record with an id and metadata": (
            lambda: memory.add([next(given)]),
            lambda: store.add_with_ids(one, ids),
        ),
        "add 100 records (per call)": (lambda: memory.add(hundred), lambda: store.add_with_ids(hundred, hundred_ids)),
        "search, k=10": (
            lambda: memory.search("tea with lemon", scope=USER, k=K),
            lambda: store.search("tea with lemon", scope=USER, k=K, filters=None),
        ),
        "search, k=10, a metadata filter": (
            lambda: memory.search("tea with lemon", scope=USER, k=K, filters={"kind": "fact"}),
            lambda: store.search("tea with lemon", scope=USER, k=K, filters={"kind": "fact"}),
        ),
        "get": (lambda: memory.get("r0", scope=USER), lambda: store.get("r0", scope=USER)),
        "delete 1 id": (lambda: memory.delete(["r0"], scope=USER), lambda: store.delete(["r0"], scope=USER)),
        "count": (
            lambda: memory.count(USER),
            lambda: store.count(USER, filters=None, since=None, until=None),
        ),
    }


async def hot(fn: Call, calls: int, repeat: int) -> float:
    """Median µs per call over ``repeat`` runs of ``calls`` calls in a row."""
    per: list[float] = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(calls):
            await fn()
        per.append((time.thread_time() - start) / calls * 1e6)
    return statistics.median(per)


async def cold(ops: dict[str, Call], calls: int) -> dict[str, float]:
    """Median µs per call of each operation, every call right after :func:`thrash`, operations in rotation."""
    names = list(ops)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(calls):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            thrash()
            start = time.thread_time()
            await ops[name]()
            times[name].append((time.thread_time() - start) * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


async def over_null(calls: int) -> dict[str, dict[str, float]]:
    store = NullStore()
    memory = GuardedMemory(store)  # type: ignore[arg-type]  # a duck-typed store
    ops = null_operations(memory, store, 9 * calls + max(calls // 4, 20) + 2)
    for guarded, alone in ops.values():  # warm up (and fail early)
        await guarded()
        await alone()
    out: dict[str, dict[str, float]] = {}
    for name, (guarded, alone) in ops.items():
        out[name] = {"hot store": await hot(alone, calls, 9), "hot guarded": await hot(guarded, calls, 9)}
    both = {f"{name}\0g": pair[0] for name, pair in ops.items()} | {f"{name}\0s": pair[1] for name, pair in ops.items()}
    colds = await cold(both, max(calls // 4, 20))
    for name in ops:
        out[name]["cold store"] = colds[f"{name}\0s"]
        out[name]["cold guarded"] = colds[f"{name}\0g"]
    return out


async def over_sqlite(records: int, calls: int, folder: Path) -> dict[str, dict[str, float]]:
    corpus = Corpus()
    texts = corpus.texts(records + 3 * calls + 16)
    embedder = LookupEmbedder()
    embedder.put(texts, corpus.vectors(len(texts)))
    queries = [f"q{i} " + corpus.query(texts[i % records]) for i in range(calls)]
    embedder.put(queries, corpus.vectors(calls))
    memory = SQLiteMemory(folder / "guard.db", embedder=embedder, search_mode="vector")
    try:
        for i in range(0, records, 1000):
            await memory.add([MemoryRecord(scope=USER, text=t) for t in texts[i : min(i + 1000, records)]])
        store = memory.store
        new = iter(texts[records:])
        own_ids = (f"s{i}" for i in range(10**9))
        ops: dict[str, Callable[[int], Awaitable[Any]]] = {
            "add 1 record, public": lambda i: memory.add([MemoryRecord(scope=USER, text=next(new))]),
            # The store alone gets what the guard hands it: the record and its id beside it.
            "add 1 record, store alone": lambda i: store.add_with_ids(
                [MemoryRecord(scope=USER, text=next(new))], [next(own_ids)]
            ),
            "vector search k=10, public": lambda i: memory.search(queries[i], scope=USER, k=K),
            "vector search k=10, store alone": lambda i: store.search(queries[i], scope=USER, k=K, filters=None),
        }
        names = list(ops)
        for name in names:
            for i in range(3):
                await ops[name](calls - 1 - i)
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(calls):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                start = time.thread_time()
                await ops[name](i)
                times[name].append((time.thread_time() - start) * 1e6)
        med = {name: statistics.median(t) for name, t in times.items()}
        return {
            "add 1 record": {"store": med["add 1 record, store alone"], "public": med["add 1 record, public"]},
            "vector search k=10": {
                "store": med["vector search k=10, store alone"],
                "public": med["vector search k=10, public"],
            },
        }
    finally:
        await memory.aclose()


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    folder = scratch(args.folder)
    try:
        null = await over_null(args.calls)
        sqlite = await over_sqlite(args.records, args.calls, folder) if not args.null_only else {}
    finally:
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
    import memoryport

    return {"null": null, "sqlite": sqlite, "memoryport": memoryport.__file__}


def render(result: dict[str, Any]) -> str:
    rows = []
    for name, v in result["null"].items():
        rows.append(
            [
                name,
                v["hot store"],
                v["hot guarded"],
                v["hot guarded"] - v["hot store"],
                v["cold store"],
                v["cold guarded"],
                v["cold guarded"] - v["cold store"],
            ]
        )
    out = [
        "\n### The guard over a store that does nothing (µs of thread CPU per call, medians)\n",
        table(
            [
                "operation",
                "store (hot)",
                "guarded (hot)",
                "guard (hot)",
                "store (cold)",
                "guarded (cold)",
                "guard (cold)",
            ],
            rows,
        ),
    ]
    if result["sqlite"]:
        rows = [[name, v["store"], v["public"], v["public"] - v["store"]] for name, v in result["sqlite"].items()]
        out += [
            "\n### Over SQLiteMemory (µs of thread CPU per call, medians, interleaved)\n",
            table(["operation", "store alone", "public API", "guard's share"], rows),
        ]
    return "\n".join(out)


def render_ab(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """Medians over the rounds of each side; the guard's cost before and after, and after / before."""

    def med(runs: list[dict[str, Any]], section: str, name: str, key: str) -> float:
        return statistics.median(r[section][name][key] for r in runs)

    rows = []
    for name in after[0]["null"]:
        row: list[Any] = [name]
        for mode in ("hot", "cold"):
            b = med(before, "null", name, f"{mode} guarded") - med(before, "null", name, f"{mode} store")
            a = med(after, "null", name, f"{mode} guarded") - med(after, "null", name, f"{mode} store")
            row += [b, a, round(a / b, 2) if b > 0 else float("nan")]
        rows.append(row)
    out = [
        f"\n### The guard's own cost, before and after ({len(before)} + {len(after)} alternated runs; "
        "µs of thread CPU per call, medians)\n",
        table(
            [
                "operation",
                "hot: before",
                "hot: after",
                "after / before",
                "cold: before",
                "cold: after",
                "after / before",
            ],
            rows,
        ),
    ]
    if after[0]["sqlite"]:
        rows = []
        for name in after[0]["sqlite"]:
            vals = {
                side: (med(runs, "sqlite", name, "store"), med(runs, "sqlite", name, "public"))
                for side, runs in (("before", before), ("after", after))
            }
            rows.append(
                [
                    name,
                    *vals["before"],
                    vals["before"][1] - vals["before"][0],
                    *vals["after"],
                    vals["after"][1] - vals["after"][0],
                ]
            )
        out += [
            "\n### Over SQLiteMemory, before and after (µs of thread CPU per call, medians)\n",
            table(
                [
                    "operation",
                    "before: store",
                    "before: public",
                    "before: guard's share",
                    "after: store",
                    "after: public",
                    "after: guard's share",
                ],
                rows,
            ),
        ]
    return "\n".join(out)


def child(args: argparse.Namespace, before: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if before is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (before, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "benchmarks.guard_overhead", "--json", "--calls", str(args.calls)]
    cmd += ["--records", str(args.records)] + (["--null-only"] if args.null_only else [])
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per operation (hot: per run of 9)")
    parser.add_argument("--records", type=int, default=10_000, help="records in the SQLite file")
    parser.add_argument("--null-only", action="store_true", help="leave out the SQLite part")
    parser.add_argument("--against", help="a folder holding another memoryport package: before/after, alternated")
    parser.add_argument("--rounds", type=int, default=3, help="child runs per side with --against")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--folder", help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.records, args.rounds = 20, 300, 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    head = f"Python {platform.python_version()}, {os.cpu_count()} cores, load average {load:.1f} at the start"
    if args.against:
        before: list[dict[str, Any]] = []
        after: list[dict[str, Any]] = []
        for _ in range(args.rounds):
            before.append(child(args, args.against))
            after.append(child(args, None))
        if before[0]["memoryport"] == after[0]["memoryport"]:
            raise SystemExit(f"--against {args.against}: both sides imported {after[0]['memoryport']}")
        sides = f"\nbefore: {before[0]['memoryport']}\nafter: {after[0]['memoryport']}\n"
        return head + sides + render_ab(before, after)
    result = asyncio.run(measure(args))
    if args.json:
        return json.dumps(result)
    return head + "\n" + render(result)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
