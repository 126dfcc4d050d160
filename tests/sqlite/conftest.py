"""Fixtures of the SQLite backend's tests: both SQLite drivers, with and without an embedder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryport import GuardedMemory, SQLiteMemory
from memoryport.adapters.sqlite import SQLiteStore, available_drivers

from .support import DRIVERS, bow_embedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
def memory(request: pytest.FixtureRequest, db_path: str, driver: str) -> Iterator[GuardedMemory[SQLiteStore]]:
    m = SQLiteMemory(db_path, embedder=bow_embedder() if request.param else None, driver=driver)
    yield m
    m.close()
