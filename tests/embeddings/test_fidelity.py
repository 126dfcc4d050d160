"""LocalEmbedder reproduces sentence-transformers (torch) on at least 1,000 sentences.

Runs wherever torch and sentence-transformers are installed (``make setup``
installs them); skipped with the reason otherwise.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from memoryport import LocalEmbedder, MemoryEvent

from ._data import sentences

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("sentence_transformers") is None,
        reason="torch and sentence-transformers are not installed (pip install torch==2.13.0 sentence-transformers)",
    ),
]

N = 1000


@pytest.fixture(scope="module")
def reference(model_path: object) -> object:
    from memoryport.embedders.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(str(model_path), device="cpu", batch_size=64)


async def test_cosine_to_sentence_transformers(local: LocalEmbedder, reference: object) -> None:
    from memoryport.embedders.sentence_transformers import SentenceTransformerEmbedder

    assert isinstance(reference, SentenceTransformerEmbedder)
    texts = sentences(N)
    texts[7] = " ".join(["longer than the limit"] * 120)  # exercises truncation on both sides
    assert len(set(texts)) == N
    ours = await local.embed(texts)
    theirs = await reference.embed(texts)
    cosine = np.einsum("ij,ij->i", ours, theirs) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    assert cosine.min() >= 0.9999, f"worst cosine {cosine.min():.7f} at sentence {int(cosine.argmin())}"
    # nearest neighbours agree too
    q = ours[:50] @ ours.T
    r = theirs[:50] @ theirs.T
    assert (np.argsort(-q, axis=1)[:, :5] == np.argsort(-r, axis=1)[:, :5]).mean() > 0.99


async def test_sentence_transformer_embedder(reference: object, events: list[MemoryEvent]) -> None:
    from memoryport.embedders.sentence_transformers import SentenceTransformerEmbedder

    assert isinstance(reference, SentenceTransformerEmbedder)
    assert reference.dim == 384 and reference.name == "sentence-transformers:model"
    rows = await reference.embed(["green tea", "black coffee"])
    assert rows.shape == (2, 384) and rows.dtype == np.float32
    assert [e.usage for e in events] == [{"texts": 2}]
    assert (await reference.embed([])).shape == (0, 384)
