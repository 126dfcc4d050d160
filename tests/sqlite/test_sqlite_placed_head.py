"""SQLite ``placed``: the later steps on the head within reach give the same k best as on every candidate.

``placed`` bounds what the date, speaker, time and length steps can add (``_lifts``) from
what is known of the ranked candidates, read in one pass: here with texts that put a colon
inside the speaker prefix, just past it, or nowhere, and with ranked rids nobody read (a
record gone), the cut ranking must equal the whole one's first k.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory, ranking
from memoryport.adapters.sqlite import _search

PREFIX = ranking.SPEAKER_PREFIX


def _text(rng: random.Random) -> str:
    words = " ".join(rng.choices(["tea", "river", "lamp", "garden", "storm"], k=rng.randint(1, 40)))
    kind = rng.randrange(4)
    if kind == 0:
        return "Ann: " + words  # a speaker prefix
    if kind == 1:
        return "x" * (PREFIX + rng.randrange(3)) + ": " + words  # a colon just past the prefix
    if kind == 2:
        return "y" * (PREFIX - 1 - rng.randrange(3)) + ": " + words  # a colon at the prefix's end
    return words  # no colon at all


def _lifts_reference(store: Any, texts: list[str]) -> float:
    """What ``_lifts`` must bound: the longest text's length lift, the speaker weight when a colon is in a prefix."""
    most = store.length_weight * min(1.0, max(map(len, texts)) / store.length_pivot) if texts else 0.0
    if texts and any(0 <= text.find(":") < PREFIX for text in texts):
        most += store.speaker_weight
    return most


@pytest.mark.parametrize("seed", range(6))
def test_the_bound_sees_a_colon_only_inside_the_prefix(db_path: str, seed: int) -> None:
    rng = random.Random(seed)
    memory = SQLiteMemory(db_path)
    try:
        store = memory.store
        for _ in range(40):
            n = rng.randint(1, 12)
            kinds = rng.sample(range(4), rng.randint(1, 4))  # some draws have no colon in any prefix
            texts = []
            while len(texts) < n:
                text = _text(rng)
                if (
                    (0 in kinds or not text.startswith("Ann"))
                    and (1 in kinds or not text.startswith("x"))
                    and (2 in kinds or not text.startswith("y"))
                    and (3 in kinds or ":" in text)
                ):
                    texts.append(text)
            found = [(0, None, None, text) for text in texts]
            most, _ = _search._lifts(store, found, {}, False, False)
            assert most == _lifts_reference(store, texts), texts
    finally:
        memory.close()


@pytest.mark.parametrize("seed", range(4))
def test_the_head_gives_the_k_best_of_every_candidate(db_path: str, seed: int) -> None:
    rng = random.Random(seed)
    start = datetime(2023, 7, 1, tzinfo=timezone.utc)
    scope = MemoryScope(user_id="ann")
    memory = SQLiteMemory(db_path)
    try:
        memory.add_sync(
            [
                MemoryRecord(
                    scope=scope, text=_text(rng), created_at=start + timedelta(minutes=rng.choice([5, 50, 500]) * i)
                )
                for i in range(120)
            ]
        )
        store = memory.store
        rids = [int(r) for (r,) in store.db.conn().execute("SELECT rid FROM records ORDER BY rid")]
        compared = 0
        for query in ["tea river", "When did Ann water the garden?", "storm on 2 July 2023"]:
            for _ in range(10):
                picked = rng.sample(rids, 60) + [10**9 + i for i in range(rng.randrange(3))]  # rids nobody has
                ranked = sorted(((rid, rng.choice([1.0, 0.5, rng.random()])) for rid in picked), key=lambda p: -p[1])
                for k in (1, 5, 20):

                    def both(conn: Any, query: str = query, ranked: list[Any] = ranked, k: int = k) -> tuple[Any, Any]:
                        times: dict[int, Any] = {}
                        return (
                            _search.placed(conn, query, ranked, store, times, k),
                            _search.placed(conn, query, ranked, store)[:k],
                        )

                    cut, whole = store.db.read(both)
                    assert cut[:k] == whole
                    assert [score.hex() for _, score in cut[:k]] == [score.hex() for _, score in whole]
                    compared += 1
        assert compared == 90
    finally:
        memory.close()
