"""The in-memory reference store: a correct :class:`~memoryport.MemoryPort` over a dict.

Use it to test code that holds a memory (no file, no service), as the model of
what a store must do when writing your own, and as the store the contract
suite certifies about itself. It keeps everything in a process-local dict and
declares every capability but vector search.

Example:
    >>> from memoryport import GuardedMemory, MemoryRecord, MemoryScope
    >>> from memoryport.testing import InMemoryStore
    >>> memory = GuardedMemory(InMemoryStore())
    >>> ann = MemoryScope(user_id="ann")
    >>> _ = memory.add_sync([MemoryRecord(scope=ann, text="Ann drinks green tea")])
    >>> [h.record.text for h in memory.search_sync("tea", scope=ann)]
    ['Ann drinks green tea']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ._filters import matches
from ._port import Capability
from ._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, utcnow
from .storekit import ids_of

__all__ = ["InMemoryStore"]

_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _in_range(record: MemoryRecord, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or record.created_at >= since) and (until is None or record.created_at < until)


class InMemoryStore:
    """A :class:`~memoryport.MemoryPort` over a dict, for tests, docs and demos.

    Search ranks by the share of the query's words a record contains (signal
    ``"keyword"``); an empty query lists the newest records (signal
    ``"recent"``). Filters (with operators), time ranges, update and count are
    served by the store itself. Nothing is checked here: hold it through
    :class:`~memoryport.GuardedMemory`, as every store.

    Args:
        capabilities: what it declares; by default every capability but
            ``vector_search``. Declare fewer to stand in for a smaller
            backend (e.g. a user-only one, like Zep).
        name: its name in events and errors.

    Attributes:
        rows: record id -> record, everything stored (expired records too,
            until ``purge``), for a test to inspect.

    Example:
        >>> from memoryport import Capability, GuardedMemory
        >>> user_only = InMemoryStore(capabilities={Capability.KEYWORD_SEARCH, Capability.DELETE}, name="zep-like")
        >>> GuardedMemory(user_only).user_only
        True
    """

    def __init__(
        self, *, capabilities: Iterable[Capability] | None = None, name: str = "in-memory"
    ) -> None:
        self.rows: dict[str, MemoryRecord] = {}
        self.capabilities: frozenset[Capability] = (
            frozenset(Capability) - {Capability.VECTOR_SEARCH}
            if capabilities is None
            else frozenset(capabilities)
        )
        self.name = name

    def __repr__(self) -> str:
        return f"InMemoryStore(name={self.name!r}, records={len(self.rows)})"

    # -- helpers a subclass may override --------------------------------------------------

    def in_scope(self, scope: MemoryScope) -> list[MemoryRecord]:
        """Every stored record ``scope`` covers, in insertion order."""
        return [r for r in self.rows.values() if scope.covers(r.scope)]

    def rank(self, query: str, candidates: Sequence[MemoryRecord], k: int) -> list[MemoryHit]:
        """The ``k`` best of ``candidates`` for ``query``: word overlap, newest first on ties; newest for ``""``."""
        if not query.strip():
            newest = sorted(candidates, key=lambda r: r.created_at, reverse=True)[:k]
            return [MemoryHit(record=r, score=1.0 / (1 + i), signal="recent") for i, r in enumerate(newest)]
        wanted = _words(query)
        scored = [(len(wanted & _words(r.text)) / max(1, len(wanted)), r) for r in candidates]
        scored = [(s, r) for s, r in scored if s > 0]
        scored.sort(key=lambda p: (p[0], p[1].created_at), reverse=True)
        return [MemoryHit(record=r, score=s, signal="keyword") for s, r in scored[:k]]

    def doomed(self, ids: Sequence[str] | None, scope: MemoryScope) -> list[str]:
        """The ids ``delete(ids, scope=scope)`` removes."""
        if ids is None:
            return [r.id for r in self.in_scope(scope) if r.id is not None]
        return [i for i in ids if i in self.rows and scope.covers(self.rows[i].scope)]

    def updated(self, change: MemoryUpdate, record: MemoryRecord, now: datetime) -> MemoryRecord:
        """``record`` with ``change`` applied at ``now``."""
        return change.apply(record, now)

    # -- the port -------------------------------------------------------------------------

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        """Store the batch (the guard has given every record an id)."""
        ids = ids_of(records)
        self.rows.update(zip(ids, records, strict=True))
        return ids

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
        """The ``k`` best records in scope, filtered and in range (see :meth:`rank`)."""
        return self.rank(
            query, [r for r in self.in_scope(scope) if matches(r.metadata, filters) and _in_range(r, since, until)], k
        )

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        """The record if ``scope`` covers it."""
        record = self.rows.get(id)
        return record if record is not None and scope.covers(record.scope) else None

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        """Remove the ids in scope (all of the scope for ``None``); how many went."""
        doomed = self.doomed(ids, scope)
        for record_id in doomed:
            del self.rows[record_id]
        return len(doomed)

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        """Every record in scope and range (the guard hides the expired and sorts)."""
        return [r for r in self.in_scope(scope) if _in_range(r, since, until)]

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        """Apply the changes to live records in scope; the ids updated, in order."""
        now = utcnow()
        done: list[str] = []
        for change in changes:
            record = self.rows.get(change.id)
            if record is None or not scope.covers(record.scope) or record.is_expired(now):
                continue
            self.rows[change.id] = self.updated(change, record, now)
            done.append(change.id)
        return done

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Mapping[str, Any] | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        """How many live records in scope match."""
        now = utcnow()
        return sum(
            1
            for r in self.in_scope(scope)
            if not r.is_expired(now) and matches(r.metadata, filters) and _in_range(r, since, until)
        )

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        """Remove what expired at ``now`` or was created before the cutoff."""
        doomed = [
            i
            for i, r in self.rows.items()
            if r.is_expired(now) or (created_before is not None and r.created_at < created_before)
        ]
        for record_id in doomed:
            del self.rows[record_id]
        return len(doomed)
