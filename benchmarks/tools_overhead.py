"""What the model-facing tools cost on top of the memory they wrap.

Side by side in one run, on one SQLite file: a direct ``memory.search`` /
``memory.add`` against ``tools.dispatch("recall"/"remember", json, ctx)``,
which adds JSON parsing, argument validation, scope resolution, the PII check
(on remember) or redaction (on recall), and event relaying. Also the PII check
alone. Medians and ratios are printed as a Markdown table.

Run:  .venv/bin/python benchmarks/tools_overhead.py [--records 5000] [--repeat 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from memoryport import MemoryRecord, MemoryScope, ToolContext, memory_tools, pii_check, redact_pii
from memoryport.adapters.sqlite import SQLiteMemory

WORDS = [
    "tea",
    "coffee",
    "lisbon",
    "oslo",
    "trip",
    "dinner",
    "vegetarian",
    "marathon",
    "piano",
    "garden",
    "cat",
    "dog",
    "sister",
    "brother",
    "meeting",
    "budget",
    "report",
    "window",
    "seat",
    "train",
    "flight",
    "hotel",
    "museum",
    "jazz",
    "novel",
]


def fact(i: int) -> str:
    w = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6)]
    return f"User note {i}: likes {w[0]} and {w[1]}, planning {w[2]} with {w[3]}, mentions {w[4]} {w[5]}"


async def median_us(fn: Callable[[], Awaitable[object]], repeat: int) -> float:
    for _ in range(min(20, repeat)):
        await fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - t) * 1e6)
    return statistics.median(samples)


def median_sync_us(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e6)
    return statistics.median(samples)


async def main(records: int, repeat: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="memoryport-bench-"))
    memory = SQLiteMemory(folder / "memory.db")
    users = [f"user-{u}" for u in range(20)]
    batch = [MemoryRecord(scope=MemoryScope(user_id=users[i % len(users)]), text=fact(i)) for i in range(records)]
    await memory.add(batch)
    tools = memory_tools(memory)
    ann = MemoryScope(user_id=users[0])
    ctx = ToolContext(user_id=users[0])
    query = "planning a trip with my sister"
    args = json.dumps({"query": query})
    counter = iter(range(10**9))

    rows = []
    direct = await median_us(lambda: memory.search(query, scope=ann, k=5), repeat)
    tool = await median_us(lambda: tools.dispatch("recall", args, ctx), repeat)
    rows.append(("search k=5 vs recall", direct, tool))
    direct = await median_us(lambda: memory.search("", scope=ann, k=5), repeat)
    tool = await median_us(lambda: tools.dispatch("recall", '{"query": ""}', ctx), repeat)
    rows.append(("newest k=5 vs recall('')", direct, tool))
    direct = await median_us(
        lambda: memory.add([MemoryRecord(scope=ann, text=f"direct fact {next(counter)} about tea")]), repeat
    )
    tool = await median_us(
        lambda: tools.dispatch("remember", json.dumps({"text": f"tool fact {next(counter)} about tea"}), ctx), repeat
    )
    rows.append(("add 1 vs remember", direct, tool))
    await memory.aclose()
    shutil.rmtree(folder, ignore_errors=True)

    text = fact(3) + " and calls +44 20 7946 0958"
    check = median_sync_us(lambda: pii_check(fact(3)), repeat)
    redact = median_sync_us(lambda: redact_pii(text), repeat)

    print(f"records: {records:,} in 20 users; repeat: {repeat}; one SQLite file, keyword search")
    print()
    print("| operation | direct (µs, median) | through the tool (µs, median) | ratio |")
    print("|---|---:|---:|---:|")
    for name, d, t in rows:
        print(f"| {name} | {d:,.0f} | {t:,.0f} | {t / d:.2f} |")
    print()
    print(f"pii_check on a {len(fact(3))}-char text: {check:.1f} µs; redact_pii with one phone number: {redact:.1f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=300)
    ns = parser.parse_args()
    asyncio.run(main(ns.records, ns.repeat))
