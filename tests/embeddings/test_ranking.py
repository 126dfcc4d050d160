"""The retrieval-quality steps of SQLiteMemory: stopwords, score fusion, neighbours, reranking."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from memoryport import CallableEmbedder, GuardedMemory, MemoryRecord, MemoryScope
from memoryport.adapters.sqlite import SQLiteMemory, SQLiteStore
from memoryport.adapters.sqlite._fts import match_expression
from memoryport.ranking import (
    STOPWORDS,
    fuse,
    normalise,
    query_terms,
    spread_to_neighbours,
    within_reach,
)

ANN = MemoryScope(user_id="ann")


def test_stopwords_are_dropped_unless_nothing_else_is_left() -> None:
    assert query_terms("What did Ann paint after the trip?") == ["ann", "paint", "trip"]
    assert query_terms("Who are you?") == ["who", "are", "you"]
    assert query_terms("🍵") == []
    assert match_expression("what is it") == '"what" OR "is" OR "it"'
    assert {"what", "did", "the", "s"} <= STOPWORDS and "paint" not in STOPWORDS


def test_normalise() -> None:
    assert normalise([]) == {}
    assert normalise([("a", 3.0)]) == {"a": 1.0}
    assert normalise([("a", 2.0), ("b", 2.0)]) == {"a": 1.0, "b": 1.0}
    assert normalise([("a", -1.0), ("b", -3.0), ("c", -2.0)]) == {"a": 1.0, "b": 0.0, "c": 0.5}


def test_fuse_weights_normalised_scores() -> None:
    fused = dict(fuse([("a", 10.0), ("b", 5.0), ("c", 0.0)], [("c", 0.9), ("d", 0.1)], keyword_weight=0.6))
    assert fused == pytest.approx({"a": 0.6, "b": 0.3, "c": 0.4, "d": 0.0})
    # a one-sided candidate can still win when its side is sure and the other is not
    assert fuse([], [("x", 0.3), ("y", 0.2)])[0] == ("x", pytest.approx(0.4))
    assert [k for k, _ in fuse([("a", 1.0), ("b", 1.0)], [])] == ["a", "b"]  # ties keep first appearance
    with pytest.raises(ValueError):
        fuse([], [], keyword_weight=1.5)


def test_spread_to_neighbours_same_as_the_inline_formula() -> None:
    """Each distance's share computed once gives the floats and order of ``weight * 0.5 ** (d - 1) * score``."""
    import random

    rng = random.Random(5)
    for _ in range(300):
        keys = rng.sample(range(60), rng.randint(1, 30))
        if rng.random() < 0.2:
            keys.append(rng.choice(keys))  # a key listed twice: ties fall back to the numbered order
        scored = [(key, rng.choice([0.25, 0.5, 1.0, rng.random()])) for key in keys]
        near = {
            key: [(rng.randrange(80), rng.randint(1, 4)) for _ in range(rng.randint(0, 4))]
            for key in rng.sample(keys, rng.randint(0, len(keys)))
        }
        weight, only = rng.choice([0.0, 0.3, 0.4]), rng.random() < 0.5
        out: dict[int, float] = dict(scored)
        order = {key: i for i, (key, _) in enumerate(scored)}
        if weight:
            for key, score in scored:
                for other, distance in near.get(key, ()):
                    if only and other not in order:
                        continue
                    order.setdefault(other, len(order))
                    out[other] = out.get(other, 0.0) + weight * 0.5 ** (distance - 1) * score
        want = sorted(out.items(), key=lambda kv: (-kv[1], order[kv[0]]))
        assert spread_to_neighbours(scored, near, weight=weight, only_scored=only) == want


