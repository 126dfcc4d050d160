"""memoryport.ranking.context_keys: a record credited the query words its neighbours hold and it lacks."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import pytest

from memoryport.ranking import CONTEXT_KEY_WEIGHT, CONTEXT_KEY_WINDOW, SESSION_GAP, context_keys

T0 = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
TEXTS = {
    1: "Bo: What do you paint?",
    2: "Ann: Sunsets, mostly.",
    3: "Ann: I love the lake.",
    4: "Bo: Nice lake!",
}
IDF = {"paint": 2.0, "lake": 1.0}


def chain(keys: list[int], window: int = 2) -> dict[int, list[tuple[int, int]]]:
    """Each key's neighbours in a row of ``keys``, as a store's lookup gives them (before, then after)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for i, key in enumerate(keys):
        before = [(keys[i - d], d) for d in range(1, window + 1) if i - d >= 0]
        after = [(keys[i + d], d) for d in range(1, window + 1) if i + d < len(keys)]
        out[key] = [*before, *after]
    return out


def test_defaults() -> None:
    assert CONTEXT_KEY_WEIGHT == 0.4 and CONTEXT_KEY_WINDOW == 2


def test_each_missing_word_is_credited_once_at_weight_times_its_idf() -> None:
    keyword = [(1, 2.0), (3, 1.0), (4, 1.0)]
    ranked = dict(context_keys(keyword, chain([1, 2, 3, 4]), TEXTS, IDF, weight=0.5, window=2))
    # 1 holds "paint"; 3 (distance 2) lends it "lake"
    assert ranked[1] == pytest.approx(2.0 + 0.5 * 1.0)
    assert ranked[2] == pytest.approx(0.5 * (2.0 + 1.0))  # holds neither: "paint" from 1, "lake" from 3 and 4
    assert ranked[3] == pytest.approx(1.0 + 0.5 * 2.0)  # lacks "paint" (1 is two away), holds "lake" already
    assert ranked[4] == pytest.approx(1.0)  # 1 is 3 away: nothing it lacks within 2


def test_window_one_reads_only_adjacent_records() -> None:
    ranked = dict(context_keys([(1, 2.0), (3, 1.0)], chain([1, 2, 3, 4]), TEXTS, IDF, weight=0.5, window=1))
    assert ranked[3] == pytest.approx(1.0)  # "paint" is two away
    assert ranked[2] == pytest.approx(0.5 * 3.0)


def test_words_match_whole_and_case_blind_and_only_those_in_idf() -> None:
    texts = {1: "REPAINTED it", 2: "a Paint-brush", 3: "paint"}
    near = {2: [(1, 1), (3, 1)]}
    ranked = dict(context_keys([(2, 1.0)], near, texts, {"paint": 2.0}, weight=0.5))
    assert ranked[2] == pytest.approx(1.0)  # holds "paint" itself ("Paint-brush")
    assert ranked[1] == pytest.approx(0.5 * 2.0)  # "REPAINTED" is not the word: lent by 2
    assert 3 not in ranked or ranked[3] == pytest.approx(0.0)  # holds it; 2 lends only "paint"
    # a word the engine did not find (not in idf) lends nothing
    assert context_keys([(2, 1.0)], near, {**texts, 1: "sunset"}, {}, weight=0.5) == [(2, 1.0)]


def test_a_neighbour_in_another_session_lends_nothing() -> None:
    near = chain([1, 2, 3])
    when = {1: ("ann", T0), 2: ("ann", T0 + timedelta(minutes=5)), 3: ("ann", T0 + timedelta(days=3))}
    ranked = dict(context_keys([(1, 2.0)], near, TEXTS, IDF, weight=0.5, when=when))
    assert ranked[2] == pytest.approx(1.0) and 3 not in ranked
    # unknown times: no session, no credit; when=None: every neighbour counts
    assert dict(context_keys([(1, 2.0)], near, TEXTS, IDF, weight=0.5, when={}))[1] == 2.0
    assert dict(context_keys([(1, 2.0)], near, TEXTS, IDF, weight=0.5))[3] == pytest.approx(1.0)
    gap = timedelta(days=7)
    assert dict(context_keys([(1, 2.0)], near, TEXTS, IDF, weight=0.5, when=when, gap=gap))[3] == pytest.approx(1.0)
    assert timedelta(minutes=30) == SESSION_GAP


