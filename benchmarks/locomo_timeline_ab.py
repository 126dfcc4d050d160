"""LoCoMo hybrid search with and without the SQLite timelines, asked in turn for every question (one process).

"before" switches the in-RAM lookups off (``_timeline.Timelines.of`` answers None,
so every lookup runs its statement, and ``ranking.mentions_time`` runs without its
memo): the search as it was before session 8. "after" is the store as shipped.
Per question, in alternating order, each variant runs ``search_hits`` on the
store worker's code path (thread CPU, cached question vector), then
``SQLiteMemory.search`` with the cached vector and with the question embedded by
``LocalEmbedder`` (wall). Medians, skipping the first 10 questions. Hits are the
same both ways (``tests/sqlite/test_sqlite_timeline.py``); on a shared machine,
read the ratios.

    OPENBLAS_NUM_THREADS=1 python benchmarks/locomo_timeline_ab.py [DATA] [--questions 400] [--cache DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import locomo


async def run(data: Path, questions: int, cache: Path) -> dict[str, float]:
    from memoryport import MemoryRecord, MemoryScope, SQLiteMemory, ranking
    from memoryport.adapters.sqlite import _search, _timeline
    from memoryport.adapters.sqlite._where import Where
    from memoryport.embedders.local import LocalEmbedder

    conversations, _ = locomo.load(data)
    embedder = locomo.CachedEmbedder(LocalEmbedder(), cache)
    with tempfile.TemporaryDirectory(prefix="memoryport-timeline-ab-") as folder:
        memory = SQLiteMemory(str(Path(folder) / "ab.db"), embedder=embedder)
        for conv in conversations:
            scope = MemoryScope(user_id=conv.sample_id)
            await memory.add(
                [
                    MemoryRecord(
                        scope=scope,
                        text=locomo.record_text(turn),
                        metadata={"dia_id": turn.dia_id},
                        created_at=turn.date + timedelta(seconds=i),
                    )
                    for i, turn in enumerate(conv.turns)
                ]
            )
        asked = [(c.sample_id, q.text) for c in conversations for q in c.questions]
        asked = asked[:: max(1, len(asked) // questions)][:questions]
        vectors = await embedder.embed([text for _, text in asked])
        store = memory.store
        no_filters = Where.of(None, None, None)
        real_of, real_mentions = _timeline.Timelines.of, ranking.mentions_time

        def use(after: bool) -> None:
            _timeline.Timelines.of = real_of if after else (lambda self, conn, user: None)  # type: ignore[method-assign]
            ranking.mentions_time = real_mentions if after else ranking._names_time

        times: dict[str, list[float]] = {}
        loads: list[float] = []
        try:
            for i, ((user, text), vector) in enumerate(zip(asked, vectors, strict=True)):
                scope = MemoryScope(user_id=user)
                for variant in ("before", "after") if i % 2 else ("after", "before"):
                    use(variant == "after")

                    def read(conn: Any, text: str = text, vector: Any = vector, scope: Any = scope) -> Any:
                        return _search.search_hits(store, conn, text, vector, "hybrid", scope, 50, no_filters)

                    start = time.thread_time()
                    store.db.read(read)
                    times.setdefault(f"search_hits CPU, cached vector {variant}", []).append(time.thread_time() - start)
                    for live in (False, True):
                        embedder.live = live
                        start = time.perf_counter()
                        await memory.search(text, scope=scope, k=50)
                        label = "embedded" if live else "cached vector"
                        times.setdefault(f"search wall, {label} {variant}", []).append(time.perf_counter() - start)
                    embedder.live = False
                loads.append(os.getloadavg()[0])
        finally:
            use(True)
            await memory.aclose()
    print(f"{len(asked)} questions, before/after in turn per question, load {min(loads):.2f}-{max(loads):.2f}")
    out: dict[str, float] = {}
    for label in ("search_hits CPU, cached vector", "search wall, cached vector", "search wall, embedded"):
        before = statistics.median(times[f"{label} before"][10:]) * 1000
        after = statistics.median(times[f"{label} after"][10:]) * 1000
        out[label] = after / before
        print(f"{label:32s} before {before:7.2f} ms  after {after:7.2f} ms  ratio {after / before:.3f}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/ann/locomo-cache"))
    args = parser.parse_args(argv)
    asyncio.run(run(args.data, args.questions, args.cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