def _spread_reference(
    scores: list[tuple[int, float]], near: dict[int, list[tuple[int, int]]], weight: float, only: bool
) -> Any:
    """spread_to_neighbours as it was before its path for unique keys (session 13), line for line."""
    import math

    out: dict[int, float] = dict(scores)
    order = {key: i for i, (key, _) in enumerate(scores)}
    unique = len(order) == len(scores)
    if weight:
        share: dict[int, float] = {}
        for key, score in scores:
            for other, distance in near.get(key, ()):
                if only and other not in order:
                    continue
                if other not in order:
                    order[other] = len(order)
                lift = share.get(distance)
                if lift is None:
                    lift = share[distance] = weight * 0.5 ** (distance - 1)
                out[other] = out.get(other, 0.0) + lift * score
    if len(order) == len(scores) or (unique and all(map(math.isfinite, out.values()))):
        return sorted(out.items(), key=lambda kv: kv[1], reverse=True)
    return sorted(out.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def test_spread_to_neighbours_equals_the_reference_with_scores_that_are_not_finite() -> None:
    """Every key once and every neighbour let in (hybrid search) takes a shorter path: the same pairs, in the
    same order, bit for bit, also with infinite and NaN scores and with no neighbour added."""
    import math
    import random

    rng = random.Random(11)
    seen_nan = 0
    for _ in range(2000):
        keys = rng.sample(range(50), rng.randint(1, 25))
        if rng.random() < 0.1:
            keys.append(rng.choice(keys))
        special = [math.inf, -math.inf, math.nan, 0.0, 1.0] if rng.random() < 0.3 else [0.5, 1.0]
        scored = [(key, rng.choice([*special, rng.random(), rng.random()])) for key in keys]
        pool = keys if rng.random() < 0.3 else list(range(70))  # sometimes no key is added
        near = {
            key: [(rng.choice(pool), rng.randint(1, 3)) for _ in range(rng.randint(0, 4))]
            for key in rng.sample(keys, rng.randint(0, len(keys)))
        }
        weight, only = rng.choice([0.0, 0.4, 1.7]), rng.random() < 0.3
        got = spread_to_neighbours(scored, near, weight=weight, only_scored=only)
        want = _spread_reference(scored, near, weight, only)
        assert [key for key, _ in got] == [key for key, _ in want]
        assert [repr(score) for _, score in got] == [repr(score) for _, score in want]
        seen_nan += any(math.isnan(score) for _, score in got)
    assert seen_nan > 50


def test_spread_to_neighbours() -> None:
    scored = [("hit", 1.0), ("weak", 0.3)]
    near = {"hit": [("before", 1), ("after", 1), ("far", 2)], "weak": [("hit", 1)]}
    spread = dict(spread_to_neighbours(scored, near, weight=0.4))
    assert spread == pytest.approx({"hit": 1.12, "before": 0.4, "after": 0.4, "far": 0.2, "weak": 0.3})
    kept = spread_to_neighbours(scored, {"hit": [("before", 1), ("weak", 2)]}, weight=0.4, only_scored=True)
    assert [k for k, _ in kept] == ["hit", "weak"] and dict(kept)["weak"] == pytest.approx(0.5)
    assert spread_to_neighbours(scored, {"hit": [("x", 1)]}, weight=0.0) == scored
    with pytest.raises(ValueError):
        spread_to_neighbours(scored, {}, weight=-1)


def bow(texts: list[str]) -> list[list[float]]:
    vocab = ["paint", "sunset", "lake", "bus", "late", "trip", "tea"]
    rows = []
    for t in texts:
        v = [float(w in t.lower()) for w in vocab] + [0.01]
        n = sum(x * x for x in v) ** 0.5
        rows.append([x / n for x in v])
    return rows


CONVERSATION = [
    "Ben: The bus was late again today.",
    "Ben: What did you paint last week?",
    "Ann: A sunset over the lake!",
    "Ben: Lovely. I had tea at the station.",
    "Ann: I am planning a trip to Rome.",
]


def add_conversation(memory: GuardedMemory[SQLiteStore], scope: MemoryScope = ANN) -> None:
    from datetime import datetime, timedelta, timezone

    start = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    memory.add_sync(
        [MemoryRecord(scope=scope, text=t, created_at=start + timedelta(minutes=i)) for i, t in enumerate(CONVERSATION)]
    )


def texts(hits: list[object]) -> list[str]:
    return [h.record.text for h in hits]  # type: ignore[attr-defined]


def test_within_reach_keeps_every_candidate_that_bounded_lifts_can_bring_into_the_k_best() -> None:
    """Random rankings with ties, random lifts up to the bound: the k best are the same on the head alone."""
    import random

    rng = random.Random(5)
    for trial in range(3000):
        n = rng.randint(0, 40)
        # few distinct scores: ties everywhere, also at the k-th place
        levels = [0.0, 0.1, 0.25, 0.5, 0.7, 1.0, 1.3]
        scored = sorted(((i, rng.choice(levels)) for i in range(n)), key=lambda kv: -kv[1])
        k = rng.randint(1, 12)
        bound = rng.choice([0.0, 0.1, 0.2, 0.45, 0.5, 2.0])
        # a lift per key, up to the bound (often exactly it), applied in steps as the store does
        parts = [{i: rng.choice([0.0, bound / 2, bound]) / 2 for i in range(n)} for _ in range(2)]

        def steps(ranking: list[tuple[int, float]], parts: list[dict[int, float]] = parts) -> list[tuple[int, float]]:
            for part in parts:
                ranking = sorted(((key, score + part[key]) for key, score in ranking), key=lambda kv: -kv[1])
            return ranking

        head = within_reach(scored, k, bound)
        assert head == scored[: len(head)] and len(head) >= min(k, n)
        assert steps(head)[:k] == steps(scored)[:k], trial


def _lifted(ranking: list[tuple[int, float]], parts: list[dict[int, float]]) -> list[tuple[int, float]]:
    """Steps as the store runs them: each adds a lift per key, then a stable sort by score."""
    for part in parts:
        ranking = sorted(((key, score + part.get(key, 0.0)) for key, score in ranking), key=lambda kv: -kv[1])
    return ranking


def test_within_reach_with_a_least_lift_per_key_gives_the_same_k_best() -> None:
    """Random rankings with ties, a least lift per key (given exactly by one step) and up to ``lift`` in all:
    the k best after the steps are the same on the head, a prefix no longer than without ``least``."""
    import random

    rng = random.Random(11)
    cut = 0
    for trial in range(1000):
        n = rng.randint(0, 40)
        levels = [0.0, 0.1, 0.25, 0.5, 0.7, 1.0, 1.3]
        scored = sorted(((i, rng.choice(levels)) for i in range(n)), key=lambda kv: -kv[1])
        k = rng.randint(1, 12)
        lift = rng.choice([0.0, 0.1, 0.3, 0.5, 2.0])
        least = {i: rng.choice([0.0, lift / 4, lift / 2, lift]) for i in range(n)}
        # the least in one step, some share of the rest in another
        parts = [dict(least), {i: rng.choice([0.0, 0.5, 1.0]) * (lift - least[i]) for i in range(n)}]
        head = within_reach(scored, k, lift, least=least.__getitem__)
        plain = within_reach(scored, k, lift)
        assert head == scored[: len(head)] and min(k, n) <= len(head) <= len(plain)
        assert _lifted(head, parts)[:k] == _lifted(scored, parts)[:k], trial
        cut += len(head) < len(plain)
    assert cut > 50  # the least lifts do cut more than the uniform lift alone


def test_session_boost_on_the_head_gives_the_same_k_best() -> None:
    """session_boost(k=, lift=) against the full step followed by steps of at most ``lift`` per key:
    random sessions (two scopes, pauses around the gap, candidates left out between two sessions),
    ties, keys without a time; the k best are the same, and the head is shorter in some cases."""
    import random

    from memoryport.ranking import session_boost

    rng = random.Random(3)
    shorter = 0
    gap = 1800.0
    for trial in range(800):
        n = rng.randint(0, 30)
        levels = [0.0, 0.05, 0.1, 0.3, 0.5, 0.7, 1.0]
        scored = sorted(((i, rng.choice(levels)) for i in range(n)), key=lambda kv: -kv[1])
        when: dict[int, tuple[object, float]] = {}
        t = 0.0
        for i in rng.sample(range(n), n):
            t += rng.choice([0.0, 60.0, 1000.0, gap - 1, gap, 2 * gap, 86_400.0])
            if rng.random() < 0.9:
                when[i] = (rng.choice(["a", "b"]), t)
        k = rng.randint(1, 8)
        weight = rng.choice([0.3, 0.5, 1.0])
        lift = rng.choice([0.0, 0.05, 0.2, 0.5])
        parts = [{i: rng.choice([0.0, lift / 2, lift]) for i in range(n)}]
        full = session_boost(scored, when, weight=weight)
        head = session_boost(scored, when, weight=weight, k=k, lift=lift)
        assert len(head) >= min(k, n)
        assert _lifted(head, parts)[:k] == _lifted(full, parts)[:k], trial
        shorter += len(head) < len(full)
    assert shorter > 50


def test_session_boost_with_a_grouping_equals_sessions_of() -> None:
    """session_boost(grouping=): a caller's grouping that answers as sessions_of does (other numbers) gives the
    same result, with and without k; one that answers None falls back to sessions_of; the grouping is asked for
    exactly the keys in ``when`` that the step groups (all of them, or the head's), and its answer is used."""
    import random

    from memoryport.ranking import session_boost, sessions_of

    rng = random.Random(5)
    gap = 1800.0
    asked: list[list[int]] = []
    for trial in range(400):
        n = rng.randint(0, 30)
        scored = sorted(((i, rng.choice([0.0, 0.1, 0.3, 0.5, 0.7, 1.0])) for i in range(n)), key=lambda kv: -kv[1])
        when: dict[int, tuple[object, float]] = {}
        t = 0.0
        for i in rng.sample(range(n), n):
            t += rng.choice([0.0, 60.0, gap - 1, gap, 86_400.0])
            if rng.random() < 0.9:
                when[i] = (rng.choice(["a", "b"]), t)

        def grouping(keys: list[int], when: dict[int, tuple[object, float]] = when) -> dict[int, object]:
            asked.append(keys)
            assert all(key in when for key in keys)
            # other session labels than sessions_of's numbers: only equality counts
            return {key: ("session", number) for key, number in sessions_of({k: when[k] for k in keys}).items()}

        for k in (None, rng.randint(1, 8)):
            want = session_boost(scored, when, weight=0.5, k=k, lift=0.2)
            assert session_boost(scored, when, weight=0.5, k=k, lift=0.2, grouping=grouping) == want, trial
            assert session_boost(scored, when, weight=0.5, k=k, lift=0.2, grouping=lambda keys: None) == want
    assert asked and any(len(keys) > 1 for keys in asked)
    # The grouping's answer is what counts: one session for every key lifts each by the best score.
    when = {1: ("s", 0.0), 2: ("s", 86_400.0)}
    apart = session_boost([(1, 1.0), (2, 0.5)], when, weight=0.5)
    together = session_boost([(1, 1.0), (2, 0.5)], when, weight=0.5, grouping=lambda keys: dict.fromkeys(keys, 0))
    assert apart == [(1, 1.5), (2, 0.75)] and together == [(1, 1.5), (2, 1.0)]


def test_session_boost_on_the_head_looks_at_every_candidate_when_one_left_out_may_join_two_sessions() -> None:
    from memoryport.ranking import session_boost

    # 1 and 2 are two hours apart (two sessions); 3, left out (too low), lies between them at 25-minute steps.
    when = {1: ("s", 0.0), 2: ("s", 4 * 1500.0), 3: ("s", 1500.0), 4: ("s", 3000.0), 5: ("s", 4500.0), 6: ("x", 0.0)}
    scored = [(1, 1.0), (2, 0.9), (6, 0.8), (3, 0.01), (4, 0.01), (5, 0.01)]
    full = session_boost(scored, when, weight=0.5)
    # 1 and 2 share a session through 3, 4 and 5
    assert [(key, round(score, 6)) for key, score in full[:3]] == [(1, 1.5), (2, 1.4), (6, 1.2)]
    assert session_boost(scored, when, weight=0.5, k=2, lift=0.0) == full
    # without the chain, the head alone is exact
    apart = {**when, 3: ("s", 9e9), 4: ("s", 9e9), 5: ("s", 9e9)}
    head = session_boost(scored, apart, weight=0.5, k=2, lift=0.0)
    assert [(key, round(score, 6)) for key, score in head] == [(1, 1.5), (2, 1.35)]  # 6 cannot reach 1.35
    assert head == session_boost(scored, apart, weight=0.5)[:2]
    # edges: k of 0 or beyond the candidates, scores that are not finite: every candidate; a negative lift: refused
    assert session_boost(scored, apart, weight=0.5, k=0) == session_boost(scored, apart, weight=0.5)
    assert session_boost(scored, apart, weight=0.5, k=9) == session_boost(scored, apart, weight=0.5)
    assert len(session_boost([(1, float("inf")), *scored[1:]], apart, weight=0.5, k=1)) == len(scored)
    assert session_boost([], apart, weight=0.5, k=2) == []
    with pytest.raises(ValueError):
        session_boost(scored, apart, weight=0.5, k=2, lift=-0.1)


def test_within_reach_edges() -> None:
    scored = [("a", 0.9), ("b", 0.8), ("c", 0.5), ("d", 0.1)]
    assert within_reach(scored, 2, 0.3) == scored[:3]
    assert within_reach(scored, 2, 0.0) == scored[:2]
    assert within_reach(scored, 4, 0.0) == scored and within_reach(scored, 9, 0.0) == scored
    assert within_reach([], 3, 1.0) == []
    # not finite: no cut
    assert len(within_reach([("a", float("nan")), ("b", 0.5), ("c", 0.1)], 1, 0.1)) == 3
    assert len(within_reach([("a", float("inf")), ("b", 0.5), ("c", 0.1)], 1, 0.1)) == 3
    assert len(within_reach(scored, 1, float("inf"))) == 4
    with pytest.raises(ValueError):
        within_reach(scored, 2, -0.1)


def test_keyword_search_returns_only_matching_records(tmp_path: object) -> None:
    memory = SQLiteMemory(f"{tmp_path}/k.db")
    add_conversation(memory)
    # "paint" matches one turn only; its neighbours contain no query word and are not returned
    assert texts(memory.search_sync("What did they paint?", scope=ANN, k=5)) == ["Ben: What did you paint last week?"]
    memory.close()


def test_hybrid_lifts_the_turn_after_a_match(tmp_path: object) -> None:
    emb = CallableEmbedder(bow, dim=8, name="bow")
    memory = SQLiteMemory(f"{tmp_path}/h.db", embedder=emb)
    add_conversation(memory)
    other = MemoryScope(user_id="ann", session_id="other")
    memory.add_sync([MemoryRecord(scope=other, text="Ann: unrelated words entirely")])
    hits = memory.search_sync("What did you paint?", scope=MemoryScope(user_id="ann", session_id=None), k=3)
    top = texts(hits)
    assert top[0] == "Ben: What did you paint last week?"
    assert "Ann: A sunset over the lake!" in top[:2]  # the answer, next to the matching question
    memory.close()


def test_context_weight_zero_turns_neighbours_off(tmp_path: object) -> None:
    emb = CallableEmbedder(bow, dim=8, name="bow")
    lifted = SQLiteMemory(f"{tmp_path}/on.db", embedder=emb)
    plain = SQLiteMemory(f"{tmp_path}/off.db", embedder=emb, context_weight=0)
    for memory in (lifted, plain):
        add_conversation(memory)
    query = "What did you paint?"
    on = lifted.search_sync(query, scope=ANN, k=5)
    off = plain.search_sync(query, scope=ANN, k=5)
    sunset = "Ann: A sunset over the lake!"
    score_on = next(h.score for h in on if h.record.text == sunset)
    score_off = next((h.score for h in off if h.record.text == sunset), 0.0)
    assert score_on > score_off  # the turn after the match got context only where enabled
    for memory in (lifted, plain):
        memory.close()


def test_context_options_are_checked(tmp_path: object) -> None:
    from memoryport import InvalidInput

    with pytest.raises(InvalidInput, match="context_weight"):
        SQLiteMemory(f"{tmp_path}/a.db", context_weight=1.5)
    with pytest.raises(InvalidInput, match="context_window"):
        SQLiteMemory(f"{tmp_path}/b.db", context_window=-1)


def test_neighbours_respect_scope_and_filters(tmp_path: object) -> None:
    from datetime import datetime, timezone

    emb = CallableEmbedder(bow, dim=8, name="bow")
    memory = SQLiteMemory(f"{tmp_path}/n.db", embedder=emb)
    t = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    s1, s2 = MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ann", session_id="s2")
    memory.add_sync([MemoryRecord(scope=s1, text="paint the lake", created_at=t, metadata={"kind": "a"})])
    memory.add_sync([MemoryRecord(scope=s2, text="nothing here", created_at=t)])
    hits = memory.search_sync("paint", scope=s1, k=5)
    assert texts(hits) == ["paint the lake"]  # s2's record is written next to it but is another scope
    assert texts(memory.search_sync("paint", scope=ANN, k=5))[0] == "paint the lake"
    assert memory.dropped_out_of_scope == 0
    assert texts(memory.search_sync("paint", scope=s1, k=5, filters={"kind": "b"})) == []
    memory.close()


def test_reranker_reorders_the_first_stage(tmp_path: object) -> None:
    from memoryport import CallableReranker, MemoryEvent

    calls: list[int] = []

    def by_length(query: str, texts: list[str]) -> list[float]:
        calls.append(len(texts))
        return [-len(t) for t in texts]  # shortest first, whatever the first stage said

    events: list[MemoryEvent] = []
    memory = SQLiteMemory(f"{tmp_path}/r.db", reranker=CallableReranker(by_length, name="len"), rerank_candidates=3,
                          sink=events.append)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in ("tea tea tea and more tea", "tea", "tea time", "x")])
    hits = memory.search_sync("tea", scope=ANN, k=2)
    assert texts(hits) == ["tea", "tea time"]
    assert calls == [3]
    assert [h.score for h in hits] == [-3.0, -8.0]
    assert any(e.name == "rerank.used" and e.count == 3 for e in events)
    assert memory.search_sync("", scope=ANN, k=1)[0].signal == "recent"  # listing is not reranked
    memory.close()


