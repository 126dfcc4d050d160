"""Tool history: the agent's tool calls as ordinary records (name, outcome, duration, error type), errors and stats."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .._errors import InvalidInput, UsageError
from .._events import EventSink
from .._guard import GuardedMemory
from .._port import Capability
from .._records import MemoryRecord, MemoryScope, MetadataValue, new_id, utcnow
from .._sync import run_sync
from .._timerange import TimeBound
from ..curated import AgentMemory, Remembered
from ..curated._types import Duration
from . import _keys as K
from ._conversation import memory_of

__all__ = ["ToolCallRecord", "ToolHistory", "ToolStats"]

Outcome = Literal["ok", "error"]
_REQUIRED = (Capability.METADATA, Capability.FILTERS)
_MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class ToolCallRecord:
    """One logged tool call.

    Attributes:
        id: the record's id.
        tool: the tool's name.
        outcome: ``"ok"`` or ``"error"``.
        duration_ms: how long it took.
        error_type: the error's type name (``"TimeoutError"``), or ``None``.
        at: when it was logged.
        scope: where it was logged.
        text: the record's text: ``"<tool> ok"`` / ``"<tool> error <type>"``, plus the
            arguments and error message only when the host opted in.
        record: the underlying record.

    Example:
        >>> call.tool, call.outcome, call.error_type                    # doctest: +SKIP
        ('web_search', 'error', 'TimeoutError')
    """

    id: str
    tool: str
    outcome: str
    duration_ms: float | None
    error_type: str | None
    at: datetime
    scope: MemoryScope
    text: str
    record: MemoryRecord | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_record(cls, record: MemoryRecord) -> ToolCallRecord:
        """Read a tool call's keys from its record."""
        md = record.metadata
        tool, outcome, duration, error = md.get(K.TOOL_NAME), md.get(K.OUTCOME), md.get(K.DURATION_MS), \
            md.get(K.ERROR_TYPE)
        return cls(
            id=str(record.id),
            tool=tool if isinstance(tool, str) else "?",
            outcome=outcome if isinstance(outcome, str) else "ok",
            duration_ms=float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool)
            else None,
            error_type=error if isinstance(error, str) else None,
            at=record.created_at,
            scope=record.scope,
            text=record.text,
            record=record,
        )


@dataclass(frozen=True)
class ToolStats:
    """Calls per tool over a span: how many, how many failed, and how long they took.

    Attributes:
        tool: the tool's name.
        calls: how many calls.
        errors: how many ended in an error.
        error_rate: ``errors / calls``.
        median_ms, mean_ms, max_ms: durations of the calls that recorded one (``None`` without).
        error_types: error type name -> count, most frequent first.
        last_at: the newest call.

    Example:
        >>> stats["web_search"].error_rate                               # doctest: +SKIP
        0.25
    """

    tool: str
    calls: int
    errors: int
    error_rate: float
    median_ms: float | None
    mean_ms: float | None
    max_ms: float | None
    error_types: dict[str, int]
    last_at: datetime


