"""LocalEmbedder's engines: which one runs, errors, ONNX Runtime's threads, and the same vectors from both."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryport import InvalidInput, LocalEmbedder, MissingExtra
from memoryport.embedders import local
from memoryport.embedders._bert import BertConfig, BertEncoder
from memoryport.embedders.local import SMALL_FORWARD_TOKENS

from ._data import sentences

HAS_ORT = importlib.util.find_spec("onnxruntime") is not None
needs_ort = pytest.mark.skipif(not HAS_ORT, reason="onnxruntime is not installed (the local extra brings it)")

QUESTIONS = ["When did Caroline go to the LGBTQ support group?", "tea", "What did Ann drink this morning?",
             "¿Dónde está el café? 東京 — naïve façade 🙂", " ".join(["memory"] * 600)]


@pytest.fixture(scope="module")
def engines(model_path: Path) -> dict[str, LocalEmbedder]:
    if not HAS_ORT:
        pytest.skip("onnxruntime is not installed")
    return {e: LocalEmbedder(engine=e) for e in ("onnxruntime", "numpy")}


@needs_ort
def test_auto_picks_onnxruntime_when_installed(engines: dict[str, LocalEmbedder]) -> None:
    assert LocalEmbedder().engine == "onnxruntime"
    assert engines["numpy"].engine == "numpy" and engines["onnxruntime"].engine == "onnxruntime"
    # The vectors do not depend on the engine (beyond rounding), so neither does the name.
    assert engines["numpy"].name == engines["onnxruntime"].name


def test_auto_without_onnxruntime_runs_numpy(monkeypatch: pytest.MonkeyPatch, model_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes the import fail
    emb = LocalEmbedder()
    assert emb.engine == "numpy"
    assert emb.embed_sync(["tea"]).shape == (1, 384)


def test_onnxruntime_engine_without_it_is_a_missing_extra(monkeypatch: pytest.MonkeyPatch, model_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingExtra) as err:
        LocalEmbedder(engine="onnxruntime")
    assert 'pip install "memoryport[local]"' in str(err.value) and err.value.package == "onnxruntime"


@pytest.mark.parametrize("bad", ["torch", "", "ONNXRUNTIME", "onnx", None, 1, ["numpy"]])
def test_bad_engine_is_invalid_input(bad: Any) -> None:
    """Checked before anything is loaded (no model needed)."""
    with pytest.raises(InvalidInput, match="engine") as err:
        LocalEmbedder(engine=bad)
    assert err.value.field == "engine"


@needs_ort
def test_engines_give_the_same_vectors(engines: dict[str, LocalEmbedder]) -> None:
    """Questions alone, a batch of turns of mixed lengths (padding), a text cut at max_length: rounding apart."""
    ort, ref = engines["onnxruntime"], engines["numpy"]
    for text in QUESTIONS:
        np.testing.assert_allclose(ort.embed_sync([text]), ref.embed_sync([text]), rtol=0, atol=1e-5, err_msg=text)
    batch = [*sentences(24), *QUESTIONS]
    got, want = ort.embed_sync(batch), ref.embed_sync(batch)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert float(np.min(np.einsum("ij,ij->i", got, want))) > 1 - 1e-6


@needs_ort
def test_onnxruntime_threads(model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto: one thread for a question, ONNX Runtime's own count for a batch, each in its session, no spinning."""
    monkeypatch.setattr(local, "_idle_core", lambda cores: False)  # a busy machine
    monkeypatch.setattr(local, "_cores", lambda: 2)
    emb = LocalEmbedder(engine="onnxruntime")
    encoder = emb._onnx
    assert encoder is not None
    seen: list[tuple[int, int]] = []
    forward = encoder.forward

    def spy(ids: list[Any], types: Any = None, *, threads: int = 1) -> Any:
        seen.append((sum(len(i) for i in ids), threads))
        return forward(ids, types, threads=threads)

    encoder.forward = spy  # type: ignore[method-assign]
    emb.embed_sync(["What did Ann drink this morning?"])
    emb.embed_sync(sentences(12))
    assert seen[0][0] <= SMALL_FORWARD_TOKENS and seen[0][1] == 1
    assert all(threads == 0 for tokens, threads in seen[1:] if tokens > SMALL_FORWARD_TOKENS)
    assert sorted(encoder._sessions) == [0, 1, 2]  # a question's two made at construction, a batch's on first use
    assert emb._encoder is None and encoder._values is None  # the sessions hold the weights now
    with pytest.raises(ValueError, match="no session for 3 threads"):
        encoder.session(3)
    for threads, session in encoder._sessions.items():
        options = session.get_session_options()
        assert options.intra_op_num_threads == threads
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    # An int: that count for every pass, one session; None: ONNX Runtime's own count throughout.
    two = LocalEmbedder(engine="onnxruntime", blas_threads=2)
    two.embed_sync(["tea", *sentences(12)])
    assert two._onnx is not None and list(two._onnx._sessions) == [2]
    default = LocalEmbedder(engine="onnxruntime", blas_threads=None)
    default.embed_sync(["tea"])
    assert default._onnx is not None and list(default._onnx._sessions) == [0]