def test_failing_reranker_keeps_the_fused_order(tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    from memoryport import CallableReranker

    def broken(query: str, texts: list[str]) -> list[float]:
        return [1.0]  # wrong length

    memory = SQLiteMemory(f"{tmp_path}/f.db", reranker=CallableReranker(broken, name="broken"))
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in ("green tea", "tea")])
    with caplog.at_level("WARNING", logger="memoryport"):
        hits = memory.search_sync("green tea", scope=ANN, k=2)
    assert texts(hits) == ["green tea", "tea"]
    assert "reranker failed" in caplog.text and "BackendError" in caplog.text
    memory.close()


def test_reranker_must_be_a_port(tmp_path: object) -> None:
    from memoryport import InvalidInput, UsageError

    with pytest.raises(UsageError):
        SQLiteMemory(f"{tmp_path}/u.db", reranker=lambda q, t: t)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        SQLiteMemory(f"{tmp_path}/u.db", reranker=None, rerank_candidates=0)


def test_neighbours_skip_other_sessions_written_in_between(tmp_path: object) -> None:
    from datetime import datetime, timedelta, timezone

    emb = CallableEmbedder(bow, dim=8, name="bow")
    memory = SQLiteMemory(f"{tmp_path}/i.db", embedder=emb)
    t = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    s1, s2 = MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ann", session_id="s2")
    for i, (scope, text) in enumerate([(s1, "What did you paint?"), (s2, "noise"), (s1, "A sunset over the lake!")]):
        memory.add_sync([MemoryRecord(scope=scope, text=text, created_at=t + timedelta(minutes=i))])
    hits = memory.search_sync("paint", scope=s1, k=5)
    assert texts(hits) == ["What did you paint?", "A sunset over the lake!"]
    assert hits[1].score >= 0.4 * 0.99  # lifted as the distance-1 neighbour of the match
    memory.close()