def test_admit_false_re_scores_the_keyword_candidates_only() -> None:
    near = chain([1, 2, 3, 4])
    ranked = context_keys([(1, 2.0), (3, 1.0)], near, TEXTS, IDF, weight=0.5, admit=False)
    assert [key for key, _ in ranked] == [1, 3] and dict(ranked)[1] == pytest.approx(2.5)


def test_off_switches_and_checks() -> None:
    keyword = [(1, 2.0), (3, 1.0)]
    near = chain([1, 2, 3, 4])
    for options in ({"weight": 0.0}, {"window": 0}):
        assert context_keys(keyword, near, TEXTS, IDF, **options) == keyword  # type: ignore[arg-type]
    assert context_keys(keyword, {}, TEXTS, IDF) == keyword
    assert context_keys(keyword, near, {}, IDF) == keyword  # no texts: nobody holds a word
    assert context_keys([], {}, {}, {}) == []
    with pytest.raises(ValueError, match="weight"):
        context_keys(keyword, near, TEXTS, IDF, weight=-0.1)


def test_ties_do_not_depend_on_the_order_of_the_mappings() -> None:
    keyword = [(1, 2.0)]
    near = chain([10, 11, 1, 12, 13])
    texts = {1: "paint", 10: "x", 11: "y", 12: "z", 13: "w"}
    expected = context_keys(keyword, near, texts, {"paint": 1.0}, others=[13])
    assert [key for key, _ in expected] == [1, 13, 11, 10, 12]  # keyword, others, then neighbours as met
    rng = random.Random(3)
    for _ in range(20):
        items = list(near.items())
        rng.shuffle(items)
        shuffled_texts = list(texts.items())
        rng.shuffle(shuffled_texts)
        again = context_keys(keyword, dict(items), dict(shuffled_texts), {"paint": 1.0}, others=[13])
        assert again == expected


def test_hostile_texts_and_words() -> None:
    texts = {1: "ünïcode CAFÉ\n\x00", 2: "café " * 1000, 3: ""}
    near = {1: [(2, 1), (3, 1)]}
    ranked = dict(context_keys([(1, 1.0)], near, texts, {"café": 1.0, "\n": 5.0, "": 9.0}, weight=0.5))
    assert ranked[1] == pytest.approx(1.0)  # holds "café" already (case folded)
    assert ranked[3] == pytest.approx(0.5)  # empty text: lent "café" by 1


def _reference(
    keyword: list[tuple[int, float]],
    near: dict[int, list[tuple[int, int]]],
    texts: dict[int, str],
    idf: dict[str, float],
    *,
    weight: float,
    window: int,
    when: dict[int, tuple[object, float]] | None,
    admit: bool,
    others: list[int],
) -> list[tuple[int, float]]:
    """context_keys as first written (session 6): every record's context built, then filtered; a key tuple sort."""
    from memoryport.ranking import _holders, sessions_of

    if not weight or window < 1 or not idf or not near:
        return list(keyword)
    session = None if when is None else sessions_of(when, gap=SESSION_GAP)
    pairs: list[tuple[int, int]] = []
    for key, found in near.items():
        mine = None if session is None else session.get(key)
        if session is not None and mine is None:
            continue
        pairs.extend(
            (key, other)
            for other, distance in found
            if distance <= window and other != key and (session is None or session.get(other) == mine)
        )
    if not pairs:
        return list(keyword)
    keys = list(dict.fromkeys(key for pair in pairs for key in pair))
    held = _holders(keys, texts, list(idf))
    if not held:
        return list(keyword)
    context: dict[int, set[str]] = {}
    for a, b in pairs:
        if b in held:
            context.setdefault(a, set()).update(held[b])
        if a in held:
            context.setdefault(b, set()).update(held[a])
    scores = dict(keyword)
    for key, words in context.items():
        if not admit and key not in scores:
            continue
        own = held.get(key)
        if own is not None:
            words -= own
        if words:
            scores[key] = scores.get(key, 0.0) + weight * sum(map(idf.__getitem__, words))
    order = {key: i for i, (key, _) in enumerate(keyword)}
    if len(scores) > len(order):
        for key in others:
            if key in scores:
                order.setdefault(key, len(order))
        for key in [*(key for key, _ in keyword), *others, *near]:
            if key in scores:
                order.setdefault(key, len(order))
            for other, _ in near.get(key, ()):
                if other in scores:
                    order.setdefault(other, len(order))
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


