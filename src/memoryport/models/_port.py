"""The model port: messages in, one JSON object out; and its callable implementation."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, Union, runtime_checkable

from .._errors import InvalidInput, ModelError
from .._events import report_usage

__all__ = ["CallableModel", "JSONObject", "Message", "ModelPort", "check_messages", "parse_json_object"]

JSONObject = dict[str, Any]
"""What a model answers: one JSON object, parsed."""

Message = Mapping[str, Any]
"""An OpenAI-shaped chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""

_ROLES = frozenset({"system", "user", "assistant", "developer"})
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)
MAX_MESSAGES = 1_000
MAX_CHARS = 1_000_000


@runtime_checkable
class ModelPort(Protocol):
    """The smallest protocol for a language model: chat messages in, one JSON object out.

    Implementations: :class:`CallableModel` (any function) and
    :class:`~memoryport.models.openai.OpenAIModel` (any OpenAI-compatible
    ``/v1/chat/completions`` server: OpenAI, Ollama, llama.cpp, vLLM, LiteLLM).
    A failure (timeout, unreachable server, error status, an answer that is
    not a JSON object) raises :class:`~memoryport.ModelError` with a
    ``reason``; callers such as extraction count it and carry on.

    Example:
        >>> import asyncio
        >>> model = CallableModel(lambda messages: {"ok": True}, name="stub")
        >>> isinstance(model, ModelPort)
        True
        >>> asyncio.run(model.complete_json([{"role": "user", "content": "hi"}]))
        {'ok': True}
    """

    @property
    def name(self) -> str:
        """Identifies the model in logs and usage events."""
        ...

    async def complete_json(
        self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None
    ) -> JSONObject:
        """Answer ``messages`` with one JSON object (``schema``: a JSON Schema the answer should follow)."""
        ...


def check_messages(messages: object) -> list[dict[str, str]]:
    """``messages`` as a list of ``{"role", "content"}`` dicts, or :class:`~memoryport.InvalidInput`.

    Roles are ``system``, ``developer``, ``user`` and ``assistant``; contents are strings.

    Example:
        >>> check_messages([{"role": "user", "content": "hi"}])
        [{'role': 'user', 'content': 'hi'}]
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInput("messages must be a list of {'role', 'content'} mappings", field="messages")
    if not messages:
        raise InvalidInput("messages must not be empty", field="messages")
    if len(messages) > MAX_MESSAGES:
        raise InvalidInput(f"messages has {len(messages)} items; the limit is {MAX_MESSAGES}", field="messages")
    out: list[dict[str, str]] = []
    total = 0
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"messages[{i}] must be a mapping", field=f"messages[{i}]")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise InvalidInput(f"messages[{i}].role must be one of {', '.join(sorted(_ROLES))}",
                               field=f"messages[{i}].role")
        if not isinstance(content, str):
            raise InvalidInput(f"messages[{i}].content must be a string", field=f"messages[{i}].content")
        total += len(content)
        out.append({"role": str(role), "content": content})
    if total > MAX_CHARS:
        raise InvalidInput(f"messages hold {total:,} characters; the limit is {MAX_CHARS:,}", field="messages")
    return out


def parse_json_object(text: object, *, backend: str) -> JSONObject:
    """Parse a model's answer into one JSON object; a Markdown code fence around it is allowed.

    Raises:
        ModelError: (``reason="malformed"``) not JSON, or JSON that is not an object.

    Example:
        >>> parse_json_object('```json\\n{"a": 1}\\n```', backend="m")
        {'a': 1}
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelError(f"model {backend!r} answered with bytes that are not UTF-8", backend=backend,
                             reason="malformed") from exc
    if not isinstance(text, str):
        raise ModelError(f"model {backend!r} answered with a {type(text).__name__}, not text",
                         backend=backend, reason="malformed")
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ModelError(f"model {backend!r} answered with something that is not JSON", backend=backend,
                         reason="malformed") from exc
    if not isinstance(value, dict):
        raise ModelError(f"model {backend!r} answered with a JSON {type(value).__name__}, not an object",
                         backend=backend, reason="malformed")
    return value


ModelFn = Callable[..., Union[object, Awaitable[object]]]


class CallableModel:
    """A :class:`ModelPort` over any function from messages to a JSON object.

    The function takes the messages (a list of ``{"role", "content"}`` dicts)
    and, if it accepts it, a ``schema`` keyword; it may be sync or async and
    may return a dict, a pydantic model, or JSON text (a Markdown code fence
    around it is allowed). A sync function runs in a worker thread, so a
    caller's timeout can stop waiting for it. Anything it raises becomes
    :class:`~memoryport.ModelError` (``reason="error"``, or ``"timeout"`` for
    a :class:`TimeoutError`), logged by type only.

    This is the scripted model of tests and the way to plug in any SDK.

    Args:
        fn: ``fn(messages) -> dict | str | BaseModel`` (or ``fn(messages, schema=...)``).
        name: identifies the model in logs and usage events.

    Example:
        >>> import asyncio, json
        >>> def script(messages):
        ...     return json.dumps({"echo": messages[-1]["content"]})
        >>> model = CallableModel(script, name="echo")
        >>> asyncio.run(model.complete_json([{"role": "user", "content": "hello"}]))
        {'echo': 'hello'}
    """

    def __init__(self, fn: ModelFn, *, name: str = "callable") -> None:
        if not callable(fn):
            raise InvalidInput("fn must be callable", field="fn")
        if not isinstance(name, str) or not name:
            raise InvalidInput("name must be a non-empty string", field="name")
        self._fn = fn
        self._name = name
        try:
            params = inspect.signature(fn).parameters
            self._takes_schema = "schema" in params or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
            )
        except (TypeError, ValueError):
            self._takes_schema = False
        target = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
        self._async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)

    @property
    def name(self) -> str:
        """The name as given."""
        return self._name

    async def complete_json(
        self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None
    ) -> JSONObject:
        """Call the function and parse its answer.

        Raises:
            InvalidInput: ``messages`` are not chat messages.
            ModelError: the function raised, or its answer is not a JSON object.
        """
        batch = check_messages(messages)
        kwargs: dict[str, Any] = {"schema": schema} if self._takes_schema else {}
        start = time.perf_counter()
        try:
            if self._async:
                answer = await self._fn(batch, **kwargs)  # type: ignore[misc]
            else:
                answer = await asyncio.to_thread(self._fn, batch, **kwargs)
            if inspect.isawaitable(answer):
                answer = await answer
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise ModelError(f"model {self._name!r} timed out", backend=self._name, reason="timeout") from exc
        except Exception as exc:
            raise ModelError(f"model {self._name!r} failed: {type(exc).__name__}", backend=self._name,
                             reason="error") from exc
        if hasattr(answer, "model_dump") and callable(answer.model_dump):
            answer = answer.model_dump(mode="json")
        if isinstance(answer, dict):
            try:  # a JSON object means JSON values only, string keys included
                answer = json.dumps(answer, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ModelError(f"model {self._name!r} answered with a dict that is not JSON", backend=self._name,
                                 reason="malformed") from exc
        value = parse_json_object(answer, backend=self._name)
        report_usage(self._name, texts=len(batch), latency_ms=(time.perf_counter() - start) * 1000,
                     event="model.used")
        return value

    def __repr__(self) -> str:
        return f"CallableModel(name={self._name!r})"