DIARY = [
    ("Ann: hiking by the lake.", datetime(2023, 3, 4, 10, tzinfo=timezone.utc)),
    ("Ann: hiking up the hill.", datetime(2023, 7, 8, 10, tzinfo=timezone.utc)),
    ("Ann: hiking on the coast.", datetime(2023, 11, 20, 10, tzinfo=timezone.utc)),
]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_date_in_the_query_lifts_records_written_then(tmp_path: object, mode: str) -> None:
    emb = CallableEmbedder(bow, dim=8, name="bow")
    memory = SQLiteMemory(f"{tmp_path}/d.db", embedder=emb, search_mode=mode)
    plain = SQLiteMemory(f"{tmp_path}/p.db", embedder=emb, search_mode=mode, date_weight=0)
    for m in (memory, plain):
        m.add_sync([MemoryRecord(scope=ANN, text=t, created_at=at) for t, at in DIARY])
    assert texts(memory.search_sync("Where did Ann hike on 8 July 2023?", scope=ANN, k=1)) == [DIARY[1][0]]
    assert texts(memory.search_sync("Where did Ann hike in November 2023?", scope=ANN, k=1)) == [DIARY[2][0]]
    # a hint, not a filter: the other records still come back; without a date, or with the boost off, no edge
    assert len(memory.search_sync("Where did Ann hike on 8 July 2023?", scope=ANN, k=3)) == 3
    undated = texts(memory.search_sync("Where did Ann hike?", scope=ANN, k=3))
    assert undated == texts(plain.search_sync("Where did Ann hike on 8 July 2023?", scope=ANN, k=3))
    for m in (memory, plain):
        m.close()


