"""The reranker port: CallableReranker, score checks, and the sentence-transformers cross-encoder."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from memoryport import BackendError, CallableReranker, InvalidInput, MemoryEvent, RerankerPort

pytestmark = pytest.mark.anyio


def overlap(query: str, texts: list[str]) -> list[float]:
    q = set(query.lower().split())
    return [float(len(q & set(t.lower().split()))) for t in texts]


async def test_callable_reranker_sync_and_async(events: list[MemoryEvent]) -> None:
    rr = CallableReranker(overlap, name="overlap")
    assert isinstance(rr, RerankerPort) and rr.name == "overlap"
    assert await rr.rerank("green tea", ["black tea", "green tea", "coffee"]) == [1.0, 2.0, 0.0]

    async def async_overlap(query: str, texts: list[str]) -> list[float]:
        return overlap(query, texts)

    assert await CallableReranker(async_overlap, name="a").rerank("tea", ["tea", "x"]) == [1.0, 0.0]
    assert await rr.rerank("tea", []) == []
    assert [(e.name, e.usage) for e in events] == [("rerank.used", {"texts": 3}), ("rerank.used", {"texts": 2})]


@pytest.mark.parametrize(
    "scores",
    [lambda q, t: [1.0], lambda q, t: [1.0, float("nan")], lambda q, t: ["a", "b"], lambda q, t: None],
    ids=["too few", "nan", "not numbers", "none"],
)
async def test_bad_scores_are_backend_errors(scores: object) -> None:
    rr = CallableReranker(scores, name="bad")  # type: ignore[arg-type]
    with pytest.raises(BackendError) as err:
        await rr.rerank("q", ["a", "b"])
    assert err.value.operation == "rerank"


async def test_failing_function_is_chained() -> None:
    def boom(query: str, texts: list[str]) -> list[float]:
        raise RuntimeError("secret text")

    with pytest.raises(BackendError) as err:
        await CallableReranker(boom, name="boom").rerank("q", ["a"])
    assert isinstance(err.value.__cause__, RuntimeError) and "secret" not in str(err.value)


def test_construction_errors() -> None:
    with pytest.raises(InvalidInput):
        CallableReranker("not callable", name="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        CallableReranker(overlap, name="")


needs_st = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("sentence_transformers") is None,
    reason="torch and sentence-transformers are not installed",
)


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A small randomly initialised BERT cross-encoder saved to a folder, with MiniLM's tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("cross-encoder")
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(model_path / name, folder / name)
    return folder


@needs_st
async def test_cross_encoder_from_a_path(tiny_cross_encoder: Path, events: list[MemoryEvent]) -> None:
    from sentence_transformers import CrossEncoder

    from memoryport.embedders import CrossEncoderReranker

    rr = CrossEncoderReranker(tiny_cross_encoder)
    assert isinstance(rr, RerankerPort) and rr.name == f"cross-encoder:{tiny_cross_encoder.name}"
    texts = ["Ann likes green tea", "Ben sold his bike", "tea"]
    scores = await rr.rerank("who likes tea?", texts)
    expected = CrossEncoder(str(tiny_cross_encoder), device="cpu").predict([("who likes tea?", t) for t in texts])
    assert scores == pytest.approx([float(s) for s in expected], abs=1e-5)
    assert await rr.rerank("q", []) == []
    assert events[0].name == "rerank.used" and events[0].count == 3


def test_cross_encoder_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from memoryport import MissingExtra
    from memoryport.embedders.rerank import CrossEncoderReranker

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtra, match=r'memoryport\[sentence-transformers\]'):
        CrossEncoderReranker("/nowhere")