@pytest.mark.parametrize("seed", range(4))
def test_same_ranking_as_the_first_version(seed: int) -> None:
    """The faster loops and the stable sort by score give what the first version gave: ties (many equal
    scores), repeated keyword keys, a non-finite score, sessions on and off, admission on and off."""
    rng = random.Random(seed)
    vocab = ["paint", "lake", "sun", "tea", "walk", "x"]
    for _ in range(300):
        n = rng.randint(1, 40)
        line = rng.sample(range(1000), n)  # records in time order
        texts = {key: " ".join(rng.choices(vocab, k=rng.randint(0, 3))) for key in line}
        near = chain(line, window=rng.choice([1, 2, 3]))
        near = {key: found for key, found in near.items() if rng.random() < 0.6}
        picked = rng.sample(line, rng.randint(0, n))
        keyword = [(key, float(rng.choice([0.5, 1.0, 1.0, 2.0]))) for key in picked]
        if keyword and rng.random() < 0.2:
            keyword.append((keyword[0][0], 1.0))  # a repeated key
        if keyword and rng.random() < 0.05:
            keyword[-1] = (keyword[-1][0], float("nan"))
        others = rng.sample(line, rng.randint(0, min(n, 5)))
        when = None
        if rng.random() < 0.7:
            at = 0.0
            when = {}
            for key in line:
                at += rng.choice([60.0, 60.0, 3 * 3600.0])
                when[key] = (rng.choice(["a", "a", "b"]), at)
        idf = {word: rng.choice([0.5, 1.0, 1.5]) for word in rng.sample(vocab, rng.randint(0, 4))}
        options = {"weight": rng.choice([0.0, 0.4, 1.0]), "window": rng.choice([0, 1, 2]), "when": when,
                   "admit": rng.random() < 0.5, "others": others}  # fmt: skip
        got = context_keys(keyword, near, texts, idf, **options)  # type: ignore[arg-type]
        want = _reference(keyword, near, texts, idf, **options)  # type: ignore[arg-type]
        assert repr(got) == repr(want)  # repr: NaN == NaN


_SEEDED = """
import random
from memoryport import ranking
rnd = random.Random(5)
words = [f"w{i}" for i in range(40)]
idf = {w: rnd.uniform(0.1, 5) / 7 for w in words}
texts = {i: " ".join(rnd.sample(words, 12)) for i in range(200)}
near = {i: [(j, abs(j - i)) for j in range(max(0, i - 2), min(200, i + 3)) if j != i] for i in range(200)}
keyword = [(i, rnd.random()) for i in range(0, 200, 3)]
print(repr(ranking.context_keys(keyword, near, texts, idf, weight=0.4, window=2)))
"""