def test_date_weight_is_checked(tmp_path: object) -> None:
    from memoryport import InvalidInput

    with pytest.raises(InvalidInput, match="date_weight"):
        SQLiteMemory(f"{tmp_path}/x.db", date_weight=2)


# Vectors by hand: the query is about trips; the reply "Yes, twice!" is not, but the turn before it is.
TRIP_VECTORS = {
    "holiday destinations": [1.0, 0.0, 0.0, 0.0],
    "Ben: Did you go anywhere nice?": [1.0, 0.0, 0.0, 0.0],
    "Ann: Yes, twice!": [0.0, 1.0, 0.0, 0.0],
    "Ben: The weather is nice.": [0.5, 0.0, 0.866, 0.0],
}
TRIP_TALK = [*list(TRIP_VECTORS)[1:], "Ann: My cat sleeps all day.", "Ben: Mine too."]


def trip_embedder() -> CallableEmbedder:
    return CallableEmbedder(
        lambda texts: [TRIP_VECTORS.get(t, [0.0, 0.0, 0.0, 1.0]) for t in texts], dim=4, name="trip"
    )


def add_talk(memory: GuardedMemory, talk: list[str], scope: MemoryScope = ANN) -> None:
    from datetime import timedelta

    t0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    for i, text in enumerate(talk):
        memory.add_sync([MemoryRecord(scope=scope, text=text, created_at=t0 + timedelta(seconds=i))])


