"""memoryport.ranking.rerank: the reranker's order, and the fused order kept when it fails."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from memoryport import CallableReranker, MemoryHit, MemoryRecord, MemoryScope
from memoryport.ranking import rerank, rerank_pool

ANN = MemoryScope(user_id="ann")
pytestmark = pytest.mark.anyio


def _hits(*texts: str) -> list[MemoryHit]:
    return [
        MemoryHit(record=MemoryRecord(scope=ANN, text=t), score=1.0 - i / 10, signal="hybrid")
        for i, t in enumerate(texts)
    ]


async def test_rerank_orders_by_the_scores_and_keeps_signal_and_ties() -> None:
    scores = {"a": 0.1, "b": 0.9, "c": 0.9, "d": 0.5}
    reranker = CallableReranker(lambda q, texts: [scores[t] for t in texts], name="table")
    out = await rerank(reranker, "q", _hits("a", "b", "c", "d"), backend="test")
    assert [h.record.text for h in out] == ["b", "c", "d", "a"]
    assert [h.score for h in out] == [0.9, 0.9, 0.5, 0.1]
    assert {h.signal for h in out} == {"hybrid"}


@pytest.mark.parametrize(
    "fn",
    [
        lambda q, texts: 1 / 0,
        lambda q, texts: [1.0],  # wrong count
        lambda q, texts: [float("nan")] * len(texts),
    ],
)
async def test_a_failing_reranker_keeps_the_fused_order_with_a_warning(
    fn: object, caplog: pytest.LogCaptureFixture
) -> None:
    hits = _hits("secret one", "secret two")
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        out = await rerank(CallableReranker(fn, name="broken"), "q", hits, backend="store x")  # type: ignore[arg-type]
    assert out == hits
    assert "store x: the reranker failed" in caplog.text
    assert "secret" not in caplog.text


async def test_fewer_than_two_hits_are_not_sent_to_the_reranker() -> None:
    calls: list[Sequence[str]] = []
    reranker = CallableReranker(lambda q, texts: calls.append(texts) or [0.0] * len(texts), name="spy")
    hits = _hits("only")
    assert await rerank(reranker, "q", hits, backend="t") == hits
    assert calls == []


def test_rerank_pool() -> None:
    reranker = CallableReranker(lambda q, texts: [0.0] * len(texts), name="r")
    assert rerank_pool(5, None, 20) == 5
    assert rerank_pool(5, reranker, 20) == 20
    assert rerank_pool(30, reranker, 20) == 30
