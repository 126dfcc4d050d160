"""Entity graph traversal latency, SQLite and PostgreSQL side by side: 100k facts in one user's graph.

    python -m benchmarks.graph_bench [--facts 100000] [--entities 20000] [--queries 50]
                                     [--backends sqlite,postgres] [--dsn postgresql://...]

Random facts over ``--entities`` entities (relations: 8 multi-valued, 2 single-valued
so that some facts are closed), the same again for a second user in the same store.
Both backends get the same facts, loaded through ``KnowledgeGraph.add_facts`` in
batches of 10,000, and the same queries; then, one run, medians and p95 over
``--queries`` random start entities of ``facts_about``, ``related(depth=1)``,
``related(depth=2)`` and ``paths(max_depth=3)``, the backends interleaved query by
query so that the machine's load falls on both alike. PostgreSQL is ``--dsn`` (an
ordinary role) or pgserver started in a temporary folder (the dev extra).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memoryport import GuardedMemory, KnowledgeGraph, MemoryScope, NewFact

RELATIONS = ["knows", "likes", "visited", "owns", "mentions", "uses", "reads", "follows"]
SINGLE = ["lives_in", "works_at"]
BATCH = 10_000


def facts(n_facts: int, n_entities: int, seed: int) -> list[NewFact]:
    rng = random.Random(seed)
    out = []
    for _ in range(n_facts):
        rel = rng.choice(RELATIONS) if rng.random() < 0.9 else rng.choice(SINGLE)
        a, b = rng.randrange(n_entities), rng.randrange(n_entities)
        out.append(NewFact(subject=f"entity {a}", relation=rel, object=f"entity {b}"))
    return out


async def load(graph: KnowledgeGraph, data: dict[str, list[NewFact]]) -> float:
    t = time.perf_counter()
    for user, batch in data.items():
        scope = MemoryScope(user_id=user)
        for start in range(0, len(batch), BATCH):
            await graph.add_facts(batch[start : start + BATCH], scope=scope)
    return time.perf_counter() - t


def _stats(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


async def main(n_facts: int, n_entities: int, n_queries: int, backends: list[str], dsn: str | None = None) -> str:
    from memoryport.adapters.sqlite import SQLiteMemory

    data = {"bench": facts(n_facts, n_entities, 5), "other": facts(n_facts, n_entities, 6)}
    memories: dict[str, GuardedMemory[Any]] = {}
    tmp = tempfile.TemporaryDirectory(prefix="memoryport-graph-")
    server = None
    try:
        if "sqlite" in backends:
            memories["SQLite"] = SQLiteMemory(Path(tmp.name) / "g.db")
        if "postgres" in backends:
            from memoryport.adapters.postgres import PostgresMemory

            from . import _postgres

            server = _postgres.start(dsn)
            memories["PostgreSQL"] = PostgresMemory(server.dsn, pool_size=2)
        graphs = {name: KnowledgeGraph(m, single_valued=SINGLE) for name, m in memories.items()}
        loads: dict[str, float] = {}
        for name, graph in graphs.items():
            loads[name] = await load(graph, data)
            print(f"{name}: loaded {2 * n_facts:,} facts in {loads[name]:.1f}s", file=sys.stderr, flush=True)
        if "PostgreSQL" in memories:
            await memories["PostgreSQL"].store.vacuum()  # fresh statistics for the planner, as autovacuum would
        rng = random.Random(7)
        scope = MemoryScope(user_id="bench")
        starts = [f"entity {rng.randrange(n_entities)}" for _ in range(n_queries)]
        ends = [f"entity {rng.randrange(n_entities)}" for _ in range(n_queries)]
        queries: list[tuple[str, Callable[[KnowledgeGraph, int], Awaitable[list[Any]]]]] = [
            ("facts_about (current)", lambda g, i: g.facts_about(starts[i], scope=scope)),
            ("related, depth 1", lambda g, i: g.related(starts[i], scope=scope, depth=1, limit=1000)),
            ("related, depth 2", lambda g, i: g.related(starts[i], scope=scope, depth=2, limit=1000)),
            ("paths, max_depth 3", lambda g, i: g.paths(starts[i], ends[i], scope=scope, max_depth=3)),
        ]
        names = list(graphs)
        head = (
            "| query (random start entities) | "
            + " | ".join(f"{n} median ms | {n} p95 ms" for n in names)
            + " | results (median) |"
        )
        if len(names) == 2:
            head += " PostgreSQL / SQLite (median) |"
        rows = [head, "|---|" + "---:|" * (2 * len(names) + 1 + (len(names) == 2))]
        for label, call in queries:
            times: dict[str, list[float]] = {n: [] for n in names}
            sizes: dict[str, list[int]] = {n: [] for n in names}
            for i in range(n_queries):
                for n in names:  # interleaved: the load of the moment falls on both
                    t0 = time.perf_counter()
                    out = await call(graphs[n], i)
                    times[n].append((time.perf_counter() - t0) * 1000)
                    sizes[n].append(len(out))
            if len(names) == 2:
                assert sizes[names[0]] == sizes[names[1]], f"{label}: the backends disagree on the results"
            cells = []
            medians = []
            for n in names:
                median, p95 = _stats(times[n])
                medians.append(median)
                cells += [f"{median:.1f}", f"{p95:.1f}"]
            row = f"| {label} | " + " | ".join(cells) + f" | {statistics.median(sizes[names[0]]):.0f} |"
            if len(names) == 2:
                row += f" {medians[1] / medians[0]:.1f}× |"
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
        load_line = ", ".join(f"{n} {loads[n]:.1f}s" for n in names)
        head_line = (
            f"{n_facts:,} facts over {n_entities:,} entities in one user's graph (and as many in another's), "
            f"{n_queries} queries; load of {2 * n_facts:,} facts through add_facts: {load_line}; "
            f"machine load (1-min average) {os.getloadavg()[0]:.1f}"
        )
        return head_line + "\n\n" + "\n".join(rows)
    finally:
        for m in memories.values():
            await m.aclose()
        if server is not None:
            server.stop()
        tmp.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--entities", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--dsn", default=None, help="a PostgreSQL DSN (an ordinary role); default: pgserver")
    a = parser.parse_args()
    chosen = [b.strip() for b in a.backends.split(",") if b.strip()]
    print(asyncio.run(main(a.facts, a.entities, a.queries, chosen, a.dsn)))
