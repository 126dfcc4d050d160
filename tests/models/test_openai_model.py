"""OpenAIModel against a server on 127.0.0.1 that speaks the /v1/chat/completions API."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memoryport import InvalidInput, MemoryEvent, ModelError, ModelPort
from memoryport.models.openai import OpenAIModel

pytestmark = pytest.mark.anyio

Reply = tuple[int, dict[str, str], Any]  # status, headers, body (JSON-able, or bytes sent as is)
HI = [{"role": "system", "content": "answer in JSON"}, {"role": "user", "content": "my pin is 1234"}]


def completion(content: Any, finish: str = "stop") -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}


def ok(body: dict[str, Any]) -> Reply:
    return 200, {}, completion(json.dumps({"echo": body["messages"][-1]["content"]}))


class FakeAPI:
    """A scripted OpenAI-compatible chat server; unscripted requests get a correct answer."""

    def __init__(self) -> None:
        self.script: list[Callable[[dict[str, Any]], Reply]] = []
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.release = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append((dict(self.headers), body))
                status, headers, payload = (api.script.pop(0) if api.script else ok)(body)
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def stall(self, body: dict[str, Any]) -> Reply:
        self.release.wait(10)  # until the test ends: the client's timeout fires first
        return ok(body)


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    server.thread.start()
    yield server
    server.release.set()
    server.server.shutdown()
    server.server.server_close()
    server.thread.join(5)


def make(api: FakeAPI, **kw: Any) -> OpenAIModel:
    kw.setdefault("backoff", 0.0)
    return OpenAIModel("test-chat", base_url=api.url, **kw)


async def test_request_shape_answer_and_usage(api: FakeAPI, events: list[MemoryEvent]) -> None:
    model = make(api, api_key="sk-test", max_tokens=50)
    assert isinstance(model, ModelPort)
    assert await model.complete_json(HI) == {"echo": "my pin is 1234"}
    await model.aclose()
    headers, body = api.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert body == {"model": "test-chat", "messages": HI, "temperature": 0.0, "stream": False, "max_tokens": 50,
                    "response_format": {"type": "json_object"}}
    (event,) = events
    assert event.name == "model.used" and event.usage == {"texts": 2, "tokens": 10}
    assert model.name == "openai:test-chat"


async def test_json_modes(api: FakeAPI) -> None:
    schema = {"type": "object", "properties": {"echo": {"type": "string"}}}
    await make(api, json_mode="schema").complete_json(HI, schema=schema)
    await make(api, json_mode="schema").complete_json(HI)  # no schema given: JSON object mode
    await make(api, json_mode="off").complete_json(HI, schema=schema)
    formats = [b.get("response_format") for _, b in api.requests]
    assert formats == [{"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
                       {"type": "json_object"}, None]
    assert "Authorization" not in api.requests[0][0]  # no key: local servers need none


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retries_transient_failures(api: FakeAPI, status: int) -> None:
    api.script = [lambda b: (status, {"Retry-After": "0"}, {"error": {"type": "busy", "message": "slow down"}})] * 2
    model = make(api, max_retries=2)
    assert await model.complete_json(HI) == {"echo": "my pin is 1234"}
    await model.aclose()
    assert len(api.requests) == 3


async def test_gives_up_after_max_retries(api: FakeAPI) -> None:
    api.script = [lambda b: (503, {}, {"error": {"code": "overloaded"}})] * 5
    model = make(api, max_retries=1)
    with pytest.raises(ModelError, match=r"after 2 attempts: HTTP 503 \(overloaded\)") as err:
        await model.complete_json(HI)
    await model.aclose()
    assert len(api.requests) == 2 and err.value.reason == "http"


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_client_errors_are_not_retried(api: FakeAPI, status: int) -> None:
    api.script = [lambda b: (status, {}, {"error": {"message": "bad: my pin is 1234",
                                                    "type": "invalid_request_error"}})]
    model = make(api, max_retries=3)
    with pytest.raises(ModelError) as err:
        await model.complete_json(HI)
    await model.aclose()
    assert len(api.requests) == 1
    assert str(status) in str(err.value) and "invalid_request_error" in str(err.value)
    assert "1234" not in str(err.value)  # the server's message may quote the prompt: never repeated


async def test_timeout(api: FakeAPI) -> None:
    # The stalled request is never answered before the test ends, so the timeout fires whatever the load.
    api.script = [api.stall]
    model = make(api, timeout=0.3, max_retries=0)
    with pytest.raises(ModelError, match="timed out") as err:
        await model.complete_json(HI)
    await model.aclose()
    assert err.value.reason == "timeout" and len(api.requests) == 1


async def test_timeout_then_success_is_retried(api: FakeAPI) -> None:
    api.script = [api.stall]
    model = make(api, timeout=3.0, max_retries=1)
    assert await model.complete_json(HI) == {"echo": "my pin is 1234"}
    await model.aclose()
    assert len(api.requests) == 2  # the stalled one, then the retry that was answered


async def test_connection_refused() -> None:
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff=0.0)
    with pytest.raises(ModelError, match="ConnectError") as err:
        await model.complete_json(HI)
    await model.aclose()
    assert err.value.reason == "connect"


BAD_ANSWERS: dict[str, tuple[Callable[[dict[str, Any]], Reply], str]] = {
    "body not json": (lambda b: (200, {}, b"<html>proxy error</html>"), "malformed"),
    "no choices": (lambda b: (200, {}, {"object": "chat.completion"}), "malformed"),
    "empty choices": (lambda b: (200, {}, {"choices": []}), "malformed"),
    "no message": (lambda b: (200, {}, {"choices": [{"index": 0}]}), "malformed"),
    "content not json": (lambda b: (200, {}, completion("Sure! Here are the facts: ...")), "malformed"),
    "content a list": (lambda b: (200, {}, completion("[1, 2, 3]")), "malformed"),
    "cut off": (lambda b: (200, {}, completion('{"facts": ["a"', finish="length")), "malformed"),
    "null content": (lambda b: (200, {}, completion(None)), "refused"),
    "empty content": (lambda b: (200, {}, completion("")), "refused"),
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_malformed_bodies(api: FakeAPI, case: str) -> None:
    reply, reason = BAD_ANSWERS[case]
    api.script = [reply]
    model = make(api, max_retries=2)
    with pytest.raises(ModelError) as err:
        await model.complete_json(HI)
    await model.aclose()
    assert err.value.reason == reason
    assert len(api.requests) == 1  # a bad answer is not retried: the same prompt gives the same answer


async def test_fenced_and_part_lists_are_read(api: FakeAPI) -> None:
    api.script = [lambda b: (200, {}, completion("```json\n{\"a\": 1}\n```")),
                  lambda b: (200, {}, completion([{"type": "text", "text": "{\"b\": "},
                                                  {"type": "text", "text": "2}"}]))]
    model = make(api)
    assert await model.complete_json(HI) == {"a": 1}
    assert await model.complete_json(HI) == {"b": 2}
    await model.aclose()


def test_configuration_errors() -> None:
    for kwargs in ({"timeout": 0}, {"timeout": -1}, {"max_retries": -1}, {"backoff": -1.0}, {"max_tokens": 0},
                   {"json_mode": "xml"}, {"base_url": "localhost:11434"}):
        with pytest.raises(InvalidInput):
            OpenAIModel("m", **kwargs)
    with pytest.raises(InvalidInput):
        OpenAIModel("")


async def test_bad_input_sends_nothing(api: FakeAPI) -> None:
    model = make(api)
    with pytest.raises(InvalidInput):
        await model.complete_json([{"role": "user"}])
    with pytest.raises(InvalidInput):
        await model.complete_json(HI, schema="object")  # type: ignore[arg-type]
    assert api.requests == []


async def test_one_client_per_event_loop(api: FakeAPI) -> None:
    import asyncio

    model = make(api)
    await model.complete_json(HI)
    # another loop in another thread: a client of its own, not this loop's
    assert await asyncio.to_thread(lambda: asyncio.run(model.complete_json(HI))) == {"echo": "my pin is 1234"}
    await model.aclose()


def test_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from memoryport import MissingExtra

    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingExtra, match=r'memoryport\[openai\]'):
        OpenAIModel("m")
