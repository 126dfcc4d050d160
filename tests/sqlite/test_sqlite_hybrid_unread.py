"""Hybrid search leaves its candidates' and neighbours' times unread while the timeline answers the lookups.

Without filters, while the user's timeline holds every rid looked up, the
neighbour lookups of a hybrid search read nothing into ``times``: contextual
keys answer from the timeline's positions, ``with_previous`` takes what it
reads of each vector candidate and its predecessor from the timeline
(``_search._previous_times``), ``placed`` reads its candidates' from the
timeline itself, and contextual keys' fallback reads them through
``_search._Unread`` (the same entries, in the order the lookups would have
filled them). End to end, on users of one scope and of several, with expiring
records, filters, replies (``previous_mode``), and rids the timeline does not
hold, the hits must equal those of the statements' path (no timeline), with the
positions' answer and with its fallback.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timezone
from typing import Any

import pytest

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import _keyword_user, _search
from memoryport.adapters.sqlite._timeline import Timeline, Timelines, sides_in

from .support import bow_vectors, hits_of, statements_hits, timeline_records

WORDS = ["tea", "green", "coffee", "walk", "river", "book", "piano", "garden", "storm", "lamp", "paint", "when"]
OTHER = ["zinc", "quartz", "violet", "mango"]  # no query holds them: such records are vector candidates only
START = datetime(2023, 5, 1, tzinfo=timezone.utc)
DIM = 32
QUERIES = ["tea river", "when did Ann walk", "green storm lamp piano", "Ben: book garden", "coffee", "zebra"]


def _records(rng: random.Random, n: int, *, sessions: int, agents: int, mortal: bool) -> list[MemoryRecord]:
    return timeline_records(rng, n, WORDS, START, sessions=sessions, agents=agents, mortal=mortal, other=OTHER)


def _hits(memory: Any, scope: MemoryScope) -> list[list[tuple[str, float, str]]]:
    return hits_of(memory, scope, QUERIES)


class _Hiding(dict):  # type: ignore[type-arg]
    """A timeline's rid -> position that says it lacks the ``hidden`` rids (``in``, ``get``), finds them by ``[]``."""

    def __init__(self, at: dict[int, int], hidden: set[int]) -> None:
        super().__init__(at)
        self.hidden = hidden

    def __contains__(self, rid: object) -> bool:
        return rid not in self.hidden and dict.__contains__(self, rid)

    def get(self, rid: Any, default: Any = None) -> Any:
        return dict.get(self, rid, default) if rid in self else default


def _holey(real: Any, every: bool) -> Any:
    """Timelines.of/current answering a timeline that says it lacks some rids: their lookups go to SQL. ``every``:
    every fourth rid; else every other record no query word matches (vector candidates only: the keyword half and
    its lookups run from the timeline, then a lookup of the vector candidates needs SQL)."""

    def of(self: Timelines, conn: Any, user: str | None) -> Timeline | None:
        line = real(self, conn, user)
        if line is None:
            return None
        if every:
            hidden = {rid for rid in line.rids if rid % 4 == 0}
        else:
            hidden = {
                rid for rid, text in zip(line.rids, line.texts, strict=True) if rid % 2 and text.split()[0] in OTHER
            }
        return dataclasses.replace(line, at=_Hiding(line.at, hidden), words=line.words)

    return of


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["replies", "all"])
def test_hybrid_hits_equal_the_statements_path(
    db_path: str, seed: int, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    shape = {"sessions": [1, 1, 3][seed % 3], "agents": [1, 1, 2][seed % 3], "mortal": seed in (2, 5)}
    embedder = CallableEmbedder(lambda texts: bow_vectors(texts, DIM), dim=DIM, name="bow")
    options: dict[str, Any] = {"previous_mode": mode}
    if seed == 4:
        options.update(context_key_weight=0.0)  # no contextual keys: the lookups' times read by nobody but placed
    memory = SQLiteMemory(db_path, embedder=embedder, search_mode="hybrid", **options)
    memory.add_sync(_records(rng, rng.choice([80, 400]), **shape))
    real_of, real_current, real_context = Timelines.of, Timelines.current, _search.context_in
    real_ranking = _search.keyword_ranking
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)  # the word index (and its whole words) bought at once
    lookups: list[bool] = []
    real_near = _search._near

    def near(*args: Any, **kwargs: Any) -> Any:
        lookups.append(args[5] is None)  # times left unread
        return real_near(*args, **kwargs)

    monkeypatch.setattr(_search, "_near", near)
    for scope in [MemoryScope(user_id="ann"), MemoryScope(user_id="ann", session_id="s1")]:
        _hits(memory, scope)  # builds the timeline and the word index
        lookups.clear()
        warm = _hits(memory, scope)
        assert any(lookups)  # the unread path ran
        expected = statements_hits(monkeypatch, memory, scope, QUERIES)  # the statements' path: times read too
        assert warm == expected
        # Contextual keys' fallback (context_keys on the unread times) gives the same hits.
        monkeypatch.setattr(_search, "context_in", lambda *a, **k: None)
        assert _hits(memory, scope) == expected
        monkeypatch.setattr(_search, "context_in", real_context)
        # A timeline missing some rids: a lookup of one of them reads times, the ones before it are read first.
        for every in (True, False):
            monkeypatch.setattr(Timelines, "of", _holey(real_of, every))
            monkeypatch.setattr(Timelines, "current", _holey(real_current, every))
            # (with the timeline, keyword_ranking keeps only rids it holds: every fourth is the statements' to check)
            ranked = (lambda *a: real_ranking(*a[:8], None, *a[9:])) if every else real_ranking
            monkeypatch.setattr(_search, "keyword_ranking", ranked)
            lookups.clear()
            assert _hits(memory, scope) == expected
            assert any(lookups) and not all(lookups)  # unread until a rid the timeline lacks, then read
            monkeypatch.setattr(_search, "context_in", lambda *a, **k: None)
            assert _hits(memory, scope) == expected
            monkeypatch.setattr(_search, "context_in", real_context)
            monkeypatch.setattr(_search, "keyword_ranking", real_ranking)
        monkeypatch.setattr(Timelines, "of", real_of)
        monkeypatch.setattr(Timelines, "current", real_current)
    memory.close()


