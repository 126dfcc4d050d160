"""``OpenAIModel``: any OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI, Ollama, llama.cpp, vLLM)."""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._checks import check_int
from .._errors import InvalidInput, ModelError
from .._events import report_usage
from .._extras import require
from .._http import error_code
from .._http import retry_after as retry_after_of
from ._port import JSONObject, Message, check_messages, parse_json_object

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIModel"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class OpenAIModel:
    """A :class:`~memoryport.models.ModelPort` over an OpenAI-compatible chat API, with httpx and no SDK.

    ``POST {base_url}/chat/completions`` with the messages, ``temperature``
    and JSON mode: ``response_format`` is ``{"type": "json_object"}`` by
    default, ``{"type": "json_schema", ...}`` with ``json_mode="schema"`` when
    the caller passes a schema, or absent with ``json_mode="off"`` (for
    servers that refuse the field). The answer's ``choices[0].message.content``
    is parsed as one JSON object (a Markdown code fence around it is allowed).

    A request that times out, cannot connect, or gets 408, 409, 429 or 5xx is
    retried up to ``max_retries`` times with exponential backoff and jitter
    (honouring ``Retry-After``); any other 4xx fails at once. Failures raise
    :class:`~memoryport.ModelError` whose message names the status and the
    server's error code, never the prompt or the answer. The API key is never
    read from the environment: the host passes it (local servers need none).

    Args:
        model: the model name sent to the server (``"llama3.2"``, ``"gpt-4o-mini"``).
        base_url: the API root, up to and including ``/v1``
            (Ollama: ``http://localhost:11434/v1``; llama.cpp: ``http://localhost:8080/v1``).
        api_key: sent as ``Authorization: Bearer ...`` when given.
        timeout: seconds per request (default 3).
        max_retries: retries per call after the first attempt.
        backoff: the first retry's delay in seconds; it doubles each time (capped at 5 s).
        temperature: sampling temperature (0: as deterministic as the server allows).
        max_tokens: the answer's token budget, when given.
        json_mode: ``"object"``, ``"schema"`` or ``"off"`` (see above).
        name: the name in logs and usage events (default ``openai:<model>``).
        headers: extra HTTP headers.

    Raises:
        MissingExtra: httpx is not installed (``pip install "memoryport[openai]"``).
        ModelError: (from ``complete_json``) the server failed after retries, or
            its answer was not one JSON object.

    Example:
        >>> local = OpenAIModel("llama3.2", base_url="http://localhost:11434/v1")
        >>> local.name
        'openai:llama3.2'
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        timeout: float = 3.0,
        max_retries: int = 2,
        backoff: float = 0.25,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: Literal["object", "schema", "off"] = "object",
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._httpx = require("httpx", extra="openai", feature="OpenAIModel")
        if not isinstance(model, str) or not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidInput("base_url must be an http:// or https:// URL", field="base_url")
        check_int(max_retries, "max_retries", minimum=0)
        if max_tokens is not None:
            check_int(max_tokens, "max_tokens")
        for field, value in (("timeout", timeout), ("backoff", backoff), ("temperature", temperature)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
                raise InvalidInput(f"{field} must be a non-negative number", field=field)
        if not timeout > 0:
            raise InvalidInput("timeout must be positive", field="timeout")
        if json_mode not in ("object", "schema", "off"):
            raise InvalidInput("json_mode must be 'object', 'schema' or 'off'", field="json_mode")
        self._model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._timeout = float(timeout)
        self._max_retries = max_retries
        self._backoff = float(backoff)
        self._temperature = float(temperature)
        self._max_tokens = max_tokens
        self._json_mode = json_mode
        self._name = name or f"openai:{model}"
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # One client per event loop: an httpx.AsyncClient must not cross loops.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def name(self) -> str:
        """``openai:<model>`` unless given."""
        return self._name

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None or client.is_closed:
            client = self._httpx.AsyncClient(timeout=self._timeout, headers=self._headers)
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections of the running event loop."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def _body(self, messages: list[dict[str, str]], schema: Mapping[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "messages": messages, "temperature": self._temperature,
                                "stream": False}
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        if self._json_mode == "schema" and schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": dict(schema)}}
        elif self._json_mode != "off":
            body["response_format"] = {"type": "json_object"}
        return body

    async def complete_json(
        self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None
    ) -> JSONObject:
        """Send ``messages``; the answer's content parsed as one JSON object.

        Raises:
            InvalidInput: ``messages`` are not chat messages.
            ModelError: the server failed after retries (``reason`` ``"timeout"``,
                ``"connect"`` or ``"http"``), or answered with no content
                (``"refused"``) or not one JSON object (``"malformed"``).
        """
        if schema is not None and not isinstance(schema, Mapping):
            raise InvalidInput("schema must be a JSON Schema mapping", field="schema")
        body = self._body(check_messages(messages), schema)
        httpx = self._httpx
        client = self._client()
        start = time.perf_counter()
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await client.post(self._url, json=body)
            except httpx.TimeoutException as exc:
                failure: BaseException = exc
                reason, detail = "timeout", f"timed out after {self._timeout:g} s"
            except httpx.TransportError as exc:
                failure = exc
                reason, detail = "connect", type(exc).__name__
            else:
                if response.status_code == 200:
                    value, tokens = self._parse(response)
                    report_usage(self._name, texts=len(body["messages"]), tokens=tokens,
                                 latency_ms=(time.perf_counter() - start) * 1000, event="model.used")
                    return value
                reason, detail = "http", f"HTTP {response.status_code}{error_code(response)}"
                failure = ModelError(f"model {self._name!r} failed: {detail}", backend=self._name, reason=reason)
                if response.status_code not in _RETRY_STATUS:
                    raise failure
                retry_after = retry_after_of(response)
            if attempt >= self._max_retries:
                raise ModelError(f"model {self._name!r} failed after {attempt + 1} attempts: {detail}",
                                 backend=self._name, reason=reason) from failure
            delay = min(self._backoff * (2**attempt), 5.0) * (0.5 + random.random() / 2)
            if retry_after is not None:
                delay = max(delay, min(retry_after, 30.0))
            attempt += 1
            await asyncio.sleep(delay)

    def _parse(self, response: httpx.Response) -> tuple[JSONObject, int | None]:
        def bad(what: str, reason: str = "malformed") -> ModelError:
            return ModelError(f"model {self._name!r}: the server answered {what}", backend=self._name,
                              reason=reason)

        try:
            payload = response.json()
        except ValueError as exc:
            raise bad("with a body that is not JSON") from exc
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad("without choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise bad("without a message")
        content = message.get("content")
        if isinstance(content, list):  # content parts, as some servers send them
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if content is None or content == "":
            raise bad("with no content (a refusal or an empty answer)", "refused")
        if choice.get("finish_reason") == "length":
            raise bad("with an answer cut off at the token limit")
        value = parse_json_object(content, backend=self._name)
        usage = payload.get("usage")
        tokens = None
        if isinstance(usage, dict):
            total = usage.get("total_tokens")
            if isinstance(total, int) and not isinstance(total, bool):
                tokens = total
        return value, tokens

    def __repr__(self) -> str:
        return f"OpenAIModel(name={self._name!r}, url={self._url!r})"
