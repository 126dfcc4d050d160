"""``OpenAIEmbedder``: any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM, ...)."""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._checks import check_int
from .._embedding import check_matrix
from .._errors import EmbeddingError, InvalidInput
from .._events import report_usage
from .._extras import require
from .._http import error_code
from .._http import retry_after as retry_after_of

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = ["OpenAIEmbedder"]

_KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible HTTP API (``POST {base_url}/embeddings``).

    Works with OpenAI and with servers that speak the same API: Ollama
    (``http://localhost:11434/v1``), vLLM, text-embeddings-inference, LiteLLM.
    Texts go in batches of ``batch_size``; a request that fails with 408, 409,
    429 or 5xx, times out or cannot connect is retried up to ``max_retries``
    times with exponential backoff and jitter (honouring ``Retry-After``).
    The token counts of the responses are reported to the event sink of the
    operation in progress. The API key is never read from the environment:
    the host passes it.

    Args:
        model: the model name sent to the server.
        base_url: the API root, up to and including ``/v1``.
        api_key: sent as ``Authorization: Bearer ...`` when given.
        dim: the vector length; known for OpenAI's models, else required.
        dimensions: ask the server for shortened vectors (``text-embedding-3-*``).
        batch_size: texts per request.
        timeout: seconds per request.
        max_retries: retries per request after the first attempt.
        backoff: the first retry's delay in seconds; it doubles each time (capped at 20 s).
        name: overrides the name recorded by stores (default ``openai:<model>:<dim>``).
        headers: extra HTTP headers.

    Raises:
        MissingExtra: httpx is not installed (``pip install "memoryport[openai]"``).
        EmbeddingError: (from ``embed``) the server failed after retries or
            answered with vectors of the wrong number or shape.

    Example:
        >>> import os
        >>> emb = OpenAIEmbedder("text-embedding-3-small", api_key=os.environ["OPENAI_API_KEY"])  # doctest: +SKIP
        >>> local = OpenAIEmbedder("nomic-embed-text", base_url="http://localhost:11434/v1", dim=768)
        >>> local.name
        'openai:nomic-embed-text:768'
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        dim: int | None = None,
        dimensions: int | None = None,
        batch_size: int = 128,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._httpx = require("httpx", extra="openai", feature="OpenAIEmbedder")
        if not isinstance(model, str) or not model:
            raise InvalidInput("model must be a non-empty string", field="model")
        for field, value in (("dim", dim), ("dimensions", dimensions)):
            if value is not None:
                check_int(value, field)
        check_int(batch_size, "batch_size")
        check_int(max_retries, "max_retries", minimum=0)
        if not timeout > 0:
            raise InvalidInput("timeout must be positive", field="timeout")
        if backoff < 0:
            raise InvalidInput("backoff must not be negative", field="backoff")
        resolved = dimensions or dim or _KNOWN_DIMS.get(model)
        if resolved is None:
            raise InvalidInput(f"dim is required for model {model!r} (its vector length is not known)", field="dim")
        if dim is not None and dimensions is not None and dim != dimensions:
            raise InvalidInput("dim and dimensions disagree", field="dim")
        self._model = model
        self._url = base_url.rstrip("/") + "/embeddings"
        self._dim = resolved
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff = backoff
        self._name = name or f"openai:{model}:{resolved}"
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # One client per event loop: an httpx.AsyncClient must not cross loops.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def name(self) -> str:
        """``openai:<model>:<dim>`` unless given."""
        return self._name

    @property
    def dim(self) -> int:
        """The vector length."""
        return self._dim

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

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in batches; one float32 row per text, in order.

        Raises:
            InvalidInput: ``texts`` is not a sequence of strings.
            EmbeddingError: the server failed after retries, or answered badly.
        """
        import numpy as np

        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidInput("texts must be a sequence of strings, not a single string", field="texts")
        batch = list(texts)
        for i, text in enumerate(batch):
            if not isinstance(text, str):
                raise InvalidInput(f"texts[{i}] is not a string", field=f"texts[{i}]")
        if not batch:
            return np.zeros((0, self._dim), np.float32)
        start = time.perf_counter()
        parts: list[Matrix] = []
        tokens: int | None = 0
        for first in range(0, len(batch), self._batch_size):
            chunk = batch[first : first + self._batch_size]
            rows, used = await self._request(chunk)
            parts.append(rows)
            tokens = None if tokens is None or used is None else tokens + used
        matrix = np.concatenate(parts) if len(parts) > 1 else parts[0]
        report_usage(self._name, texts=len(batch), tokens=tokens, latency_ms=(time.perf_counter() - start) * 1000)
        return matrix

    async def _request(self, chunk: list[str]) -> tuple[Matrix, int | None]:
        httpx = self._httpx
        body: dict[str, Any] = {"model": self._model, "input": chunk, "encoding_format": "float"}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        client = self._client()
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await client.post(self._url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                failure: BaseException = exc
                reason = f"{type(exc).__name__}"
            else:
                if response.status_code == 200:
                    return self._parse(response, len(chunk))
                reason = f"HTTP {response.status_code}{error_code(response)}"
                failure = EmbeddingError(
                    f"embedder {self._name!r} failed: {reason}", backend=self._name, operation="embed"
                )
                if response.status_code not in _RETRY_STATUS:
                    raise failure
                retry_after = retry_after_of(response)
            if attempt >= self._max_retries:
                raise EmbeddingError(
                    f"embedder {self._name!r} failed after {attempt + 1} attempts: {reason}",
                    backend=self._name,
                    operation="embed",
                ) from failure
            delay = min(self._backoff * (2**attempt), 20.0) * (0.5 + random.random() / 2)
            if retry_after is not None:
                delay = max(delay, min(retry_after, 60.0))
            attempt += 1
            await asyncio.sleep(delay)

    def _parse(self, response: httpx.Response, n: int) -> tuple[Matrix, int | None]:
        def bad(what: str) -> EmbeddingError:
            return EmbeddingError(f"embedder {self._name!r}: the server answered {what}",
                                  backend=self._name, operation="embed")

        try:
            payload = response.json()
        except ValueError as exc:
            raise bad("with something that is not JSON") from exc
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise bad("without a 'data' list")
        if len(data) != n:
            raise bad(f"{len(data)} vectors for {n} texts")
        try:
            ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
            rows = [item["embedding"] for item in ordered]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise bad("with malformed items") from exc
        if sorted(int(item.get("index", i)) for i, item in enumerate(ordered)) != list(range(n)):
            raise bad("with indexes that do not match the texts")
        if any(isinstance(r, str) for r in rows):
            raise bad("base64 vectors although floats were asked for")
        matrix = check_matrix(rows, n, self._dim, self._name)
        usage = payload.get("usage")
        tokens = None
        if isinstance(usage, dict):
            value = usage.get("prompt_tokens", usage.get("total_tokens"))
            if isinstance(value, int) and not isinstance(value, bool):
                tokens = value
        return matrix, tokens

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self._name!r}, url={self._url!r})"
