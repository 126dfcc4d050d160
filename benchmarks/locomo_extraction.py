"""LLM extraction over the LoCoMo dev conversations: memories written, decisions, evidence recall.

Each conversation is one user (``user_id`` = the sample id); each of its
dialogue turns is fed, in order, to :meth:`memoryport.extraction.MemoryExtractor.extract`
as one user message ``"<speaker>: <text>"`` in the scope of its session
(``session_id`` = the session number), with GAIA's defaults (20 words,
10 candidates, confidence 0.4) and a curated memory on a fresh SQLite file.
Each memory written is tagged with the dialogue turn it came from (an UPDATE's
new version inherits its old version's turns), so that it can be scored:

* **memories per session**: memories written (ADD and UPDATE applied) per session;
* **decisions by type**: ADD, UPDATE, DELETE, NOOP, rejected, low confidence, and
  failures by reason (timeouts, malformed answers, ...);
* **evidence recall@k**: each question with evidence is asked of the
  extracted memories (``AgentMemory.recall``, relevance order, keyword search);
  recall@k is the fraction of its evidence turns that the memories among the
  first k came from, averaged over questions; **coverage** is the same with
  k = everything (did extraction keep the evidence at all).

The model is any OpenAI-compatible endpoint (``--base-url``, ``--model``,
``--api-key``), or, without one, the **scripted model**: deterministic and
honest, it proposes the turn itself, verbatim, as one ADD (kind ``fact``,
confidence 1) and a NOOP when a memory shown to it already has that text. It
makes no judgement at all: its figures are those of "store every turn long
enough to pass the 20-word filter", the baseline a real model has to beat on
recall per memory written.

    python benchmarks/locomo_extraction.py                      # scripted model, all conversations
    python benchmarks/locomo_extraction.py --conversations 1 --sessions 2
    python benchmarks/locomo_extraction.py --base-url http://localhost:11434/v1 --model llama3.2 --timeout 30

DATA defaults to ../shared/data/locomo/locomo-dev.json (beside the repository).
The data is CC BY-NC: benchmarks only, never shipped in the package.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.locomo import DEFAULT_DATA, Conversation, load, record_text
from memoryport import CallableModel, MemoryScope, SQLiteMemory
from memoryport.curated import AgentMemory
from memoryport.extraction import ExtractionPolicy, MemoryExtractor
from memoryport.models import ModelPort

KS = (5, 10, 25)
_SHOWN = re.compile(r"^\[m\d+\] \([\w-]+\) (.*)$", re.M)
_TURN = re.compile(r"<turn>\n(.*)\n</turn>", re.S)


def scripted_answer(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The scripted model: the turn itself as one ADD, or a NOOP when a shown memory already holds it."""
    prompt = messages[-1]["content"]
    found = _TURN.search(prompt)
    if not found:
        return {"decisions": []}
    said = "\n".join(line.split(": ", 1)[1] for line in found.group(1).splitlines() if line.startswith("user: "))
    if not said or said in _SHOWN.findall(prompt):
        return {"decisions": [{"action": "NOOP"}]}
    return {"decisions": [{"action": "ADD", "text": said, "kind": "fact", "confidence": 1.0}]}


def make_model(args: argparse.Namespace) -> tuple[ModelPort, str]:
    if args.base_url:
        from memoryport import OpenAIModel

        model = OpenAIModel(args.model, base_url=args.base_url, api_key=args.api_key, timeout=args.timeout,
                            json_mode=args.json_mode)
        return model, f"{args.model} at {args.base_url}"
    return CallableModel(scripted_answer, name="scripted"), "scripted (each long-enough turn proposed as one ADD)"


