"""Events without content, and OpenTelemetry spans and metrics.

An event carries counts, a latency, the backend and the kind of scope, never
texts or ids. With ``capture_content=True`` on the memory, the texts ride under
``arguments``/``result``; a sink receives them only if it has a true
``capture_content`` attribute of its own.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, Union, runtime_checkable

__all__ = [
    "EventSink",
    "MemoryEvent",
    "SupportsEmit",
    "current_sink",
    "deliver",
    "report_usage",
]

logger = logging.getLogger("memoryport")


@dataclass(frozen=True)
class MemoryEvent:
    """What happened, in numbers.

    Attributes:
        name: ``memory.added``, ``memory.searched``, ``memory.fetched``,
            ``memory.deleted``, ``memory.exported``, ``memory.purged``,
            ``memory.updated``, ``memory.counted``, ``memory.extracted``,
            ``embedding.used``, ``rerank.used`` or ``model.used``.
        backend: the backend's name.
        count: records added, hits returned, records deleted, exported, updated,
            counted, ...
        latency_ms: wall time of the operation.
        scope_kind: ``"user"``, ``"user+session"``, ... where a scope applies.
        k: the requested number of hits (searches).
        mode: ``keyword``, ``vector``, ``hybrid``, ``recent`` or ``backend`` (searches).
        error: the exception type's name when the operation failed.
        usage: counters such as ``{"texts": 3, "tokens": 41}`` (embeddings).
        arguments: texts sent, only with ``capture_content=True``.
        result: texts returned, only with ``capture_content=True``.

    Example:
        >>> events = []
        >>> sink = events.append   # any callable taking a MemoryEvent is a sink
    """

    name: str
    backend: str
    count: int
    latency_ms: float
    scope_kind: str | None = None
    k: int | None = None
    mode: str | None = None
    error: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    arguments: Mapping[str, Any] | None = None
    result: Any = None

    def without_content(self) -> MemoryEvent:
        """This event with ``arguments`` and ``result`` removed."""
        if self.arguments is None and self.result is None:
            return self
        return replace(self, arguments=None, result=None)


@runtime_checkable
class SupportsEmit(Protocol):
    """An object that receives events through ``emit`` (e.g. a tool context)."""

    def emit(self, event: MemoryEvent) -> None:
        """Receive one event."""


EventSink = Union[Callable[[MemoryEvent], None], SupportsEmit]
"""A callable taking a :class:`MemoryEvent`, or an object with ``emit(event)``.

Give it a true ``capture_content`` attribute to receive texts as well.
"""

current_sink: contextvars.ContextVar[EventSink | None] = contextvars.ContextVar("memoryport_current_sink", default=None)
"""The sink of the operation in progress, so that embedders can report usage."""


def deliver(sink: EventSink | None, event: MemoryEvent) -> None:
    """Send ``event`` to ``sink``, stripping content unless the sink captures it.

    A failing sink never fails the operation: the error type is logged.
    """
    if sink is None:
        return
    if not getattr(sink, "capture_content", False):
        event = event.without_content()
    try:
        if isinstance(sink, SupportsEmit):
            sink.emit(event)
        else:
            sink(event)
    except Exception as exc:  # a sink must not break storage
        logger.warning("event sink failed with %s; event dropped", type(exc).__name__)


def report_usage(
    backend: str,
    *,
    texts: int,
    tokens: int | None = None,
    latency_ms: float = 0.0,
    event: str = "embedding.used",
) -> None:
    """Report model usage to the sink of the operation in progress.

    Embedders call this (``embedding.used``), and rerankers with
    ``event="rerank.used"``, so that a host can bill a run; outside an
    operation (no current sink) only the OpenTelemetry counters move.
    """
    usage = {"texts": texts}
    if tokens is not None:
        usage["tokens"] = tokens
    deliver(
        current_sink.get(),
        MemoryEvent(name=event, backend=backend, count=texts, latency_ms=latency_ms, usage=usage),
    )
    if event == "embedding.used":
        get_telemetry().record_usage(backend, texts, tokens)


class _NoSpan:
    """The context manager of an operation when no tracer provider is set: OpenTelemetry's invalid span."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def __enter__(self) -> Any:
        return self.span

    def __exit__(self, *exc: object) -> None:
        return None


