"""Contextual keys' whole-word dictionary: the same word holders as the texts give, wherever they come from.

``WholeWords`` (``_timeline.py``) holds, for every word of every text of a
user's timeline, which records hold it; it comes with the user's word index
(``_keyword_user.py``) and grows with this store's own adds. ``Timeline.holders``
answers from it. Every answer must equal ``ranking._holders`` on the texts
themselves: Unicode case changes (U+0130 changes the length, the Greek final
sigma depends on the next letter), underscores, digits, words held twice,
non-ASCII letters and digits, a NUL inside a text, rids another user holds.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory, ranking
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _keyword_user
from memoryport.adapters.sqlite._rows import NEVER
from memoryport.adapters.sqlite._timeline import Timeline, WholeWords

PIECES = [
    "Ann", "ANN", "ann's", "Annie", "paint", "Paint_brush", "paint-pots", "PAINTING", "x2", "2x", "10:30", "²",
    "ΟΔΟΣ", "ΟΔΟΣ.", "Σ", "ΣΑΣ", "İstanbul", "İ", "istanbul", "naïve", "café", "CAFÉ", "straße", "STRASSE", "ǅemal",
    "ﬁre", "fire", "١٢٣", "e\u0301", "日本語", "🙂", "-", "_", "__init__", "a_b", "tea", "Tea.", "TEA!", "\n", "\t",
]  # fmt: skip
ASCII = ["Ann", "ANN", "ann's", "paint", "Paint_brush", "paint-pots", "x2", "2x", "10:30", "tea", "Tea.", "-", "_"]
WORDS = [
    "ann", "Ann", "paint", "brush", "paint_brush", "pots", "x2", "2x", "10", "30", "οδος", "οδοσ", "σ", "σας",
    "i̇stanbul", "stanbul", "i", "istanbul", "naïve", "café", "straße", "strasse", "ǆemal", "ﬁre", "fire", "١٢٣",
    "e", "日本語", "tea", "init", "a", "b", "", "zebra", "a b", "İstanbul", "İ",
]  # fmt: skip


def _texts(rng: random.Random, n: int, pieces: Sequence[str]) -> list[str]:
    return [
        "".join(rng.choice([" ", "", ", "]) + rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(n)
    ]


def _line(texts: Sequence[str]) -> Timeline:
    rids = [1000 + 3 * i for i in range(len(texts))]
    return Timeline(
        gen=1,
        rids=rids,
        ats=list(range(len(texts))),
        sessions=[None] * len(texts),
        agents=[None] * len(texts),
        expires=[NEVER] * len(texts),
        texts=list(texts),
        at={rid: i for i, rid in enumerate(rids)},
        nbytes=0,
        mortal=False,
        uniform=True,
    )


def _holdings(whole: WholeWords, texts: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """Every word the texts hold, as ``whole`` answers it."""
    words = {w for text in texts for w in ranking._WORD.findall(text.lower())}
    return {w: whole.holding(w) for w in words}


@pytest.mark.parametrize("pieces", [PIECES, ASCII], ids=["unicode", "ascii"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_holders_from_the_dictionary_equal_the_texts(pieces: list[str], seed: int) -> None:
    rng = random.Random(seed)
    texts = _texts(rng, 300, pieces)
    texts[5] = "ΟΔΟΣ\x00ann"  # a NUL inside a text: the texts are not split there
    texts[6] = "İİ ann İstanbul"  # lower-cased longer than it is
    line = _line(texts)
    line.words.whole = WholeWords.of(texts)
    by_rid = dict(zip(line.rids, line.texts, strict=True))
    for _ in range(200):
        rids = rng.sample(line.rids, rng.randint(1, 80))
        rids += rng.sample(rids, min(len(rids), rng.randint(0, 3)))  # a rid asked twice
        asked = rng.sample(WORDS, rng.randint(1, 6))
        asked = [w for w in asked if not w or w.isalnum() or not w.lower().isalnum()]
        got = line.holders(rids, asked)
        expected = ranking._holders(rids, by_rid, asked)
        if any(w.isalnum() and not w.lower().isalnum() for w in asked):
            assert got is None  # lower-cased, not all letters and digits: the caller searches the texts
        else:
            assert got == expected, (rids, asked)
    # Every rid and every word at once, and a rid the timeline does not hold.
    words = [w for w in WORDS if w.lower().isalnum()]
    assert line.holders(line.rids, words) == ranking._holders(line.rids, by_rid, words)
    assert line.holders([*line.rids[:3], 7], ["ann"]) is None


def test_holders_with_no_room_forget_and_answer_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryport.adapters.sqlite import _timeline

    monkeypatch.setattr(_timeline, "_HOLDERS_PER_RECORD", 0)
    monkeypatch.setattr(_timeline, "_HOLDERS_BASE", 40)
    rng = random.Random(5)
    texts = _texts(rng, 200, PIECES)
    line = _line(texts)
    whole = line.words.whole = WholeWords.of(texts)
    by_rid = dict(zip(line.rids, line.texts, strict=True))
    words = [w for w in WORDS if w.lower().isalnum()]
    for _ in range(100):
        rids = rng.sample(line.rids, rng.randint(1, 120))
        asked = rng.sample(words, rng.randint(1, 5))
        assert line.holders(rids, asked) == ranking._holders(rids, by_rid, asked)
        kept = line.words.held
        assert sum(map(len, kept.values())) == line.words.size  # the least recently asked forgotten when full
        assert line.words.size <= 40 or len(kept) == 1
        held = [w.lower() for w in asked if whole.holding(w.lower())]
        assert not held or list(kept)[-1] == held[-1]  # the last asked is the most recent


@pytest.mark.parametrize("pieces", [PIECES, ASCII], ids=["unicode", "ascii"])
def test_a_dictionary_extended_equals_one_built_on_all_the_texts(pieces: list[str]) -> None:
    rng = random.Random(11)
    texts = _texts(rng, 120, pieces)
    whole = WholeWords.of(texts[:50])
    for cut in (60, 61, 90, 120):  # one record, several, a batch with unicode after an ASCII one
        whole = whole.extended(texts[len(range(whole.size)) : cut])
        assert whole.size == cut
        assert _holdings(whole, texts[:cut]) == _holdings(WholeWords.of(texts[:cut]), texts[:cut])
        assert whole.nbytes > 0
    assert WholeWords.of([]).size == 0 and not WholeWords.of([]).base
    assert WholeWords.of(["", "-", "_"]).base == {}


ANN = MemoryScope(user_id="ann")


@pytest.fixture
def buy_now(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)
    yield


def _hits(memory: Any, query: str) -> list[tuple[Any, float]]:
    """Each hit's record (by its time: the two files give it different ids) and exact score."""
    return [(h.record.created_at, h.score) for h in memory.search_sync(query, scope=ANN, k=10)]


