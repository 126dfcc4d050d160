"""Events carry no content; capture_content reaches only capturing sinks; OpenTelemetry spans and metrics."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryport import BackendError, GuardedMemory, MemoryEvent, MemoryHit, MemoryRecord, MemoryScope, _events
from memoryport._events import report_usage

from .dictstore import DictStore

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann-user-id")
SECRET = "secret tea preference"


@dataclass
class Capturing:
    """A sink object that asks for content."""

    capture_content: bool = True
    events: list[MemoryEvent] = field(default_factory=list)

    def emit(self, event: MemoryEvent) -> None:
        self.events.append(event)


async def run_all(memory: GuardedMemory, ctx: Any = None) -> str:
    [rid] = await memory.add([MemoryRecord(scope=ANN, text=SECRET)], ctx=ctx)
    await memory.search("tea", scope=ANN, k=3, ctx=ctx)
    await memory.search("", scope=ANN, ctx=ctx)
    await memory.get(rid, scope=ANN, ctx=ctx)
    await memory.export(ANN, ctx=ctx)
    await memory.delete([rid], scope=ANN, ctx=ctx)
    await memory.purge(ctx=ctx)
    return rid


def assert_no_content(events: list[MemoryEvent], rid: str) -> None:
    for event in events:
        assert event.arguments is None and event.result is None
        for secret in (SECRET, "tea", rid, "ann-user-id"):
            assert secret not in repr(event), (event.name, secret)


async def test_events_have_counts_kinds_and_no_content() -> None:
    events: list[MemoryEvent] = []
    memory = GuardedMemory(DictStore())
    rid = await run_all(memory, ctx=events.append)
    assert [e.name for e in events] == [
        "memory.added",
        "memory.searched",
        "memory.searched",
        "memory.fetched",
        "memory.exported",
        "memory.deleted",
        "memory.purged",
    ]
    assert [e.count for e in events] == [1, 1, 1, 1, 1, 1, 0]
    assert all(e.backend == "dict" and e.latency_ms >= 0 and e.error is None for e in events)
    assert [e.scope_kind for e in events] == ["user"] * 6 + [None]
    assert (events[1].k, events[1].mode) == (3, "keyword")
    assert (events[2].k, events[2].mode) == (5, "recent")
    assert_no_content(events, rid)


async def test_sink_on_the_memory_and_ctx_per_call() -> None:
    on_memory: list[MemoryEvent] = []
    per_call: list[MemoryEvent] = []
    memory = GuardedMemory(DictStore(), sink=on_memory.append)
    await memory.add([MemoryRecord(scope=ANN, text="a")])
    await memory.add([MemoryRecord(scope=ANN, text="b")], ctx=per_call.append)
    assert len(on_memory) == 1 and len(per_call) == 1


async def test_content_only_with_capture_content_on_both_sides() -> None:
    plain: list[MemoryEvent] = []
    capturing = Capturing()
    off = GuardedMemory(DictStore())
    rid = await run_all(off, ctx=capturing)
    assert_no_content(capturing.events, rid)

    on = GuardedMemory(DictStore(), capture_content=True)
    rid = await run_all(on, ctx=plain.append)
    assert_no_content(plain, rid)

    capturing = Capturing()
    await run_all(on, ctx=capturing)
    by_name = {e.name: e for e in capturing.events}
    assert by_name["memory.added"].arguments == {"texts": [SECRET]}
    assert by_name["memory.searched"].result == [SECRET] or by_name["memory.searched"].arguments == {"query": ""}
    searched = [e for e in capturing.events if e.name == "memory.searched"]
    assert searched[0].arguments == {"query": "tea"} and searched[0].result == [SECRET]
    assert by_name["memory.exported"].result == [SECRET]
    assert Capturing(capture_content=False).capture_content is False


async def test_a_failing_sink_never_fails_the_operation(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: MemoryEvent) -> None:
        raise ValueError(f"sink exploded on {SECRET}")

    memory = GuardedMemory(DictStore(), sink=broken)
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        assert len(await memory.add([MemoryRecord(scope=ANN, text=SECRET)])) == 1
    assert "ValueError" in caplog.text and SECRET not in caplog.text


async def test_failed_operation_emits_an_error_event() -> None:
    class Failing(DictStore):
        async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
            raise OSError(SECRET)

    events: list[MemoryEvent] = []
    with pytest.raises(BackendError):
        await GuardedMemory(Failing()).export(ANN, ctx=events.append)
    assert [(e.name, e.error, e.count) for e in events] == [("memory.exported", "OSError", 0)]
    assert SECRET not in repr(events)


async def test_embedder_usage_reaches_the_operations_sink() -> None:
    class Embedding(DictStore):
        async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
            report_usage("toy-embedder", texts=1, tokens=4, latency_ms=1.0)
            return await super().search(query, scope=scope, k=k, filters=filters)

    events: list[MemoryEvent] = []
    await GuardedMemory(Embedding()).search("tea", scope=ANN, ctx=events.append)
    assert [(e.name, e.backend, dict(e.usage)) for e in events] == [
        ("embedding.used", "toy-embedder", {"texts": 1, "tokens": 4}),
        ("memory.searched", "dict", {}),
    ]
    report_usage("toy-embedder", texts=1)  # outside an operation: nowhere to go, no error


# -- OpenTelemetry ------------------------------------------------------------------------


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metrics])
    monkeypatch.setattr(_events, "_TELEMETRY", _events._Telemetry(tracer_provider, meter_provider))
    yield spans, metrics
    meter_provider.shutdown()
    tracer_provider.shutdown()


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_spans_and_metrics_have_attributes_and_no_content(
    otel: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, reader = otel
    memory = GuardedMemory(DictStore())
    rid = await run_all(memory)
    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == [
        "memory.add",
        "memory.search",
        "memory.search",
        "memory.get",
        "memory.export",
        "memory.delete",
        "memory.purge",
    ]
    search = dict(finished[1].attributes or {})
    assert search == {
        "memory.backend": "dict",
        "memory.scope_kind": "user",
        "memory.k": 3,
        "memory.count": 1,
        "memory.mode": "keyword",
    }
    for span in finished:
        for value in (span.attributes or {}).values():
            for secret in (SECRET, "tea", rid, "ann-user-id"):
                assert secret not in str(value)
    points = metric_points(reader)
    ops = {
        (p.attributes["memory.operation"], p.attributes["memory.outcome"]): p.value
        for p in points["memoryport.operations"]
    }
    assert ops == {
        ("add", "ok"): 1,
        ("search", "ok"): 2,
        ("get", "ok"): 1,
        ("export", "ok"): 1,
        ("delete", "ok"): 1,
        ("purge", "ok"): 1,
    }
    assert sum(p.count for p in points["memoryport.operation.duration"]) == 7
    for dp in (*points["memoryport.operations"], *points["memoryport.records"]):
        assert set(dp.attributes) == {"memory.operation", "memory.backend", "memory.outcome"}


async def test_failed_span_carries_the_error_type(otel: tuple[InMemorySpanExporter, InMemoryMetricReader]) -> None:
    spans, reader = otel

    class Failing(DictStore):
        async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
            raise KeyError(SECRET)

    with pytest.raises(BackendError):
        await GuardedMemory(Failing()).get("x", scope=ANN)
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["error.type"] == "KeyError"
    assert SECRET not in span.to_json()
    assert span.status.description == "KeyError" and not span.events
    [point] = metric_points(reader)["memoryport.operations"]
    assert point.attributes["memory.outcome"] == "error"


async def test_embedding_metrics(otel: tuple[InMemorySpanExporter, InMemoryMetricReader]) -> None:
    _, reader = otel
    report_usage("toy", texts=3, tokens=12)
    points = metric_points(reader)
    assert [p.value for p in points["memoryport.embedding.texts"]] == [3]
    assert [p.value for p in points["memoryport.embedding.tokens"]] == [12]