class _Telemetry:
    """OpenTelemetry instruments, created on first use so imports stay cheap."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from opentelemetry import metrics, trace

        # Providers are injectable for tests; by default the global ones (no-op without an SDK).
        self._trace = trace
        #: What :meth:`span` returns when no tracer provider is set: its span ignores attributes.
        self.no_span = _NoSpan(trace.INVALID_SPAN)
        self.tracer = trace.get_tracer("memoryport", tracer_provider=tracer_provider)
        self._global_tracer = tracer_provider is None
        meter = metrics.get_meter("memoryport", meter_provider=meter_provider)
        self.operations = meter.create_counter(
            "memoryport.operations", unit="1", description="Memory operations by outcome"
        )
        self.duration = meter.create_histogram(
            "memoryport.operation.duration", unit="ms", description="Memory operation latency"
        )
        self.records = meter.create_counter(
            "memoryport.records", unit="1", description="Records added, returned, deleted or exported"
        )
        self.embedded = meter.create_counter("memoryport.embedding.texts", unit="1", description="Texts embedded")
        self.tokens = meter.create_counter(
            "memoryport.embedding.tokens", unit="1", description="Tokens embedded, where known"
        )

    def span(
        self, operation: str, backend: str, scope_kind: str | None = None, k: int | None = None
    ) -> AbstractContextManager[Any]:
        """The span of one operation: OpenTelemetry's, or the invalid span when no tracer provider is set.

        Its attributes: ``memory.backend``, and ``memory.scope_kind`` and ``memory.k`` when given.
        """
        trace = self._trace
        if self._global_tracer and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            # No tracer provider set (yet): the API would make a non-recording span
            # through its proxy (~8 µs a call); the same span, without the detour, nor
            # a generator-based context manager (~5 µs more per guarded call), nor its attributes.
            return self.no_span
        attributes: dict[str, str | int] = {"memory.backend": backend}
        if scope_kind is not None:
            attributes["memory.scope_kind"] = scope_kind
        if k is not None:
            attributes["memory.k"] = k
        return self._recording_span(operation, attributes)

    @contextmanager
    def _recording_span(self, operation: str, attributes: Mapping[str, str | int]) -> Iterator[Any]:
        # Recording the exception would put its message and the chained cause's
        # traceback (texts, queries) on the span: only the error type goes there.
        with self.tracer.start_as_current_span(
            f"memory.{operation}",
            attributes=dict(attributes),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield span

    def fail(self, span: Any, error: str) -> None:
        """Mark ``span`` failed with only the error type as description."""
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR, error))

    def record(self, event: MemoryEvent, operation: str) -> None:
        self.record_call(operation, event.backend, event.latency_ms, event.count, event.error)

    def record_call(self, operation: str, backend: str, latency_ms: float, count: int, error: str | None) -> None:
        """The metrics of one operation (what :meth:`record` takes from an event, without building one)."""
        attrs = {
            "memory.operation": operation,
            "memory.backend": backend,
            "memory.outcome": "error" if error else "ok",
        }
        self.operations.add(1, attrs)
        self.duration.record(latency_ms, attrs)
        if count:
            self.records.add(count, attrs)

    def record_usage(self, backend: str, texts: int, tokens: int | None) -> None:
        attrs = {"memory.backend": backend}
        self.embedded.add(texts, attrs)
        if tokens is not None:
            self.tokens.add(tokens, attrs)


_TELEMETRY: _Telemetry | None = None


def get_telemetry() -> _Telemetry:
    global _TELEMETRY
    if _TELEMETRY is None:
        _TELEMETRY = _Telemetry()
    return _TELEMETRY