@pytest.mark.parametrize(("weight", "reply_first"), [(0.6, True), (0.0, False)])
def test_previous_weight_finds_a_reply_by_the_turn_before_it(
    tmp_path: object, weight: float, reply_first: bool
) -> None:
    memory = SQLiteMemory(
        f"{tmp_path}/p.db",
        embedder=trip_embedder(),
        previous_weight=weight,
        context_weight=0,
        session_weight=0,
        length_weight=0,
    )
    add_talk(memory, TRIP_TALK)
    # No query word is in any record: hybrid ranks by vectors alone (mixed with the previous turn's).
    found = texts(memory.search_sync("holiday destinations", scope=ANN, k=3))
    assert found[0] == "Ben: Did you go anywhere nice?"
    assert (found.index("Ann: Yes, twice!") < found.index("Ben: The weather is nice.")) is reply_first
    # pure vector search keeps plain cosine scores
    vector = SQLiteMemory(f"{tmp_path}/p.db", embedder=trip_embedder(), previous_weight=weight, search_mode="vector")
    hits = vector.search_sync("holiday destinations", scope=ANN, k=3)
    assert texts(hits)[1] == "Ben: The weather is nice." and hits[1].score == pytest.approx(0.5, abs=1e-3)
    for m in (memory, vector):
        m.close()


