"""Fixtures for the framework integrations: a real SQLite memory and a plain dict store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

# Nothing may call out: LangSmith tracing and the Agents SDK's trace export stay off.
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

import pytest
from integrations_support import PlainStore, UpdatingStore

from memoryport import GuardedMemory, SQLiteMemory


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sqlite_memory(tmp_path: Path) -> Iterator[GuardedMemory]:
    memory = SQLiteMemory(tmp_path / "memory.db")
    yield memory
    memory.close()


@pytest.fixture(params=["sqlite", "plain", "update"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GuardedMemory]:
    """Every behaviour test runs on SQLite, on a plain store without filters (nothing pushed down), and on
    one with ``update`` (a put replaces in place)."""
    if request.param == "sqlite":
        m = SQLiteMemory(tmp_path / "memory.db")
        yield m
        m.close()
    elif request.param == "plain":
        yield GuardedMemory(PlainStore())
    else:
        yield GuardedMemory(UpdatingStore())
