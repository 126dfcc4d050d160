"""What the agent loop's per-turn context costs on a 10k-memory scope.

One SQLite file (keyword search, the default install) holds ``--size`` curated
memories of one user (kinds preference, fact, skill, error, note and a few
reminders; importances random), written through the guard in batches. Then,
interleaved per message so all ways see the same file and machine state, for
``--turns`` user messages of mixed complexity:

* ``AgentMemory.recall(message, k=5, reinforce=False)``: the bare curated recall (baseline);
* ``PromptContext.turn(message)``: the per-turn block (time, upcoming and overdue
  reminders, complexity-aware recall 3/5/10, quoting, read filter);
* ``PromptContext.prefix()``: the stable prefix (pinned, preferences 10, facts 5,
  skills 3, errors 5 by importance, capped at 4,000 characters);
* ``AutoRecall.before_turn(messages)``: both, as a host calls it before each model turn.

Medians in ms, one run, and the ratio to the bare recall.

    python benchmarks/loop_context.py [--size 10000] [--turns 100] [--json FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

KINDS = ("preference", "fact", "skill", "error", "note")


def vocabulary(size: int) -> tuple[list[str], list[float]]:
    """Made-up words drawn with Zipf's law (s = 1.1), as words are in text."""
    words = [f"w{i:04d}" for i in range(size)]
    return words, [1.0 / (rank + 1) ** 1.1 for rank in range(size)]


def message(rnd: random.Random, words: list[str], weights: list[float], i: int) -> str:
    """A user message; every third short (depth 3), every third long or comparative (depth 10)."""
    if i % 3 == 0:
        return " ".join(rnd.choices(words, weights, k=2))
    if i % 3 == 1:
        return "What about " + " ".join(rnd.choices(words, weights, k=6)) + "?"
    return "Compare " + " ".join(rnd.choices(words, weights, k=12)) + " for me"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
    from memoryport.curated import AgentMemory
    from memoryport.loop import AutoRecall, PromptContext

    rnd = random.Random(args.seed)
    words, weights = vocabulary(args.vocabulary)
    folder = Path(tempfile.mkdtemp(prefix="memoryport-loop-context-"))
    guard = SQLiteMemory(folder / "loop.db")
    agent = AgentMemory(guard)
    scope = MemoryScope(user_id="bench")
    chat = MemoryScope(user_id="bench", session_id="chat")
    now = agent._now()
    for start in range(0, args.size, 1000):
        batch = []
        for i in range(start, min(start + 1000, args.size)):
            md: dict[str, Any] = {"mp:kind": KINDS[i % len(KINDS)], "mp:importance": round(rnd.random(), 3),
                                  "mp:source": "user"}
            if i % 500 == 0:
                md["mp:kind"] = "reminder"
                md["mp:due_at"] = int((now + timedelta(hours=rnd.randint(-48, 240))).timestamp())
            if i % 1000 == 1:
                md["mp:pinned"] = True
            text = "The user " + " ".join(rnd.choices(words, weights, k=10))
            batch.append(MemoryRecord(scope=chat, text=text, metadata=md))
        await guard.add(batch)
    context = PromptContext(agent)
    hook = AutoRecall(agent, context=context)
    messages = [message(rnd, words, weights, i) for i in range(args.turns)]
    times: dict[str, list[float]] = {"recall": [], "turn": [], "prefix": [], "before_turn": []}
    sizes: dict[str, list[int]] = {"turn": [], "prefix": []}
    # One warm-up turn: connections opened, caches filled.
    await hook.before_turn([{"role": "user", "content": messages[0]}], scope=chat)
    for text in messages:
        steps = [
            ("recall", lambda t=text: agent.recall(t, scope=scope, k=5, reinforce=False)),
            ("turn", lambda t=text: context.turn(t, scope=chat)),
            ("prefix", lambda: context.prefix(scope=chat)),
            ("before_turn", lambda t=text: hook.before_turn([{"role": "user", "content": t}], scope=chat)),
        ]
        rnd.shuffle(steps)
        for name, step in steps:
            start = time.perf_counter()
            result = await step()
            times[name].append((time.perf_counter() - start) * 1000)
            if name in sizes:
                sizes[name].append(len(result.text))
    await guard.aclose()
    shutil.rmtree(folder, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "size": args.size,
        "turns": args.turns,
        "median_ms": {k: round(v, 2) for k, v in medians.items()},
        "ratio_to_recall": {k: round(v / medians["recall"], 2) for k, v in medians.items()},
        "median_chars": {k: int(statistics.median(v)) for k, v in sizes.items()},
        "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def table(result: dict[str, Any]) -> str:
    rows = [
        ("`AgentMemory.recall(message, k=5, reinforce=False)` (baseline)", "recall"),
        ("`PromptContext.turn(message)`: the per-turn block", "turn"),
        ("`PromptContext.prefix()`: the stable prefix", "prefix"),
        ("`AutoRecall.before_turn(messages)`: prefix + turn block", "before_turn"),
    ]
    lines = [
        f"| way ({result['size']:,} memories in the scope, {result['turns']} messages) | median ms | × recall "
        "| median chars |",
        "|---|---:|---:|---:|",
    ]
    for label, key in rows:
        chars = result["median_chars"].get(key)
        lines.append(f"| {label} | {result['median_ms'][key]:.2f} | {result['ratio_to_recall'][key]:.2f} | "
                     f"{'' if chars is None else f'{chars:,}'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--vocabulary", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    text = table(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.out is not None:
        args.out.write_text(text)
    return text


if __name__ == "__main__":
    sys.stdout.write(main())