def _line(rng: random.Random, n: int, *, uniform: bool, mortal: bool) -> Timeline:
    rids = sorted(rng.sample(range(1, 10 * n), n))
    ats, t = [], 10**15
    for _ in range(n):
        t += rng.choice([0, 1, 10**6, 3 * 10**9])
        ats.append(t)
    sessions = [None] * n if uniform else [rng.choice([None, "s1"]) for _ in range(n)]
    return Timeline(
        gen=1,
        rids=rids,
        ats=ats,
        sessions=sessions,
        agents=["bot"] * n,
        expires=[rng.choice([5, 10**18]) if mortal else 2**62 for _ in range(n)],
        texts=[rng.choice(["Ann: ", "Ben: ", ""]) + " ".join(rng.choices(WORDS, k=3)) for _ in range(n)],
        at={rid: i for i, rid in enumerate(rids)},
        nbytes=0,
        mortal=mortal,
        uniform=uniform,
    )


@pytest.mark.parametrize("seed", range(8))
def test_unread_times_of_lookups_added_one_after_another(seed: int) -> None:
    """Lookups added to ``near`` after ``_Unread`` was made (and after it was first read) are read in turn."""
    rng = random.Random(seed)
    line = _line(rng, rng.choice([10, 80, 300]), uniform=seed % 2 == 0, mortal=seed % 3 == 0)
    for _ in range(20):
        filled: dict[int, Any] = {}
        times: dict[int, Any] = {}
        near: dict[int, list[tuple[int, int]]] = {}
        unread = _search._Unread(line, near, times)
        window = rng.choice([1, 2, 3])
        for step in range(rng.randint(1, 4)):
            rids = [rid for rid in rng.sample(line.rids, rng.randint(1, min(20, len(line.rids)))) if rid not in near]
            found = sides_in(line, rids, 7, window=window, scan=16, after=True, times=filled)
            assert found is not None
            near.update({rid: [*before, *after] for rid, (before, after) in found.items()})
            if rng.random() < 0.5 or step == 0:
                assert list(unread.items()) == list(filled.items())  # read so far, in the lookups' order
        assert list(unread.fill().items()) == list(filled.items())
        assert times == filled and len(unread) == len(filled)


@pytest.mark.parametrize("seed", range(8))
def test_previous_times_hold_what_with_previous_reads(seed: int) -> None:
    """with_previous gives the same candidates from the timeline's rows of each candidate and its neighbours at
    distance 1 as from every time the lookups read (the vector candidates all looked up)."""
    import numpy as np

    rng = random.Random(seed)
    line = _line(rng, rng.choice([10, 80, 300]), uniform=seed % 2 == 0, mortal=seed % 3 == 0)
    vecs = np.random.default_rng(seed).standard_normal((len(line.rids), 8)).astype(np.float32)
    block = (vecs, {rid: i for i, rid in enumerate(line.rids)})
    for _ in range(20):
        picked = rng.sample(line.rids, rng.randint(1, min(30, len(line.rids))))
        vector = [(rid, rng.random()) for rid in picked]
        filled: dict[int, Any] = {}
        found = sides_in(line, picked, 7, window=rng.choice([1, 2]), scan=16, after=True, times=filled)
        assert found is not None
        near = {rid: [*before, *after] for rid, (before, after) in found.items()}
        read = _search._previous_times(_search._Unread(line, near, {}), vector, near)
        assert read is not None
        for mode in ("replies", "all"):
            args = (None, vecs[0], vector, None, 7, 0.3)
            want = _search.with_previous(*args, mode=mode, near=near, times=dict(filled), line=line, vectors=block)
            got = _search.with_previous(*args, mode=mode, near=near, times=read, line=line, vectors=block)
            assert got == want
        assert _search._previous_times(_search._Unread(line, near, {}), [*vector, (-1, 0.5)], near) is None
