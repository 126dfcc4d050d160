"""Entity graph traversal latency on SQLite: 100k facts in one user's graph (plus another user's).

    python -m benchmarks.graph_bench [--facts 100000] [--entities 20000] [--queries 50]

Random facts over ``--entities`` entities (relations: 8 multi-valued, 2 single-valued
so that some facts are closed), the same again for a second user in the same file.
Measures, one run, medians and p95 over ``--queries`` random start entities:
``related(depth=1)``, ``related(depth=2)``, ``facts_about`` and ``paths(max_depth=3)``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memoryport import MemoryScope, NewFact, SQLiteGraph, SQLiteMemory

RELATIONS = ["knows", "likes", "visited", "owns", "mentions", "uses", "reads", "follows"]
SINGLE = ["lives_in", "works_at"]


async def main(n_facts: int, n_entities: int, n_queries: int) -> str:
    with tempfile.TemporaryDirectory(prefix="memoryport-graph-") as tmp:
        memory = SQLiteMemory(Path(tmp) / "g.db")
        graph = SQLiteGraph(memory, single_valued=set(SINGLE))
        rng = random.Random(5)
        t = time.perf_counter()
        for user in ("bench", "other"):
            scope = MemoryScope(user_id=user)
            for start in range(0, n_facts, 10_000):
                batch = []
                for _ in range(min(10_000, n_facts - start)):
                    rel = rng.choice(RELATIONS) if rng.random() < 0.9 else rng.choice(SINGLE)
                    a, b = rng.randrange(n_entities), rng.randrange(n_entities)
                    batch.append(NewFact(subject=f"entity {a}", relation=rel, object=f"entity {b}"))
                await graph.add_facts(batch, scope=scope)
        load = time.perf_counter() - t
        print(f"loaded {2 * n_facts:,} facts in {load:.1f}s", file=sys.stderr, flush=True)
        scope = MemoryScope(user_id="bench")
        starts = [f"entity {rng.randrange(n_entities)}" for _ in range(n_queries)]
        ends = [f"entity {rng.randrange(n_entities)}" for _ in range(n_queries)]
        rows = ["| query | median ms | p95 ms | results (median) |", "|---|---:|---:|---:|"]

        async def measure(label: str, call) -> None:  # type: ignore[no-untyped-def]
            times, sizes = [], []
            for i in range(n_queries):
                t0 = time.perf_counter()
                out = await call(i)
                times.append((time.perf_counter() - t0) * 1000)
                sizes.append(len(out))
            times.sort()
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            rows.append(f"| {label} | {statistics.median(times):.1f} | {p95:.1f} | {statistics.median(sizes):.0f} |")
            print(rows[-1], file=sys.stderr, flush=True)

        await measure("facts_about (current)", lambda i: graph.facts_about(starts[i], scope=scope))
        await measure("related, depth 1", lambda i: graph.related(starts[i], scope=scope, depth=1, limit=1000))
        await measure("related, depth 2", lambda i: graph.related(starts[i], scope=scope, depth=2, limit=1000))
        await measure("paths, max_depth 3", lambda i: graph.paths(starts[i], ends[i], scope=scope, max_depth=3))
        await memory.aclose()
        head = f"{n_facts:,} facts over {n_entities:,} entities in one user's graph (and as many in another's); "
        return head + f"load {load:.1f}s\n\n" + "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--entities", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=50)
    a = parser.parse_args()
    print(asyncio.run(main(a.facts, a.entities, a.queries)))
