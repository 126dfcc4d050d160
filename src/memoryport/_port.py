"""The storage port every backend implements, and the capabilities it declares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Protocol, runtime_checkable

from ._records import MemoryHit, MemoryRecord, MemoryScope, MetadataValue

__all__ = ["Capability", "MemoryPort", "SearchMode", "SearchResults"]


class Capability(str, Enum):
    """What a backend supports beyond user-scoped text storage.

    A request that needs a capability the backend lacks raises
    :class:`~memoryport.UnsupportedCapability` before the backend is called.
    """

    SESSION_SCOPE = "session_scope"
    """Scopes may set ``session_id``."""
    AGENT_SCOPE = "agent_scope"
    """Scopes may set ``agent_id``."""
    METADATA = "metadata"
    """Records may carry metadata, returned as stored."""
    FILTERS = "filters"
    """``search(filters=...)`` matches metadata exactly."""
    EXPIRY = "expiry"
    """Records may carry ``expires_at``."""
    KEYWORD_SEARCH = "keyword_search"
    """Search ranks by words (a record containing the query's words is found)."""
    VECTOR_SEARCH = "vector_search"
    """Search ranks by embedding similarity."""
    GET = "get"
    """``get(id)`` is available."""
    DELETE = "delete"
    """``delete`` (by ids and erasing a scope) is available."""
    EXPORT = "export"
    """``export(scope)`` is available."""
    PURGE = "purge"
    """``purge()`` physically removes expired and retained-out records."""

    def __str__(self) -> str:
        return self.value


SearchMode = str
"""``"keyword"``, ``"vector"``, ``"hybrid"``, ``"recent"`` or ``"backend"``."""


class SearchResults(list[MemoryHit]):
    """A list of hits that also says which mode produced them.

    A backend may return a plain list from ``search``; returning
    ``SearchResults(hits, mode="keyword")`` lets the guard report the mode
    actually used (for example when a vector search fell back to keywords).
    """

    def __init__(self, hits: Iterable[MemoryHit] = (), *, mode: SearchMode | None = None) -> None:
        super().__init__(hits)
        self.mode = mode


@runtime_checkable
class MemoryPort(Protocol):
    """The storage operations a backend provides. Plain storage: no checks.

    Backends never validate input nor filter by expiry or retention: the
    :class:`~memoryport.GuardedMemory` in front of them does that once for all.
    They must honour the scope they are given (the contract suite checks it).
    Records passed to ``add`` always carry an id; a backend may store them
    under ids of its own and return those instead.

    Example:
        A dict-backed port, wrapped by the guard as hosts hold it::

            class DictStore:
                name = "dict"
                capabilities = frozenset({Capability.GET, Capability.DELETE,
                                          Capability.EXPORT})
                async def add(self, records): ...
                async def search(self, query, *, scope, k, filters): ...
                async def get(self, id, *, scope): ...
                async def delete(self, ids, *, scope): ...
                async def export(self, scope): ...
                async def purge(self, *, now, created_before): ...

            memory = GuardedMemory(DictStore())
    """

    @property
    def name(self) -> str:
        """A short name for logs and events, e.g. ``"sqlite"``."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this backend supports."""
        ...

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        """Store a batch (all or nothing); return the ids, in order."""
        ...

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, MetadataValue] | None,
    ) -> list[MemoryHit]:
        """The ``k`` best records covered by ``scope``; newest first for ``""``."""
        ...

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        """The record with this id if ``scope`` covers it, else ``None``."""
        ...

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        """Delete these ids within ``scope`` (all of the scope when ``None``)."""
        ...

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        """Every record covered by ``scope``, in any order."""
        ...

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        """Physically remove records expired at ``now`` or created before the cutoff."""
        ...