def test_searches_with_the_dictionary_give_the_same_hits(db_path: str, tmp_path: Any, driver: str) -> None:
    """Two stores with the same records: one whose user's word index (and dictionary) is bought at once,
    one whose never is; the same hits and scores, also after this store's own adds extend the dictionary."""
    rng = random.Random(3)
    start = utcnow() - timedelta(days=1)
    texts = _texts(rng, 400, PIECES)
    bought = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    plain = SQLiteMemory(str(tmp_path / "plain.db"), search_mode="keyword", driver=driver)
    at = 0

    def add(batch: list[str]) -> None:
        nonlocal at
        records = [
            MemoryRecord(scope=ANN, text=(t if t.strip() else "-"), created_at=start + timedelta(seconds=at + i))
            for i, t in enumerate(batch)
        ]
        at += len(batch)
        for memory in (bought, plain):
            memory.add_sync(records)

    add(texts)
    queries = ["Ann paint", "ΟΔΟΣ café tea", "istanbul İstanbul x2", "straße 10 fire", "paint_brush naïve ann"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_keyword_user, "BUY", 1e9)
        expected = [_hits(plain, q) for q in queries * 3]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_keyword_user, "BUY", 0.0)
        got = [_hits(bought, q) for q in queries * 3]
        line = bought.store.timelines.of(bought.store.db.conn(), "ann")
        assert line is not None and line.words.whole is not None  # the dictionary answered
        assert got == expected
        for batch in (["ann paints the ΟΔΟΣ"], _texts(rng, 5, PIECES)):
            add(batch)
            assert [_hits(bought, q) for q in queries] == [_hits(plain, q) for q in queries]
        line = bought.store.timelines.of(bought.store.db.conn(), "ann")
        assert line is not None and line.words.whole is not None and line.words.whole.size == len(line.rids)
    bought.close()
    plain.close()


