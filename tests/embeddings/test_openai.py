"""OpenAIEmbedder against a server on 127.0.0.1 that speaks the /v1/embeddings API."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from memoryport import EmbeddingError, InvalidInput, MemoryEvent
from memoryport.embedders.openai import OpenAIEmbedder

pytestmark = pytest.mark.anyio

DIM = 8

Reply = tuple[int, dict[str, str], Any]  # status, headers, body (JSON-able, or bytes sent as is)


def vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255 for b in digest[:DIM]]


def ok(body: dict[str, Any]) -> Reply:
    texts = body["input"]
    data = [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)]
    data.reverse()  # servers may answer out of order: the index decides
    tokens = sum(len(t.split()) for t in texts)
    return 200, {}, {"object": "list", "data": data, "model": body["model"],
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class FakeAPI:
    """A scripted OpenAI-compatible embeddings server; unscripted requests get a correct answer."""

    def __init__(self) -> None:
        self.script: list[Callable[[dict[str, Any]], Reply]] = []
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.release = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                if self.path != "/v1/embeddings":
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


def make(api: FakeAPI, **kw: Any) -> OpenAIEmbedder:
    kw.setdefault("dim", DIM)
    kw.setdefault("backoff", 0.0)
    return OpenAIEmbedder("test-embed", base_url=api.url, api_key="sk-test", **kw)


async def test_batches_order_and_usage(api: FakeAPI, events: list[MemoryEvent]) -> None:
    emb = make(api, batch_size=2)
    texts = ["green tea", "black coffee", "a b c", "x"]
    rows = await emb.embed(texts)
    await emb.aclose()
    assert rows.dtype == np.float32 and rows.shape == (4, DIM)
    np.testing.assert_allclose(rows, np.array([vector(t) for t in texts], np.float32))
    assert [b["input"] for _, b in api.requests] == [texts[:2], texts[2:]]
    headers, body = api.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "test-embed" and body["encoding_format"] == "float" and "dimensions" not in body
    (event,) = events
    assert event.name == "embedding.used" and event.usage == {"texts": 4, "tokens": 8}
    assert emb.name == f"openai:test-embed:{DIM}"


async def test_dimensions_are_sent(api: FakeAPI) -> None:
    emb = OpenAIEmbedder("text-embedding-3-small", base_url=api.url, dimensions=DIM)
    assert emb.dim == DIM and emb.name == f"openai:text-embedding-3-small:{DIM}"
    await emb.embed(["x"])
    await emb.aclose()
    assert api.requests[0][1]["dimensions"] == DIM
    assert "Authorization" not in api.requests[0][0]


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retries_transient_failures(api: FakeAPI, status: int) -> None:
    api.script = [lambda b: (status, {"Retry-After": "0"}, {"error": {"type": "busy", "message": "slow down"}})] * 2
    emb = make(api, max_retries=2)
    rows = await emb.embed(["tea"])
    await emb.aclose()
    assert len(api.requests) == 3
    np.testing.assert_allclose(rows[0], vector("tea"), rtol=1e-6)


async def test_gives_up_after_max_retries(api: FakeAPI) -> None:
    api.script = [lambda b: (503, {}, {"error": {"code": "overloaded"}})] * 5
    emb = make(api, max_retries=1)
    with pytest.raises(EmbeddingError, match=r"after 2 attempts: HTTP 503 \(overloaded\)"):
        await emb.embed(["tea"])
    await emb.aclose()
    assert len(api.requests) == 2


async def test_client_errors_are_not_retried(api: FakeAPI) -> None:
    api.script = [lambda b: (400, {}, {"error": {"message": "bad input: tea", "type": "invalid_request_error"}})]
    emb = make(api, max_retries=3)
    with pytest.raises(EmbeddingError) as err:
        await emb.embed(["tea"])
    await emb.aclose()
    assert len(api.requests) == 1
    assert "400" in str(err.value) and "invalid_request_error" in str(err.value)
    assert "tea" not in str(err.value)  # the server's message may quote the input: never repeated


# The stalled request never gets an answer until the test ends, so its timeout fires
# whatever the machine's load; the timeout is long enough that an answered request
# never hits it, even on a busy machine.
TIMEOUT = 3.0


async def test_timeout(api: FakeAPI) -> None:
    api.script = [api.stall]
    emb = make(api, timeout=TIMEOUT, max_retries=0)
    with pytest.raises(EmbeddingError, match="Timeout"):
        await emb.embed(["tea"])
    await emb.aclose()
    assert len(api.requests) == 1


async def test_timeout_then_success_is_retried(api: FakeAPI) -> None:
    api.script = [api.stall]
    emb = make(api, timeout=TIMEOUT, max_retries=1)
    rows = await emb.embed(["tea"])
    await emb.aclose()
    assert rows.shape == (1, DIM)
    assert len(api.requests) == 2  # the stalled one, then the retry that was answered
    assert np.allclose(rows[0], vector("tea"))


async def test_connection_refused() -> None:
    emb = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", dim=DIM, max_retries=1, backoff=0.0)
    with pytest.raises(EmbeddingError, match="ConnectError"):
        await emb.embed(["tea"])
    await emb.aclose()


BAD_ANSWERS: dict[str, Callable[[dict[str, Any]], Reply]] = {
    "too few vectors": lambda b: (200, {}, {"data": [{"index": 0, "embedding": [0.0] * DIM}] * 0}),
    "wrong dimension": lambda b: (200, {}, {"data": [{"index": 0, "embedding": [0.0] * (DIM + 1)}]}),
    "not numbers": lambda b: (200, {}, {"data": [{"index": 0, "embedding": ["a"] * DIM}]}),
    "no data": lambda b: (200, {}, {"object": "list"}),
    "not json": lambda b: (200, {}, b"<html>proxy error</html>"),
    "base64": lambda b: (200, {}, {"data": [{"index": 0, "embedding": "AAAA"}]}),
    "bad index": lambda b: (200, {}, {"data": [{"index": 5, "embedding": [0.0] * DIM}]}),
    "NaN": lambda b: (200, {}, b'{"data": [{"index": 0, "embedding": [NaN, 0, 0, 0, 0, 0, 0, 0]}]}'),
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_bad_shapes_are_embedding_errors(api: FakeAPI, case: str) -> None:
    api.script = [BAD_ANSWERS[case]]
    emb = make(api, max_retries=0)
    with pytest.raises(EmbeddingError):
        await emb.embed(["tea"])
    await emb.aclose()


def test_configuration_errors() -> None:
    with pytest.raises(InvalidInput, match="dim is required"):
        OpenAIEmbedder("some-local-model")
    assert OpenAIEmbedder("text-embedding-3-large").dim == 3072
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("m", dim=0)
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("m", dim=4, batch_size=0)
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("m", dim=4, dimensions=8)


async def test_empty_input_sends_nothing(api: FakeAPI) -> None:
    emb = make(api)
    assert (await emb.embed([])).shape == (0, DIM)
    assert api.requests == []


def test_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from memoryport import MissingExtra

    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingExtra, match=r'memoryport\[openai\]'):
        OpenAIEmbedder("m", dim=4)
