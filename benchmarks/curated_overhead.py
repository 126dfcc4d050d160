"""What AgentMemory costs over the bare guard: remember and recall at 10k memories in one scope.

One SQLite file (or PostgreSQL; keyword search, the default install; ``--embedder bow`` adds
a deterministic hashed bag-of-words embedder for hybrid search) holds
``--size`` memories of one user, written through the guard in batches. Then,
interleaved so both see the same file and machine state:

* remember: ``guard.add([one record])`` vs ``AgentMemory.remember(text)``
  (dedup on: one search of the new text for near-duplicates, then the add)
  and with ``CurationPolicy(dedup=False)``;
* recall: ``guard.search(query, k=5)`` vs ``AgentMemory.recall(query, k=5)``
  (three times the candidates, salience, and reinforcement: one update of the
  five hits) and with ``reinforce=False``.

Medians in ms and the ratio layer / guard, one run.

    python benchmarks/curated_overhead.py [--size 10000] [--ops 200] [--embedder none|bow]
                                          [--backend sqlite|postgres] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


# A vocabulary of 5,000 made-up words drawn with Zipf's law (s = 1.1), as words are in text: a few
# common, most rare. (With a handful of words every query word would match most records, the worst
# case for a keyword search; ``--vocabulary 40`` measures that.)
def vocabulary(size: int) -> tuple[list[str], list[float]]:
    words = [f"w{i:04d}" for i in range(size)]
    weights = [1.0 / (rank + 1) ** 1.1 for rank in range(size)]
    return words, weights


def sentence(rnd: random.Random, words: list[str], weights: list[float], n: int = 10) -> str:
    return "The user " + " ".join(rnd.choices(words, weights, k=n))


def bow_embedder(dim: int = 64) -> Any:
    import numpy as np

    from memoryport import CallableEmbedder

    def embed(texts: list[str]) -> Any:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
                out[i, h % dim] += 1.0
            out[i, -1] += 0.01
        return out

    return CallableEmbedder(embed, dim=dim, name=f"bow-{dim}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryport import MemoryRecord, MemoryScope
    from memoryport.curated import AgentMemory, CurationPolicy

    rnd = random.Random(args.seed)
    words, weights = vocabulary(args.vocabulary)
    from _curated_backends import open_backend

    folder = Path(tempfile.mkdtemp(prefix="memoryport-curated-overhead-"))
    embedder = bow_embedder() if args.embedder == "bow" else None
    guard, stop = open_backend(args.backend, folder, **({"embedder": embedder} if embedder else {}))
    agent = AgentMemory(guard)
    plain = AgentMemory(guard, policy=CurationPolicy(dedup=False))
    scope = MemoryScope(user_id="bench")
    for start in range(0, args.size, 1000):
        n = min(1000, args.size - start)
        batch = [MemoryRecord(scope=scope, text=sentence(rnd, words, weights)) for _ in range(n)]
        await guard.add(batch)
    times: dict[str, list[float]] = {k: [] for k in
                                     ("add", "remember", "remember_no_dedup", "search", "recall",
                                      "recall_no_reinforce")}

    async def timed(name: str, call: Any) -> None:
        t0 = time.perf_counter()
        await call
        times[name].append((time.perf_counter() - t0) * 1000)

    for _ in range(args.ops):
        await timed("add", guard.add([MemoryRecord(scope=scope, text=sentence(rnd, words, weights))]))
        await timed("remember", agent.remember(sentence(rnd, words, weights), scope=scope))
        await timed("remember_no_dedup", plain.remember(sentence(rnd, words, weights), scope=scope))
        query = " ".join(rnd.choices(words, weights, k=3))
        await timed("search", guard.search(query, scope=scope, k=5))
        await timed("recall", agent.recall(query, scope=scope, k=5))
        await timed("recall_no_reinforce", agent.recall(query, scope=scope, k=5, reinforce=False))
    await guard.aclose()
    stop()
    shutil.rmtree(folder, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "size": args.size,
        "ops": args.ops,
        "embedder": args.embedder,
        "backend": args.backend,
        "vocabulary": args.vocabulary,
        "median_ms": {k: round(v, 3) for k, v in med.items()},
        "ratio": {
            "remember / add": round(med["remember"] / med["add"], 2),
            "remember(dedup=False) / add": round(med["remember_no_dedup"] / med["add"], 2),
            "recall / search": round(med["recall"] / med["search"], 2),
            "recall(reinforce=False) / search": round(med["recall_no_reinforce"] / med["search"], 2),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--vocabulary", type=int, default=5000, help="distinct words (Zipf-distributed)")
    ap.add_argument("--embedder", choices=("none", "bow"), default="none")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    result = asyncio.run(run(args))
    m, r = result["median_ms"], result["ratio"]
    print(f"# {args.backend}: {args.size:,} memories in one scope ({args.vocabulary:,}-word Zipf vocabulary), "
          f"{args.ops} operations each, embedder {args.embedder}")
    print()
    print("| operation | bare guard (ms) | AgentMemory (ms) | ratio |")
    print("|---|---|---|---|")
    print(f"| remember one | {m['add']:.2f} | {m['remember']:.2f} | {r['remember / add']:.2f}x |")
    print(f"| remember one, dedup=False | {m['add']:.2f} | {m['remember_no_dedup']:.2f} | "
          f"{r['remember(dedup=False) / add']:.2f}x |")
    print(f"| recall k=5 | {m['search']:.2f} | {m['recall']:.2f} | {r['recall / search']:.2f}x |")
    print(f"| recall k=5, reinforce=False | {m['search']:.2f} | {m['recall_no_reinforce']:.2f} | "
          f"{r['recall(reinforce=False) / search']:.2f}x |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