# -- contextual keys from the timeline's positions (context_in) ------------------------------------------------------


def _timed(texts: Sequence[str], ats: Sequence[int], *, mortal: bool = False, sessions: Any = None) -> Timeline:
    rids = [500 + 7 * i for i in range(len(texts))]
    return Timeline(
        gen=1,
        rids=rids,
        ats=list(ats),
        sessions=list(sessions) if sessions is not None else [None] * len(texts),
        agents=[None] * len(texts),
        expires=[NEVER - 1 if mortal and i == 3 else NEVER for i in range(len(texts))],
        texts=list(texts),
        at={rid: i for i, rid in enumerate(rids)},
        nbytes=0,
        mortal=mortal,
        uniform=sessions is None or len(set(sessions)) == 1,
    )


def _reference(
    line: Timeline,
    keyword: Any,
    near: Any,
    times: Any,
    idf: Any,
    weight: float,
    window: int,
    gap: timedelta,
    admit: bool = False,
    others: Sequence[int] = (),
) -> list[tuple[int, float]]:
    """``ranking.context_keys`` as the search runs it without a timeline: sessions and texts from ``times``."""
    when = {rid: ((session, agent), at / 1e6) for rid, (at, session, agent, _) in times.items()}
    texts = {rid: found[3] for rid, found in times.items()}
    return ranking.context_keys(
        keyword, near, texts, idf, weight=weight, window=window, when=when, gap=gap, admit=admit, others=others
    )