def _tiny(act: str, seed: int) -> tuple[BertConfig, dict[str, np.ndarray]]:
    """A random two-layer BERT (hidden 16, 4 heads) with ``act`` as its activation."""
    rng = np.random.default_rng(seed)
    cfg = BertConfig(hidden_size=16, num_layers=2, num_heads=4, intermediate_size=24, max_positions=12,
                     layer_norm_eps=1e-12, hidden_act=act, type_vocab_size=2)
    h, i = cfg.hidden_size, cfg.intermediate_size
    w: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": rng.normal(size=(30, h)),
        "embeddings.position_embeddings.weight": rng.normal(size=(12, h)),
        "embeddings.token_type_embeddings.weight": rng.normal(size=(2, h)),
        "embeddings.LayerNorm.weight": rng.normal(1, 0.1, size=h),
        "embeddings.LayerNorm.bias": rng.normal(size=h),
    }
    shapes = {"attention.self.query": (h, h), "attention.self.key": (h, h), "attention.self.value": (h, h),
              "attention.output.dense": (h, h), "intermediate.dense": (i, h), "output.dense": (h, i)}
    for layer in range(cfg.num_layers):
        p = f"encoder.layer.{layer}."
        for name, shape in shapes.items():
            w[p + name + ".weight"] = rng.normal(0, 1 / math.sqrt(shape[1]), size=shape)
            w[p + name + ".bias"] = rng.normal(0, 0.1, size=shape[0])
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + norm + ".weight"] = rng.normal(1, 0.1, size=h)
            w[p + norm + ".bias"] = rng.normal(0, 0.1, size=h)
    return cfg, {k: v.astype(np.float32) for k, v in w.items()}


@needs_ort
@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_the_graph_computes_what_numpy_does(act: str) -> None:
    """Any activation, token types, texts of several lengths in one padded batch, one text alone."""
    import onnxruntime

    from memoryport.embedders._onnx import OnnxEncoder

    cfg, weights = _tiny(act, seed=len(act))
    ref = BertEncoder(cfg, weights)
    ort = OnnxEncoder(ref, onnxruntime)
    rng = np.random.default_rng(7)
    lengths = [1, 5, 12, 3, 12]
    ids = [rng.integers(0, 30, size=n).astype(np.int64) for n in lengths]
    types = [rng.integers(0, 2, size=n).astype(np.int64) for n in lengths]
    for threads in (1, 2):
        got = ort.forward(ids, types, threads=threads)
        want = ref.forward(ids, types)
        assert [g.shape for g in got] == [(n, 16) for n in lengths]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5)
    alone = ort.forward([ids[1]])[0]
    np.testing.assert_allclose(alone, ref.forward([ids[1]])[0], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"1\.\.max_position"):
        ort.forward([np.zeros(13, np.int64)])


@needs_ort
@pytest.mark.parametrize(
    ("cores", "load", "want"),
    [(2, 0.7, 2), (2, 1.9, 2), (2, 2.0, 1), (2, 5.3, 1), (1, 0.0, 1), (8, 3.0, 2), (2, None, 1)],
)
def test_a_question_takes_two_threads_only_while_a_core_is_idle(
    model_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int, load: float | None, want: int
) -> None:
    """auto on ONNX Runtime: two threads for a question when the 1-minute load is below the cores, else one."""

    def loadavg() -> tuple[float, float, float]:
        if load is None:
            raise OSError("no load average here")
        return (load, load, load)

    monkeypatch.setattr(local, "_cores", lambda: cores)
    monkeypatch.setattr(local.os, "getloadavg", loadavg)
    emb = LocalEmbedder(engine="onnxruntime")
    assert emb._onnx is not None
    assert sorted(emb._onnx._sessions) == ([1, 2] if cores >= 2 else [1])
    seen: list[int] = []
    forward = emb._onnx.forward

    def spy(ids: list[Any], types: Any = None, *, threads: int = 1) -> Any:
        seen.append(threads)
        return forward(ids, types, threads=threads)

    emb._onnx.forward = spy  # type: ignore[method-assign]
    vector = emb.embed_sync(["What did Ann drink this morning?"])
    assert seen == [want]
    # the same vector whichever session ran it (rounding only)
    reference = LocalEmbedder(engine="onnxruntime", blas_threads=1).embed_sync(["What did Ann drink this morning?"])
    np.testing.assert_allclose(vector, reference, rtol=0, atol=1e-5)


def test_numpy_keeps_one_thread_for_a_question_on_an_idle_machine(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle-core rule is ONNX Runtime's: OpenBLAS gains little from a second thread on a question."""
    monkeypatch.setattr(local, "_cores", lambda: 4)
    monkeypatch.setattr(local.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    emb = LocalEmbedder(engine="numpy")
    assert emb._threads_for(12) == 1 and emb._threads_for(SMALL_FORWARD_TOKENS + 1) is None
