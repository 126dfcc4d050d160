"""Time ranges, filter operators and update on SQLiteMemory, side by side in one run.

    python -m benchmarks.port_bench [--n 100000] [--queries 60] [--json FILE]

One user holds ``n`` records (record ``i`` created ``n - i`` seconds ago, metadata
``{"n": i, "kind": ...}``, texts sharing words so that each query word matches
about 2% of them). Each search shape runs without and with a restriction, the
two alternating query by query; the table gives the medians and their ratio:

- ``since`` covering the newest 1% and 50% of the records;
- ``{"n": {"$gte": ...}}`` covering the same 1% and 50% (a numeric key);

for the newest-first listing (``""``), a keyword search and a hybrid search
(a 384-d random-projection embedder: storage cost only, no model). Then update
throughput: batches of ``--batch`` records, text changes on a keyword-only file
(FTS5 re-index), text changes with the embedder (re-embedding and a vector
write), and metadata-only changes.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow

WORDS = [f"w{j:02d}" for j in range(50)]
USER = MemoryScope(user_id="bench")
DIM = 384


def embedder() -> CallableEmbedder:
    def embed(texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        seeds = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest(), "big") for t in texts]
        return np.stack([np.random.default_rng(s).standard_normal(DIM).astype(np.float32) for s in seeds])

    return CallableEmbedder(embed, dim=DIM, name="random-384")


async def fill(memory: SQLiteMemory, n: int) -> None:
    now = utcnow()
    for start in range(0, n, 5_000):
        await memory.add(
            [
                MemoryRecord(
                    scope=USER,
                    text=f"note {i} about {WORDS[i % 50]} and {WORDS[(i * 7) % 50]}",
                    created_at=now - timedelta(seconds=n - i),
                    metadata={"n": i, "kind": f"k{i % 10}"},
                )
                for i in range(start, min(n, start + 5_000))
            ]
        )


async def paired(
    queries: int, base: Callable[[int], Awaitable[Any]], other: Callable[[int], Awaitable[Any]]
) -> tuple[float, float]:
    a: list[float] = []
    b: list[float] = []
    for q in range(queries):
        for fn, out in ((base, a), (other, b))[:: 1 if q % 2 else -1]:
            start = time.perf_counter()
            await fn(q)
            out.append((time.perf_counter() - start) * 1000)
    return statistics.median(a), statistics.median(b)


async def searches(memory: SQLiteMemory, n: int, queries: int, mode: str) -> list[dict[str, Any]]:
    now = utcnow()
    rows = []
    restrictions: list[tuple[str, dict[str, Any]]] = [
        ("since, newest 1%", {"since": now - timedelta(seconds=n // 100 + 5)}),
        ("since, newest 50%", {"since": now - timedelta(seconds=n // 2 + 5)}),
        ('{"n": {"$gte": ...}}, 1%', {"filters": {"n": {"$gte": n - n // 100}}}),
        ('{"n": {"$gte": ...}}, 50%', {"filters": {"n": {"$gte": n - n // 2}}}),
    ]

    def query(q: int) -> str:
        if mode == "recent":
            return ""
        return f"{WORDS[q % 50]} {WORDS[(q * 3 + 1) % 50]}"

    for name, extra in restrictions:

        async def plain(q: int) -> Any:
            return await memory.search(query(q), scope=USER, k=10)

        async def restricted(q: int, extra: dict[str, Any] = extra) -> Any:
            hits = await memory.search(query(q), scope=USER, k=10, **extra)
            assert hits or mode != "recent", "a restricted listing found nothing"
            return hits

        without, with_ = await paired(queries, plain, restricted)
        rows.append({"search": mode, "restriction": name, "without_ms": without, "with_ms": with_})
    return rows


async def updates(memory: SQLiteMemory, n: int, batch: int, total: int, kind: str) -> float:
    ids = [h.record.id for h in await memory.search("", scope=USER, k=1000)]
    ids += [r.id for r in (await memory.export(USER))[: total - len(ids)]]
    ids = [i for i in ids if i is not None][:total]
    start = time.perf_counter()
    for b in range(0, len(ids), batch):
        chunk = ids[b : b + batch]
        if kind == "metadata":
            changes = [MemoryUpdate(id=i, metadata={"n": -1, "kind": "changed"}) for i in chunk]
        else:
            changes = [MemoryUpdate(id=i, text=f"changed {i[:8]} about {WORDS[len(i) % 50]}") for i in chunk]
        done = await memory.update(changes, scope=USER)
        assert len(done) == len(chunk)
    return len(ids) / (time.perf_counter() - start)


async def main(
    n: int, queries: int, batch: int, total: int, modes: tuple[str, ...] = ("recent", "keyword", "hybrid")
) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="memoryport-port-bench-"))
    keyword = SQLiteMemory(folder / "keyword.db")
    hybrid = SQLiteMemory(folder / "hybrid.db", embedder=embedder())
    start = time.perf_counter()
    await fill(keyword, n)
    await fill(hybrid, n)
    filled = time.perf_counter() - start
    rows = []
    for mode in modes:
        if mode == "hybrid":
            await hybrid.search("warm up", scope=USER)
        rows += await searches(hybrid if mode == "hybrid" else keyword, n, queries, mode)
    throughput = {}
    if total:
        throughput = {
            "text, keyword-only file (FTS5 re-index)": await updates(keyword, n, batch, total, "text"),
            "text, with embedder (re-embed + vector write)": await updates(hybrid, n, batch, total, "text"),
            "metadata only": await updates(keyword, n, batch, total, "metadata"),
        }
        after_update = await hybrid.search("w01 w04", scope=USER, k=10)
        assert after_update
    await keyword.aclose()
    await hybrid.aclose()
    shutil.rmtree(folder, ignore_errors=True)
    return {"n": n, "queries": queries, "batch": batch, "updated": total, "fill_s": filled, "searches": rows,
            "update_per_s": throughput}  # fmt: skip


def table(result: dict[str, Any]) -> str:
    lines = [
        f"n={result['n']:,} records in one scope, k=10, median of {result['queries']} queries each",
        "",
        "| search | restriction | without (ms) | with (ms) | with / without |",
        "|---|---|---|---|---|",
    ]
    for row in result["searches"]:
        ratio = row["with_ms"] / row["without_ms"]
        lines.append(
            f"| {row['search']} | {row['restriction']} | {row['without_ms']:.2f} | {row['with_ms']:.2f} | {ratio:.2f} |"
        )
    lines += ["", f"update, batches of {result['batch']}, {result['updated']:,} records each:", "",
              "| update | records/s |", "|---|---|"]  # fmt: skip
    for name, rate in result["update_per_s"].items():
        lines.append(f"| {name} | {rate:,.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--updates", type=int, default=10_000, help="records updated per kind (0: no update part)")
    modes = ["recent", "keyword", "hybrid"]
    parser.add_argument("--modes", nargs="+", choices=modes, default=modes, help="which searches to time")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(main(args.n, args.queries, args.batch, min(args.updates, args.n), tuple(args.modes)))
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
