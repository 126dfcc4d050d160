"""GuardedMemory: the one façade in front of every backend.

Long on purpose: it is the one place every check, refusal, filter on the way
out, event and blocking twin lives, for every store (the ways in and out of
each operation side by side read better than spread over modules).
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

from typing_extensions import TypeVar as DefaultTypeVar

from ._errors import BackendError, InvalidInput, MemoryportError, UnsupportedCapability, UsageError
from ._events import EventSink, MemoryEvent, current_sink, deliver, get_telemetry
from ._filters import OPERATORS, Filters, check_filters, matches, operators_in, split_filters
from ._port import Capability, MemoryPort, SearchResults, SupportsClose, adds_with_ids
from ._records import (
    DEFAULT_LIMITS,
    Limits,
    MemoryHit,
    MemoryRecord,
    MemoryScope,
    MemoryUpdate,
    SearchMode,
    check_scalar,
    new_id,
    new_ids,
    utcnow,
    with_id,
)
from ._sync import run_sync
from ._timerange import TimeBound, in_range, time_range

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["GuardOptions", "GuardedMemory", "retention_period"]

logger = logging.getLogger("memoryport")

_SCOPE = operator.attrgetter("scope")
_ID = operator.attrgetter("id")
_TEXT = operator.attrgetter("text")
_METADATA = operator.attrgetter("metadata")
_CREATED = operator.attrgetter("created_at")
_EXPIRES = operator.attrgetter("expires_at")
_SCORE = operator.attrgetter("score")
_HIT_CREATED = operator.attrgetter("record.created_at")
_NOTHING = object()  # no scope remembered yet in a search's hit loop (never a record's scope)


def _first_repeat(ids: Sequence[str]) -> None:
    """Raise the guard's error for the first id of ``ids`` that repeats an earlier one, if any."""
    seen: set[str] = set()
    for i, record_id in enumerate(ids):
        if record_id in seen:
            raise InvalidInput(f"records[{i}].id repeats an id earlier in the batch", field=f"records[{i}].id")
        seen.add(record_id)


T = TypeVar("T")
# The store a guard holds; a bare ``GuardedMemory`` annotation means any store.
S = DefaultTypeVar("S", bound=MemoryPort, covariant=True, default=MemoryPort)


class GuardOptions(TypedDict, total=False):
    """The guard's options, declared once: :class:`GuardedMemory` and every friendly constructor take them.

    ``SQLiteMemory(path, retention_days=30)``, ``Mem0Memory(client, sink=...)``
    and ``GuardedMemory(store, limits=...)`` accept exactly these keywords.

    Keys:
        retention_days: hide (and let ``purge`` remove) records older than
            this many days; ``None`` (the default) keeps them.
        limits: input bounds (default :data:`~memoryport.DEFAULT_LIMITS`); see :class:`Limits`.
        sink: where events go when a call passes no ``ctx`` (default none).
        capture_content: let texts ride on events, to sinks that capture
            content too (default ``False``).

    Example:
        >>> from memoryport import GuardOptions
        >>> options: GuardOptions = {"retention_days": 30}
    """

    retention_days: float | None
    limits: Limits
    sink: EventSink | None
    capture_content: bool


def retention_period(retention_days: float | None) -> timedelta | None:
    """``retention_days`` as a :class:`timedelta`, or ``None``; :class:`InvalidInput` unless positive.

    A store that also acts on retention (SQLite deletes retained-out rows on
    every write) takes the period from here, so it is checked in one place.

    Example:
        >>> retention_period(1.5)
        datetime.timedelta(days=1, seconds=43200)
    """
    if retention_days is None:
        return None
    if isinstance(retention_days, bool) or not isinstance(retention_days, (int, float)) or not retention_days > 0:
        raise InvalidInput("retention_days must be a positive number or None", field="retention_days")
    return timedelta(days=retention_days)


_OPERATIONS = ("add", "search", "get", "delete", "export", "purge")  # update, count: when declared