class ToolHistory:
    """The agent's tool calls, logged as ordinary records on any backend that can hold them.

    Each call is one record marked ``mp:log="tool"`` with ``mp:tool`` (name),
    ``mp:outcome`` (``ok``/``error``), ``mp:duration_ms`` and ``mp:error_type``
    (the exception's type name; its message only with ``capture_details``).
    Arguments may hold personal data, so they are stored only when the host
    opts in (``capture_details=True``), in the record's text (searchable,
    exported and erased with the user like any text). Curated recall leaves
    these records out. With ``errors_as_memories=True`` (and an
    :class:`~memoryport.AgentMemory`), each failure is also remembered as a
    curated memory of kind ``error`` (near-duplicates reinforce one memory).

    Needs ``metadata`` and ``filters``; :meth:`stats` needs ``export``.

    Args:
        memory: a :class:`~memoryport.GuardedMemory` or an :class:`~memoryport.AgentMemory`.
        capture_details: store arguments and error messages too (off by default).
        errors_as_memories: remember each failure as a memory of kind ``error``
            (needs an ``AgentMemory`` whose policy has that kind).
        ttl: keep calls this long (``"30d"``; needs ``expiry``).
        clock: the current time.

    Example:
        >>> import os, tempfile
        >>> from memoryport import MemoryScope, SQLiteMemory
        >>> from memoryport.loop import ToolHistory
        >>> history = ToolHistory(SQLiteMemory(os.path.join(tempfile.mkdtemp(), "m.db")))
        >>> chat = MemoryScope(user_id="ann", session_id="chat-1")
        >>> history.log_tool_call_sync("web_search", scope=chat, duration_ms=120.0).outcome
        'ok'
        >>> history.log_tool_call_sync("web_search", scope=chat, error=TimeoutError("slow")).error_type
        'TimeoutError'
        >>> [c.error_type for c in history.errors_sync(scope=chat)]
        ['TimeoutError']
        >>> history.stats_sync(scope=chat)["web_search"].errors
        1
        >>> history.memory.close()
    """

    def __init__(
        self,
        memory: GuardedMemory | AgentMemory,
        *,
        capture_details: bool = False,
        errors_as_memories: bool = False,
        ttl: Duration | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        guard = memory_of(memory, "ToolHistory()")
        K.require(guard, _REQUIRED, "ToolHistory")
        if not isinstance(capture_details, bool) or not isinstance(errors_as_memories, bool):
            raise UsageError("capture_details and errors_as_memories must be True or False")
        self.agent: AgentMemory | None = memory if isinstance(memory, AgentMemory) else None
        if errors_as_memories:
            if self.agent is None:
                raise UsageError("errors_as_memories=True needs an AgentMemory (curated memory keeps the errors)")
            if "error" not in self.agent.policy.kinds:
                raise UsageError("errors_as_memories=True needs the kind 'error' in the CurationPolicy's kinds")
        self.ttl = K.ttl_of(guard, ttl, "ToolHistory")
        self.memory = guard
        self.capture_details = capture_details
        self.errors_as_memories = errors_as_memories
        self._clock = clock

    def __repr__(self) -> str:
        return f"ToolHistory(backend={self.memory.backend!r})"

    def _now(self) -> datetime:
        return K.aware_now(self._clock, "ToolHistory")

    async def log_tool_call(
        self,
        tool: str,
        *,
        scope: MemoryScope,
        outcome: Outcome | None = None,
        duration_ms: float | None = None,
        error: BaseException | str | None = None,
        arguments: Mapping[str, Any] | None = None,
        ctx: EventSink | None = None,
    ) -> ToolCallRecord:
        """Log one tool call; ``error`` (an exception, or its type name) makes it a failure.

        ``outcome`` defaults to ``"error"`` when ``error`` is given, else ``"ok"``.
        ``arguments`` are stored only with ``capture_details=True`` (else ignored,
        never stored); an error's message likewise.

        Raises:
            InvalidInput: an empty or overlong tool name, an outcome other than
                ``ok``/``error``, ``error`` with outcome ``ok``, a negative or
                non-finite duration, arguments that are not JSON or make the text
                too long. Nothing is stored then.

        Example:
            >>> await history.log_tool_call("calendar.add", scope=chat, duration_ms=85.2)   # doctest: +SKIP
        """
        scope = K.check_scope(scope, session=False, what="a tool call")
        name = K.check_name(tool, "tool")
        if outcome is None:
            outcome = "error" if error is not None else "ok"
        if outcome not in ("ok", "error"):
            raise InvalidInput("outcome must be 'ok' or 'error'", field="outcome")
        if outcome == "ok" and error is not None:
            raise InvalidInput("a call with an error cannot have outcome 'ok'", field="outcome")
        md: dict[str, MetadataValue] = {K.LOG: K.TOOL, K.TOOL_NAME: name, K.OUTCOME: outcome}
        if duration_ms is not None:
            if isinstance(duration_ms, bool) or not isinstance(duration_ms, (int, float)) or not math.isfinite(
                duration_ms
            ) or duration_ms < 0:
                raise InvalidInput("duration_ms must be a finite number of milliseconds, 0 or more",
                                   field="duration_ms")
            md[K.DURATION_MS] = round(float(duration_ms), 3)
        message: str | None = None
        if error is not None:
            if isinstance(error, BaseException):
                md[K.ERROR_TYPE] = type(error).__name__
                message = str(error) or None
            else:
                md[K.ERROR_TYPE] = K.check_name(error, "error")
        text = f"{name} {outcome}" + (f" {md[K.ERROR_TYPE]}" if K.ERROR_TYPE in md else "")
        if self.capture_details:
            if arguments is not None:
                if not isinstance(arguments, Mapping):
                    raise InvalidInput("arguments must be a mapping (the call's JSON arguments)", field="arguments")
                try:
                    dumped = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise InvalidInput(f"arguments must be JSON-serialisable ({type(exc).__name__})",
                                       field="arguments") from None
                text += f"\narguments: {dumped}"
                md[K.ARGUMENTS] = True
            if message:
                text += f"\nerror: {message[:_MAX_ERROR_CHARS]}" + (" [...]" if len(message) > _MAX_ERROR_CHARS
                                                                     else "")
        K.check_text(text, "arguments" if K.ARGUMENTS in md else "tool", self.memory.limits.max_text_chars)
        now = self._now()
        expires = None if self.ttl is None else now + self.ttl
        record = MemoryRecord(id=new_id(), scope=scope, text=text, metadata=md, created_at=now, expires_at=expires)
        self.memory.limits.check_record(record, "tool call", utcnow(), scope=False)
        await self.memory.add([record], ctx=ctx)
        if outcome == "error" and self.errors_as_memories:
            await self._remember_error(name, str(md.get(K.ERROR_TYPE, "an error")), message, scope, ctx)
        return ToolCallRecord.from_record(record)

    async def _remember_error(
        self, tool: str, error_type: str, message: str | None, scope: MemoryScope, ctx: EventSink | None
    ) -> Remembered:
        assert self.agent is not None
        text = f"The tool {tool} failed with {error_type}"
        if self.capture_details and message:
            text += f": {message[:_MAX_ERROR_CHARS]}"
        return await self.agent.remember(text, scope=scope, kind="error", source="tool", ctx=ctx)

    @asynccontextmanager
    async def track(
        self,
        tool: str,
        *,
        scope: MemoryScope,
        arguments: Mapping[str, Any] | None = None,
        ctx: EventSink | None = None,
    ) -> AsyncIterator[None]:
        """Time a call and log it when the block ends; an exception is logged as the error and re-raised.

        Example:
            >>> async with history.track("web_search", scope=chat, arguments={"q": "pizza"}):  # doctest: +SKIP
            ...     result = await web_search("pizza")
        """
        K.check_name(tool, "tool")
        start = time.perf_counter()
        try:
            yield
        except Exception as exc:
            elapsed = (time.perf_counter() - start) * 1000
            await self.log_tool_call(tool, scope=scope, duration_ms=elapsed, error=exc, arguments=arguments, ctx=ctx)
            raise
        elapsed = (time.perf_counter() - start) * 1000
        await self.log_tool_call(tool, scope=scope, duration_ms=elapsed, arguments=arguments, ctx=ctx)

    async def calls(
        self,
        *,
        scope: MemoryScope,
        tool: str | None = None,
        outcome: Outcome | None = None,
        limit: int = 50,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> list[ToolCallRecord]:
        """The newest ``limit`` calls in ``scope`` (of one tool, with one outcome), newest first.

        Example:
            >>> [c.tool for c in await history.calls(scope=chat, limit=5)]   # doctest: +SKIP
        """
        scope = K.check_scope(scope, session=False, what="calls()")
        limit = K.check_limit(limit, "limit", self.memory.limits.max_k)
        filters: dict[str, Any] = {K.LOG: K.TOOL}
        if tool is not None:
            filters[K.TOOL_NAME] = K.check_name(tool, "tool")
        if outcome is not None:
            if outcome not in ("ok", "error"):
                raise InvalidInput("outcome must be 'ok' or 'error'", field="outcome")
            filters[K.OUTCOME] = outcome
        hits = await self.memory.search("", scope=scope, k=limit, filters=filters, since=since, until=until, ctx=ctx)
        return [ToolCallRecord.from_record(h.record) for h in hits]

    async def errors(
        self, *, scope: MemoryScope, limit: int = 10, tool: str | None = None, since: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> list[ToolCallRecord]:
        """The newest ``limit`` (10) failed calls, newest first.

        Example:
            >>> [(c.tool, c.error_type) for c in await history.errors(scope=chat)]   # doctest: +SKIP
        """
        return await self.calls(scope=scope, tool=tool, outcome="error", limit=limit, since=since, ctx=ctx)

    async def stats(
        self, *, scope: MemoryScope, since: TimeBound | None = None, until: TimeBound | None = None,
        ctx: EventSink | None = None,
    ) -> dict[str, ToolStats]:
        """Per tool: calls, errors, error rate, durations and error types, busiest tool first (needs ``export``).

        Example:
            >>> stats = await history.stats(scope=MemoryScope(user_id="ann"), since="7d")   # doctest: +SKIP
        """
        scope = K.check_scope(scope, session=False, what="stats()")
        K.require(self.memory, (Capability.EXPORT,), "ToolHistory.stats()")
        grouped: dict[str, list[ToolCallRecord]] = {}
        for record in await self.memory.export(scope, since=since, until=until, ctx=ctx):
            if K.is_log(record.metadata, K.TOOL):
                call = ToolCallRecord.from_record(record)
                grouped.setdefault(call.tool, []).append(call)
        out: dict[str, ToolStats] = {}
        for name, calls in sorted(grouped.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            durations = [c.duration_ms for c in calls if c.duration_ms is not None]
            errors = [c for c in calls if c.outcome == "error"]
            types: dict[str, int] = {}
            for c in errors:
                types[c.error_type or "?"] = types.get(c.error_type or "?", 0) + 1
            out[name] = ToolStats(
                tool=name,
                calls=len(calls),
                errors=len(errors),
                error_rate=round(len(errors) / len(calls), 6),
                median_ms=round(statistics.median(durations), 3) if durations else None,
                mean_ms=round(statistics.fmean(durations), 3) if durations else None,
                max_ms=max(durations) if durations else None,
                error_types=dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
                last_at=max(c.at for c in calls),
            )
        return out

    # -- blocking twins ------------------------------------------------------------

    def log_tool_call_sync(self, tool: str, *, scope: MemoryScope, **kwargs: Any) -> ToolCallRecord:
        """Blocking twin of :meth:`log_tool_call`."""
        return run_sync(self.log_tool_call(tool, scope=scope, **kwargs), method="log_tool_call", owner="history")

    def calls_sync(self, *, scope: MemoryScope, **kwargs: Any) -> list[ToolCallRecord]:
        """Blocking twin of :meth:`calls`."""
        return run_sync(self.calls(scope=scope, **kwargs), method="calls", owner="history")

    def errors_sync(self, *, scope: MemoryScope, **kwargs: Any) -> list[ToolCallRecord]:
        """Blocking twin of :meth:`errors`."""
        return run_sync(self.errors(scope=scope, **kwargs), method="errors", owner="history")

    def stats_sync(self, *, scope: MemoryScope, **kwargs: Any) -> dict[str, ToolStats]:
        """Blocking twin of :meth:`stats`."""
        return run_sync(self.stats(scope=scope, **kwargs), method="stats", owner="history")
