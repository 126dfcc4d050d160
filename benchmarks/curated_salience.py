"""Does salience put the right memory first? A constructed benchmark for AgentMemory's ranking.

Three kinds of cases, generated from templates (deterministic for a seed), each
asked in its own scope; the score is hit@1 (the expected memory first) with
plain relevance (``ranking="relevance"``) and with salience (the default):

* ``importance``: five memories match the query about equally well; the
  expected one was stored with importance 0.9, the others 0.3. Salience should
  put it first; plain relevance does so only by chance.
* ``recency``: five about-equal matches of equal importance; the expected one
  is the oldest (400 days) but was recalled yesterday, the others were written
  30 to 300 days ago and never used. Salience should put it first; plain
  relevance, which knows nothing of use, does not.
* ``relevance``: one memory matches every query word; four match one word
  only but have importance 1.0 and were just written. Salience must still put
  the real match first (importance and recency break near-ties, they do not
  override a clearly better match).

    python benchmarks/curated_salience.py [--cases 60] [--seed 7] [--backend sqlite|reference] [--json FILE]

The backend is SQLite (keyword search, the default install) or CallableMemory
over the reference store. Results go into docs/curated-memory.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

TOPICS = [
    ("dentist appointment", ["moved to", "confirmed for", "pencilled in for", "asked about", "rescheduled to"]),
    ("team offsite", ["planned in", "budgeted for", "voted for", "postponed to", "booked in"]),
    ("car insurance", ["renewed with", "quoted by", "compared with", "switched to", "paid to"]),
    ("piano lesson", ["set for", "cancelled on", "paid for", "recorded on", "shifted to"]),
    ("book club", ["meets on", "reads", "voted on", "hosted by", "moved to"]),
    ("garden fence", ["repaired by", "painted on", "measured for", "ordered from", "quoted by"]),
    ("tax return", ["filed on", "prepared by", "checked by", "due on", "amended on"]),
    ("flight to Oslo", ["booked for", "changed to", "seat chosen on", "paid on", "checked in on"]),
]
FILLERS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the twelfth", "the third", "next week",
           "Acme", "Globex", "Initech", "Umbrella", "March", "April", "June", "October"]
STRONG = [
    ("quarterly budget review meeting", "The quarterly budget review meeting moved to Thursday afternoon"),
    ("daughter swimming class schedule", "Her daughter's swimming class schedule changed to Saturday mornings"),
    ("landlord boiler repair visit", "The landlord's boiler repair visit is on Wednesday at nine"),
    ("marathon training plan week", "The marathon training plan this week has three long runs"),
]
WEAK = ["The quarter ended well", "Meeting people is fun", "Reviews are due soon", "A budget app was installed",
        "Swimming is good exercise", "The schedule app crashed", "Her class photo arrived", "Daughter's friend came",
        "Boiler brands compared", "The visit was short", "A repair shop opened", "Landlord called",
        "The plan is flexible", "Training shoes bought", "A marathon on TV", "Week off in May"]


def cases(n: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        kind = ("importance", "recency", "relevance")[i % 3]
        if kind == "relevance":
            query, strong = STRONG[rnd.randrange(len(STRONG))]
            weak = rnd.sample(WEAK, 4)
            items = [{"text": strong, "importance": 0.1, "age_days": 200, "expected": True}]
            items += [{"text": w, "importance": 1.0, "age_days": 0, "expected": False} for w in weak]
        else:
            topic, verbs = TOPICS[rnd.randrange(len(TOPICS))]
            fill = rnd.sample(FILLERS, 5)
            texts = [f"The {topic} was {verb} {f}" for verb, f in zip(verbs, fill, strict=True)]
            query = f"when is the {topic}"
            target = rnd.randrange(5)
            items = []
            for j, text in enumerate(texts):
                if kind == "importance":
                    items.append({"text": text, "importance": 0.9 if j == target else 0.3, "age_days": 0,
                                  "expected": j == target})
                else:
                    # The expected memory is the oldest but was used (recalled) yesterday.
                    age = 400 if j == target else rnd.randint(30, 300)
                    items.append({"text": text, "importance": 0.5, "age_days": age, "expected": j == target,
                                  "used_days_ago": 1 if j == target else None})
        rnd.shuffle(items)
        out.append({"kind": kind, "query": query, "items": items})
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryport import CallableMemory, MemoryRecord, MemoryScope, SQLiteMemory
    from memoryport._records import utcnow
    from memoryport.curated import AgentMemory, CurationPolicy
    from memoryport.curated import _keys as K

    folder = Path(tempfile.mkdtemp(prefix="memoryport-salience-"))
    if args.backend == "sqlite":
        memory: Any = SQLiteMemory(folder / "salience.db")
    else:
        from memoryport.testing import InMemoryStore  # type: ignore[import-not-found]

        store = InMemoryStore()
        memory = CallableMemory(**{op: getattr(store, op) for op in
                                   ("add", "search", "get", "delete", "export", "purge", "update", "count")},
                                capabilities=store.capabilities)
    agent = AgentMemory(memory, policy=CurationPolicy(dedup=False, recall_boost=0.0))
    now = utcnow()

    def metadata(item: dict[str, Any]) -> dict[str, Any]:
        md: dict[str, Any] = {K.KIND: "fact", K.IMPORTANCE: item["importance"], K.SOURCE: "user"}
        if item.get("used_days_ago") is not None:
            md[K.LAST_USED] = int((now - timedelta(days=item["used_days_ago"])).timestamp())
            md[K.USES] = 1
        return md

    hits: dict[str, dict[str, list[int]]] = {}
    for i, case in enumerate(cases(args.cases, args.seed)):
        scope = MemoryScope(user_id=f"case-{i}")
        # Written as AgentMemory writes them, with creation times in the past where the case says so.
        records = [
            MemoryRecord(scope=scope, text=item["text"], created_at=now - timedelta(days=item["age_days"]),
                         metadata=metadata(item))
            for item in case["items"]
        ]
        ids = await memory.add(records)
        expected = ids[[item["expected"] for item in case["items"]].index(True)]
        for ranking in ("relevance", "salience"):
            got = await agent.recall(case["query"], scope=scope, k=5, ranking=ranking, reinforce=False)
            hits.setdefault(case["kind"], {}).setdefault(ranking, []).append(int(bool(got) and got[0].id == expected))
    await memory.aclose()
    table = {
        kind: {ranking: round(100 * sum(v) / len(v), 1) for ranking, v in by.items()} | {"cases": len(by["salience"])}
        for kind, by in hits.items()
    }
    return {"backend": args.backend, "seed": args.seed, "cases": args.cases, "hit_at_1": table,
            "salience": {"relevance": agent.policy.salience.relevance, "importance": agent.policy.salience.importance,
                         "recency": agent.policy.salience.recency,
                         "half_life_days": agent.policy.salience.half_life.days}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--backend", choices=("sqlite", "reference"), default="sqlite")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    result = asyncio.run(run(args))
    print(f"# {args.cases} cases, seed {args.seed}, backend {args.backend}; weights {result['salience']}")
    print()
    print("| case | cases | hit@1 plain relevance | hit@1 salience |")
    print("|---|---|---|---|")
    for kind, row in result["hit_at_1"].items():
        print(f"| {kind} | {row['cases']} | {row['relevance']:.1f} | {row['salience']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
