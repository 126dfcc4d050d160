"""CallableMemory: a memory over the host's own functions (CallableStore, guarded)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Union

from memoryport._errors import BackendError, UsageError
from memoryport._guard import GuardedMemory, GuardOptions
from memoryport._port import Capability, SearchResults
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate
from memoryport.storekit import ids_of

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CallableMemory", "CallableStore"]

Fn = Callable[..., Union[Any, Awaitable[Any]]]

# What a host's store is assumed to hold when it receives full records.
_STORAGE = frozenset(
    {Capability.SESSION_SCOPE, Capability.AGENT_SCOPE, Capability.METADATA, Capability.FILTERS, Capability.EXPIRY}
)


class CallableStore:
    """The :class:`~memoryport.MemoryPort` over the host's functions (no checks: the guard does them).

    Hosts usually build it through :func:`CallableMemory`, which returns it
    guarded; its arguments are ``CallableMemory``'s.

    Example:
        >>> from memoryport import GuardedMemory
        >>> memory = GuardedMemory(CallableStore(add=lambda records: None, search=lambda **kw: []))
        >>> memory.backend
        'callable'
    """

    def __init__(
        self,
        *,
        add: Fn,
        search: Fn,
        get: Fn | None = None,
        delete: Fn | None = None,
        export: Fn | None = None,
        purge: Fn | None = None,
        update: Fn | None = None,
        count: Fn | None = None,
        capabilities: Iterable[Capability | str] | None = None,
        name: str = "callable",
    ) -> None:
        fns: dict[str, Fn | None] = {
            "add": add,
            "search": search,
            "get": get,
            "delete": delete,
            "export": export,
            "purge": purge,
            "update": update,
            "count": count,
        }
        for op, fn in fns.items():
            if fn is not None and not callable(fn):
                raise UsageError(f"CallableMemory({op}=...) must be a function, not {type(fn).__name__}")
        optional = ("get", "delete", "export", "purge", "update", "count")
        given = frozenset(Capability(op) for op in optional if fns[op] is not None)
        if capabilities is None:
            caps = _STORAGE | given
        else:
            caps = frozenset(Capability(c) for c in capabilities)
            lacking = (caps & {Capability(op) for op in optional}) - given
            if Capability.GRAPH in caps:
                raise UsageError(
                    "CallableMemory cannot keep an entity graph ('graph'); wrap a store that implements "
                    "graph_port() in GuardedMemory instead (see docs/graph.md)"
                )
            if lacking:
                names = ", ".join(sorted(c.value for c in lacking))
                raise UsageError(f"CallableMemory declares {names} but was given no function for it")
        self._fns = fns
        self.capabilities = caps
        self.name = name

    def __repr__(self) -> str:
        return f"CallableStore(name={self.name!r})"

    async def _call(self, op: str, **kwargs: Any) -> Any:
        fn = self._fns.get(op)
        if fn is None:  # the guard refuses first; this is a second line
            raise UsageError(f"CallableMemory was given no {op} function")
        result = fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _list(self, op: str, value: Any, what: str) -> list[Any]:
        if value is None or isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise BackendError(
                f"CallableMemory {self.name!r}: the {op} function returned a {type(value).__name__}, not {what}",
                backend=self.name,
                operation=op,
            )
        return list(value)

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        ids = await self._call("add", records=list(records))
        if ids is None:  # the host's store keeps the ids the guard assigned
            return ids_of(records)
        return self._list("add", ids, "a list of ids")

    def _range(self, since: datetime | None, until: datetime | None) -> dict[str, datetime | None]:
        # Only a host that declared time ranges takes since/until (older functions lack the arguments).
        return {"since": since, "until": until} if Capability.TIME_RANGE in self.capabilities else {}

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
        items = await self._call("search", query=query, scope=scope, k=k, filters=filters, **self._range(since, until))
        if items is None:
            return SearchResults(mode="backend")
        hits: list[MemoryHit] = []
        for rank, item in enumerate(self._list("search", items, "a list")):
            if isinstance(item, MemoryRecord):
                hits.append(MemoryHit(record=item, score=1.0 / (1 + rank), signal="backend"))
            elif (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], MemoryRecord)
                and isinstance(item[1], (int, float))
            ):
                hits.append(MemoryHit(record=item[0], score=float(item[1]), signal="backend"))
            else:
                hits.append(item)  # a MemoryHit, or a wrong type the guard refuses with BackendError
        return SearchResults(hits, mode="backend")

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        record: MemoryRecord | None = await self._call("get", id=id, scope=scope)
        return record

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        n: int = await self._call("delete", ids=None if ids is None else list(ids), scope=scope)
        return n

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        return self._list("export", await self._call("export", scope=scope, **self._range(since, until)), "a list")

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        return self._list("update", await self._call("update", changes=list(changes), scope=scope), "a list of ids")

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Mapping[str, Any] | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        n: int = await self._call("count", scope=scope, filters=filters, since=since, until=until)
        return n

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        n: int = await self._call("purge", now=now, created_before=created_before)
        return n


def CallableMemory(
    *,
    add: Fn,
    search: Fn,
    get: Fn | None = None,
    delete: Fn | None = None,
    export: Fn | None = None,
    purge: Fn | None = None,
    update: Fn | None = None,
    count: Fn | None = None,
    capabilities: Iterable[Capability | str] | None = None,
    name: str = "callable",
    **guard: Unpack[GuardOptions],
) -> GuardedMemory[CallableStore]:
    """A memory over the host's own functions, sync or async, guarded.

    Returns a :class:`~memoryport.GuardedMemory` over a :class:`CallableStore`.

    Each function is called with keyword arguments named as in the port:
    ``add(records)``, ``search(query, scope, k, filters)``, ``get(id, scope)``,
    ``delete(ids, scope)`` (``ids=None`` erases the scope), ``export(scope)``,
    ``purge(now, created_before)``, ``update(changes, scope)`` (a list of
    :class:`~memoryport.MemoryUpdate`; return the ids updated) and
    ``count(scope, filters, since, until)``. ``search`` may return records
    (ranked in order), :class:`MemoryHit` objects or ``(record, score)`` pairs;
    ``add`` may return the ids or ``None`` (the ids the guard assigned are used).

    Capabilities follow from the functions given (``get``, ``delete``,
    ``export``, ``purge``, ``update``, ``count``); the functions are assumed to
    store whole records (session and agent scopes, metadata, equality filters,
    expiry). Pass ``capabilities=`` to declare exactly what your store supports
    instead: with ``time_range`` your ``search`` and ``export`` also take
    ``since`` and ``until`` (aware datetimes or ``None``), and with
    ``filter_operators`` the filters they get may hold operator dicts
    (``{"$gte": 0.5}``). Without those, the guard applies time ranges and
    operators to what your functions return.
    Any exception from a function becomes :class:`BackendError` (the guard
    maps it, as for every store); logs carry only the exception's type. What
    a function returns is checked by the guard too.

    Args:
        add, search, get, delete, export, purge, update, count: the host's functions.
        capabilities: what the store supports, when not inferred.
        name: the backend's name in events and errors.
        **guard: the guard's options (:class:`~memoryport.GuardOptions`).

    Example:
        >>> from memoryport import CallableMemory, MemoryRecord, MemoryScope
        >>> rows = {}
        >>> def add(records):
        ...     rows.update({r.id: r for r in records})
        >>> def search(query, scope, k, filters):
        ...     found = [r for r in rows.values() if scope.covers(r.scope) and query in r.text]
        ...     return found[:k]
        >>> memory = CallableMemory(add=add, search=search)
        >>> ann = MemoryScope(user_id="ann")
        >>> _ = memory.add_sync([MemoryRecord(scope=ann, text="Ann likes tea")])
        >>> [h.record.text for h in memory.search_sync("tea", scope=ann)]
        ['Ann likes tea']
    """

    store = CallableStore(
        add=add,
        search=search,
        get=get,
        delete=delete,
        export=export,
        purge=purge,
        update=update,
        count=count,
        capabilities=capabilities,
        name=name,
    )
    return GuardedMemory(store, **guard)
