"""Fixtures of the curated-memory tests: every policy runs on SQLite and on CallableMemory over the reference store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memoryport import CallableMemory, GuardedMemory, SQLiteMemory

from .support import reference_functions

# "reference": the guard applies operator filters and time ranges on the way out;
# "reference-native": the store declares it runs them itself.
BACKENDS = ["sqlite", "reference", "reference-native"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def open_backend(name: str, tmp_path: Path, **kwargs: Any) -> GuardedMemory:
    if name == "sqlite":
        return SQLiteMemory(tmp_path / "curated.db", **kwargs)
    if name == "reference-native":
        fns = reference_functions()
        caps = fns.pop("capabilities")
        return CallableMemory(**fns, capabilities=caps, name="reference-native")
    fns = reference_functions()
    fns.pop("capabilities")
    return CallableMemory(**fns, name="reference")


@pytest.fixture(params=BACKENDS)
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[GuardedMemory]:
    m = open_backend(str(request.param), tmp_path)
    yield m
    await m.aclose()