@pytest.mark.parametrize("seed", range(6))
def test_contextual_keys_from_positions_equal_context_keys(seed: int) -> None:
    from memoryport.adapters.sqlite._timeline import context_in, sides_in

    rng = random.Random(seed)
    n = rng.choice([30, 120, 400])
    texts = _texts(rng, n, PIECES if seed % 2 else ASCII)
    gap = timedelta(minutes=rng.choice([1, 30]))
    seconds = gap.total_seconds()
    ats, t = [], 10**12
    steps = [0, 0, 1, 10**6, int(seconds * 1e6) - 1, int(seconds * 1e6), int(seconds * 1e6) + 1]
    if seed % 3 == 0:
        steps = steps[:5]  # one session: every link within the window counts
    for _ in range(n):  # ties, steps just under, at and over the gap
        t += rng.choice(steps)
        ats.append(t)
    line = _timed(texts, ats)
    line.words.whole = WholeWords.of(texts)
    answered = 0
    for case in range(120):
        reach, window = rng.choice([(2, 2), (3, 2), (1, 1), (2, 3), (4, 1)])
        looked = rng.sample(line.rids, rng.randint(1, min(n, 60)))
        times: dict[int, Any] = {}
        found = sides_in(line, looked, 0, window=reach, scan=16, after=True, times=times)
        assert found is not None
        near = {rid: [*before, *after] for rid, (before, after) in found.items()}
        picked = rng.sample(looked, rng.randint(1, len(looked)))
        if case % 5 == 0:
            picked += rng.sample(line.rids, 2)  # candidates that are not keys of near (their neighbours may be)
            picked = list(dict.fromkeys(picked))
            for rid in picked:
                p = line.at[rid]
                times.setdefault(rid, (line.ats[p], None, None, line.texts[p]))
        scores = sorted((rng.choice([0.5, 1.0, 1.5, rng.random() * 3]) for _ in picked), reverse=True)  # ties
        keyword = list(zip(picked, scores, strict=True))
        idf = {w: rng.choice([0.25, 0.7, 1.3, rng.random() * 2]) for w in rng.sample(WORDS, rng.randint(1, 6))}
        weight = rng.choice([0.4, 1.0, 0.1])
        admit = case % 2 == 1  # hybrid: any record linked may enter, ordered after the other side's candidates
        others = rng.sample(line.rids, rng.randint(0, 20)) if admit else []
        others += rng.sample(others, min(len(others), 2)) + rng.sample(picked, min(len(picked), 2))
        # The caller keeping only the first ``cut`` (hybrid: its candidates): the records that enter are ordered
        # only where they can reach them.
        cut = rng.choice([None, None, 1, 2, 5, len(keyword), len(keyword) + 3, 40])
        got = context_in(
            line, keyword, near, idf, weight=weight, window=window, reach=reach, seconds=seconds, admit=admit,
            others=others, cut=cut,
        )  # fmt: skip
        expected = _reference(line, keyword, near, times, idf, weight, min(window, reach), gap, admit, others)
        if window <= reach:
            assert expected == _reference(line, keyword, near, times, idf, weight, window, gap, admit, others)
        if got is not None:
            answered += 1
            if cut is None:
                assert got == expected, (case, admit, keyword, idf)
            else:
                assert got[:cut] == expected[:cut], (case, admit, keyword, idf, cut)
        else:
            assert any(w.isalnum() and not w.lower().isalnum() for w in idf)  # İ: the caller searches the texts
    assert answered > 60


def test_contextual_keys_from_positions_refuse_what_they_cannot_tell() -> None:
    from memoryport.adapters.sqlite._timeline import context_in, sides_in

    texts = ["Ann paints", "a sunset", "over the lake", "Ann: tea?", "green tea", "the lake again"] * 5
    ats = [10**12 + i * 10**6 for i in range(len(texts))]
    line = _timed(texts, ats)
    whole = line.words.whole = WholeWords.of(texts)
    times: dict[int, Any] = {}
    found = sides_in(line, line.rids[5:20], 0, window=2, scan=16, after=True, times=times)
    assert found is not None
    near = {rid: [*before, *after] for rid, (before, after) in found.items()}
    keyword = [(line.rids[9], 2.0), (line.rids[12], 1.0), (line.rids[15], 0.5)]
    idf = {"ann": 1.0, "lake": 0.5, "tea": 0.75}

    def ask(**changes: Any) -> Any:
        args: dict[str, Any] = {"line": line, "keyword": keyword, "near": near, "idf": idf}
        args.update(changes)
        return context_in(
            args["line"], args["keyword"], args["near"], args["idf"], weight=0.4, window=2, reach=2, seconds=1800.0
        )

    assert ask() == _reference(line, keyword, near, times, idf, 0.4, 2, timedelta(minutes=30))
    assert ask() != keyword  # some credit
    # A candidate that is no key of near takes only from keys: not from its own neighbours (rids 24 and 26).
    alone = [*keyword, (line.rids[25], 0.25)]
    times[line.rids[25]] = (line.ats[25], None, None, line.texts[25])
    assert ask(keyword=alone) == _reference(line, alone, near, times, idf, 0.4, 2, timedelta(minutes=30))
    assert dict(ask(keyword=alone))[line.rids[25]] == 0.25
    assert ask(keyword=[*keyword, keyword[0]]) is None  # a candidate twice
    assert ask(keyword=keyword[::-1]) is None  # not best first
    assert ask(keyword=[(keyword[0][0], float("nan")), *keyword[1:]]) is None
    assert ask(keyword=[(7, 3.0), *keyword]) is None  # a rid the timeline does not hold
    assert ask(near={**near, 7: []}) is None
    cut = dict(near)
    cut[line.rids[9]] = near[line.rids[9]][:-1]  # a list another lookup cut (filters): not sides_in's
    assert ask(near=cut) is None
    assert ask(idf={"İstanbul": 1.0, "ann": 1.0}) is None
    mortal = _timed(texts, ats, mortal=True)
    mortal.words.whole = whole
    assert ask(line=mortal) is None
    scoped = _timed(texts, ats, sessions=["a", "b"] * 15)
    scoped.words.whole = whole
    assert ask(line=scoped) is None
    bare = _timed(texts, ats)
    assert ask(line=bare) is None  # no whole-word dictionary