async def run_conversation(
    conv: Conversation, model: ModelPort, policy: ExtractionPolicy, sessions: int | None, workdir: Path
) -> dict[str, Any]:
    memory = AgentMemory(SQLiteMemory(workdir / f"{conv.sample_id}.db"))
    extractor = MemoryExtractor(memory, model, policy=policy)
    user = MemoryScope(user_id=conv.sample_id)
    origin: dict[str, set[str]] = {}  # memory id -> dialogue turns it came from
    per_session: Counter[int] = Counter()
    turns = [t for t in conv.turns if sessions is None or t.session <= sessions]
    latencies: list[float] = []
    for turn in turns:
        scope = MemoryScope(user_id=conv.sample_id, session_id=str(turn.session))
        start = time.perf_counter()
        result = await extractor.extract([{"role": "user", "content": record_text(turn)}], scope=scope)
        if result.status != "skipped":
            latencies.append((time.perf_counter() - start) * 1000)
        for d in result.decisions:
            if d.status != "applied" or d.memory_id is None:
                continue
            if d.action == "ADD":
                origin.setdefault(d.memory_id, set()).add(turn.dia_id)
                per_session[turn.session] += d.result == "added"
            elif d.action == "UPDATE":
                item = await memory.get(d.memory_id, scope=user)
                older = origin.get(item.supersedes or "", set()) if item is not None else set()
                origin[d.memory_id] = {*older, turn.dia_id}
                per_session[turn.session] += 1
    seen = {t.session for t in turns}
    known = {t.dia_id for t in turns}
    recall: dict[int, list[float]] = {k: [] for k in (*KS, 0)}
    for q in conv.questions:
        evidence = [e for e in q.evidence if e in known]
        if not evidence:
            continue
        hits = await memory.recall(q.text, scope=user, k=max(KS), ranking="relevance", reinforce=False)
        for k in KS:
            got = set().union(*(origin.get(h.id, set()) for h in hits[:k])) if hits else set()
            recall[k].append(len(got & set(evidence)) / len(evidence))
        kept = set().union(*origin.values()) if origin else set()
        recall[0].append(len(kept & set(evidence)) / len(evidence))
    live = len(await memory.list_memories(scope=user, limit=1000))
    await memory.aclose()
    return {"sample_id": conv.sample_id, "sessions": len(seen), "turns": len(turns), "stats": extractor.stats,
            "per_session": [per_session.get(s, 0) for s in sorted(seen)], "live_memories": live,
            "recall": recall, "latency_ms": latencies}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    conversations, _ = load(Path(args.data))
    conversations = conversations[: args.conversations] if args.conversations else conversations
    model, label = make_model(args)
    policy = ExtractionPolicy(timeout=args.timeout, min_words=args.min_words)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mp-extract-") as tmp:
        rows = [await run_conversation(c, model, policy, args.sessions, Path(tmp)) for c in conversations]
    if hasattr(model, "aclose"):
        await model.aclose()
    stats: Counter[str] = Counter()
    for row in rows:
        stats.update(row["stats"])
    per_session = [n for row in rows for n in row["per_session"]]
    recall = {k: [v for row in rows for v in row["recall"][k]] for k in (*KS, 0)}
    latencies = [v for row in rows for v in row["latency_ms"]]
    return {
        "model": label,
        "conversations": len(rows),
        "sessions": len(per_session),
        "turns": sum(r["turns"] for r in rows),
        "questions": len(recall[0]),
        "memories_per_session": {"mean": round(statistics.fmean(per_session), 2) if per_session else 0.0,
                                 "median": statistics.median(per_session) if per_session else 0,
                                 "total": sum(per_session)},
        "live_memories": sum(r["live_memories"] for r in rows),
        "decisions": {a: stats.get(f"decisions_{a}", 0) for a in ("ADD", "UPDATE", "DELETE", "NOOP")},
        "applied": {a: stats.get(f"applied_{a}", 0) for a in ("ADD", "UPDATE", "DELETE")},
        "rejected": stats.get("rejected", 0),
        "low_confidence": stats.get("low_confidence", 0),
        "skipped": {k.removeprefix("skipped_"): v for k, v in stats.items() if k.startswith("skipped_")},
        "failed": {k.removeprefix("failed_"): v for k, v in stats.items() if k.startswith("failed_")},
        "evidence_recall": {f"@{k}": round(statistics.fmean(recall[k]), 4) if recall[k] else 0.0 for k in KS},
        "coverage": round(statistics.fmean(recall[0]), 4) if recall[0] else 0.0,
        "model_call_ms_median": round(statistics.median(latencies), 2) if latencies else None,
        "seconds": round(time.perf_counter() - started, 1),
    }


def print_report(result: dict[str, Any]) -> None:
    print(f"model: {result['model']}")
    print(f"{result['conversations']} conversations, {result['sessions']} sessions, {result['turns']} turns, "
          f"{result['questions']} questions with evidence, {result['seconds']} s")
    m = result["memories_per_session"]
    print(f"memories written per session: mean {m['mean']}, median {m['median']}, total {m['total']} "
          f"({result['live_memories']} live at the end)")
    print("| decisions | ADD | UPDATE | DELETE | NOOP | rejected | low confidence |")
    print("|---|---|---|---|---|---|---|")
    d, a = result["decisions"], result["applied"]
    print(f"| proposed | {d['ADD']} | {d['UPDATE']} | {d['DELETE']} | {d['NOOP']} | {result['rejected']} | "
          f"{result['low_confidence']} |")
    print(f"| applied | {a['ADD']} | {a['UPDATE']} | {a['DELETE']} | - | - | - |")
    print(f"skipped turns: {result['skipped'] or 0}; failed calls: {result['failed'] or 0}")
    r = result["evidence_recall"]
    print("| evidence recall | " + " | ".join(r) + " | coverage |")
    print("|---|" + "---|" * (len(r) + 1))
    print("| extracted memories | " + " | ".join(f"{v:.3f}" for v in r.values()) + f" | {result['coverage']:.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--base-url", help="an OpenAI-compatible API root (…/v1); without it, the scripted model")
    parser.add_argument("--model", default="llama3.2", help="the model name sent to the server")
    parser.add_argument("--api-key", default=None, help="sent as a bearer token (local servers need none)")
    parser.add_argument("--json-mode", default="object", choices=("object", "schema", "off"))
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per model call (GAIA: 3)")
    parser.add_argument("--min-words", type=int, default=20, help="shorter turns are skipped (GAIA: 20)")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations")
    parser.add_argument("--sessions", type=int, default=None, help="only the first N sessions of each")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    print_report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
