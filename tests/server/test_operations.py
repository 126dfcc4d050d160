"""Operations: spans flow through, access logs carry no content, shutdown finishes in-flight writes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, _events
from memoryport.adapters.callable import CallableStore
from memoryport.server import KeyStore, create_app

from .support import Live, live_server, running


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider()
    monkeypatch.setattr(_events, "_TELEMETRY", _events._Telemetry(provider, meters))
    yield exporter
    provider.shutdown()
    meters.shutdown()


def test_guard_spans_are_children_of_the_request_span(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with live_server(tmp_path) as live, live.client("ann") as ann:
        assert ann.post("/v1/memories", json={"memories": [{"text": "Ann hums sea shanties"}]}).status_code == 200
        assert ann.post("/v1/search", json={"query": "shanties"}).status_code == 200
    finished = spans.get_finished_spans()
    by_name = {s.name: s for s in finished}
    server_add, guard_add = by_name["POST /v1/memories"], by_name["memory.add"]
    assert guard_add.parent is not None and guard_add.parent.span_id == server_add.context.span_id
    assert by_name["memory.search"].parent.span_id == by_name["POST /v1/search"].context.span_id  # type: ignore[union-attr]
    assert server_add.attributes["http.route"] == "/v1/memories"
    assert server_add.attributes["http.response.status_code"] == 200
    for span in finished:
        assert "shanties" not in json.dumps(dict(span.attributes or {}))


def test_access_log_is_one_content_free_line_per_request(live: Live, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="memoryport.server.access")
    with live.client("ann") as ann:
        ids = ann.post("/v1/memories", json={"memories": [{"text": "Ann's gate code is 7291"}]}).json()["ids"]
        ann.post("/v1/search", json={"query": "gate code 7291"})
        ann.get(f"/v1/memories/{ids[0]}")
        ann.get("/v1/memories?kind=secretkind")
    with httpx.Client(base_url=live.url) as anonymous:
        anonymous.get("/v1/stats")

    def access() -> list[dict[str, object]]:
        return [json.loads(r.getMessage()) for r in caplog.records if r.name == "memoryport.server.access"]

    # The line is written once the answer has gone out: wait (bounded) for the last one.
    deadline = time.monotonic() + 10
    while len(access()) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    lines = access()
    assert [(x["method"], x["route"], x["status"]) for x in lines] == [
        ("POST", "/v1/memories", 200),
        ("POST", "/v1/search", 200),
        ("GET", "/v1/memories/{memory_id}", 200),
        ("GET", "/v1/memories", 200),
        ("GET", "/v1/stats", 401),
    ]
    assert all(isinstance(x["ms"], float) for x in lines)
    assert {x["key_id"] for x in lines[:4]} == {live.secrets["ann"].split("_")[1]}
    assert lines[4]["key_id"] is None
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "7291" not in text and "gate" not in text and ids[0] not in text and "secretkind" not in text
    assert live.secrets["ann"] not in text


def test_graceful_shutdown_finishes_the_write_in_flight(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()
    stored: list[MemoryRecord] = []
    closed: list[bool] = []

    async def add(records: Sequence[MemoryRecord]) -> list[str]:
        entered.set()
        await asyncio.to_thread(release.wait, 30)
        stored.extend(records)
        return [str(r.id) for r in records]

    async def delete(ids: Sequence[str] | None, scope: MemoryScope) -> int:
        return 0

    class Watched(CallableStore):  # a store that holds resources (SupportsClose): the guard closes it
        async def aclose(self) -> None:
            closed.append(bool(stored))

    keys = KeyStore(tmp_path / "keys")
    secret = keys.create(user_id="ann").secret
    app = create_app(GuardedMemory(Watched(add=add, search=lambda **_: [], delete=delete)), keys)
    answer: list[httpx.Response] = []
    with running(app) as (url, server):

        def post() -> None:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=60) as c:
                answer.append(c.post("/v1/memories", json={"memories": [{"text": "Ann is mid-write"}]}))

        client = threading.Thread(target=post)
        client.start()
        assert entered.wait(30)
        server.should_exit = True  # what SIGTERM/SIGINT do
        # Let the write go on only once the server has stopped listening: it is draining now.
        deadline = time.monotonic() + 30
        while server.servers[0].is_serving() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not server.servers[0].is_serving()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/healthz", timeout=5)
        release.set()
        client.join(30)
    assert answer and answer[0].status_code == 200
    assert [r.text for r in stored] == ["Ann is mid-write"]
    assert closed == [True]  # the memory closed only after the write had finished
