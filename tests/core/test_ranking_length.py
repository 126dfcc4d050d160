"""memoryport.ranking.length_boost: a bounded prior for longer records."""

from __future__ import annotations

import pytest

from memoryport.ranking import LENGTH_PIVOT, LENGTH_WEIGHT, length_boost


def test_defaults() -> None:
    assert (LENGTH_WEIGHT, LENGTH_PIVOT) == (0.3, 250)


def test_the_lift_grows_with_the_length_up_to_the_pivot() -> None:
    scores = [("short", 0.5), ("half", 0.5), ("pivot", 0.5), ("long", 0.5)]
    lengths = {"short": 0, "half": 125, "pivot": 250, "long": 10_000}
    out = dict(length_boost(scores, lengths, weight=0.3, pivot=250))
    assert out["short"] == 0.5
    assert out["half"] == pytest.approx(0.65)
    assert out["pivot"] == out["long"] == pytest.approx(0.8)  # bounded: never more than the weight


def test_a_longer_record_overtakes_a_slightly_better_short_one_only() -> None:
    scores = [("short", 1.0), ("long", 0.9), ("far", 0.5)]
    lengths = {"short": 20, "long": 300, "far": 300}
    assert [k for k, _ in length_boost(scores, lengths, weight=0.3)] == ["long", "short", "far"]
    # a candidate far behind stays behind, whatever its length
    assert [k for k, _ in length_boost(scores, lengths, weight=0.1)] == ["short", "long", "far"]


def test_off_missing_and_empty() -> None:
    scores = [("a", 1.0), ("b", 0.9)]
    assert length_boost(scores, {"b": 1_000}, weight=0.0) == scores
    assert length_boost([], {"a": 10}) == []
    # keys without a length get nothing; equal lifts keep the input order
    assert length_boost(scores, {}, weight=0.3) == scores
    assert [k for k, _ in length_boost([("a", 0.5), ("b", 0.5)], {"a": 400, "b": 400})] == ["a", "b"]


def test_a_store_of_similar_short_texts_keeps_its_order() -> None:
    # facts of 30-40 characters: the lifts differ by at most 0.3 * 10 / 250 = 0.012
    scores = [(f"f{i}", 1.0 - 0.05 * i) for i in range(10)]
    lengths = {f"f{i}": 30 + (i * 7) % 11 for i in range(10)}
    assert [k for k, _ in length_boost(scores, lengths)] == [k for k, _ in scores]


@pytest.mark.parametrize(("weight", "pivot"), [(-0.1, 250), (0.3, 0), (0.3, -5)])
def test_bad_arguments(weight: float, pivot: int) -> None:
    with pytest.raises(ValueError):
        length_boost([("a", 1.0)], {"a": 10}, weight=weight, pivot=pivot)
