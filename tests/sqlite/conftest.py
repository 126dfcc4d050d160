"""Fixtures of the SQLite backend's tests: both SQLite drivers, a deterministic embedder."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryport import CallableEmbedder, SQLiteMemory
from memoryport.adapters.sqlite import available_drivers
from memoryport.adapters.sqlite.ranking import query_terms

HERE = Path(__file__).parent
WORKER = HERE / "worker.py"

# Python's own sqlite3 (3.40 here: FTS5 'optimize' erasure) and a newer SQLite
# from the pysqlite3-binary wheel (FTS5 secure-delete). CI installs both via the dev extra.
DRIVERS = ["sqlite3", "pysqlite3"]


def bow_vectors(texts: list[str], dim: int = 64) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Hashed bag of words: deterministic, and texts sharing words are similar."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in query_terms(text):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            out[i, h % dim] += 1.0 if (h >> 32) & 1 else -1.0
        out[i, -1] += 0.01  # never the zero vector
    return out


def bow_embedder(dim: int = 64, name: str = "bow-64") -> CallableEmbedder:
    return CallableEmbedder(lambda texts: bow_vectors(texts, dim), dim=dim, name=name)


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    name = str(request.param)
    if name not in available_drivers():
        if os.environ.get("CI"):
            pytest.fail(f"SQLite driver {name} is not installed; the dev extra installs it")
        pytest.skip(f"SQLite driver {name} is not installed (pip install 'memoryport[sqlite-new]')")
    return name


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "memory.db")


@pytest.fixture(params=[False, True], ids=["keyword", "embedder"])
def memory(request: pytest.FixtureRequest, db_path: str, driver: str) -> Iterator[SQLiteMemory]:
    m = SQLiteMemory(db_path, embedder=bow_embedder() if request.param else None, driver=driver)
    yield m
    m.close()


def python() -> str:
    return sys.executable