def test_scores_do_not_depend_on_the_hash_seed() -> None:
    # A record's lent words are a set: summed in its iteration order, the last bits of a
    # score (and so an order between near-ties) changed from one process to the next.
    import subprocess
    import sys

    outputs = {
        subprocess.run(
            [sys.executable, "-c", _SEEDED],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(outputs) == 1


def test_holders_answer_for_the_texts_and_none_falls_back() -> None:
    """A caller's index of its texts (``holders``) gives the same ranking; None there: the texts are searched."""
    keyword = [(1, 2.0), (3, 1.0), (4, 1.0)]
    near = chain([1, 2, 3, 4])
    expected = context_keys(keyword, near, TEXTS, IDF, weight=0.5, window=2)
    asked: list[tuple[list[int], list[str]]] = []

    def indexed(keys: Sequence[int], words: Sequence[str]) -> dict[int, set[str]]:
        asked.append((list(keys), list(words)))
        return {1: {"paint"}, 3: {"lake"}, 4: {"lake"}}

    assert context_keys(keyword, near, TEXTS, IDF, weight=0.5, window=2, holders=indexed) == expected
    assert asked == [([1, 2, 3, 4], ["paint", "lake"])]  # the linked keys, the words of idf
    assert context_keys(keyword, near, TEXTS, IDF, weight=0.5, window=2, holders=lambda k, w: None) == expected
    # What the index answers is what counts (here: nobody holds "lake").
    only_paint = dict(
        context_keys(keyword, near, TEXTS, IDF, weight=0.5, window=2, holders=lambda k, w: {1: {"paint"}})
    )
    assert only_paint[2] == pytest.approx(0.5 * 2.0)  # "paint" from 1, no "lake" from anyone
    assert only_paint[3] == pytest.approx(1.0 + 0.5 * 2.0) and only_paint[4] == pytest.approx(1.0)


def test_texts_lowered_in_one_go_equal_the_texts_lowered_one_by_one() -> None:
    """ranking._lowered (and the timeline's _joined): one lower() of the joined texts, or text by text when a
    character changes length (U+0130); final sigmas at a text's end or start, newlines inside texts."""
    import itertools
    import random

    from memoryport.adapters.sqlite._timeline import _joined
    from memoryport.ranking import _lowered

    rng = random.Random(2)
    alphabet = ["a", "B", "Σ", "σ", "ς", "İ", "I", "ı", " ", "\n", ".", "'", "Ω", "ﬀ", "1", "_", "ΑΣ", "é"]
    for _ in range(3000):
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 5))]
        lowered = [text.lower() for text in texts]
        want = ("\n".join(lowered), list(itertools.accumulate((len(t) + 1 for t in lowered[:-1]), initial=0)))
        assert _lowered(texts) == want == _joined(texts), texts


def test_sessions_given_replace_when() -> None:
    """``sessions=`` (a caller's own grouping, as sessions_of would give) ranks as ``when`` does, and ``when``
    is then not read; a key missing from ``sessions`` has no session (it lends and takes nothing)."""
    from memoryport.ranking import sessions_of

    rng = random.Random(5)
    vocab = ["paint", "lake", "sun", "tea"]
    for _ in range(200):
        line = rng.sample(range(100), rng.randint(2, 30))
        texts = {key: " ".join(rng.choices(vocab, k=rng.randint(0, 3))) for key in line}
        near = chain(line, window=2)
        at, when = 0.0, {}
        for key in line:
            at += rng.choice([60.0, 3 * 3600.0])
            when[key] = (rng.choice(["a", "b"]), at)
        keyword = [(key, float(rng.choice([0.5, 1.0, 2.0]))) for key in rng.sample(line, rng.randint(1, len(line)))]
        idf = {word: 1.0 for word in vocab}
        options = {"weight": 0.4, "window": 2, "admit": rng.random() < 0.5}
        want = context_keys(keyword, near, texts, idf, when=when, **options)  # type: ignore[arg-type]
        # other numbers, the same grouping
        sessions = {key: ("s", number * 7) for key, number in sessions_of(when).items()}
        assert repr(context_keys(keyword, near, texts, idf, when={}, sessions=sessions, **options)) == repr(want)  # type: ignore[arg-type]
    near = chain([1, 2, 3])
    assert dict(context_keys([(1, 2.0)], near, TEXTS, IDF, weight=0.5, sessions={1: 0, 2: 0}))[2] == pytest.approx(1.0)
    assert 3 not in dict(context_keys([(1, 2.0)], near, TEXTS, IDF, weight=0.5, sessions={1: 0, 2: 0}))