def test_previous_turn_comes_from_the_same_session_and_passes_the_filters(tmp_path: object) -> None:
    s1, s2 = MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ann", session_id="s2")
    memory = SQLiteMemory(f"{tmp_path}/s.db", embedder=trip_embedder(), previous_weight=0.6, context_weight=0)
    from datetime import timedelta

    t0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    talk = [(s1, "Ben: Did you go anywhere nice?", "q"), (s2, "Ben: Mine too.", "x"), (s1, "Ann: Yes, twice!", "a"),
            (s2, "Ann: Yes, twice!", "b"), (s1, "Ben: The weather is nice.", "w")]  # fmt: skip
    for i, (scope, text, tag) in enumerate(talk):
        at = t0 + timedelta(seconds=i)
        memory.add_sync([MemoryRecord(scope=scope, text=text, metadata={"tag": tag}, created_at=at)])
    user = MemoryScope(user_id="ann")
    tags = [h.record.metadata["tag"] for h in memory.search_sync("holiday destinations", scope=user, k=5)]
    # s1's reply follows the question in its session; s2's follows "Mine too." and gets no lift
    assert tags.index("a") < tags.index("w") < tags.index("b")
    # a filter that hides the question leaves the reply without a predecessor
    filtered = memory.search_sync("holiday destinations", scope=s1, k=5, filters={"tag": {"$in": ["a", "w"]}})
    assert [h.record.metadata["tag"] for h in filtered] == ["w", "a"]
    memory.close()


DAYS = [
    ("Ann: We flew to Lisbon for the weekend.", 0),
    ("Ann: The food there was wonderful.", 60),
    ("Ann: Some food.", 3 * 86_400),  # three days later: another session, and a stronger keyword match alone
]


@pytest.mark.parametrize(("weight", "first_food"), [(0.3, 1), (0.0, 2)])
def test_session_weight_lifts_the_session_of_the_best_match(
    tmp_path: object, weight: float, first_food: int
) -> None:
    from datetime import timedelta

    memory = SQLiteMemory(
        f"{tmp_path}/k.db", session_weight=weight, context_weight=0, context_key_weight=0, length_weight=0
    )
    t0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    memory.add_sync([MemoryRecord(scope=ANN, text=t, created_at=t0 + timedelta(seconds=s)) for t, s in DAYS])
    found = texts(memory.search_sync("Lisbon food", scope=ANN, k=3))
    assert found[0] == DAYS[0][0] and found[1] == DAYS[first_food][0]
    memory.close()


@pytest.mark.parametrize(
    ("option", "value"),
    [("previous_weight", -0.1), ("previous_weight", 1.5), ("session_weight", True), ("session_gap", 0),
     ("session_gap", 30)],
)  # fmt: skip
def test_previous_and_session_options_are_checked(tmp_path: object, option: str, value: object) -> None:
    from memoryport import InvalidInput

    with pytest.raises(InvalidInput, match=option):
        SQLiteMemory(f"{tmp_path}/x.db", **{option: value})  # type: ignore[arg-type]


TURNS = [
    ("Gina: Hey Jon! How was the fair?", "greets"),
    ("Jon: The fair went well, thanks a lot for asking.", "jon"),
    ("Gina: The fair was fun.", "gina"),
]


@pytest.mark.parametrize(("weight", "first"), [(0.5, "jon"), (0.0, "greets")])
def test_speaker_weight_lifts_the_turns_of_the_speaker_the_query_names(
    tmp_path: object, weight: float, first: str
) -> None:
    memory = SQLiteMemory(
        f"{tmp_path}/k.db", speaker_weight=weight, session_weight=0, context_weight=0, context_key_weight=0
    )
    memory.add_sync([MemoryRecord(scope=ANN, text=t, metadata={"tag": tag}) for t, tag in TURNS])
    hits = memory.search_sync("How was Jon's fair?", scope=ANN, k=3)
    assert hits[0].record.metadata["tag"] == first
    assert {h.record.metadata["tag"] for h in hits} == {"greets", "jon", "gina"}
    # a query naming nobody, or records without a speaker prefix, rank as before
    plain = memory.search_sync("fair", scope=ANN, k=3)
    off = SQLiteMemory(f"{tmp_path}/k.db", speaker_weight=0, session_weight=0, context_weight=0, context_key_weight=0)
    before = off.search_sync("fair", scope=ANN, k=3)
    assert [(h.record.id, h.score) for h in plain] == [(h.record.id, h.score) for h in before]
    memory.close()
    off.close()


