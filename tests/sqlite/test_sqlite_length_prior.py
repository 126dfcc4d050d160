"""The length prior in SQLiteMemory (ranking.length_boost): longer records lifted, never a hidden one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memoryport import CallableEmbedder, InvalidInput, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.ranking import LENGTH_PIVOT, LENGTH_WEIGHT

ANN = MemoryScope(user_id="ann")
# Every other step off: only the length prior moves the order.
ONLY_LENGTH: dict[str, Any] = {
    "context_weight": 0.0,
    "session_weight": 0.0,
    "speaker_weight": 0.0,
    "time_weight": 0.0,
    "context_key_weight": 0.0,
    "date_weight": 0.0,
    "previous_weight": 0.0,
}
LONG = (
    "Ann: we finally went to the lake house last weekend and I spent both mornings painting the water "
    "from the porch while the kids were fishing off the jetty with their grandfather, then we cooked "
    "everything they caught on the old grill"
)
SHORT = "Ben: painting the lake, nice"


def talk() -> list[MemoryRecord]:
    start = utcnow() - timedelta(days=2)
    texts = [("short", SHORT), ("long", LONG), ("lake", "Ben: the lake again")]
    # other talk, so that the query's words are rare (BM25 gives words in most records no weight)
    texts += [(f"other{i}", f"Ben: {w} all day") for i, w in enumerate(["rain", "work", "chess", "soup", "jazz"])]
    return [
        MemoryRecord(scope=ANN, text=t, metadata={"tag": tag}, created_at=start + timedelta(minutes=i))
        for i, (tag, t) in enumerate(texts)
    ]


def tags(hits: Any) -> list[str]:
    return [h.record.metadata["tag"] for h in hits]


def by_meaning(texts: list[str]) -> list[list[float]]:
    """The query and the long turn point one way, every other text another: the vector side prefers the long turn."""
    return [[1.0, 0.0] if "jetty" in t or t == "painting lake" else [0.0, 1.0] for t in texts]


def test_a_longer_record_is_lifted_over_a_short_one(tmp_path: Path) -> None:
    embedder = CallableEmbedder(by_meaning, dim=2, name="meaning")
    on = SQLiteMemory(tmp_path / "l.db", embedder=embedder, **ONLY_LENGTH)
    on.add_sync(talk())
    off = SQLiteMemory(tmp_path / "l.db", embedder=embedder, length_weight=0, **ONLY_LENGTH)
    # keyword side: the short line holding both words leads (BM25 favours short texts); vector side: the long turn
    assert tags(off.search_sync("painting lake", scope=ANN, k=2)) == ["short", "long"]
    assert tags(on.search_sync("painting lake", scope=ANN, k=2)) == ["long", "short"]
    # pure vector search keeps its cosine scores
    vector = SQLiteMemory(tmp_path / "l.db", embedder=embedder, search_mode="vector")
    assert [(h.record.metadata["tag"], h.score) for h in vector.search_sync("painting lake", scope=ANN, k=1)] == [
        ("long", 1.0)
    ]
    for memory in (on, off, vector):
        memory.close()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(("weight", "pivot"), [(0.3, 250), (1.0, 40)])
def test_each_hit_gets_weight_times_its_length_over_the_pivot(
    tmp_path: Path, mode: str, weight: float, pivot: int
) -> None:
    embedder = CallableEmbedder(by_meaning, dim=2, name="meaning")
    on = SQLiteMemory(
        tmp_path / "s.db", embedder=embedder, search_mode=mode, length_weight=weight, length_pivot=pivot, **ONLY_LENGTH
    )
    on.add_sync(talk())
    off = SQLiteMemory(tmp_path / "s.db", embedder=embedder, search_mode=mode, length_weight=0, **ONLY_LENGTH)
    before = {h.record.id: h.score for h in off.search_sync("painting lake", scope=ANN, k=10)}
    after = on.search_sync("painting lake", scope=ANN, k=10)
    assert {h.record.id for h in after} == set(before)  # the same candidates, re-ranked
    for hit in after:
        assert hit.score == pytest.approx(before[hit.record.id] + weight * min(1.0, len(hit.record.text) / pivot))
    assert [h.score for h in after] == sorted((h.score for h in after), reverse=True)
    for memory in (on, off):
        memory.close()


CASES = ["other user", "other session scope", "expired", "filtered out", "outside the time range"]


@pytest.mark.parametrize("case", ["control", *CASES])
@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_long_record_out_of_reach_is_never_lifted_in(tmp_path: Path, case: str, mode: str) -> None:
    """The prior re-ranks the candidates the search found; a long record it must not see stays out."""
    flat = CallableEmbedder(lambda texts: [[1.0, 0.0] for _ in texts], dim=2, name="flat")
    memory = SQLiteMemory(tmp_path / "o.db", embedder=flat, search_mode=mode, length_weight=1.0)
    start = utcnow() - timedelta(days=2)
    hidden: dict[str, Any] = {"scope": ANN, "text": LONG + " painting lake", "metadata": {"tag": "hidden"},
                              "created_at": start}  # fmt: skip
    search: dict[str, Any] = {}
    if case == "other user":
        hidden["scope"] = MemoryScope(user_id="bob")
    elif case == "other session scope":
        hidden["scope"] = MemoryScope(user_id="ann", session_id="s2")
        search["scope"] = MemoryScope(user_id="ann", session_id="s1")
    elif case == "expired":
        hidden["expires_at"] = utcnow() - timedelta(minutes=1)
    elif case == "filtered out":
        hidden["metadata"] = {"tag": "hidden", "kind": "other"}
        search["filters"] = {"kind": "note"}
    elif case == "outside the time range":
        search["since"] = start + timedelta(minutes=1)
    else:
        assert case == "control"  # in reach, the long record holding both words is found
    scope = search.pop("scope", ANN)
    visible = [
        MemoryRecord(scope=scope, text=r.text, metadata={**r.metadata, "kind": "note"}, created_at=r.created_at)
        for r in talk()
    ]
    memory.add_sync([MemoryRecord(**hidden), *visible])
    found = memory.search_sync("painting lake", scope=scope, k=10, **search)
    if case == "control":
        assert "hidden" in tags(found)
    else:
        assert "hidden" not in tags(found) and tags(found)[0] == "long"
    memory.close()


def test_defaults_and_checks(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "d.db")
    assert (memory.store.length_weight, memory.store.length_pivot) == (LENGTH_WEIGHT, LENGTH_PIVOT) == (0.3, 250)
    memory.close()
    for option, bad in [("length_weight", -0.1), ("length_weight", 1.5), ("length_weight", True),
                        ("length_weight", "0.3"), ("length_pivot", 0), ("length_pivot", 2.5),
                        ("length_pivot", "250"), ("length_pivot", True)]:  # fmt: skip
        with pytest.raises(InvalidInput, match=option):
            SQLiteMemory(tmp_path / "x.db", **{option: bad})  # type: ignore[arg-type]
