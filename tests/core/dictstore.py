"""The reference store: plain dicts behind the port, plus three deliberately broken variants."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memoryport import Capability, MemoryHit, MemoryRecord, MemoryScope, MetadataValue

ALL = frozenset(Capability) - {Capability.VECTOR_SEARCH}


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def matches(record: MemoryRecord, filters: Mapping[str, MetadataValue] | None) -> bool:
    if not filters:
        return True
    md = record.metadata
    return all(key in md and type(md[key]) is type(value) and md[key] == value for key, value in filters.items())


class DictStore:
    """A correct MemoryPort over a dict: what the contract suite certifies."""

    name = "dict"

    def __init__(self, capabilities: frozenset[Capability] = ALL) -> None:
        self.rows: dict[str, MemoryRecord] = {}
        self.capabilities = capabilities

    def _in(self, scope: MemoryScope) -> list[MemoryRecord]:
        return [r for r in self.rows.values() if scope.covers(r.scope)]

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        self.rows.update({r.id: r for r in records if r.id is not None})
        return [r.id for r in records if r.id is not None]

    def rank(self, query: str, candidates: list[MemoryRecord], k: int) -> list[MemoryHit]:
        if not query.strip():
            newest = sorted(candidates, key=lambda r: r.created_at, reverse=True)[:k]
            return [MemoryHit(record=r, score=0.0, signal="recent") for r in newest]
        wanted = words(query)
        scored = [(len(wanted & words(r.text)) / max(1, len(wanted)), r) for r in candidates]
        scored = [(s, r) for s, r in scored if s > 0]
        scored.sort(key=lambda p: (p[0], p[1].created_at), reverse=True)
        return [MemoryHit(record=r, score=s, signal="keyword") for s, r in scored[:k]]

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        return self.rank(query, [r for r in self._in(scope) if matches(r, filters)], k)

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        record = self.rows.get(id)
        return record if record is not None and scope.covers(record.scope) else None

    def doomed(self, ids: Sequence[str] | None, scope: MemoryScope) -> list[str]:
        if ids is None:
            return [r.id for r in self._in(scope) if r.id is not None]
        return [i for i in ids if i in self.rows and scope.covers(self.rows[i].scope)]

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        doomed = self.doomed(ids, scope)
        for record_id in doomed:
            del self.rows[record_id]
        return len(doomed)

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return self._in(scope)

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        doomed = [
            i
            for i, r in self.rows.items()
            if r.is_expired(now) or (created_before is not None and r.created_at < created_before)
        ]
        for record_id in doomed:
            del self.rows[record_id]
        return len(doomed)


class LeakySearchStore(DictStore):
    """Broken: a non-empty query searches every user's records (the user filter was forgotten)."""

    name = "leaky-search"

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        if not query.strip():
            return await super().search(query, scope=scope, k=k, filters=filters)
        return self.rank(query, [r for r in self.rows.values() if matches(r, filters)], k)


class GreedyEraseStore(DictStore):
    """Broken: erasing a user deletes every user whose id starts with it (a LIKE 'ann%' bug)."""

    name = "greedy-erase"

    def doomed(self, ids: Sequence[str] | None, scope: MemoryScope) -> list[str]:
        if ids is None and scope.user_id is not None and scope.session_id is None and scope.agent_id is None:
            prefix = scope.user_id
            return [i for i, r in self.rows.items() if (r.scope.user_id or "").startswith(prefix)]
        return super().doomed(ids, scope)


class ShortExportStore(DictStore):
    """Broken: export returns only the first page of 100 records."""

    name = "short-export"

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return self._in(scope)[:100]


def functions(store: DictStore, *, asynchronous: bool) -> dict[str, Any]:
    """The store's operations as plain host functions for CallableMemory, sync or async."""

    def add(records: list[MemoryRecord]) -> list[str]:
        store.rows.update({r.id: r for r in records if r.id is not None})
        return [r.id for r in records if r.id is not None]

    def search(query: str, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None) -> Any:
        hits = store.rank(query, [r for r in store._in(scope) if matches(r, filters)], k)
        # Exercise each shape CallableMemory accepts: records, (record, score) pairs.
        return [h.record for h in hits] if not query.strip() else [(h.record, h.score) for h in hits]

    def get(id: str, scope: MemoryScope) -> MemoryRecord | None:
        record = store.rows.get(id)
        return record if record is not None and scope.covers(record.scope) else None

    def delete(ids: list[str] | None, scope: MemoryScope) -> int:
        doomed = store.doomed(ids, scope)
        for record_id in doomed:
            del store.rows[record_id]
        return len(doomed)

    def export(scope: MemoryScope) -> list[MemoryRecord]:
        return store._in(scope)

    def purge(now: datetime, created_before: datetime | None) -> int:
        doomed = [
            i
            for i, r in store.rows.items()
            if r.is_expired(now) or (created_before is not None and r.created_at < created_before)
        ]
        for record_id in doomed:
            del store.rows[record_id]
        return len(doomed)

    fns: dict[str, Any] = {
        "add": add,
        "search": search,
        "get": get,
        "delete": delete,
        "export": export,
        "purge": purge,
    }
    if not asynchronous:
        return fns

    def wrap(fn: Any) -> Any:
        async def call(**kwargs: Any) -> Any:
            return fn(**kwargs)

        return call

    return {name: wrap(fn) for name, fn in fns.items()}


class GetIgnoresScope(DictStore):
    """Broken: get looks the id up without checking the scope."""

    name = "get-ignores-scope"

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        return self.rows.get(id)


class DeleteIgnoresScope(DictStore):
    """Broken: delete by ids removes the ids whatever their scope."""

    name = "delete-ignores-scope"

    def doomed(self, ids: Sequence[str] | None, scope: MemoryScope) -> list[str]:
        if ids is None:
            return super().doomed(ids, scope)
        return [i for i in ids if i in self.rows]


class InsertionOrderListing(DictStore):
    """Broken: the empty-query listing returns the first records inserted, not the newest."""

    name = "insertion-order"

    def rank(self, query: str, candidates: list[MemoryRecord], k: int) -> list[MemoryHit]:
        if not query.strip():
            return [MemoryHit(record=r, score=0.0, signal="recent") for r in candidates[:k]]
        return super().rank(query, candidates, k)


class IgnoresFilters(DictStore):
    """Broken: declares filters but ignores them."""

    name = "ignores-filters"

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        return await super().search(query, scope=scope, k=k, filters=None)
