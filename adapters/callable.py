"""CallableMemory: a memory over the host's own functions."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, Union

from memoryport._errors import BackendError, MemoryportError, UsageError
from memoryport._events import EventSink
from memoryport._guard import GuardedMemory
from memoryport._port import Capability, SearchResults
from memoryport._records import DEFAULT_LIMITS, Limits, MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate

__all__ = ["CallableMemory"]

logger = logging.getLogger("memoryport")
T = TypeVar("T")

Fn = Callable[..., Union[Any, Awaitable[Any]]]

# What a host's store is assumed to hold when it receives full records.
_STORAGE = frozenset(
    {Capability.SESSION_SCOPE, Capability.AGENT_SCOPE, Capability.METADATA, Capability.FILTERS, Capability.EXPIRY}
)


class _CallableStore:
    """The port over the host's functions; GuardedMemory does every check."""

    def __init__(
        self,
        fns: dict[str, Fn | None],
        capabilities: frozenset[Capability],
        name: str,
    ) -> None:
        self._fns = fns
        self.capabilities = capabilities
        self.name = name

    async def _call(self, op: str, **kwargs: Any) -> Any:
        fn = self._fns.get(op)
        if fn is None:  # the guard refuses first; this is a second line
            raise UsageError(f"CallableMemory was given no {op} function")
        try:
            result = fn(**kwargs)
            if inspect.isawaitable(result):
                result = await result
        except MemoryportError:
            raise
        except Exception as exc:
            logger.warning("CallableMemory %r: %s function failed: %s", self.name, op, type(exc).__name__)
            raise BackendError(
                f"CallableMemory {self.name!r}: the {op} function raised {type(exc).__name__}",
                backend=self.name,
                operation=op,
            ) from exc
        return result

    def _fail(self, op: str, message: str) -> BackendError:
        return BackendError(f"CallableMemory {self.name!r}: {message}", backend=self.name, operation=op)

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        ids = await self._call("add", records=list(records))
        if ids is None:
            return [r.id for r in records if r.id is not None]
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise self._fail("add", f"the add function returned a {type(ids).__name__}, not a list of ids")
        return [str(i) for i in ids]

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
        if not isinstance(items, Iterable):
            raise self._fail("search", f"the search function returned a {type(items).__name__}, not a list")
        hits: list[MemoryHit] = []
        for rank, item in enumerate(items):
            if isinstance(item, MemoryHit):
                hits.append(item)
            elif isinstance(item, MemoryRecord):
                hits.append(MemoryHit(record=item, score=1.0 / (1 + rank), signal="backend"))
            elif (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], MemoryRecord)
                and isinstance(item[1], (int, float))
            ):
                hits.append(MemoryHit(record=item[0], score=float(item[1]), signal="backend"))
            else:
                raise self._fail(
                    "search",
                    f"the search function returned a {type(item).__name__}; expected "
                    "MemoryRecord, MemoryHit or (MemoryRecord, score)",
                )
        return SearchResults(hits, mode="backend")

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        record = await self._call("get", id=id, scope=scope)
        if record is not None and not isinstance(record, MemoryRecord):
            raise self._fail("get", f"the get function returned a {type(record).__name__}, not a MemoryRecord")
        return record

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        n = await self._call("delete", ids=None if ids is None else list(ids), scope=scope)
        if isinstance(n, bool) or not isinstance(n, int):
            raise self._fail("delete", f"the delete function returned a {type(n).__name__}, not a count")
        return n

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        records = await self._call("export", scope=scope, **self._range(since, until))
        if not isinstance(records, Iterable):
            raise self._fail("export", f"the export function returned a {type(records).__name__}, not a list")
        return list(records)

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        ids = await self._call("update", changes=list(changes), scope=scope)
        if ids is None or isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise self._fail("update", f"the update function returned a {type(ids).__name__}, not a list of ids")
        return [str(i) for i in ids]

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Mapping[str, Any] | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        n = await self._call("count", scope=scope, filters=filters, since=since, until=until)
        if isinstance(n, bool) or not isinstance(n, int):
            raise self._fail("count", f"the count function returned a {type(n).__name__}, not a count")
        return n

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        n = await self._call("purge", now=now, created_before=created_before)
        if isinstance(n, bool) or not isinstance(n, int):
            raise self._fail("purge", f"the purge function returned a {type(n).__name__}, not a count")
        return n


class CallableMemory(GuardedMemory):
    """A memory over the host's own functions, sync or async, already guarded.

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
    Any exception from a function becomes :class:`BackendError`; logs carry
    only the exception's type.

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
        retention_days: float | None = None,
        limits: Limits = DEFAULT_LIMITS,
        sink: EventSink | None = None,
        capture_content: bool = False,
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
            if lacking:
                names = ", ".join(sorted(c.value for c in lacking))
                raise UsageError(f"CallableMemory declares {names} but was given no function for it")
        super().__init__(
            _CallableStore(fns, caps, name),
            retention_days=retention_days,
            limits=limits,
            sink=sink,
            capture_content=capture_content,
        )
