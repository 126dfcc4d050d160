"""Fixtures for the SDK adapters' tests.

mem0: the real ``mem0.Memory`` / ``mem0.AsyncMemory`` with qdrant in memory, a
history database in a temporary folder, a dummy OpenAI key (the LLM is never
called with ``infer=False``, ``Mem0Memory(extract=False)``) and a small deterministic embedder (no torch).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

MEM0_DIMS = 256


def _mem0_embedder_class() -> type:
    from mem0.embeddings.base import EmbeddingBase

    class HashEmbedder(EmbeddingBase):  # type: ignore[misc]
        """Bag of hashed words: texts sharing words are similar; cosine is never negative."""

        def __init__(self) -> None:
            super().__init__()
            self.fail_on: str | None = None

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            if self.fail_on is not None and self.fail_on in text:
                raise RuntimeError("embedder failure for the test")
            vector = np.zeros(MEM0_DIMS)
            for word in re.findall(r"\w+", text.lower()):
                vector[int(hashlib.blake2b(word.encode(), digest_size=8).hexdigest(), 16) % MEM0_DIMS] += 1.0
            norm = float(np.linalg.norm(vector))
            if norm == 0.0:
                vector[0] = 1.0
                norm = 1.0
            return [float(x) for x in vector / norm]

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            return [self.embed(t, memory_action) for t in texts]

    return HashEmbedder


def mem0_config(history_db_path: Path, collection: str = "memoryport") -> dict[str, Any]:
    from qdrant_client import QdrantClient

    return {
        "llm": {"provider": "openai", "config": {"api_key": "dummy-not-used"}},
        "embedder": {"provider": "openai", "config": {"api_key": "dummy-not-used", "embedding_dims": MEM0_DIMS}},
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": collection,
                "embedding_model_dims": MEM0_DIMS,
                "client": QdrantClient(":memory:"),
            },
        },
        "history_db_path": str(history_db_path),
    }


def make_mem0(kind: str, history_db_path: Path) -> Any:
    """A real mem0 ``Memory`` (``kind="sync"``) or ``AsyncMemory`` (``"async"``)."""
    import warnings

    import mem0

    cls = mem0.AsyncMemory if kind == "async" else mem0.Memory
    with warnings.catch_warnings():
        # qdrant warns that payload indexes do nothing in local mode.
        warnings.simplefilter("ignore", UserWarning)
        client = cls.from_config(mem0_config(history_db_path))
    client.embedding_model = _mem0_embedder_class()()
    # mem0 commits its history database once per write; on disk the fsync is
    # ~95% of an add here. Tests need the rows, not their durability.
    client.db.connection.execute("PRAGMA synchronous=OFF")
    return client


def close_mem0(client: Any) -> None:
    client.vector_store.client.close()
    client.close()


@pytest.fixture(scope="module", params=["sync", "async"])
def mem0_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real mem0 client per module and kind; tests use fresh random scopes."""
    pytest.importorskip("mem0")
    client = make_mem0(request.param, tmp_path_factory.mktemp("mem0") / "history.db")
    yield client
    close_mem0(client)


class Mem0Factory:
    """Builds extra real mem0 clients for tests that need their own; closes them at teardown."""

    def __init__(self) -> None:
        self.clients: list[Any] = []

    def __call__(self, kind: str, history_db_path: Path) -> Any:
        client = make_mem0(kind, history_db_path)
        self.clients.append(client)
        return client


@pytest.fixture
def mem0_factory() -> Iterator[Mem0Factory]:
    pytest.importorskip("mem0")
    factory = Mem0Factory()
    yield factory
    for client in factory.clients:
        close_mem0(client)
