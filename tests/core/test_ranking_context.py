"""memoryport.ranking.mix_previous, sessions_of and session_boost: context from the previous turn and the session."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryport.ranking import SESSION_GAP, mix_previous, session_boost, sessions_of

T0 = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_mix_previous_is_the_cosine_with_the_mixed_key(seed: int, weight: float) -> None:
    rng = np.random.default_rng(seed)
    q, v, p = (unit(rng.normal(size=16)) for _ in range(3))
    mixed = mix_previous([("r", float(q @ v))], {"r": (float(q @ p), float(v @ p))}, weight=weight)
    assert mixed[0][1] == pytest.approx(float(q @ unit(v + weight * p)), abs=1e-9)


def test_mix_previous_keeps_records_without_a_predecessor_and_reorders() -> None:
    scores = [("first", 0.6), ("reply", 0.1), ("other", 0.4)]
    mixed = dict(mix_previous(scores, {"reply": (0.9, 0.0)}, weight=0.5))
    assert mixed["first"] == 0.6 and mixed["other"] == 0.4
    assert mixed["reply"] == pytest.approx((0.1 + 0.45) / math.sqrt(1.25))
    assert [k for k, _ in mix_previous(scores, {"reply": (0.9, 0.0)}, weight=0.5)] == ["first", "reply", "other"]
    assert mix_previous(scores, {"reply": (0.9, 0.0)}, weight=0.0) == scores
    assert mix_previous([], {}, weight=0.3) == []
    with pytest.raises(ValueError):
        mix_previous(scores, {}, weight=-0.1)


def test_sessions_are_chained_by_gaps_within_a_group() -> None:
    at = {
        "a": ("ann", T0),
        "b": ("ann", T0 + timedelta(minutes=20)),
        "c": ("ann", T0 + timedelta(minutes=40)),  # 20 min after b: chained to a through b
        "d": ("ann", T0 + timedelta(hours=3)),
        "e": ("ann/s2", T0 + timedelta(minutes=1)),  # another session id: never with a
    }
    found = sessions_of(at)
    assert found["a"] == found["b"] == found["c"]
    assert len({found["a"], found["d"], found["e"]}) == 3
    # exactly the gap apart: a new session
    assert len(set(sessions_of({"x": ("g", T0), "y": ("g", T0 + SESSION_GAP)}).values())) == 2
    assert sessions_of({}) == {}


def test_session_boost_lifts_the_session_of_the_best_match() -> None:
    when = {
        "match": ("ann", T0),
        "same_session": ("ann", T0 + timedelta(minutes=2)),
        "elsewhere": ("ann", T0 + timedelta(days=3)),
    }
    scores = [("match", 1.0), ("elsewhere", 0.5), ("same_session", 0.4)]
    boosted = session_boost(scores, when, weight=0.2)
    assert [k for k, _ in boosted] == ["match", "same_session", "elsewhere"]
    assert dict(boosted) == pytest.approx({"match": 1.2, "same_session": 0.6, "elsewhere": 0.6})
    # records without a known time keep their score; weight 0 changes nothing
    assert dict(session_boost([*scores, ("unknown", 0.55)], when, weight=0.2))["unknown"] == 0.55
    assert session_boost(scores, when, weight=0.0) == scores
    # a longer gap joins the two sessions: everyone gets the same lift, the order stays
    joined = session_boost(scores, when, weight=0.2, gap=timedelta(days=4))
    assert [k for k, _ in joined] == ["match", "elsewhere", "same_session"]
    with pytest.raises(ValueError):
        session_boost(scores, when, weight=-1)


def test_one_batch_of_unrelated_facts_keeps_its_order() -> None:
    # Facts written a minute apart form one session: the boost adds the same to all.
    scores = [(f"fact{i}", 1.0 - i / 10) for i in range(8)]
    when = {key: ("ann", T0 + timedelta(minutes=i)) for i, (key, _) in enumerate(scores)}
    assert [k for k, _ in session_boost(scores, when, weight=0.3)] == [k for k, _ in scores]


def test_sessions_accept_posix_seconds() -> None:
    at = {"a": ("g", T0), "b": ("g", T0 + timedelta(minutes=5)), "c": ("g", T0 + timedelta(hours=2))}
    seconds = {key: (group, when.timestamp()) for key, (group, when) in at.items()}
    assert sessions_of(at) == sessions_of(seconds)
    assert session_boost([("a", 1.0), ("c", 0.75), ("b", 0.7)], seconds, weight=0.3)[1][0] == "b"