class GuardedMemory(Generic[S]):
    """What a host holds: any :class:`MemoryPort` (a *store*) behind one set of guarantees.

    The guard checks input, refuses what the backend cannot do
    (:class:`UnsupportedCapability`, before calling it), drops records outside
    the query's scope or past their expiry or retention on the way out (a
    backend returning another scope's record is logged as a WARNING and counted
    in :attr:`dropped_out_of_scope`), emits content-free events and
    OpenTelemetry spans, and offers a blocking ``*_sync`` twin of every method.
    It also maps any exception a store raises outside the error tree to
    :class:`BackendError` (logged with its type only), so stores need not.

    The friendly constructors (``SQLiteMemory(path)``, ``Mem0Memory(client)``,
    ...) return a ``GuardedMemory`` over their store; :attr:`store` gives the
    store back, typed, for what only it offers (``memory.store.stats()``).

    Args:
        store: the store (plain storage, no checks).
        **options: the guard's options, :class:`GuardOptions`
            (``retention_days``, ``limits``, ``sink``, ``capture_content``).

    Example:
        >>> from memoryport import GuardedMemory, MemoryRecord, MemoryScope
        >>> memory = GuardedMemory(MyStore())                      # doctest: +SKIP
        >>> ann = MemoryScope(user_id="ann")
        >>> memory.add_sync([MemoryRecord(scope=ann, text="Ann likes tea")])  # doctest: +SKIP
        ['3f0c...']
        >>> [h.record.text for h in memory.search_sync("tea", scope=ann)]  # doctest: +SKIP
        ['Ann likes tea']

    The ``*_sync`` twins run on one background event loop and work from any
    thread; called inside a running event loop they raise :class:`UsageError`
    naming the ``await`` form.
    """

    def __init__(self, store: S, **options: Unpack[GuardOptions]) -> None:
        if isinstance(store, GuardedMemory):
            raise UsageError("GuardedMemory(store) got a GuardedMemory; pass its .store or use it as is")
        unknown = sorted(set(options) - set(GuardOptions.__annotations__))
        if unknown:
            raise UsageError(f"unknown guard option {unknown[0]!r}; known: {', '.join(GuardOptions.__annotations__)}")
        missing = [op for op in _OPERATIONS if not callable(getattr(store, op, None))]
        if missing or not hasattr(store, "capabilities"):
            raise UsageError(
                f"{type(store).__name__} is not a MemoryPort: missing {', '.join(missing) or 'capabilities'}"
            )
        self._retention = retention_period(options.get("retention_days"))
        self._store = store
        try:
            self._capabilities = frozenset(Capability(c) for c in store.capabilities)
        except ValueError as exc:
            known = ", ".join(c.value for c in Capability)
            name = type(store).__name__
            raise UsageError(f"{name}.capabilities holds an unknown capability; known: {known}") from exc
        self._backend = str(getattr(store, "name", type(store).__name__))
        for capability, op in (
            (Capability.UPDATE, "update"),
            (Capability.COUNT, "count"),
            (Capability.GRAPH, "graph_port"),
        ):
            if capability in self._capabilities and not callable(getattr(store, op, None)):
                raise UsageError(f"{type(store).__name__} declares {capability.value!r} but has no {op} method")
        if Capability.GRAPH in self._capabilities and Capability.DELETE not in self._capabilities:
            raise UsageError(
                f"{type(store).__name__} declares 'graph' without 'delete': a user's graph must be erasable "
                "(delete(scope=MemoryScope(user_id=...)) erases it)"
            )
        self._native_ops = self._native_operators(store)
        self.limits: Limits = options.get("limits", DEFAULT_LIMITS)
        self.sink: EventSink | None = options.get("sink")
        self.capture_content: bool = options.get("capture_content", False)
        self._dropped = 0
        self._mismatched = 0

    def _native_operators(self, port: MemoryPort) -> frozenset[str]:
        if Capability.FILTERS not in self._capabilities:
            return frozenset()
        if Capability.FILTER_OPERATORS not in self._capabilities:
            return frozenset({"$eq"})
        declared = getattr(port, "filter_operators", None)
        if declared is None:
            return OPERATORS
        ops = frozenset(str(op) for op in declared)
        if not ops <= OPERATORS:
            raise UsageError(
                f"{type(port).__name__}.filter_operators holds {sorted(ops - OPERATORS)}; "
                f"known: {', '.join(sorted(OPERATORS))}"
            )
        return ops | {"$eq"}

    # -- introspection -------------------------------------------------

    @property
    def store(self) -> S:
        """The store behind the guard (plain storage, no checks), typed as given.

        For what only that store offers: ``SQLiteMemory(path).store.stats()``.
        Calls made on it directly skip every check and event of the guard.
        """
        return self._store

    @property
    def backend(self) -> str:
        """The backend's name."""
        return self._backend

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the backend supports."""
        return self._capabilities

    @property
    def user_only(self) -> bool:
        """True when the backend accepts only ``MemoryScope(user_id=...)`` and no metadata."""
        return not ({Capability.SESSION_SCOPE, Capability.AGENT_SCOPE, Capability.METADATA} & self._capabilities)

    @property
    def retention_days(self) -> float | None:
        """The retention period in days, or ``None``."""
        return None if self._retention is None else self._retention.total_seconds() / 86400

    @property
    def dropped_out_of_scope(self) -> int:
        """How many records the backend returned outside the query's scope (a backend bug)."""
        return self._dropped

    @property
    def dropped_not_matching(self) -> int:
        """How many records the backend returned that fail a filter or time range it was given (a backend bug)."""
        return self._mismatched

    @property
    def filter_operators(self) -> frozenset[str]:
        """The filter operators the backend runs itself (``$eq`` is plain equality).

        With :attr:`Capability.FILTERS` the guard applies the others on the way
        out; :meth:`count` needs every operator it is given here.
        """
        return self._native_ops

    def __repr__(self) -> str:
        return f"GuardedMemory({self._store!r})"

    # -- checks ----------------------------------------------------------

    def _require(self, capability: Capability, what: str) -> None:
        if capability not in self._capabilities:
            raise UnsupportedCapability(
                f"{what} needs the {capability.value!r} capability, which the {self._backend!r} backend does not have",
                capability=capability.value,
                backend=self._backend,
            )

    def _check_scope(self, scope: object, field: str = "scope") -> MemoryScope:
        if scope is None:
            raise UsageError(f"{field} is required: pass scope=MemoryScope(user_id=...)")
        if not isinstance(scope, MemoryScope):
            raise UsageError(f"{field} must be a MemoryScope, not {type(scope).__name__}")
        self.limits.check_scope(scope, field)
        if scope.session_id is not None:
            self._require(Capability.SESSION_SCOPE, f"{field} with a session_id")
        if scope.agent_id is not None:
            self._require(Capability.AGENT_SCOPE, f"{field} with an agent_id")
        if scope.user_id is None and not (scope.session_id or scope.agent_id):
            raise UsageError(f"{field} must set at least one id")
        return scope

    def _filters(
        self, filters: object, what: str
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
        """(checked filters, the part the backend runs, the part the guard applies), or Nones."""
        if filters is None:
            return None, None, None
        if not isinstance(filters, Mapping):
            raise UsageError("filters must be a mapping of metadata key to a value or an operator dict")
        if not filters:
            return None, None, None
        self._require(Capability.FILTERS, f"{what}(filters=...)")
        checked = check_filters(filters, max_values=self.limits.max_filter_values)
        self.limits.check_metadata(checked, "filters")
        pushed, rest = split_filters(
            checked, self._native_ops, plain_only=Capability.FILTER_OPERATORS not in self._capabilities
        )
        return checked, pushed, rest

    def _range(
        self, since: TimeBound | None, until: TimeBound | None, now: datetime
    ) -> tuple[datetime | None, datetime | None]:
        return time_range(since, until, now=now)

    def _matching(
        self,
        record: MemoryRecord,
        pushed: Filters | None,
        rest: Filters | None,
        since: datetime | None,
        until: datetime | None,
        pushed_range: bool,
        drops: list[int],
    ) -> bool:
        """Re-check filters and the time range on a record the backend returned.

        A record failing what the backend was asked to do itself is a backend bug:
        dropped, counted in :attr:`dropped_not_matching` and in the call's ``drops[1]`` (logged once per call).
        """
        ok_range = in_range(record.created_at, since, until)
        if not matches(record.metadata, pushed) or (pushed_range and not ok_range):
            self._mismatched += 1
            drops[1] += 1
            return False
        return ok_range and matches(record.metadata, rest)

    def _visible(self, record: object, scope: MemoryScope, now: datetime, drops: list[int]) -> bool:
        """Whether the caller may see a record the backend returned: in ``scope``, not expired nor retained out.

        A record outside the scope is a backend bug: counted in :attr:`dropped_out_of_scope` and in the
        call's ``drops[0]`` (logged once per call).
        """
        if not isinstance(record, MemoryRecord):
            raise BackendError(
                f"backend {self._backend!r} returned a {type(record).__name__}, not a MemoryRecord",
                backend=self._backend,
                operation="read",
            )
        if not scope.covers(record.scope):
            self._dropped += 1
            drops[0] += 1
            return False
        if record.is_expired(now):
            return False
        return not (self._retention is not None and record.created_at < now - self._retention)

    def _count(self, n: object, operation: str) -> int:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise BackendError(
                f"backend {self._backend!r} returned a {type(n).__name__} from {operation}, not a count",
                backend=self._backend,
                operation=operation,
            )
        return n

    # -- instrumentation -------------------------------------------------

    async def _run(
        self,
        operation: str,
        event_name: str,
        call: Callable[[], Awaitable[T]],
        count: Callable[[T], int],
        ctx: EventSink | None,
        *,
        scope: MemoryScope | None = None,
        k: int | None = None,
        mode: Callable[[T], str] | None = None,
        arguments: Callable[[], Mapping[str, Any]] | None = None,
        result: Callable[[T], Any] | None = None,
        drops: list[int] | None = None,
    ) -> T:
        """Run ``call`` as one operation: its span, metrics and event, errors mapped, drops logged.

        ``drops``: the call's count of records the backend returned that were dropped, [outside the
        scope, failing the filters or range it was given], filled by :meth:`_visible` and :meth:`_matching`.
        """
        sink = ctx if ctx is not None else self.sink
        scope_kind = None if scope is None else scope.kind
        telemetry = get_telemetry()
        # The sink of the operation in progress (embedders report usage to it); set only when it changes.
        token = None if current_sink.get() is sink else current_sink.set(sink)
        start = time.perf_counter()
        value: T | None = None
        error: str | None = None
        n, m = 0, None
        try:
            context = telemetry.span(operation, self._backend, scope_kind, k)
            # No tracer provider: OpenTelemetry's invalid span, whose set_attribute does nothing (not called).
            recording = context is not telemetry.no_span
            with context as span:
                try:
                    value = await call()
                except MemoryportError as exc:
                    error = type(exc).__name__
                    raise
                except Exception as exc:
                    error = type(exc).__name__
                    # An HTTP SDK's status says which failure it was, and carries no text.
                    status = getattr(exc, "status_code", None)
                    detail = f" (HTTP {status})" if type(status) is int else ""
                    logger.warning("backend %r failed in %s: %s%s", self._backend, operation, error, detail)
                    raise BackendError(
                        f"backend {self._backend!r} failed in {operation}: {error}{detail}",
                        backend=self._backend,
                        operation=operation,
                    ) from exc
                finally:
                    if value is not None:
                        n = count(value)
                        m = None if mode is None else mode(value)
                    if recording:
                        span.set_attribute("memory.count", n)
                        if m is not None:
                            span.set_attribute("memory.mode", m)
                    if error is not None:
                        telemetry.fail(span, error)
        finally:
            if token is not None:
                current_sink.reset(token)
            # One line per call, however many records it dropped: a leaking store
            # must not bury the rest of the log (the counters keep the totals).
            if drops is not None and drops[0]:
                logger.warning(
                    "backend %r returned %d record(s) outside the query's scope in %s; dropped them (a backend bug)",
                    self._backend,
                    drops[0],
                    operation,
                )
            if drops is not None and drops[1]:
                logger.warning(
                    "backend %r returned %d record(s) failing the filters or time range it was given in %s; "
                    "dropped them (a backend bug)",
                    self._backend,
                    drops[1],
                    operation,
                )
            latency_ms = (time.perf_counter() - start) * 1000
            telemetry.record_call(operation, self._backend, latency_ms, n, error)
            if sink is not None:  # no listener: no event to build
                deliver(
                    sink,
                    MemoryEvent(
                        name=event_name,
                        backend=self._backend,
                        count=n,
                        latency_ms=latency_ms,
                        scope_kind=scope_kind,
                        k=k,
                        mode=m,
                        error=error,
                        arguments=arguments() if (self.capture_content and arguments) else None,
                        result=result(value) if (self.capture_content and result and value is not None) else None,
                    ),
                )
        return value

    # -- the port ----------------------------------------------------------

    def _check_batch(self, items: object, item_type: type, field: str, usage: str) -> None:
        """A batch is a sequence (not one item, not a string) of at most ``limits.max_batch`` items."""
        # A list is the usual batch: no ABC check for it.
        if type(items) is not list and (isinstance(items, (item_type, str)) or not isinstance(items, Sequence)):
            raise UsageError(usage)
        if len(items) > self.limits.max_batch:
            raise InvalidInput(
                f"{field} has {len(items):,} items; the limit is {self.limits.max_batch:,} "
                "(Limits.max_batch); split the batch",
                field=field,
                limit="max_batch",
            )

    def _plain_batch(self, batch: list[MemoryRecord], now: datetime) -> bool:
        """Whether every per-record check of :meth:`_check_records` passes without a look at each record.

        True for the usual add, of one record or a bulk batch: plain
        :class:`MemoryRecord` objects of one scope (equal scopes count as one), no
        ids, metadata or expiry, every text within ``Limits.max_text_chars`` and
        every ``created_at`` within the clock-skew tolerance, under our own
        :class:`Limits` (a subclass may refuse more). A few passes in C over a
        batch, a few attribute reads for one record; anything else (and anything
        that cannot be compared) answers False, and the batch goes record by
        record, which raises the same errors as ever.
        """
        limits = self.limits
        if type(limits) is not Limits:
            return False
        n = len(batch)
        try:
            if n == 1:
                record = batch[0]
                return bool(
                    type(record) is MemoryRecord
                    and record.id is None
                    and not record.metadata
                    and record.expires_at is None
                    and len(record.text) <= limits.max_text_chars
                    and record.created_at <= now + limits.clock_skew
                )
            return bool(
                list(map(type, batch)).count(MemoryRecord) == n
                and list(map(_SCOPE, batch)).count(batch[0].scope) == n
                and list(map(_ID, batch)).count(None) == n
                and not any(map(_METADATA, batch))
                and list(map(_EXPIRES, batch)).count(None) == n
                and max(map(len, map(_TEXT, batch))) <= limits.max_text_chars
                and max(map(_CREATED, batch)) <= now + limits.clock_skew
            )
        except Exception:  # a record built without validation: the per-record checks decide
            return False

    def _check_records(self, batch: list[MemoryRecord], now: datetime) -> tuple[list[str], bool]:
        """Check each record of a batch in order (the first failure raises, naming its record); return the
        batch's ids (fresh ones where unset) and whether every record holds the same scope object."""
        limits = self.limits
        # Our own Limits: a record its check_record could refuse has an id, metadata, a long text or a
        # created_at past the tolerance; any other record is not looked at twice (subclasses: always).
        plain = type(limits) is Limits
        latest = now + limits.clock_skew
        max_text = limits.max_text_chars
        ids: list[str] = []
        given: set[str] = set()  # ids the caller set: a repeat among them is refused
        checked_scopes: set[int] = set()  # batches usually share one scope object: check it once
        last_scope: object = None
        one_scope = True
        fresh: list[str] | None = None
        for i, record in enumerate(batch):
            if type(record) is not MemoryRecord and not isinstance(record, MemoryRecord):
                raise UsageError(f"records[{i}] is a {type(record).__name__}, not a MemoryRecord")
            scope = record.scope
            if scope is not last_scope:
                if id(scope) not in checked_scopes:
                    self._check_scope(scope, f"records[{i}].scope")
                    checked_scopes.add(id(scope))
                if last_scope is not None:
                    one_scope = False
                last_scope = scope
            record_id = record.id
            metadata = record.metadata
            if (
                not plain
                or record_id is not None
                or metadata
                or len(record.text) > max_text
                or record.created_at > latest
            ):
                limits.check_record(record, f"records[{i}]", now, scope=False)
            if metadata:
                self._require(Capability.METADATA, f"records[{i}].metadata")
            if record.expires_at is not None:
                self._require(Capability.EXPIRY, f"records[{i}].expires_at")
            if record_id is None:
                if fresh is None:  # one read of the OS's random source for the batch
                    fresh = [new_id()] if len(batch) == 1 else new_ids(len(batch))
                record_id = fresh[i]
            else:
                if record_id in given:
                    raise InvalidInput(f"records[{i}].id repeats an id earlier in the batch", field=f"records[{i}].id")
                given.add(record_id)
            ids.append(record_id)
        if given and fresh is not None and not given.isdisjoint(fresh):  # a fresh id equal to a given one
            _first_repeat(ids)
        return ids, one_scope

    async def add(self, records: Sequence[MemoryRecord], *, ctx: EventSink | None = None) -> list[str]:
        """Store a batch of records, all or nothing; return their ids in order.

        Records without an id get a fresh one. Raises :class:`InvalidInput` for a
        bad record (naming it, e.g. ``records[3].text``) and
        :class:`UnsupportedCapability` for a scope, metadata or expiry the
        backend cannot hold; nothing is stored then.

        Example:
            >>> ids = await memory.add([MemoryRecord(scope=ann, text="Ann likes tea")])  # doctest: +SKIP
        """
        self._check_batch(
            records, MemoryRecord, "records", "add() takes a list of MemoryRecord, e.g. add([MemoryRecord(...)])"
        )
        if not records:
            return []
        batch = list(records)
        now = utcnow()
        if self._plain_batch(batch, now):
            # Nothing in the batch can fail a per-record check: its one scope is checked, ids drawn at once.
            self._check_scope(batch[0].scope, "records[0].scope")
            ids, one_scope = [new_id()] if len(batch) == 1 else new_ids(len(batch)), True
        else:
            ids, one_scope = self._check_records(batch, now)
        fast = adds_with_ids(self._store)

        async def call() -> list[str]:
            if fast is not None:
                # The records as given, their ids beside them: no copy of each record to set its id.
                returned = await fast(batch, ids)
                if returned is ids:  # ours, checked already
                    return ids
                prepared = batch
            else:
                prepared = [r if r.id is not None else with_id(r, i) for r, i in zip(batch, ids, strict=True)]
                returned = await self._store.add(prepared)
            if returned is None:
                return ids
            # ints are accepted (some SDKs number their rows); anything else is a backend bug
            out = [i if isinstance(i, str) else str(i) if type(i) is int else "" for i in returned]
            if not all(out):
                raise BackendError(
                    f"backend {self._backend!r} returned an empty or non-string id from add",
                    backend=self._backend,
                    operation="add",
                )
            if len(set(out)) != len(out):
                raise BackendError(
                    f"backend {self._backend!r} returned a repeated id from add",
                    backend=self._backend,
                    operation="add",
                )
            if len(out) != len(prepared):
                raise BackendError(
                    f"backend {self._backend!r} returned {len(out)} ids for {len(prepared)} records",
                    backend=self._backend,
                    operation="add",
                )
            return out

        scope = batch[0].scope
        return await self._run(
            "add",
            "memory.added",
            call,
            len,
            ctx,
            scope=scope if one_scope or all(r.scope == scope for r in batch) else None,
            arguments=lambda: {"texts": [r.text for r in batch]},
        )

    async def search(
        self,
        query: str = "",
        *,
        scope: MemoryScope | None = None,
        k: int = 5,
        filters: Filters | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> SearchResults:
        """The ``k`` best records in ``scope`` for ``query``, best first, and the mode used (``.mode``).

        An empty query lists the newest records (mode ``recent``). ``filters``
        match metadata (a value for equality, or an operator dict such as
        ``{"$gte": 0.5}``) and need the ``filters`` capability. ``since`` and
        ``until`` restrict ``created_at`` to ``[since, until)``: an aware
        datetime, a ``timedelta`` or ``"90m"``/``"24h"``/``"7d"``/``"2w"`` (that
        long ago), or an ISO 8601 time.

        Example:
            >>> hits = await memory.search("tea", scope=ann, k=3)  # doctest: +SKIP
            >>> week = await memory.search("", scope=ann, since="7d",  # doctest: +SKIP
            ...                            filters={"importance": {"$gte": 0.5}})
        """
        checked = self._check_scope(scope)
        if not isinstance(query, str):
            raise UsageError(f"query must be a str, not {type(query).__name__}")
        if len(query) > self.limits.max_query_chars:
            raise InvalidInput(
                f"query is {len(query):,} characters; the limit is "
                f"{self.limits.max_query_chars:,} (Limits.max_query_chars)",
                field="query",
                limit="max_query_chars",
            )
        try:
            check_scalar(query, "query")
        except ValueError as exc:
            raise InvalidInput(str(exc), field="query") from None
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.limits.max_k:
            raise InvalidInput(
                f"k must be an integer from 1 to {self.limits.max_k} (Limits.max_k)", field="k", limit="max_k"
            )
        # No filters (most searches): nothing to check nor split.
        pushed, rest = (None, None) if filters is None else self._filters(filters, "search")[1:]
        start, end = (None, None) if since is None and until is None else self._range(since, until, utcnow())
        native_range = Capability.TIME_RANGE in self._capabilities
        # Passed only when asked for: a store's since/until default to None.
        extra: dict[str, Any] = {"since": start, "until": end} if native_range and (start or end) else {}
        recent = not query.strip()
        # A blank query is the newest-first listing; backends see it as "" only.
        sent = "" if recent else query
        # Nothing the backend was given to re-check on each hit: visibility decides alone.
        unfiltered = pushed is None and rest is None and start is None and end is None
        drops = [0, 0]

        def wanted(raw: Iterable[object], now: datetime) -> list[MemoryHit]:
            """The hits of ``raw`` the caller may see, in order (one loop: this runs on every search).

            A plain :class:`MemoryRecord` of an unfiltered search gets :meth:`_visible`'s checks
            written out here (the same tests in the same order, the retention cut-off computed once):
            two method calls less per hit. Anything else, a subclass included, goes through
            :meth:`_visible` and :meth:`_matching` as before.
            """
            kept: list[MemoryHit] = []
            oldest = None if self._retention is None else now - self._retention
            # The record scope last found covered: one store's hits often share one scope object (SQLite's
            # do). Only exact MemoryScopes (frozen, with MemoryScope.covers) are remembered. It starts as a
            # fresh object, never None: a record built without validation may have no scope at all.
            covered: object = _NOTHING
            plain_query = type(checked) is MemoryScope
            for hit in raw:
                if not isinstance(hit, MemoryHit):
                    raise _not_a_hit(hit, self._backend)
                record = hit.record
                if unfiltered and type(record) is MemoryRecord:
                    scope = record.scope
                    if scope is not covered:
                        if not checked.covers(scope):
                            self._dropped += 1
                            drops[0] += 1
                            continue
                        if plain_query and type(scope) is MemoryScope:
                            covered = scope
                    expires = record.expires_at
                    if (expires is not None and expires <= now) or (oldest is not None and record.created_at < oldest):
                        continue
                    kept.append(hit)
                elif self._visible(record, checked, now, drops) and (
                    unfiltered or self._matching(record, pushed, rest, start, end, native_range, drops)
                ):
                    kept.append(hit)
            return kept

        async def call() -> SearchResults:
            fetch = k
            while True:
                raw = await self._store.search(sent, scope=checked, k=fetch, filters=pushed, **extra)
                now = utcnow()
                hits = wanted(raw, now)
                if len(hits) >= k or len(raw) < fetch or fetch >= self.limits.max_k * 4:
                    break
                fetch = min(fetch * 4, self.limits.max_k * 4)
            mode: SearchMode
            if recent:
                hits.sort(key=_HIT_CREATED, reverse=True)
                mode = "recent"
            else:
                hits.sort(key=_SCORE, reverse=True)
                mode = getattr(raw, "mode", None) or _mode_of(hits)
            return SearchResults(hits[:k], mode=mode)

        return await self._run(
            "search",
            "memory.searched",
            call,
            len,
            ctx,
            scope=checked,
            k=k,
            mode=_mode_name,
            arguments=lambda: {"query": query},
            result=_hit_texts,
            drops=drops,
        )

    async def get(
        self, id: str, *, scope: MemoryScope | None = None, ctx: EventSink | None = None
    ) -> MemoryRecord | None:
        """The record with this id, or ``None`` if it is absent, expired or outside ``scope``.

        Example:
            >>> record = await memory.get(ids[0], scope=ann)  # doctest: +SKIP
        """
        checked = self._check_scope(scope)
        self._require(Capability.GET, "get()")
        record_id = self.limits.check_id(id, "id")

        drops = [0, 0]

        async def call() -> list[MemoryRecord]:
            record = await self._store.get(record_id, scope=checked)
            if record is None or not self._visible(record, checked, utcnow(), drops):
                return []
            return [record]

        found = await self._run(
            "get", "memory.fetched", call, len, ctx, scope=checked, result=_record_texts, drops=drops
        )
        return found[0] if found else None

    async def delete(
        self,
        ids: Sequence[str] | None = None,
        *,
        scope: MemoryScope | None = None,
        ctx: EventSink | None = None,
    ) -> int:
        """Delete the given ids within ``scope``, or every record ``scope`` covers.

        ``delete(scope=MemoryScope(user_id="ann"))`` erases Ann. An empty list
        deletes nothing. Ids outside the scope are left alone and not counted.

        Example:
            >>> await memory.delete([ids[0]], scope=ann)  # doctest: +SKIP
            1
        """
        checked = self._check_scope(scope)
        self._require(Capability.DELETE, "delete()")
        wanted: list[str] | None = None
        if ids is not None:
            if isinstance(ids, str) or not isinstance(ids, Sequence):
                raise UsageError("delete() takes a list of ids, e.g. delete([id], scope=...)")
            if len(ids) > self.limits.max_ids:
                raise InvalidInput(
                    f"ids has {len(ids):,} items; the limit is {self.limits.max_ids:,} (Limits.max_ids)",
                    field="ids",
                    limit="max_ids",
                )
            wanted = list(dict.fromkeys(self.limits.check_id(x, f"ids[{i}]") for i, x in enumerate(ids)))
            if not wanted:
                return 0

        async def call() -> int:
            return self._count(await self._store.delete(wanted, scope=checked), "delete")

        return await self._run("delete", "memory.deleted", call, lambda n: n, ctx, scope=checked)

    async def export(
        self,
        scope: MemoryScope | None = None,
        *,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> list[MemoryRecord]:
        """Every live record ``scope`` covers, oldest first: a data-access answer.

        ``since``/``until`` restrict ``created_at`` as in :meth:`search`.

        Example:
            >>> records = await memory.export(ann)  # doctest: +SKIP
            >>> this_week = await memory.export(ann, since="7d")  # doctest: +SKIP
        """
        checked = self._check_scope(scope)
        self._require(Capability.EXPORT, "export()")
        start, end = self._range(since, until, utcnow())
        native_range = Capability.TIME_RANGE in self._capabilities
        ranged = start is not None or end is not None
        drops = [0, 0]

        async def call() -> list[MemoryRecord]:
            if native_range and ranged:
                records = await self._store.export(checked, since=start, until=end)  # type: ignore[call-arg]
            else:
                records = await self._store.export(checked)
            now = utcnow()
            live = [
                r
                for r in records
                if self._visible(r, checked, now, drops)
                and (not ranged or self._matching(r, None, None, start, end, native_range, drops))
            ]
            live.sort(key=lambda r: (r.created_at, r.id or ""))
            return live

        return await self._run(
            "export",
            "memory.exported",
            call,
            len,
            ctx,
            scope=checked,
            result=_record_texts,
            drops=drops,
        )

    async def update(
        self,
        changes: Sequence[MemoryUpdate],
        *,
        scope: MemoryScope | None = None,
        ctx: EventSink | None = None,
    ) -> list[str]:
        """Change the text, metadata and/or expiry of records by id within ``scope``.

        Returns the ids updated, in input order; an id that is absent, expired
        or outside ``scope`` is simply not in the list (the two cannot be told
        apart). ``id``, ``scope`` and ``created_at`` are kept and ``updated_at``
        is set; a new text is re-indexed and re-embedded. A batch is one
        transaction where the backend has them. Needs the ``update`` capability
        (and ``metadata``/``expiry`` for those fields).

        Example:
            >>> from memoryport import MemoryUpdate
            >>> await memory.update([MemoryUpdate(id=ids[0], text="Ann now drinks coffee")],  # doctest: +SKIP
            ...                     scope=ann)
            ['3f0c...']
        """
        checked = self._check_scope(scope)
        self._require(Capability.UPDATE, "update()")
        self._check_batch(
            changes,
            MemoryUpdate,
            "changes",
            "update() takes a list of MemoryUpdate, e.g. update([MemoryUpdate(id=..., text=...)])",
        )
        now = utcnow()
        seen: set[str] = set()
        for i, change in enumerate(changes):
            field = f"changes[{i}]"
            if not isinstance(change, MemoryUpdate):
                raise UsageError(f"{field} is a {type(change).__name__}, not a MemoryUpdate")
            self.limits.check_id(change.id, f"{field}.id")
            if change.id in seen:
                raise InvalidInput(f"{field}.id repeats an id earlier in the batch", field=f"{field}.id")
            seen.add(change.id)
            if not change.changed:
                raise InvalidInput(f"{field} changes nothing: give text, metadata and/or expires_at", field=field)
            if change.text is not None and len(change.text) > self.limits.max_text_chars:
                raise InvalidInput(
                    f"{field}.text is {len(change.text):,} characters; the limit is "
                    f"{self.limits.max_text_chars:,} (Limits.max_text_chars)",
                    field=f"{field}.text",
                    limit="max_text_chars",
                )
            if "metadata" in change.changed and change.metadata:
                self._require(Capability.METADATA, f"{field}.metadata")
                self.limits.check_metadata(change.metadata, f"{field}.metadata")
            if "expires_at" in change.changed:
                self._require(Capability.EXPIRY, f"{field}.expires_at")
                if change.expires_at is not None and change.expires_at <= now:
                    raise InvalidInput(
                        f"{field}.expires_at is not in the future; to remove a record, delete it",
                        field=f"{field}.expires_at",
                    )
        if not changes:
            return []
        batch = list(changes)

        async def call() -> list[str]:
            done = await self._store.update(batch, scope=checked)  # type: ignore[attr-defined]
            if isinstance(done, (str, bytes)) or not isinstance(done, Sequence):
                raise BackendError(
                    f"backend {self._backend!r} returned a {type(done).__name__} from update, not a list of ids",
                    backend=self._backend,
                    operation="update",
                )
            ids = [str(i) for i in done]
            if not set(ids) <= seen or len(set(ids)) != len(ids):
                raise BackendError(
                    f"backend {self._backend!r} returned ids from update that were not asked for, or repeated",
                    backend=self._backend,
                    operation="update",
                )
            order = {c.id: i for i, c in enumerate(batch)}
            return sorted(ids, key=order.__getitem__)

        return await self._run(
            "update",
            "memory.updated",
            call,
            len,
            ctx,
            scope=checked,
            arguments=lambda: {"texts": [c.text for c in batch if c.text is not None]},
        )

    async def count(
        self,
        scope: MemoryScope | None = None,
        *,
        filters: Filters | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> int:
        """How many live records ``scope`` covers (matching ``filters``, in ``[since, until)``).

        The cheap way to ask "how many" (capacity caps, dashboards). Needs the
        ``count`` capability (a store's ``count`` always takes the time range),
        and operator filters need ``filter_operators``: a count cannot be
        re-checked on the way out. Records hidden by expiry or retention are not
        counted.

        Example:
            >>> await memory.count(ann, since="7d", filters={"kind": "fact"})  # doctest: +SKIP
            12
        """
        checked = self._check_scope(scope)
        self._require(Capability.COUNT, "count()")
        _, pushed, rest = self._filters(filters, "count")
        if rest:
            missing = sorted(operators_in(rest))
            raise UnsupportedCapability(
                f"count(filters=...) with {', '.join(missing)} needs the {Capability.FILTER_OPERATORS.value!r} "
                f"capability for them, which the {self._backend!r} backend does not have",
                capability=Capability.FILTER_OPERATORS.value,
                backend=self._backend,
            )
        now = utcnow()
        start, end = self._range(since, until, now)
        if self._retention is not None:
            # Retention is a lower bound on created_at: fold it into the range.
            cutoff = now - self._retention
            start = cutoff if start is None else max(start, cutoff)
            if end is not None and start >= end:
                return 0

        async def call() -> int:
            n = await self._store.count(checked, filters=pushed, since=start, until=end)  # type: ignore[attr-defined]
            return self._count(n, "count")

        return await self._run("count", "memory.counted", call, lambda n: n, ctx, scope=checked)

    async def purge(self, *, ctx: EventSink | None = None) -> int:
        """Physically remove what ``expires_at`` or retention already hides; return how many.

        Example:
            >>> await memory.purge()  # doctest: +SKIP
            0
        """
        self._require(Capability.PURGE, "purge()")
        now = utcnow()
        cutoff = None if self._retention is None else now - self._retention

        async def call() -> int:
            return self._count(await self._store.purge(now=now, created_before=cutoff), "purge")

        return await self._run("purge", "memory.purged", call, lambda n: n, ctx)

    async def aclose(self) -> None:
        """Release the store's resources (when it is a :class:`SupportsClose`)."""
        if isinstance(self._store, SupportsClose):
            await self._store.aclose()

    async def __aenter__(self) -> GuardedMemory[S]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- blocking twins ----------------------------------------------------

    def add_sync(self, records: Sequence[MemoryRecord], *, ctx: EventSink | None = None) -> list[str]:
        """Blocking twin of :meth:`add`."""
        return run_sync(self.add(records, ctx=ctx), method="add")

    def search_sync(
        self,
        query: str = "",
        *,
        scope: MemoryScope | None = None,
        k: int = 5,
        filters: Filters | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> SearchResults:
        """Blocking twin of :meth:`search`."""
        return run_sync(
            self.search(query, scope=scope, k=k, filters=filters, since=since, until=until, ctx=ctx), method="search"
        )

    def get_sync(
        self, id: str, *, scope: MemoryScope | None = None, ctx: EventSink | None = None
    ) -> MemoryRecord | None:
        """Blocking twin of :meth:`get`."""
        return run_sync(self.get(id, scope=scope, ctx=ctx), method="get")

    def delete_sync(
        self, ids: Sequence[str] | None = None, *, scope: MemoryScope | None = None, ctx: EventSink | None = None
    ) -> int:
        """Blocking twin of :meth:`delete`."""
        return run_sync(self.delete(ids, scope=scope, ctx=ctx), method="delete")

    def export_sync(
        self,
        scope: MemoryScope | None = None,
        *,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> list[MemoryRecord]:
        """Blocking twin of :meth:`export`."""
        return run_sync(self.export(scope, since=since, until=until, ctx=ctx), method="export")

    def update_sync(
        self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope | None = None, ctx: EventSink | None = None
    ) -> list[str]:
        """Blocking twin of :meth:`update`."""
        return run_sync(self.update(changes, scope=scope, ctx=ctx), method="update")

    def count_sync(
        self,
        scope: MemoryScope | None = None,
        *,
        filters: Filters | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> int:
        """Blocking twin of :meth:`count`."""
        return run_sync(self.count(scope, filters=filters, since=since, until=until, ctx=ctx), method="count")

    def purge_sync(self, *, ctx: EventSink | None = None) -> int:
        """Blocking twin of :meth:`purge`."""
        return run_sync(self.purge(ctx=ctx), method="purge")

    def close(self) -> None:
        """Blocking twin of :meth:`aclose`."""
        run_sync(self.aclose(), method="aclose", sync="close")


def _not_a_hit(hit: object, backend: str) -> BackendError:
    return BackendError(
        f"backend {backend!r} returned a {type(hit).__name__} from search, not a MemoryHit",
        backend=backend,
        operation="search",
    )


def _record_texts(records: list[MemoryRecord]) -> list[str]:
    return [r.text for r in records]


def _mode_name(results: SearchResults) -> str:
    return str(results.mode)


def _hit_texts(results: SearchResults) -> list[str]:
    return [h.record.text for h in results]


def _mode_of(hits: Sequence[MemoryHit]) -> SearchMode:
    signals = {h.signal for h in hits}
    if len(signals) == 1:
        return next(iter(signals))
    return "hybrid" if signals else "backend"
