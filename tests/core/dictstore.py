"""The reference store (memoryport.testing.InMemoryStore) as the suite's "dict", plus deliberately broken variants."""

from __future__ import annotations

import re
from collections.abc import Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from memoryport import Capability, Fact, MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, NewFact, Related
from memoryport._filters import matches as filter_matches
from memoryport._records import utcnow
from memoryport.testing import InMemoryGraph, InMemoryStore

T = TypeVar("T")

ALL = frozenset(Capability) - {Capability.VECTOR_SEARCH}
# What a CallableMemory can declare: everything but the entity graph (it has no functions for one).
CALLABLE = ALL - {Capability.GRAPH}


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def matches(record: MemoryRecord, filters: Mapping[str, Any] | None) -> bool:
    return filter_matches(record.metadata, filters)


def in_range(record: MemoryRecord, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or record.created_at >= since) and (until is None or record.created_at < until)


class DictStore(InMemoryStore):
    """The public reference store, named "dict": what the suite certifies (the broken ones below subclass it)."""

    name = "dict"  # each broken variant below names itself

    def __init__(self, capabilities: frozenset[Capability] = ALL) -> None:
        super().__init__(capabilities=capabilities, name=type(self).name)

    def _in(self, scope: MemoryScope) -> list[MemoryRecord]:
        return self.in_scope(scope)


def _done(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never waits (the store's methods), from sync code."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("the coroutine waited")


class LeakySearchStore(DictStore):
    """Broken: a non-empty query searches every user's records (the user filter was forgotten)."""

    name = "leaky-search"

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, Any] | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        if not query.strip():
            return await super().search(query, scope=scope, k=k, filters=filters, since=since, until=until)
        return self.rank(
            query, [r for r in self.rows.values() if matches(r, filters) and in_range(r, since, until)], k
        )


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

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        return (await super().export(scope, since=since, until=until))[:100]


def functions(store: DictStore, *, asynchronous: bool) -> dict[str, Any]:
    """The store's operations as plain host functions for CallableMemory, sync or async."""

    def add(records: list[MemoryRecord]) -> list[str]:
        store.rows.update({r.id: r for r in records if r.id is not None})
        return [r.id for r in records if r.id is not None]

    def search(
        query: str,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, Any] | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Any:
        hits = store.rank(
            query, [r for r in store._in(scope) if matches(r, filters) and in_range(r, since, until)], k
        )
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

    def export(
        scope: MemoryScope, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        return [r for r in store._in(scope) if in_range(r, since, until)]

    def update(changes: list[MemoryUpdate], scope: MemoryScope) -> list[str]:
        return _done(store.update(changes, scope=scope))

    def count(
        scope: MemoryScope, filters: Mapping[str, Any] | None, since: datetime | None, until: datetime | None
    ) -> int:
        return _done(store.count(scope, filters=filters, since=since, until=until))

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
        "update": update,
        "count": count,
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
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, Any] | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        return await super().search(query, scope=scope, k=k, filters=None, since=since, until=until)


class IgnoresSince(DictStore):
    """Broken: declares time ranges but ignores ``since`` (in search, export and count)."""

    name = "ignores-since"

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, Any] | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        return await super().search(query, scope=scope, k=k, filters=filters, since=None, until=until)

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        return await super().export(scope, since=None, until=until)

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Mapping[str, Any] | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        return await super().count(scope, filters=filters, since=None, until=until)


def _without_gte(filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not filters:
        return None
    out: dict[str, Any] = {}
    for key, condition in filters.items():
        if isinstance(condition, Mapping):
            condition = {op: v for op, v in condition.items() if op != "$gte"}
            if not condition:
                continue
        out[key] = condition
    return out


class IgnoresGte(DictStore):
    """Broken: declares filter operators but drops every ``$gte`` condition."""

    name = "ignores-gte"

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, Any] | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        return await super().search(query, scope=scope, k=k, filters=_without_gte(filters), since=since, until=until)

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Mapping[str, Any] | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        return await super().count(scope, filters=_without_gte(filters), since=since, until=until)


class UpdateMovesScope(DictStore):
    """Broken: update looks ids up in the whole store and moves the record into the caller's scope."""

    name = "update-moves-scope"

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        now = utcnow()
        done: list[str] = []
        for change in changes:
            record = self.rows.get(change.id)
            if record is None:
                continue
            self.rows[change.id] = change.apply(record, now).model_copy(update={"scope": scope})
            done.append(change.id)
        return done


class UpdateResetsCreatedAt(DictStore):
    """Broken: update writes the record anew, so ``created_at`` becomes the time of the update."""

    name = "update-resets-created-at"

    def updated(self, change: MemoryUpdate, record: MemoryRecord, now: datetime) -> MemoryRecord:
        return change.apply(record, now).model_copy(update={"created_at": now})


class _ForgetfulGraph(InMemoryGraph):
    async def erase(self, *, user_id: str) -> int:
        return 0


class GraphSurvivesErasure(DictStore):
    """Broken: erasing a user deletes their records but leaves their entity graph."""

    name = "graph-survives-erasure"

    def __init__(self) -> None:
        super().__init__()
        self.graph = _ForgetfulGraph()


class _SharedGraph(InMemoryGraph):
    """Every user's facts in one graph (the user key was forgotten)."""

    async def add_entity(self, name: str, aliases: Sequence[str], *, user_id: str) -> str:
        return await super().add_entity(name, aliases, user_id="shared")

    async def add_facts(self, facts: Sequence[NewFact], *, user_id: str, **kw: Any) -> list[Fact]:
        return await super().add_facts(facts, user_id="shared", **kw)

    async def facts_about(self, entity: str, *, user_id: str, **kw: Any) -> list[Fact]:
        return await super().facts_about(entity, user_id="shared", **kw)

    async def related(self, entity: str, *, user_id: str, **kw: Any) -> list[Related]:
        return await super().related(entity, user_id="shared", **kw)

    async def paths(self, source: str, target: str, *, user_id: str, **kw: Any) -> list[list[Fact]]:
        return await super().paths(source, target, user_id="shared", **kw)


class GraphSharedByUsers(DictStore):
    """Broken: one graph for every user."""

    name = "graph-shared"

    def __init__(self) -> None:
        super().__init__()
        self.graph = _SharedGraph()
