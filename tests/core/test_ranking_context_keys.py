"""memoryport.ranking.context_keys: a record credited the query words its neighbours hold and it lacks."""

from __future__ import annotations

import random
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