def test_session_numbers_go_on_when_a_timeline_takes_its_stores_adds() -> None:
    from datetime import datetime, timezone

    from memoryport.adapters.sqlite._timeline import _runs

    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    steps = [0, 1, 1800, 1799, 0, 3600, 1800, 1]  # seconds: ties, the gap exactly, just under it
    at, ats = start, []
    for step in steps:
        at += timedelta(seconds=step)
        ats.append(at)
    line = _timed(["ann"] * 5, [int(t.timestamp() * 1e6) for t in ats[:5]])
    for seconds in (1800.0, 60.0):
        line.words.runs[seconds] = _runs(line.ats, seconds)
    records = [MemoryRecord(scope=ANN, text="tea", created_at=t) for t in ats[5:]]
    grown = line.appended(records, [900, 901, 902], 2)
    assert grown is not None and grown.ats[5:] == [int(t.timestamp() * 1e6) for t in ats[5:]]
    for seconds in (1800.0, 60.0):
        assert grown.words.runs[seconds] == _runs(grown.ats, seconds)
    assert grown.words.runs[1800.0] == [0, 0, 1, 1, 1, 2, 3, 3]
    empty = _timed([], [])
    assert empty.appended(records, [900, 901, 902], 2) is not None


def test_holders_when_another_search_forgets_the_same_words_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two searches of one user on two threads share the timeline's kept words (no lock): one forgetting the
    oldest words while the other is between its room check and its own forgetting must not fail either search.

    Deterministic stand-in for that interleaving: a ``held`` whose iteration first lets the "other search" empty
    it (between ``while kept`` and ``next(iter(kept))``) or take the very word about to be popped.
    """
    from memoryport.adapters.sqlite import _timeline

    monkeypatch.setattr(_timeline, "_HOLDERS_PER_RECORD", 0)
    monkeypatch.setattr(_timeline, "_HOLDERS_BASE", 40)
    rng = random.Random(7)
    texts = _texts(rng, 200, PIECES)
    by_rid: dict[int, str] = {}

    class Raced(dict[str, frozenset[int]]):
        steal = "all"

        def __iter__(self) -> Iterator[str]:
            if self.steal == "all":
                self.clear()  # the other search forgot every word just now
            keys = list(super().__iter__())
            if self.steal == "one" and keys:
                super().pop(keys[0])  # the other search forgot the oldest word just now
            return iter(keys)

    for steal in ("one", "all"):
        line = _line(texts)
        line.words.whole = WholeWords.of(texts)
        by_rid = dict(zip(line.rids, line.texts, strict=True))
        held = line.words.held = Raced()
        held.steal = steal
        words = [w for w in WORDS if w.lower().isalnum()]
        for _ in range(60):
            rids = rng.sample(line.rids, rng.randint(1, 120))
            asked = rng.sample(words, rng.randint(1, 5))
            assert line.holders(rids, asked) == ranking._holders(rids, by_rid, asked)
