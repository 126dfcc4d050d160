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

    python benchmarks/curated_salience.py [--cases 60] [--seed 7] [--backend sqlite|postgres|reference] [--json FILE]

The backend is SQLite (keyword search, the default install), PostgreSQL
(full-text search; pgserver, or $MEMORYPORT_PG_DSN) or CallableMemory over the
reference store. ``--context-weight`` (default 0) is the store's
conversational context: with it, a memory written next to a match shares its
score, which suits conversation turns but not a store of unrelated facts
(the five memories of a case are written one after another, so the lift,
not the text, would separate them). Results go into docs/curated-memory.md.
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

# Every text of a case has the same length and the query's words once: BM25 sees equal matches
# (the backends rescale keyword scores min-max, so a word more or less would look like a big gap).
TOPICS = [
    ("dentist appointment", ["moved", "confirmed", "pencilled", "requested", "rescheduled"]),
    ("team offsite", ["planned", "budgeted", "approved", "postponed", "booked"]),
    ("car insurance", ["renewed", "quoted", "compared", "switched", "paid"]),
    ("piano lesson", ["set", "cancelled", "paid", "recorded", "shifted"]),
    ("book club", ["scheduled", "hosted", "voted", "announced", "moved"]),
    ("garden fence", ["repaired", "painted", "measured", "ordered", "quoted"]),
    ("tax return", ["filed", "prepared", "checked", "signed", "amended"]),
    ("flight to Oslo", ["booked", "changed", "upgraded", "paid", "confirmed"]),
]
FILLERS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "yesterday",
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
            texts = [f"The {topic} was {verb} on {f}" for verb, f in zip(verbs, fill, strict=True)]
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
    from _curated_backends import open_backend

    from memoryport import MemoryRecord, MemoryScope
    from memoryport._records import utcnow
    from memoryport.curated import AgentMemory, CurationPolicy
    from memoryport.curated import _keys as K

    folder = Path(tempfile.mkdtemp(prefix="memoryport-salience-"))
    extra = {} if args.backend == "reference" else {"context_weight": args.context_weight}
    memory, stop = open_backend(args.backend, folder, **extra)
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
    stop()
    table = {
        kind: {ranking: round(100 * sum(v) / len(v), 1) for ranking, v in by.items()} | {"cases": len(by["salience"])}
        for kind, by in hits.items()
    }
    return {"backend": args.backend, "context_weight": args.context_weight, "seed": args.seed, "cases": args.cases,
            "hit_at_1": table,
            "salience": {"relevance": agent.policy.salience.relevance, "importance": agent.policy.salience.importance,
                         "recency": agent.policy.salience.recency,
                         "half_life_days": agent.policy.salience.half_life.days}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--backend", choices=("sqlite", "postgres", "reference"), default="sqlite")
    ap.add_argument("--context-weight", type=float, default=0.0,
                    help="the store's conversational context (neighbour lift); 0 for a store of unrelated facts")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    result = asyncio.run(run(args))
    print(f"# {args.cases} cases, seed {args.seed}, backend {args.backend} (context_weight {args.context_weight}); "
          f"weights {result['salience']}")
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
