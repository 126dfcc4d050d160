"""CallableMemory: a memory over the host's own functions (CallableStore, guarded)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Union

from memoryport._errors import BackendError, UsageError
from memoryport._guard import GuardedMemory, GuardOptions
from memoryport._port import Capability, SearchResults
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope, MetadataValue

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
        }
        for op, fn in fns.items():
            if fn is not None and not callable(fn):
                raise UsageError(f"CallableMemory({op}=...) must be a function, not {type(fn).__name__}")
        given = frozenset(Capability(op) for op in ("get", "delete", "export", "purge") if fns[op] is not None)
        if capabilities is None:
            caps = _STORAGE | given
        else:
            caps = frozenset(Capability(c) for c in capabilities)
            lacking = (caps & {Capability.GET, Capability.DELETE, Capability.EXPORT, Capability.PURGE}) - given
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

    def _fail(self, op: str, message: str) -> BackendError:
        return BackendError(f"CallableMemory {self.name!r}: {message}", backend=self.name, operation=op)

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        ids = await self._call("add", records=list(records))
        if ids is None:
            return [r.id for r in records if r.id is not None]
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise self._fail("add", f"the add function returned a {type(ids).__name__}, not a list of ids")
        return list(ids)

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        items = await self._call("search", query=query, scope=scope, k=k, filters=filters)
        if items is None:
            return SearchResults(mode="backend")
        if not isinstance(items, Iterable):
            raise self._fail("search", f"the search function returned a {type(items).__name__}, not a list")
        hits: list[MemoryHit] = []
        for rank, item in enumerate(items):
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

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        records = await self._call("export", scope=scope)
        if not isinstance(records, Iterable):
            raise self._fail("export", f"the export function returned a {type(records).__name__}, not a list")
        return list(records)

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
    capabilities: Iterable[Capability | str] | None = None,
    name: str = "callable",
    **guard: Unpack[GuardOptions],
) -> GuardedMemory[CallableStore]:
    """A memory over the host's own functions, sync or async, guarded.

    Returns a :class:`~memoryport.GuardedMemory` over a :class:`CallableStore`.

    Each function is called with keyword arguments named as in the port:
    ``add(records)``, ``search(query, scope, k, filters)``, ``get(id, scope)``,
    ``delete(ids, scope)`` (``ids=None`` erases the scope), ``export(scope)``,
    ``purge(now, created_before)``. ``search`` may return records (ranked in
    order), :class:`MemoryHit` objects or ``(record, score)`` pairs; ``add``
    may return the ids or ``None`` (the ids the guard assigned are used).

    Capabilities follow from the functions given (``get``, ``delete``,
    ``export``, ``purge``); the functions are assumed to store whole records
    (session and agent scopes, metadata, filters, expiry). Pass
    ``capabilities=`` to declare exactly what your store supports instead.
    Any exception from a function becomes :class:`BackendError` (the guard
    maps it, as for every store); logs carry only the exception's type. What
    a function returns is checked by the guard too.

    Args:
        add, search, get, delete, export, purge: the host's functions.
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
        add=add, search=search, get=get, delete=delete, export=export, purge=purge, capabilities=capabilities, name=name
    )
    return GuardedMemory(store, **guard)
