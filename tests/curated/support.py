"""Helpers of the curated-memory tests: the reference store as host functions, a settable clock, vectors."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from memoryport import CallableEmbedder, Capability, MemoryScope
from memoryport._records import utcnow
from memoryport.testing import InMemoryStore

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


def reference_functions() -> dict[str, Any]:
    """The public reference store's operations, as the host functions CallableMemory takes, and its capabilities."""
    store = InMemoryStore()
    ops = ("add", "search", "get", "delete", "export", "purge", "update", "count")
    fns: dict[str, Any] = {op: getattr(store, op) for op in ops}
    # CallableMemory holds no entity graph (the reference store's graph needs GuardedMemory).
    fns["capabilities"] = store.capabilities - {Capability.GRAPH}
    return fns


class Clock:
    """Real time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return utcnow() + self.offset

    def advance(self, **kwargs: float) -> None:
        self.offset += timedelta(**kwargs)


def table_embedder(table: dict[str, Sequence[float]]) -> CallableEmbedder:
    """An embedder that looks texts up in ``table`` (every text a test uses must be in it)."""
    dim = len(next(iter(table.values())))

    def embed(texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        return np.asarray([table[t] for t in texts], dtype=np.float32)

    return CallableEmbedder(embed, dim=dim, name=f"table-{dim}")
