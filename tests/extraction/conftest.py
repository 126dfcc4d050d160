"""Fixtures of the extraction tests: curated memory on SQLite and on the reference store, a scripted model."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryport import CallableEmbedder, CallableMemory, CallableModel, GuardedMemory, SQLiteMemory
from memoryport.curated import AgentMemory
from memoryport.testing import InMemoryStore

DIM = 64


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A deterministic embedder: one hashed dimension per word, so shared words mean cosine similarity."""
    rows = np.zeros((len(texts), DIM), np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.casefold()):
            rows[i, hashlib.sha256(word.encode()).digest()[0] % DIM] += 1.0
    return rows


EMBEDDER = CallableEmbedder(bag_of_words, dim=DIM, name="bag-of-words")


def open_backend(name: str, tmp_path: Path) -> GuardedMemory:
    if name == "sqlite":
        return SQLiteMemory(tmp_path / "extract.db")
    store = InMemoryStore()
    ops = ("add", "search", "get", "delete", "export", "purge", "update", "count")
    return CallableMemory(**{op: getattr(store, op) for op in ops}, name="reference")


@pytest.fixture(params=["sqlite", "reference"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AgentMemory]:
    m = AgentMemory(open_backend(str(request.param), tmp_path))
    yield m
    await m.aclose()


class Script:
    """A scripted model: ``answer(messages)`` decides; every call's messages are kept."""

    def __init__(self, answer: Callable[[list[dict[str, str]]], Any]) -> None:
        self.answer = answer
        self.calls: list[list[dict[str, str]]] = []
        self.model = CallableModel(self._call, name="scripted")

    def _call(self, messages: list[dict[str, str]]) -> Any:
        self.calls.append(messages)
        return self.answer(messages)


def shown(messages: list[dict[str, str]]) -> dict[str, str]:
    """handle -> text of the memories shown in an extraction prompt."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^\[(m\d+)\] \([\w-]+\) (.*)$", messages[-1]["content"], re.M)}


def pairs_shown(messages: list[dict[str, str]]) -> dict[str, tuple[str, str]]:
    """handle -> (older text, newer text) of a reconciliation prompt."""
    return {m.group(1): (m.group(2), m.group(3))
            for m in re.finditer(r"^\[(p\d+)\]\nA: (.*)\nB: (.*)$", messages[-1]["content"], re.M)}
