"""Recall on a store of unrelated short facts: many users, paraphrased questions (generated, offline).

The counterweight to ``benchmarks/locomo.py``: LoCoMo's memories are the turns
of long conversations, where neighbouring records share context. Here every
user holds short, unrelated facts about themselves ("My sister is called
Ines.", "I am allergic to peanuts."), written one after another, and asks for
each with a question in other words ("What is my sibling's name?"). A ranking
change that helps conversations must not hurt this shape of store.

The data is generated from templates with a seeded random generator, so the
same command always builds the same store: ``--users`` users, each holding
``--facts`` facts drawn from the topics below with their own values (values
repeat across users, never within one user's topic). Every fact has several
phrasings and several question paraphrases; one phrasing is stored and one
question is asked per fact. Questions share few or no words with the fact
they ask for (a question never repeats the value it asks for). Scopes are
``MemoryScope(user_id=...)``; records are written a minute apart. Each question
has exactly one right record; the table gives recall@1/@3/@5 (the share of
questions whose record is among the first k hits) and MRR@10, per search mode.

    python benchmarks/facts_recall.py [--users 60] [--facts 25] [--cache DIR] [--embed-questions] [--json FILE]
    python benchmarks/facts_recall.py --cache DIR --variants '{"keys off": {"context_key_weight": 0}}'  # options

With ``--cache`` the embeddings are kept between runs (per-query times then
exclude embedding the question unless ``--embed-questions``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

try:
    from benchmarks.locomo import CachedEmbedder
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from locomo import CachedEmbedder  # type: ignore[no-redef]

# topic -> (values, fact phrasings with {v}, question paraphrases)
TOPICS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "pet": (
        ["Biscuit", "Pepper", "Luna", "Milo", "Ziggy", "Nala", "Otis", "Clover"],
        ["My dog is called {v}.", "We adopted a puppy and named him {v}.", "{v} is the name of my dog."],
        ["What is my pet's name?", "How did I name the animal I own?", "What do I call my puppy?"],
    ),
    "city": (
        ["Lisbon", "Osaka", "Denver", "Tallinn", "Cork", "Valparaiso", "Leipzig", "Hobart"],
        ["I live in {v}.", "Home for me is {v} these days.", "I moved to {v} two years ago."],
        ["Where is my home?", "Which city do I reside in?", "What town am I based in?"],
    ),
    "job": (
        ["nurse", "carpenter", "data analyst", "pilot", "teacher", "chef", "architect", "lawyer"],
        ["I work as a {v}.", "My job: {v}.", "I earn my living as a {v}."],
        ["What is my profession?", "What do I do for a living?", "What's my occupation?"],
    ),
    "allergy": (
        ["peanuts", "shellfish", "penicillin", "cats", "pollen", "latex", "sesame", "eggs"],
        ["I am allergic to {v}.", "{v} give me a bad allergic reaction.", "I react badly to {v}, allergy."],
        ["What must I avoid for health reasons?", "What am I allergic to?", "Which thing triggers my reactions?"],
    ),
    "sibling": (
        ["Ines", "Tomas", "Greta", "Yusuf", "Marta", "Oskar", "Priya", "Hugo"],
        ["My sister is called {v}.", "{v} is my younger sibling.", "I have one sibling, {v}."],
        ["What is my sibling's name?", "Who is my brother or sister?", "How is my sister named?"],
    ),
    "food": (
        ["ramen", "lasagna", "tacos", "paella", "sushi", "pierogi", "curry", "falafel"],
        ["My favourite dish is {v}.", "Nothing beats {v} for dinner.", "I could eat {v} every day."],
        ["What meal do I love most?", "Which food is my favourite?", "What do I like to eat best?"],
    ),
    "sport": (
        ["tennis", "rowing", "climbing", "cycling", "judo", "swimming", "badminton", "surfing"],
        ["I play {v} on weekends.", "My hobby is {v}.", "I train for {v} twice a week."],
        ["What sport do I do?", "How do I stay active?", "Which activity do I practise in my free time?"],
    ),
    "car": (
        ["a red Volvo", "a Toyota Prius", "an old Land Rover", "a Tesla", "a Fiat Panda", "a blue Golf"],
        ["I drive {v}.", "My car is {v}.", "I commute in {v}."],
        ["What vehicle do I own?", "What do I drive?", "Which automobile is mine?"],
    ),
    "birthday": (
        ["March 3", "July 19", "October 8", "January 27", "May 14", "December 1"],
        ["My birthday is on {v}.", "I was born on {v}.", "I celebrate turning a year older on {v}."],
        ["When is my birthday?", "What day was I born?", "When should I get birthday wishes?"],
    ),
    "language": (
        ["Portuguese", "Japanese", "Finnish", "Swahili", "Korean", "Dutch", "Greek", "Turkish"],
        ["I am learning {v}.", "I take {v} lessons every Tuesday.", "I'm studying {v} on an app."],
        ["Which language am I studying?", "What foreign tongue am I picking up?", "What do I take lessons in?"],
    ),
    "instrument": (
        ["the cello", "the piano", "the drums", "the violin", "the ukulele", "the saxophone"],
        ["I play {v}.", "I've practised {v} since school.", "Music-wise, {v} is my instrument."],
        ["What instrument do I play?", "What kind of music do I make?", "Which instrument did I learn?"],
    ),
    "diet": (
        ["vegetarian", "vegan", "gluten-free", "pescatarian", "keto"],
        ["I eat a {v} diet.", "I'm {v}.", "I keep to {v} meals."],
        ["What are my eating restrictions?", "Do I follow a diet?", "What should a host cook for me?"],
    ),
    "team": (
        ["the Celtics", "Arsenal", "the Yankees", "Benfica", "the Packers", "Ajax"],
        ["I'm a big fan of {v}.", "I support {v}.", "I never miss a game of {v}."],
        ["Which team do I root for?", "Who do I cheer for in sports?", "What club am I a supporter of?"],
    ),
    "coffee": (
        ["oat milk latte", "double espresso", "black filter coffee", "flat white", "cappuccino"],
        ["I order an {v} every morning.", "My usual drink is a {v}.", "I start the day with a {v}."],
        ["How do I take my coffee?", "What do I drink in the morning?", "What is my usual order at the cafe?"],
    ),
    "partner": (
        ["Sam", "Alex", "Noor", "Jonas", "Lea", "Mateo", "Aiko"],
        ["My wife is {v}.", "I married {v} last spring.", "{v} and I have been together for years."],
        ["Who is my spouse?", "What is my partner called?", "Who did I marry?"],
    ),
    "employer": (
        ["Acme Logistics", "Globex", "Initech", "Northwind", "Umbrella Labs", "Hooli"],
        ["I work for {v}.", "My employer is {v}.", "I joined {v} last year."],
        ["Which company employs me?", "Where do I work?", "Who is my boss's company?"],
    ),
    "school": (
        ["Oxford", "MIT", "the University of Porto", "ETH Zurich", "McGill", "Kyoto University"],
        ["I studied at {v}.", "I graduated from {v}.", "My degree is from {v}."],
        ["Where did I go to university?", "Which college did I attend?", "Where did I get my degree?"],
    ),
    "fear": (
        ["spiders", "heights", "deep water", "flying", "clowns", "thunderstorms"],
        ["I am terrified of {v}.", "{v} scare me a lot.", "I have a phobia of {v}."],
        ["What am I afraid of?", "What frightens me?", "What is my phobia?"],
    ),
    "book": (
        ["Dune", "Middlemarch", "The Hobbit", "Beloved", "Solaris", "Persuasion"],
        ["My favourite novel is {v}.", "I have reread {v} five times.", "The book I love most is {v}."],
        ["Which book do I like best?", "What novel would I recommend?", "What's my favourite read?"],
    ),
    "holiday": (
        ["Iceland", "Vietnam", "Morocco", "Patagonia", "Crete", "Norway"],
        ["Next summer I'm travelling to {v}.", "I booked a trip to {v}.", "Our vacation this year is in {v}."],
        ["Where am I going on holiday?", "What is my next travel destination?", "Where is my trip?"],
    ),
    "plant": (
        ["tomatoes", "basil", "orchids", "succulents", "roses", "chillies"],
        ["I grow {v} on my balcony.", "I'm proud of my {v}.", "Gardening: I care for {v}."],
        ["What do I grow?", "Which plants do I keep?", "What is in my garden?"],
    ),
    "medication": (
        ["insulin", "an inhaler", "blood thinners", "thyroid pills", "antihistamines"],
        ["I take {v} daily.", "My doctor put me on {v}.", "I need {v} every day."],
        ["What medicine am I on?", "What prescription do I have?", "Which treatment do I use each day?"],
    ),
    "kids": (
        ["two daughters", "a son", "three kids", "twin boys", "a baby girl"],
        ["I have {v}.", "We are raising {v}.", "At home I look after {v}."],
        ["How many children do I have?", "Tell me about my family's kids.", "Am I a parent?"],
    ),
    "commute": (
        ["by bike", "by train", "on foot", "by bus", "by ferry"],
        ["I get to work {v}.", "I commute {v}.", "Every morning I travel to the office {v}."],
        ["How do I travel to my job?", "What's my way of getting to the office?", "How do I get to work?"],
    ),
    "color": (
        ["green", "purple", "orange", "navy blue", "yellow"],
        ["My favourite colour is {v}.", "I paint everything {v}.", "{v} is the colour I like most."],
        ["Which colour do I prefer?", "What hue do I like?", "What's my favourite colour?"],
    ),
}


@dataclass
class Fact:
    user: str
    topic: str
    text: str
    question: str
    created_at: datetime


def generate(users: int, facts: int, seed: int = 7) -> list[Fact]:
    """Deterministic facts: ``facts`` topics per user (at most all), one phrasing and one question each."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
    out: list[Fact] = []
    topics = sorted(TOPICS)
    for u in range(users):
        user = f"user-{u:04d}"
        chosen = rng.sample(topics, min(facts, len(topics)))
        for i, topic in enumerate(chosen):
            values, phrasings, questions = TOPICS[topic]
            value = rng.choice(values)
            text = rng.choice(phrasings).format(v=value)
            out.append(Fact(user, topic, text[0].upper() + text[1:], rng.choice(questions),
                            start + timedelta(days=u, minutes=i)))
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryport import MemoryRecord, MemoryScope
    from memoryport.adapters.sqlite import SQLiteMemory
    from memoryport.embedders.local import LocalEmbedder

    facts = generate(args.users, args.facts, args.seed)
    embedder: Any = LocalEmbedder(args.model, engine=args.engine)
    if args.cache:
        embedder = CachedEmbedder(embedder, args.cache)
    folder = Path(tempfile.mkdtemp(prefix="memoryport-facts-"))
    modes = args.modes
    memories = {m: SQLiteMemory(folder / "facts.db", embedder=embedder, search_mode=m) for m in modes}
    for name, options in (args.variants or {}).items():
        # Any store options, side by side on the same records, e.g. '{"keys off": {"context_key_weight": 0}}'.
        memories[name] = SQLiteMemory(folder / "facts.db", embedder=embedder, **options)
    writer = memories[modes[0]]
    by_user: dict[str, list[Fact]] = {}
    for f in facts:
        by_user.setdefault(f.user, []).append(f)
    ids: dict[str, tuple[str, str]] = {}  # record id -> (user, topic)
    for user, mine in by_user.items():
        scope = MemoryScope(user_id=user)
        records = [MemoryRecord(scope=scope, text=f.text, metadata={"topic": f.topic}, created_at=f.created_at)
                   for f in mine]
        for rid, f in zip(await writer.add(records), mine, strict=True):
            ids[rid] = (user, f.topic)
    if isinstance(embedder, CachedEmbedder) and args.embed_questions:
        embedder.live = True
    result: dict[str, Any] = {"users": args.users, "facts": len(facts), "seed": args.seed,
                              "embedder": embedder.name, "modes": {}}
    for mode in memories:
        ranks: list[int | None] = []
        latency: list[float] = []
        for f in facts:
            t0 = time.perf_counter()
            hits = await memories[mode].search(f.question, scope=MemoryScope(user_id=f.user), k=10)
            latency.append((time.perf_counter() - t0) * 1000)
            found = [ids[str(h.record.id)] for h in hits]
            ranks.append(found.index((f.user, f.topic)) + 1 if (f.user, f.topic) in found else None)
        n = len(ranks)
        lat = sorted(latency)
        result["modes"][mode] = {
            **{f"R@{k}": 100 * sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 3, 5)},
            "MRR@10": sum(1 / r for r in ranks if r is not None) / n,
            "ms_median": statistics.median(lat),
            "ms_p95": lat[int(0.95 * (n - 1))],
        }
    for memory in memories.values():
        await memory.aclose()
    if isinstance(embedder, CachedEmbedder):
        embedder.live = False
        embedder.save()
    shutil.rmtree(folder)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=60)
    ap.add_argument("--facts", type=int, default=20, help="facts per user (at most the number of topics)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--modes", default="keyword,vector,hybrid", type=lambda s: s.split(","))
    ap.add_argument("--model", default=None, help="LocalEmbedder model folder (default: all-MiniLM-L6-v2)")
    ap.add_argument("--cache", type=Path, default=None, help="keep embeddings in this folder between runs")
    ap.add_argument("--embed-questions", action="store_true", help="with --cache: embed each question in the run")
    ap.add_argument("--engine", default="auto", choices=["auto", "onnxruntime", "numpy"],
                    help="LocalEmbedder engine (default auto: onnxruntime when installed)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--variants", type=json.loads, default={},
                    help='JSON: row name -> SQLiteMemory options, e.g. \'{"k0": {"context_key_weight": 0}}\'')
    args = ap.parse_args(argv)
    result = asyncio.run(run(args))
    print(f"# {result['users']} users, {result['facts']} facts (seed {result['seed']}), embedder {result['embedder']}")
    print()
    print("| mode | R@1 | R@3 | R@5 | MRR@10 | ms/query median (p95) |")
    print("|---|---|---|---|---|---|")
    for mode, m in result["modes"].items():
        print(f"| {mode} | {m['R@1']:.1f} | {m['R@3']:.1f} | {m['R@5']:.1f} | {m['MRR@10']:.3f} | "
              f"{m['ms_median']:.1f} ({m['ms_p95']:.1f}) |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