def test_speaker_and_time_weight_defaults_and_checks(tmp_path: object) -> None:
    from memoryport import InvalidInput
    from memoryport.ranking import SPEAKER_WEIGHT, TIME_WEIGHT

    memory = SQLiteMemory(f"{tmp_path}/d.db")
    assert memory.store.speaker_weight == SPEAKER_WEIGHT == 0.2
    assert memory.store.time_weight == TIME_WEIGHT == 0.2
    memory.close()
    for option in ("speaker_weight", "time_weight"):
        for bad in (-0.1, 1.5, True, "0.2"):
            with pytest.raises(InvalidInput, match=option):
                SQLiteMemory(f"{tmp_path}/x.db", **{option: bad})  # type: ignore[arg-type]


@pytest.mark.parametrize(("weight", "first"), [(1.0, "told"), (0.0, "plain")])
def test_time_weight_lifts_records_naming_a_time_for_when_questions(
    tmp_path: object, weight: float, first: str
) -> None:
    memory = SQLiteMemory(
        f"{tmp_path}/t.db", time_weight=weight, session_weight=0, context_weight=0, context_key_weight=0
    )
    talk = [("The pottery class is calming.", "plain"), ("I joined the pottery class on Friday.", "told"),
            ("Pottery.", "short")]  # fmt: skip
    memory.add_sync([MemoryRecord(scope=ANN, text=t, metadata={"tag": tag}) for t, tag in talk])
    when = memory.search_sync("When did Ann start the pottery class?", scope=ANN, k=3)
    assert when[0].record.metadata["tag"] == first
    what = memory.search_sync("What is the pottery class like?", scope=ANN, k=3)
    assert what[0].record.metadata["tag"] == "plain"  # a query not asking when is unaffected
    memory.close()


def bare_trip_embedder() -> CallableEmbedder:
    """The trip vectors by the text after its speaker prefix, if any (the same turns with and without one)."""
    bare = {text.split(": ", 1)[-1]: vec for text, vec in TRIP_VECTORS.items()}
    return CallableEmbedder(
        lambda texts: [bare.get(t.split(": ", 1)[-1], [0.0, 0.0, 0.0, 1.0]) for t in texts], dim=4, name="bare"
    )


@pytest.mark.parametrize(
    ("talk", "mode", "gap_s", "lifted"),
    [
        (["Ben: Did you go anywhere nice?", "Ann: Yes, twice!"], "replies", 1, True),  # a reply
        (["Ben: Did you go anywhere nice?", "Ben: Yes, twice!"], "replies", 1, False),  # the same speaker
        (["Did you go anywhere nice?", "Yes, twice!"], "replies", 1, False),  # no speaker prefixes: notes, facts
        (["Ben: Did you go anywhere nice?", "Ann: Yes, twice!"], "replies", 3600, False),  # an hour later
        (["Did you go anywhere nice?", "Yes, twice!"], "all", 1, True),
        (["Ben: Did you go anywhere nice?", "Ben: Yes, twice!"], "all", 3600, True),
    ],
)
def test_previous_turn_is_mixed_into_replies_only_by_default(
    tmp_path: object, talk: list[str], mode: str, gap_s: int, lifted: bool
) -> None:
    from datetime import timedelta

    weather = "Ben: The weather is nice." if talk[0].startswith("Ben: ") else "The weather is nice."
    memory = SQLiteMemory(
        f"{tmp_path}/r.db",
        embedder=bare_trip_embedder(),
        previous_weight=0.6,
        previous_mode=mode,
        context_weight=0,
        session_weight=0,
    )
    t0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    at = [t0, t0 + timedelta(seconds=gap_s), t0 + timedelta(seconds=gap_s + 7200)]
    for text, when in zip([*talk, weather], at, strict=True):
        memory.add_sync([MemoryRecord(scope=ANN, text=text, created_at=when)])
    found = texts(memory.search_sync("holiday destinations", scope=ANN, k=3))
    assert (found.index(talk[1]) < found.index(weather)) is lifted
    memory.close()


def test_previous_defaults_and_mode_check(tmp_path: object) -> None:
    from memoryport import InvalidInput
    from memoryport.ranking import PREVIOUS_WEIGHT

    memory = SQLiteMemory(f"{tmp_path}/d.db")
    assert (memory.store.previous_weight, memory.store.previous_mode) == (PREVIOUS_WEIGHT, "replies")
    assert PREVIOUS_WEIGHT == 0.3
    memory.close()
    for value in ("Replies", "", None, 1):
        with pytest.raises(InvalidInput, match="previous_mode"):
            SQLiteMemory(f"{tmp_path}/x.db", previous_mode=value)  # type: ignore[arg-type]
