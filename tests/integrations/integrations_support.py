"""A plain dict store without the filters capability, and a scripted LangChain chat model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from memoryport import Capability, MemoryHit, MemoryRecord, MemoryScope


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class PlainStore:
    """A correct MemoryPort over a dict that cannot filter: every check happens above it."""

    name = "plain"
    # The port's first-round capabilities (update, count, time ranges, operators need methods it lacks).
    capabilities = frozenset(Capability) - {
        Capability.VECTOR_SEARCH,
        Capability.FILTERS,
        Capability.UPDATE,
        Capability.COUNT,
        Capability.TIME_RANGE,
        Capability.FILTER_OPERATORS,
        Capability.GRAPH,
    }

    def __init__(self) -> None:
        self.rows: dict[str, MemoryRecord] = {}

    def _in(self, scope: MemoryScope) -> list[MemoryRecord]:
        return [r for r in self.rows.values() if scope.covers(r.scope)]

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        for r in records:
            assert r.id is not None
            self.rows[r.id] = r
        return [r.id for r in records if r.id is not None]

    async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
        assert not filters
        rows = self._in(scope)
        if not query.strip():
            rows.sort(key=lambda r: r.created_at, reverse=True)
            return [MemoryHit(record=r, score=0.0, signal="recent") for r in rows[:k]]
        wanted = _words(query)
        scored = [(len(wanted & _words(r.text)) / len(wanted), r) for r in rows]
        scored = sorted((p for p in scored if p[0] > 0), key=lambda p: (p[0], p[1].created_at), reverse=True)
        return [MemoryHit(record=r, score=s, signal="keyword") for s, r in scored[:k]]

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        r = self.rows.get(id)
        return r if r is not None and scope.covers(r.scope) else None

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        doomed = [r.id for r in self._in(scope) if ids is None or r.id in ids]
        for i in doomed:
            del self.rows[str(i)]
        return len(doomed)

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return sorted(self._in(scope), key=lambda r: r.created_at)

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        doomed = [i for i, r in self.rows.items() if r.is_expired(now)]
        for i in doomed:
            del self.rows[i]
        return len(doomed)


class UpdatingStore(PlainStore):
    """PlainStore plus ``update`` (changes in place, keeps id, scope and created_at) and a count of deletes."""

    name = "plain-update"
    capabilities = PlainStore.capabilities | {Capability.UPDATE}

    def __init__(self) -> None:
        super().__init__()
        self.deletes = 0

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        self.deletes += 1
        return await super().delete(ids, scope=scope)

    async def update(self, changes: Sequence[Any], *, scope: MemoryScope) -> list[str]:
        done = []
        for change in changes:
            record = self.rows.get(change.id)
            if record is None or not scope.covers(record.scope):
                continue
            fields = {name: getattr(change, name) for name in change.changed}
            self.rows[change.id] = record.model_copy(update={**fields, "updated_at": datetime.now(timezone.utc)})
            done.append(change.id)
        return done


class StrictIdStore(PlainStore):
    """PlainStore that keeps expired records until purge and refuses an id already stored (as SQL stores do)."""

    name = "plain-strict-ids"

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        from memoryport import InvalidInput

        for i, r in enumerate(records):
            if r.id in self.rows:
                raise InvalidInput(f"records[{i}].id is already stored; ids must be unique", field=f"records[{i}].id")
        return await super().add(records)
