"""A dict-backed store for the tools tests: host functions for CallableMemory that honour scopes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from memoryport import CallableMemory, Capability, GuardedMemory, MemoryHit, MemoryRecord, MemoryScope
from memoryport.adapters.callable import CallableStore

_MISSING = object()


def _kind(value: Any) -> tuple[str, Any]:
    """A comparison key that keeps 1, 1.0 together but apart from True and "1" (as JSON does)."""
    if value is _MISSING:
        return ("missing", None)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return (type(value).__name__, value)


class DictStore:
    """The host functions of a small in-memory store (keyword overlap ranking)."""

    def __init__(self) -> None:
        self.rows: dict[str, MemoryRecord] = {}
        self.deleted: list[str] = []

    def add(self, records: list[MemoryRecord]) -> None:
        for r in records:
            assert r.id is not None
            self.rows[r.id] = r

    def search(self, query: str, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
        mine = [
            r
            for r in self.rows.values()
            if scope.covers(r.scope)
            and all(_kind(r.metadata.get(key, _MISSING)) == _kind(v) for key, v in (filters or {}).items())
        ]
        if not query.strip():
            mine.sort(key=lambda r: r.created_at, reverse=True)
            return [MemoryHit(record=r, score=0.0, signal="recent") for r in mine[:k]]
        words = set(re.findall(r"\w+", query.lower()))
        scored = []
        for r in mine:
            overlap = len(words & set(re.findall(r"\w+", r.text.lower())))
            if overlap:
                scored.append(MemoryHit(record=r, score=overlap / len(words), signal="keyword"))
        scored.sort(key=lambda h: h.score, reverse=True)
        return scored[:k]

    def get(self, id: str, scope: MemoryScope) -> MemoryRecord | None:
        r = self.rows.get(id)
        return r if r is not None and scope.covers(r.scope) else None

    def delete(self, ids: Iterable[str] | None, scope: MemoryScope) -> int:
        targets = [i for i, r in self.rows.items() if scope.covers(r.scope) and (ids is None or i in set(ids))]
        for i in targets:
            del self.rows[i]
            self.deleted.append(i)
        return len(targets)

    def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return [r for r in self.rows.values() if scope.covers(r.scope)]

    def purge(self, now: datetime, created_before: datetime | None) -> int:
        gone = [
            i
            for i, r in self.rows.items()
            if r.is_expired(now) or (created_before is not None and r.created_at < created_before)
        ]
        for i in gone:
            del self.rows[i]
        return len(gone)

    def memory(self, **kwargs: Any) -> GuardedMemory[CallableStore]:
        return CallableMemory(
            add=self.add,
            search=self.search,
            get=self.get,
            delete=self.delete,
            export=self.export,
            purge=self.purge,
            name="dict",
            **kwargs,
        )

    def user_only_memory(self) -> GuardedMemory[CallableStore]:
        """The same store declaring no sessions, agents or metadata (like Zep)."""
        caps = {Capability.KEYWORD_SEARCH, Capability.GET, Capability.DELETE, Capability.EXPORT}
        return CallableMemory(
            add=self.add,
            search=self.search,
            get=self.get,
            delete=self.delete,
            export=self.export,
            capabilities=caps,
            name="dict-user-only",
        )
