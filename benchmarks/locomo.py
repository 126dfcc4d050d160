"""Evidence recall@k of keyword, vector and hybrid search on LoCoMo conversations (SQLite or PostgreSQL).

Each conversation becomes one scope (``user_id`` = the sample id) holding one
record per dialogue turn: the text is ``"<speaker>: <turn>"``, followed by
``" [shares a photo: <caption>]"`` when the turn shared an image; the
metadata holds the turn id, speaker, session number and session date, and
``created_at`` is the session's date. Every question with evidence is then
asked in its conversation's scope, and recall@k is the fraction of its
evidence turns among the first k hits, averaged over questions, overall and
per category. Malformed evidence ids are normalised where unambiguous
(``"D8:6; D9:17"`` -> two ids, ``"D:11:26"`` -> ``D11:26``, ``"D30:05"`` ->
``D30:5``); the rest are dropped and counted.

    python benchmarks/locomo.py [DATA] [--modes keyword,vector,hybrid] [--cache DIR] [--json FILE]
    python benchmarks/locomo.py [DATA] --ablation      # one row per ranking change, cumulative
    python benchmarks/locomo.py [DATA] --backend postgres [--dsn DSN] --cache DIR   # PostgresMemory
    python benchmarks/locomo.py [DATA] --modes hybrid --min-similarity 0.1,0.2,0.3   # similarity floors
    python benchmarks/locomo.py [DATA] --curated [--now last-session]   # + recall through AgentMemory
    python benchmarks/locomo.py [DATA] --modes hybrid --variants '{"s0.5": {"session_weight": 0.5}}'  # options

``--curated`` adds, for every mode, two rows: ``<mode>+layer`` asks the same
questions through :class:`memoryport.curated.AgentMemory` with plain relevance
(``ranking="relevance"``: what the layer itself costs or changes), and
``<mode>+salience`` with salience ranking on (the default: three times the
candidates, re-ordered) and uniform importance (the turns are plain records:
every one reads as importance 0.5); no reinforcement. ``--now last-session`` sets
the layer's clock to the day after each conversation's last session, so that
recency weighs in (with the real clock every turn is years old and recency is
~0 for all).

``--backend postgres`` stores the same records in PostgresMemory (the server at
``--dsn``, else one started from the pgserver wheel); with the same ``--cache``
both backends rank identical vectors, so their recall can be compared.

``--ablation`` switches the ranking steps of ``memoryport.ranking``
off and on in turn (stopwords, fusion by scores instead of ranks, neighbours,
dates, sessions, speakers named in the question, questions asking when, contextual keyword keys,
the previous turn's vector, the length prior)
to show what each gained.
``--baseline`` adds a hybrid row without the session step, asked question
by question beside the default (latency ratios from one run);
``--previous-weight W`` sets the previous-turn mixing (replies only by default) of every mode's store.

Latency: every question is asked at k=50 (recall@5..50 come from that search)
and timed again at each ``--latency-k`` (default 10, the k of the recall@10
goal; the two in alternating order), so both medians come from one run.
``--embed-questions`` (with ``--cache``) embeds each question in the run, so
the times include it; ``--timeline`` then also times the question's embedding
alone (``embed_sync``, once per question). ``--blas-threads auto,none`` builds
one LocalEmbedder per setting (``blas_threads``; ``none``: numpy's own count)
and one hybrid store for each after the first, asked question by question in
the same run: before/after ratios of the embedder's thread policy.
``--engines onnxruntime,numpy`` does the same for LocalEmbedder's ``engine``
(the first is the main store's); with ``--timeline`` each engine's embedding
alone is timed too, and with ``--embed-questions`` a store whose question
vectors come from the cache adds the search alone to the same run. Stores
are asked in turn, in reverse order for every other question, so that none
always goes first.

DATA defaults to ../shared/data/locomo/locomo-dev.json (beside the repository).
The data is CC BY-NC: benchmarks only, never shipped in the package.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (5, 10, 25, 50)
_EVIDENCE = re.compile(r"^D:?(\d+):0*(\d+)$")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    session: int
    date: datetime


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


@dataclass
class EvidenceReport:
    ids: int = 0
    normalised: int = 0
    dropped: list[str] = field(default_factory=list)
    questions_without_evidence: int = 0


def parse_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def normalise_evidence(raw: str, known: set[str]) -> tuple[list[str], list[str]]:
    """(ids found among ``known``, pieces dropped) for one evidence string."""
    kept, dropped = [], []
    for piece in re.split(r"[;,\s]+", raw.strip()):
        if not piece:
            continue
        m = _EVIDENCE.match(piece)
        candidate = f"D{int(m.group(1))}:{int(m.group(2))}" if m else piece
        (kept if candidate in known else dropped).append(candidate if m else piece)
    return kept, dropped


def load(path: Path) -> tuple[list[Conversation], EvidenceReport]:
    data = json.loads(path.read_text(encoding="utf-8"))
    report = EvidenceReport()
    conversations = []
    for sample in data:
        conv = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in conv:
            date = parse_date(conv[f"session_{n}_date_time"])
            for turn in conv[f"session_{n}"]:
                turns.append(Turn(turn["dia_id"], turn["speaker"], turn["text"], turn.get("blip_caption"), n, date))
            n += 1
        known = {t.dia_id for t in turns}
        questions = []
        for qa in sample["qa"]:
            evidence: list[str] = []
            for raw in qa.get("evidence", []):
                report.ids += 1
                kept, dropped = normalise_evidence(raw, known)
                if kept and kept != [raw]:
                    report.normalised += 1
                report.dropped += [f"{sample['sample_id']}:{d}" for d in dropped]
                evidence += [e for e in kept if e not in evidence]
            if evidence:
                questions.append(Question(qa["question"], int(qa["category"]), evidence))
            else:
                report.questions_without_evidence += 1
        conversations.append(Conversation(sample["sample_id"], turns, questions))
    return conversations, report


def record_text(turn: Turn) -> str:
    text = f"{turn.speaker}: {turn.text}"
    if turn.caption:
        text += f" [shares a photo: {turn.caption}]"
    return text


def conversation_records(conv: Conversation) -> list[Any]:
    """One record per turn of ``conv`` in its own scope (``user_id`` = the sample id), as every LoCoMo run stores it."""
    from memoryport import MemoryRecord, MemoryScope

    scope = MemoryScope(user_id=conv.sample_id)
    return [
        MemoryRecord(
            scope=scope,
            text=record_text(t),
            metadata={"dia_id": t.dia_id, "speaker": t.speaker, "session": t.session,
                      "session_date": t.date.date().isoformat()},
            created_at=t.date + timedelta(seconds=i),
        )
        for i, t in enumerate(conv.turns)
    ]  # fmt: skip

class CachedEmbedder:
    """Wraps an embedder with a vector cache on disk, to iterate on ranking quickly (timings then exclude it)."""

    def __init__(self, inner: Any, folder: Path) -> None:
        import numpy as np

        self.inner = inner
        folder.mkdir(parents=True, exist_ok=True)
        self.file = folder / f"{hashlib.sha256(inner.name.encode()).hexdigest()[:16]}.npz"
        self.vectors: dict[str, Any] = {}
        if self.file.exists():
            with np.load(self.file) as z:
                self.vectors = dict(zip(z["keys"].tolist(), z["rows"], strict=True))
        self.dirty = False
        self._live = False

    @property
    def live(self) -> bool:
        """True: questions are embedded in the run (timed), records still come from the cache."""
        return self._live

    @live.setter
    def live(self, value: bool) -> None:
        # Live, the inner embedder's blocking embed_sync shows through, as a store would see it unwrapped.
        self._live = value
        if value and callable(getattr(self.inner, "embed_sync", None)):
            self.embed_sync = self.inner.embed_sync
        else:
            self.__dict__.pop("embed_sync", None)

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    async def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        if self.live:
            return await self.inner.embed(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            rows = await self.inner.embed(missing)
            self.vectors.update(zip(missing, rows, strict=True))
            self.dirty = True
        return np.stack([self.vectors[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def save(self) -> None:
        import numpy as np

        if self.dirty:
            keys = list(self.vectors)
            np.savez(self.file, keys=np.array(keys), rows=np.stack([self.vectors[k] for k in keys]))


ABLATION = ["naive", "+stopwords", "+score fusion", "+neighbours", "+dates", "+sessions", "+speakers",
            "+when questions", "+previous turn (replies)", "+contextual keys", "+length prior"]


class CuratedSearch:
    """Search through AgentMemory's recall (salience on, no reinforcement), shaped like the guard's search."""

    def __init__(self, memory: Any, last_session: dict[str, datetime] | None, *, ranking: str,
                 recency: float | None = None) -> None:
        from memoryport.curated import AgentMemory, CurationPolicy, Salience

        self.ranking = ranking
        self.last_session = last_session
        self.user = ""
        clock = None if last_session is None else (lambda: self.last_session[self.user])  # type: ignore[index]
        kwargs = {} if clock is None else {"clock": clock}
        salience = Salience() if recency is None else Salience(recency=recency)
        self.agent = AgentMemory(memory, policy=CurationPolicy(recall_boost=0.0, salience=salience), **kwargs)

    async def search(self, query: str, *, scope: Any, k: int) -> list[Any]:
        from types import SimpleNamespace

        self.user = scope.user_id
        items = await self.agent.recall(query, scope=scope, k=k, reinforce=False, ranking=self.ranking)
        return [SimpleNamespace(record=item.record, score=item.salience) for item in items]


def configure_ranking(step: str, memories: dict[str, Any] | None = None) -> None:
    """Switch the ranking steps on up to ``step`` (see ``ABLATION``), for the ablation table.

    Module-level steps are patched in :mod:`memoryport.ranking`; per-store
    options (neighbour and date weights) are set on each store in ``memories``.
    """
    from memoryport import ranking

    original = configure_ranking.__dict__.setdefault(
        "original",
        (ranking.STOPWORDS, ranking.fuse, ranking.NEIGHBOUR_WEIGHT, ranking.DATE_WEIGHT, ranking.PREVIOUS_WEIGHT,
         ranking.SESSION_WEIGHT, ranking.SPEAKER_WEIGHT, ranking.TIME_WEIGHT, ranking.CONTEXT_KEY_WEIGHT,
         ranking.LENGTH_WEIGHT),
    )
    (stopwords, fuse, neighbour_weight, date_weight, previous_weight, session_weight, speaker_weight, time_weight,
     key_weight, length_weight) = original
    level = ABLATION.index(step)

    def rank_fusion(keyword: Any, vector: Any, **_: Any) -> Any:
        return ranking.reciprocal_rank_fusion([[key for key, _ in keyword], [key for key, _ in vector]])

    ranking.STOPWORDS = stopwords if level >= 1 else frozenset()
    if (ranking.query_terms.__kwdefaults__ or {}).get("stopwords") is not None:  # bound at definition
        ranking.query_terms.__kwdefaults__["stopwords"] = ranking.STOPWORDS
    ranking.fuse = fuse if level >= 2 else rank_fusion
    for memory in (memories or {}).values():
        store = getattr(memory, "store", None)
        if hasattr(store, "context_weight"):
            store.context_weight = neighbour_weight if level >= 3 else 0.0
        if hasattr(store, "date_weight"):
            store.date_weight = date_weight if level >= 4 else 0.0
        if hasattr(store, "previous_weight"):
            store.previous_weight = previous_weight if level >= 8 else 0.0
        if hasattr(store, "context_key_weight"):
            store.context_key_weight = key_weight if level >= 9 else 0.0
        if hasattr(store, "session_weight"):
            store.session_weight = session_weight if level >= 5 else 0.0
        if hasattr(store, "speaker_weight"):
            store.speaker_weight = speaker_weight if level >= 6 else 0.0
        if hasattr(store, "time_weight"):
            store.time_weight = time_weight if level >= 7 else 0.0
        if hasattr(store, "length_weight"):
            store.length_weight = length_weight if level >= 10 else 0.0


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryport import MemoryScope
    from memoryport.adapters.sqlite import SQLiteMemory
    from memoryport.embedders.local import LocalEmbedder

    conversations, report = load(args.data)
    if args.conversations:
        conversations = [c for c in conversations if c.sample_id in args.conversations]
    # Keyword search alone needs no vectors: such a run embeds nothing (minutes less on a loaded machine).
    threads = args.blas_threads
    engines = args.engines
    embedder: Any = None
    if set(args.modes) != {"keyword"}:
        embedder = LocalEmbedder(args.model, blas_threads=threads[0], engine=engines[0])
    if args.cache and embedder is not None:
        embedder = CachedEmbedder(embedder, args.cache)
    # More LocalEmbedders, one per further --blas-threads setting and --engines value, each behind a hybrid
    # store of its own.
    others: dict[str, Any] = {}
    settings = [(t, engines[0]) for t in threads[1:]] + [(threads[0], e) for e in engines[1:]]
    for setting, engine in settings if embedder is not None else []:
        other: Any = LocalEmbedder(args.model, blas_threads=setting, engine=engine)
        label = f"blas_threads {setting}" if engine == engines[0] else f"engine {other.engine}"
        others[f"hybrid, {label}"] = CachedEmbedder(other, args.cache) if args.cache else other
    modes = args.modes
    # The store's default previous_weight unless --previous-weight says otherwise.
    previous: dict[str, Any] = {} if args.previous_weight is None else {"previous_weight": args.previous_weight}
    folder = Path(tempfile.mkdtemp(prefix="memoryport-locomo-"))
    db = folder / "locomo.db"
    server = None
    if args.backend == "postgres":
        try:
            from benchmarks._postgres import start
        except ImportError:  # run as a script: benchmarks/ is on sys.path
            from _postgres import start  # type: ignore[no-redef]

        from memoryport.adapters.postgres import PostgresMemory

        server = start(args.dsn)
        schema = "locomo_" + hashlib.sha256(str(time.time()).encode()).hexdigest()[:8]
        memories: dict[str, Any] = {
            mode: PostgresMemory(server.dsn, embedder=embedder, search_mode=mode, schema=schema, **previous)
            for mode in modes
        }
    else:
        memories = {mode: SQLiteMemory(db, embedder=embedder, search_mode=mode, **previous) for mode in modes}
        # Hybrid search with a similarity floor for vector-only hits, side by side with the others.
        for floor in args.min_similarity:
            memories[f"hybrid, min_similarity {floor:g}"] = SQLiteMemory(db, embedder=embedder, min_similarity=floor)
    for name, options in args.variants.items():
        # Any store options, side by side on the same records, e.g. '{"s0.5": {"session_weight": 0.5}}'.
        options = dict(options)
        if "session_gap" in options:
            options["session_gap"] = timedelta(seconds=float(options["session_gap"]))
        if args.backend == "postgres":
            memories[name] = PostgresMemory(server.dsn, embedder=embedder, schema=schema, **options)
        else:
            memories[name] = SQLiteMemory(db, embedder=embedder, **options)
    frozen = None
    if args.timeline and args.embed_questions and isinstance(embedder, CachedEmbedder):
        # The same embedder with the question vectors from the cache: the search alone, in the same run.
        frozen = CachedEmbedder(embedder.inner, args.cache)
        others["hybrid, question vector from the cache"] = frozen
    for name, other in others.items():
        if args.backend == "postgres":
            memories[name] = PostgresMemory(server.dsn, embedder=other, schema=schema, **previous)
        else:
            memories[name] = SQLiteMemory(db, embedder=other, **previous)
    if args.baseline:
        # Side by side, question by question: the ranking before this round's default step, on the same records.
        off = {"session_weight": 0.0}
        if args.backend == "postgres":
            memories["hybrid, without sessions"] = PostgresMemory(
                server.dsn, embedder=embedder, schema=schema, **off  # type: ignore[arg-type]
            )
        else:
            memories["hybrid, without sessions"] = SQLiteMemory(
                db, embedder=embedder, **off  # type: ignore[arg-type]
            )
    writer = memories[modes[0]]
    if args.curated:
        last = {c.sample_id: max(t.date for t in c.turns) + timedelta(days=1) for c in conversations}
        for mode in modes:
            clock = last if args.now == "last-session" else None
            memories[f"{mode}+layer"] = CuratedSearch(memories[mode], clock, ranking="relevance")
            memories[f"{mode}+salience"] = CuratedSearch(memories[mode], clock, ranking="salience",
                                                          recency=args.recency)
    start = time.perf_counter()
    for conv in conversations:
        await writer.add(conversation_records(conv))
    index_s = time.perf_counter() - start
    if frozen is not None:
        await frozen.embed([q.text for c in conversations for q in c.questions])  # any not cached yet
        others.pop("hybrid, question vector from the cache")
    if args.embed_questions:
        for wrapped in (embedder, *others.values()):
            if isinstance(wrapped, CachedEmbedder):
                wrapped.live = True
    # The question's embedding alone, per embedder: the main one ("") and each further one by its store's name.
    embed_alone: dict[str, Any] = {}
    if args.timeline and embedder is not None and (args.embed_questions or not args.cache):
        for label, wrapped in {"": embedder, **others}.items():
            inner = wrapped.inner if isinstance(wrapped, CachedEmbedder) else wrapped
            embed_alone[label] = inner.embed_sync

    ids_by_record: dict[str, str] = {}
    for conv in conversations:
        for rec in await writer.export(MemoryScope(user_id=conv.sample_id)):
            ids_by_record[str(rec.id)] = str(rec.metadata["dia_id"])

    steps = ABLATION if args.ablation else [None]
    result: dict[str, Any] = {
        "data": str(args.data),
        "conversations": [c.sample_id for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "evidence": {"ids": report.ids, "normalised": report.normalised, "dropped": report.dropped,
                     "questions_without_evidence": report.questions_without_evidence},
        "embedder": embedder.name if embedder is not None else "none",
        "engine": (embedder.inner if isinstance(embedder, CachedEmbedder) else embedder).engine
        if embedder is not None else "none",
        "index_seconds": round(index_s, 1),
        "cached_embeddings": bool(args.cache),
        "embed_questions": bool(args.embed_questions),
        "blas_threads": [str(t).lower() for t in threads],
        "engines": engines,
        "steps": {},
    }
    embed_ms: dict[str, list[float]] = {label: [] for label in embed_alone}
    for step in steps:
        if step is not None:
            configure_ranking(step, memories)
        result["steps"][step or "current"] = await ask(conversations, memories, ids_by_record,
                                                       latency_ks=args.latency_k, embed_alone=embed_alone,
                                                       embed_ms=embed_ms)
    for label, times in embed_ms.items():
        ordered = sorted(times)
        if not ordered:
            continue
        summary = {"median": statistics.median(ordered), "p95": ordered[int(0.95 * (len(ordered) - 1))],
                   "questions": len(ordered)}
        if label:
            result.setdefault("embedding_alone_ms_by_store", {})[label] = summary
        else:
            result["embedding_alone_ms"] = summary
    result["backend"] = args.backend
    for memory in memories.values():
        if hasattr(memory, "aclose"):
            await memory.aclose()
    if server is not None:
        server.stop()
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    shutil.rmtree(folder)
    return result


async def ask(conversations: list[Conversation], memories: dict[str, Any], ids_by_record: dict[str, str],
              *, latency_ks: Sequence[int] = (), embed_alone: dict[str, Any] | None = None,
              embed_ms: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """Ask every question in every mode; recall@k and latency per mode.

    Recall comes from one search at k=50; each of ``latency_ks`` adds a timed
    search at that k (before the k=50 one for every other question). Modes
    are asked in turn, in reverse order for every other question.
    ``embed_alone`` (label -> ``embed_sync``), when given, is timed on each
    question once per label (the embedding alone, in alternating order too),
    into ``embed_ms[label]``.
    """
    from memoryport import MemoryScope

    modes = list(memories)
    recalls: dict[str, dict[int, dict[int, list[float]]]] = {m: {k: {} for k in KS} for m in modes}
    latency: dict[str, list[float]] = {m: [] for m in modes}
    latency_at: dict[str, dict[int, list[float]]] = {m: {k: [] for k in latency_ks} for m in modes}
    asked = 0
    # Per conversation too: a change that helps one conversation only is tuned to it, not to conversations.
    by_conv: dict[str, dict[str, dict[int, list[float]]]] = {m: {} for m in modes}
    for conv in conversations:
        scope = MemoryScope(user_id=conv.sample_id)
        for q in conv.questions:
            asked += 1
            alone = list((embed_alone or {}).items())
            for label, embed in alone if asked % 2 else alone[::-1]:
                t0 = time.perf_counter()
                embed([q.text])
                if embed_ms is not None:
                    embed_ms.setdefault(label, []).append((time.perf_counter() - t0) * 1000)
            for mode in modes if asked % 2 else modes[::-1]:
                # The timed searches at other k: after the k=50 search for odd questions, before it for even ones.
                extra = list(latency_ks)
                if asked % 2 == 0:
                    for k in extra:
                        t0 = time.perf_counter()
                        await memories[mode].search(q.text, scope=scope, k=k)
                        latency_at[mode][k].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                hits = await memories[mode].search(q.text, scope=scope, k=max(KS))
                latency[mode].append((time.perf_counter() - t0) * 1000)
                if asked % 2 == 1:
                    for k in extra:
                        t0 = time.perf_counter()
                        await memories[mode].search(q.text, scope=scope, k=k)
                        latency_at[mode][k].append((time.perf_counter() - t0) * 1000)
                found = [ids_by_record[str(h.record.id)] for h in hits]
                for k in KS:
                    top = set(found[:k])
                    value = sum(e in top for e in q.evidence) / len(q.evidence)
                    recalls[mode][k].setdefault(q.category, []).append(value)
                    by_conv[mode].setdefault(conv.sample_id, {}).setdefault(k, []).append(value)

    def mean(values: list[float]) -> float:
        return 100 * sum(values) / len(values) if values else float("nan")

    result: dict[str, Any] = {}
    for mode in modes:
        overall = {k: mean([v for vs in recalls[mode][k].values() for v in vs]) for k in KS}
        per_cat = {CATEGORIES[c]: {k: mean(recalls[mode][k].get(c, [])) for k in KS}
                   for c in sorted(recalls[mode][KS[0]])}
        counts = {CATEGORIES[c]: len(v) for c, v in sorted(recalls[mode][KS[0]].items())}
        lat = sorted(latency[mode])
        result[mode] = {
            "recall": overall,
            "per_category": per_cat,
            "questions_per_category": counts,
            "per_conversation": {c: {k: mean(vs) for k, vs in ks.items()} for c, ks in by_conv[mode].items()},
            "ms_per_query_median": statistics.median(lat),
            "ms_per_query_p95": lat[int(0.95 * (len(lat) - 1))],
            "ms_at_k": {str(k): {"median": statistics.median(v), "p95": sorted(v)[int(0.95 * (len(v) - 1))]}
                        for k, v in latency_at[mode].items() if v},
        }
    return result


def print_tables(result: dict[str, Any]) -> None:
    ev = result["evidence"]
    print(f"# backend {result.get('backend', 'sqlite')}: {len(result['conversations'])} conversations, "
          f"{result['turns']} turns, {result['questions']} "
          f"questions with evidence; embedder {result['embedder']}; indexed in {result['index_seconds']} s")
    print(f"# evidence ids: {ev['ids']}, normalised {ev['normalised']}, dropped {len(ev['dropped'])} "
          f"{ev['dropped']}; questions left without evidence: {ev['questions_without_evidence']}")
    if result["cached_embeddings"] and not result.get("embed_questions"):
        print("# embeddings came from a cache: per-query times exclude embedding the query")
    elif result["cached_embeddings"]:
        print("# record embeddings came from a cache; each question was embedded in the run (timed)")
    steps = result["steps"]
    extra_ks = list(next(iter(next(iter(steps.values())).values())).get("ms_at_k", {}))
    print()
    print("| ranking | mode | R@5 | R@10 | R@25 | R@50 | ms/query median (p95) at k=50 |"
          + "".join(f" at k={k} |" for k in extra_ks))
    print("|---|---|---|---|---|---|---|" + "---|" * len(extra_ks))
    for step, modes in steps.items():
        for mode, m in modes.items():
            r = m["recall"]
            at = "".join(f" {m['ms_at_k'][k]['median']:.1f} ({m['ms_at_k'][k]['p95']:.1f}) |" for k in extra_ks)
            print(f"| {step} | {mode} | {r[5]:.1f} | {r[10]:.1f} | {r[25]:.1f} | {r[50]:.1f} | "
                  f"{m['ms_per_query_median']:.1f} ({m['ms_per_query_p95']:.1f}) |" + at)
    alone = result.get("embedding_alone_ms")
    if alone:
        print(f"\n# the question's embedding alone (embed_sync, timed once per question): median "
              f"{alone['median']:.1f} ms (p95 {alone['p95']:.1f}), {alone['questions']} questions"
              f" (engine {result.get('engine', '?')})")
    for label, times in result.get("embedding_alone_ms_by_store", {}).items():
        print(f"# ... with the embedder of '{label}': median {times['median']:.1f} ms (p95 {times['p95']:.1f})")
    last = list(steps.values())[-1]
    cats = list(next(iter(last.values()))["per_category"])
    counts = next(iter(last.values()))["questions_per_category"]
    print()
    print(f"Per category ({list(steps)[-1]}), R@5 / R@10:")
    print()
    print("| mode | " + " | ".join(f"{c} ({counts[c]})" for c in cats) + " |")
    print("|---|" + "---|" * len(cats))
    for mode, m in last.items():
        cells = [f"{m['per_category'][c][5]:.1f} / {m['per_category'][c][10]:.1f}" for c in cats]
        print(f"| {mode} | " + " | ".join(cells) + " |")
    convs = list(next(iter(last.values()))["per_conversation"])
    print()
    print(f"Per conversation ({list(steps)[-1]}), R@5 / R@10:")
    print()
    print("| mode | " + " | ".join(convs) + " |")
    print("|---|" + "---|" * len(convs))
    for mode, m in last.items():
        cells = [f"{m['per_conversation'][c][5]:.1f} / {m['per_conversation'][c][10]:.1f}" for c in convs]
        print(f"| {mode} | " + " | ".join(cells) + " |")


def _blas_settings(text: str) -> list[Any]:
    """``auto,none,2`` -> ["auto", None, 2] (LocalEmbedder's blas_threads values)."""
    out: list[Any] = []
    for part in text.split(","):
        part = part.strip().lower()
        out.append(None if part == "none" else part if part == "auto" else int(part))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="a LoCoMo JSON file")
    ap.add_argument("--modes", default="keyword,vector,hybrid", type=lambda s: s.split(","))
    ap.add_argument("--conversations", default=None, type=lambda s: s.split(","), help="sample ids to keep")
    ap.add_argument("--model", default=None, help="LocalEmbedder model folder (default: all-MiniLM-L6-v2)")
    ap.add_argument("--cache", type=Path, default=None, help="keep embeddings in this folder between runs")
    ap.add_argument("--embed-questions", action="store_true",
                    help="with --cache: embed each question in the run, so per-query times include it")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--ablation", action="store_true", help="one row per ranking change (cumulative)")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite", help="where the records live")
    ap.add_argument("--dsn", default=None, help="PostgreSQL DSN for --backend postgres (default: start pgserver)")
    ap.add_argument("--min-similarity", default=[], type=lambda s: [float(v) for v in s.split(",")],
                    help="also run hybrid search with these similarity floors for vector-only hits, e.g. 0.1,0.2")
    ap.add_argument("--previous-weight", type=float, default=None,
                    help="previous_weight of every mode's store (default: the store's, replies mixed with the "
                         "turn they answer)")
    ap.add_argument("--variants", type=json.loads, default={},
                    help='JSON {name: {store option: value}}: more stores on the same records, side by side '
                         '(session_gap in seconds), e.g. \'{"p0.5": {"previous_weight": 0.5}}\'')
    ap.add_argument("--baseline", action="store_true",
                    help="also run hybrid search without the session step, side by side")
    ap.add_argument("--curated", action="store_true", help="also ask through AgentMemory (salience on)")
    ap.add_argument("--now", choices=("real", "last-session"), default="real",
                    help="the layer's clock with --curated (recency counts from it)")
    ap.add_argument("--recency", type=float, default=None, help="the salience's recency weight (default: the policy's)")
    ap.add_argument("--latency-k", default=[10], type=lambda s: [int(v) for v in s.split(",") if v],
                    help="also time a search at each of these k (default 10; '' for none); recall stays at k=50")
    ap.add_argument("--timeline", action="store_true",
                    help="also time the question's embedding alone (with --embed-questions, or without --cache)")
    ap.add_argument("--engines", default=["auto"], type=lambda s: [v.strip() for v in s.split(",") if v.strip()],
                    help="LocalEmbedder engine: auto (default), onnxruntime or numpy; several (onnxruntime,numpy) "
                         "compare hybrid stores side by side")
    ap.add_argument("--blas-threads", default=["auto"], type=_blas_settings,
                    help="LocalEmbedder blas_threads: auto (default), none or N; several (auto,none) compare "
                         "hybrid stores side by side")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"no LoCoMo file at {args.data}", file=sys.stderr)
        return 2
    result = asyncio.run(run(args))
    print_tables(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
