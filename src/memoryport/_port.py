"""The storage port every backend implements, and the capabilities it declares."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from ._filters import Filters
from ._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, MetadataValue, SearchMode

__all__ = [
    "Capability",
    "CountablePort",
    "MemoryPort",
    "SearchMode",
    "SearchResults",
    "SupportsCheckRecords",
    "SupportsCheckpoint",
    "SupportsClose",
    "SupportsSettle",
    "SupportsStats",
    "TimeRangePort",
    "store_stats",
    "UpdatablePort",
]


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
    UPDATE = "update"
    """``update(changes, scope=...)`` changes text, metadata or expiry in place (id and ``created_at`` kept)."""
    TIME_RANGE = "time_range"
    """The store itself restricts search and export to ``since``/``until`` over ``created_at``.

    Without it the guard still serves ``since``/``until`` on search and export by
    filtering on the way out (over-fetching to still return ``k``), but not on ``count``.
    """
    COUNT = "count"
    """``count(scope, filters=..., since=..., until=...)`` answers "how many" cheaply."""
    FILTER_OPERATORS = "filter_operators"
    """The store itself runs operator filters (``$gte``, ``$in``, ...; see :data:`OPERATORS`).

    A store may narrow which with a ``filter_operators`` frozenset attribute.
    Without it (but with ``filters``) the guard applies operators on the way out.
    """
    GRAPH = "graph"
    """The store keeps an entity graph per user (:class:`~memoryport.SupportsGraph`).

    Hosts reach it as ``KnowledgeGraph(memory)``; erasing a user erases their graph.
    Without it ``KnowledgeGraph(memory)`` raises :class:`~memoryport.UnsupportedCapability`.
    """

    def __str__(self) -> str:
        return self.value


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
    """The storage operations a store provides. Plain storage: no checks.

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
        """The ``k`` best records covered by ``scope``; newest first for ``""``.

        ``filters`` hold plain values (equality) and, for a store declaring
        :attr:`Capability.FILTER_OPERATORS`, operator dicts too (see
        :mod:`memoryport._filters`). A store declaring :attr:`Capability.TIME_RANGE`
        also takes ``since`` and ``until`` (see :class:`TimeRangePort`).
        """
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


@runtime_checkable
class TimeRangePort(Protocol):
    """How a store declaring :attr:`Capability.TIME_RANGE` takes ``since``/``until``.

    Both are aware UTC datetimes already parsed by the guard, or ``None``; a
    record is in range when ``since <= created_at < until``. The guard passes
    them only when a range is asked for, so give them the default ``None``.
    """

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Filters | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        """As :meth:`MemoryPort.search`, within the range."""
        ...

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        """As :meth:`MemoryPort.export`, within the range."""
        ...


@runtime_checkable
class UpdatablePort(Protocol):
    """What a store declaring :attr:`Capability.UPDATE` adds to :class:`MemoryPort`."""

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        """Apply the changes to the records ``scope`` covers (one transaction where possible).

        Keep ``id``, ``scope`` and ``created_at``; set ``updated_at``; re-index
        and re-embed a changed text. An id that is absent, outside ``scope`` or
        expired is skipped. Return the ids updated, in input order.
        """
        ...


@runtime_checkable
class CountablePort(Protocol):
    """What a store declaring :attr:`Capability.COUNT` adds to :class:`MemoryPort`."""

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Filters | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        """How many live (not expired) records ``scope`` covers that match."""
        ...


# -- optional protocols: what some stores offer beyond the port -------------
# A host reaches them through ``memory.store`` (typed by the constructor that
# built the guard); generic code (the CLI, copy_memories, the guard's aclose)
# asks ``isinstance(store, SupportsX)`` instead of probing attribute names.


@runtime_checkable
class SupportsClose(Protocol):
    """A store holding resources (threads, connections) to release; :meth:`GuardedMemory.aclose` calls it.

    Example:
        >>> from memoryport import SupportsClose
        >>> class Pooled:
        ...     async def aclose(self) -> None: ...
        >>> isinstance(Pooled(), SupportsClose)
        True
    """

    async def aclose(self) -> None:
        """Release the store's resources; the store is unusable afterwards."""
        ...


@runtime_checkable
class SupportsStats(Protocol):
    """A store that can describe itself (counts, versions, settings) for ``memoryport stats``.

    Example:
        >>> from memoryport import SupportsStats
        >>> class Counted:
        ...     def stats(self) -> dict: return {"records": 0}
        >>> isinstance(Counted(), SupportsStats)
        True
    """

    def stats(self) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """JSON-ready facts about the store; ``"records"`` is the record count when known.

        A store that must ask a server (PostgreSQL) makes it ``async``; read it
        with :func:`store_stats`, which awaits when needed.
        """
        ...


async def store_stats(store: object) -> dict[str, Any] | None:
    """What a :class:`SupportsStats` store says about itself (awaited if async); ``None`` for other stores.

    Example:
        >>> import asyncio
        >>> class Counted:
        ...     def stats(self): return {"records": 3}
        >>> asyncio.run(store_stats(Counted())), asyncio.run(store_stats(object()))
        ({'records': 3}, None)
    """
    if not isinstance(store, SupportsStats):
        return None
    stats = store.stats()
    if inspect.isawaitable(stats):
        stats = await stats
    return {str(k): v for k, v in stats.items()}


@runtime_checkable
class SupportsCheckpoint(Protocol):
    """A store with a write-ahead log that can be flushed on demand (SQLite).

    Example:
        >>> from memoryport import SupportsCheckpoint
        >>> class Logged:
        ...     def checkpoint(self) -> bool: return True
        >>> isinstance(Logged(), SupportsCheckpoint)
        True
    """

    def checkpoint(self) -> bool:
        """Flush and truncate the log now; ``False`` when a reader blocks it."""
        ...


@runtime_checkable
class SupportsCheckRecords(Protocol):
    """A store with limits of its own beyond the guard's (e.g. Mem0's metadata keys).

    :func:`~memoryport.copy_memories` calls it on every batch before writing
    anything, so a copy that would fail half-way fails before it starts.

    Example:
        >>> from memoryport import SupportsCheckRecords
        >>> class Picky:
        ...     def check_records(self, records) -> None: ...
        >>> isinstance(Picky(), SupportsCheckRecords)
        True
    """

    def check_records(self, records: Sequence[MemoryRecord]) -> None:
        """Raise :class:`~memoryport.InvalidInput` naming the first record the store would refuse."""
        ...


@runtime_checkable
class SupportsSettle(Protocol):
    """A store whose writes become searchable later (Zep processes episodes in the background).

    The contract suite's ``settle`` hook calls it; hosts call it before a read
    that must see a write just made.

    Example:
        >>> from memoryport import SupportsSettle
        >>> class Eventual:
        ...     async def settle(self) -> None: ...
        >>> isinstance(Eventual(), SupportsSettle)
        True
    """

    async def settle(self) -> None:
        """Return once every write made so far is visible to search, get and export."""
        ...


@runtime_checkable
class AddsWithIds(Protocol):
    """A store that takes a batch's ids beside its records (not public: the guard's fast path to a store).

    The guard gives every record without an id a fresh one. Through ``add`` it
    must copy each such record to set it (a pydantic copy per record, the
    largest part of the guard's cost in a bulk add); a store offering
    ``add_with_ids`` gets the caller's records as they are and their ids, in
    order (``ids[i]`` is ``records[i].id`` when that is set). It stores exactly
    what ``add`` would and returns the ids the same way.

    The guard uses it only when the store's class defines ``add_with_ids``
    where it defines ``add`` (a subclass overriding ``add`` alone, or an
    instance whose ``add`` was replaced, goes through ``add`` as before).

    Example:
        >>> from memoryport._port import AddsWithIds
        >>> class Fast:
        ...     async def add_with_ids(self, records, ids): return list(ids)
        >>> isinstance(Fast(), AddsWithIds)
        True
    """

    async def add_with_ids(self, records: Sequence[MemoryRecord], ids: Sequence[str]) -> list[str]:
        """Store ``records`` under ``ids`` (all or nothing); return the ids stored, in order."""
        ...


def adds_with_ids(store: object) -> Callable[[Sequence[MemoryRecord], Sequence[str]], Awaitable[list[str]]] | None:
    """``store.add_with_ids`` when the guard may call it instead of ``store.add``, else None (see :class:`AddsWithIds`).

    Called once per ``add``: the class's answer is cached (an ``isinstance``
    against a runtime protocol costs tens of µs, as much as a small add).

    Example:
        >>> adds_with_ids(object()) is None
        True
    """
    own = getattr(store, "__dict__", None)
    if own and ("add" in own or "add_with_ids" in own):
        return None
    cls = type(store)
    known = _ADDS_WITH_IDS.get(cls)
    if known is None:
        known = _ADDS_WITH_IDS[cls] = _class_adds_with_ids(cls)
    if not known:
        return None
    method: Callable[[Sequence[MemoryRecord], Sequence[str]], Awaitable[list[str]]] = store.add_with_ids  # type: ignore[attr-defined]
    return method


_ADDS_WITH_IDS: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()  # by class: see adds_with_ids


def _class_adds_with_ids(cls: type) -> bool:
    """Whether ``cls`` defines a callable ``add_with_ids`` in the class that defines its ``add``."""
    owners = [next((c for c in cls.__mro__ if name in vars(c)), None) for name in ("add", "add_with_ids")]
    return owners[0] is not None and owners[0] is owners[1] and callable(getattr(cls, "add_with_ids", None))
