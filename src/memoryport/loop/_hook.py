"""The auto-recall hook: one call before each model turn (messages in, context out), one optional call after it.

Messages are what the host sends its model: OpenAI-shaped dicts
(``{"role": "user", "content": "..."}``, content may be a list of parts) or
Anthropic-shaped ones (content a list of ``text``/``tool_use``/``tool_result``
blocks); SDK message objects with ``role``/``content`` attributes work too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .._errors import UsageError
from .._events import EventSink
from .._records import MemoryScope
from .._sync import run_sync
from ..curated import AgentMemory
from ..tools._context import ScopeFrom, ToolContext, scope_from_context
from ._context import ContextBlock, PromptContext
from ._conversation import ConversationLog, NewTurn, Turn

__all__ = ["AfterTurn", "AutoRecall", "Extractor", "TurnContext", "message_role", "message_text"]

logger = logging.getLogger("memoryport")

_TEXT_TYPES = ("text", "input_text", "output_text")
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system", "tool": "tool",
          "function": "tool"}


@runtime_checkable
class Extractor(Protocol):
    """What :meth:`AutoRecall.after_turn` calls with a turn's new messages (e.g. an LLM memory extractor).

    ``messages`` are ``{"role": "user" | "assistant", "content": str}`` dicts, in order.
    The result is the extractor's own report; :class:`AfterTurn` carries it back.

    Example:
        >>> class Keywords:
        ...     async def extract(self, messages, *, scope):
        ...         return [m["content"] for m in messages if "remember" in m["content"]]
        >>> isinstance(Keywords(), Extractor)
        True
    """

    async def extract(self, messages: Sequence[Mapping[str, Any]], *, scope: MemoryScope) -> object:
        """Learn from one turn's messages (write memories through curated memory)."""
        ...


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def message_role(message: Any) -> str | None:
    """A message's role as the log knows it (``developer`` → ``system``, ``function`` → ``tool``), or ``None``.

    Example:
        >>> message_role({"role": "developer", "content": "Be brief."})
        'system'
    """
    role = _get(message, "role")
    return _ROLES.get(role) if isinstance(role, str) else None


def message_text(message: Any, *, tool_results: bool = False) -> str:
    """The words of a message: its string content, or its text parts/blocks joined by blank lines.

    Images, tool calls and (unless ``tool_results``) tool results carry no words.

    Example:
        >>> message_text({"role": "user", "content": [{"type": "text", "text": "Hi"},
        ...                                          {"type": "image_url", "image_url": {"url": "..."}}]})
        'Hi'
    """
    content = _get(message, "content")
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence) or isinstance(content, (bytes, bytearray)):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        kind = _get(block, "type")
        if kind in _TEXT_TYPES and isinstance(_get(block, "text"), str):
            parts.append(_get(block, "text"))
        elif kind == "tool_result" and tool_results:
            parts.append(message_text(block, tool_results=True))
    return "\n\n".join(p for p in parts if p)


def _as_dict(message: Any) -> dict[str, Any]:
    if isinstance(message, Mapping):
        return dict(message)
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_none=True)
        if isinstance(dumped, dict):
            return dumped
    raise UsageError(f"a message must be a mapping with 'role' and 'content', not {type(message).__name__}")


def _with_block(content: Any, block: str) -> Any:
    """``content`` with ``block`` in front of its words (string or parts; after any tool results)."""
    if isinstance(content, str) or content is None:
        return block if not content else f"{block}\n\n{content}"
    parts = [dict(p) if isinstance(p, Mapping) else _as_dict(p) for p in content]
    at = next((i for i, p in enumerate(parts) if p.get("type") in _TEXT_TYPES), len(parts))
    parts.insert(at, {"type": "text", "text": block})
    return parts


@dataclass(frozen=True)
class TurnContext:
    """What :meth:`AutoRecall.before_turn` found: the stable prefix and this turn's block, and how to place them.

    Put :attr:`prefix` at the end of the system prompt (it is byte-identical
    while memory is unchanged, so the model server reuses its cache) and
    :attr:`turn` in front of the user's message; :meth:`openai` and
    :meth:`anthropic` do both on a copy of the messages.

    Attributes:
        prefix: the stable block (``ContextBlock.text`` is ``""`` when memory is empty).
        turn: the per-turn block (time, reminders, relevant memories).
        query: the user's message the recall searched for (``""`` when there is none).
        scope: whose memory it is.

    Example:
        >>> ctx = await hook.before_turn(messages, scope=chat)                       # doctest: +SKIP
        >>> client.chat.completions.create(model=m, messages=ctx.openai(messages))   # doctest: +SKIP
    """

    prefix: ContextBlock
    turn: ContextBlock
    query: str
    scope: MemoryScope

    def system(self, base: str = "") -> str:
        """``base`` (your system prompt) followed by the stable prefix.

        Example:
            >>> ctx.system("You are a helpful assistant.")   # doctest: +SKIP
        """
        if not isinstance(base, str):
            raise UsageError("system() takes the base system prompt as a string")
        if not self.prefix.text:
            return base
        return f"{base}\n\n{self.prefix.text}" if base else self.prefix.text

    def _place(self, messages: Sequence[Any], *, anthropic: bool) -> list[Any]:
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise UsageError("messages must be a list of messages")
        out: list[Any] = list(messages)
        if not anthropic and self.prefix.text:
            for i, message in enumerate(out):
                if message_role(message) == "system":
                    copy = _as_dict(message)
                    content = copy.get("content")
                    if isinstance(content, str):
                        copy["content"] = self.system(content)
                    else:
                        parts = [dict(p) if isinstance(p, Mapping) else _as_dict(p) for p in (content or [])]
                        copy["content"] = [*parts, {"type": "text", "text": self.prefix.text}]
                    out[i] = copy
                    break
            else:
                out.insert(0, {"role": "system", "content": self.prefix.text})
        if self.turn.text:
            for i in range(len(out) - 1, -1, -1):
                if message_role(out[i]) == "user" and message_text(out[i]).strip():
                    copy = _as_dict(out[i])
                    copy["content"] = _with_block(copy.get("content"), self.turn.text)
                    out[i] = copy
                    break
        return out

    def openai(self, messages: Sequence[Any]) -> list[Any]:
        """A copy of OpenAI-shaped ``messages``: prefix in the system message (one is added if none), block in the
        last user message. The input list is not changed.

        Example:
            >>> ctx.openai([{"role": "user", "content": "Hi"}])[0]["role"]   # doctest: +SKIP
            'system'
        """
        return self._place(messages, anthropic=False)

    def anthropic(self, messages: Sequence[Any]) -> list[Any]:
        """A copy of Anthropic-shaped ``messages`` with the block in the last user message (text blocks after any
        ``tool_result`` blocks). Pass :meth:`anthropic_system` as ``system=``.

        Example:
            >>> client.messages.create(system=ctx.anthropic_system(base), messages=ctx.anthropic(messages),
            ...                        model=m, max_tokens=1024)                   # doctest: +SKIP
        """
        return self._place(messages, anthropic=True)

    def anthropic_system(self, base: str | Sequence[Mapping[str, Any]] = "") -> str | list[dict[str, Any]]:
        """Anthropic's ``system=``: a string, or your list of system blocks with the prefix as one more block.

        Example:
            >>> ctx.anthropic_system([{"type": "text", "text": "Be brief."}])[-1]["type"]   # doctest: +SKIP
            'text'
        """
        if isinstance(base, str):
            return self.system(base)
        blocks = [dict(b) for b in base]
        if self.prefix.text:
            blocks.append({"type": "text", "text": self.prefix.text})
        return blocks


@dataclass(frozen=True)
class AfterTurn:
    """What :meth:`AutoRecall.after_turn` did.

    Attributes:
        turns: the turns logged now (already logged ones are skipped).
        extraction: ``"done"``, ``"skipped"`` (no extractor, or nothing new from
            the user or assistant) or ``"failed"``.
        extracted: the extractor's result, when done.
        error: the error's type name when the extraction failed (never its message).

    Example:
        >>> (await hook.after_turn(messages, scope=chat)).extraction   # doctest: +SKIP
        'skipped'
    """

    turns: tuple[Turn, ...] = ()
    extraction: Literal["done", "skipped", "failed"] = "skipped"
    extracted: object = None
    error: str | None = None
    messages: tuple[dict[str, str], ...] = field(default=(), repr=False)


class AutoRecall:
    """The hook a host calls around each model turn: context before, log (and learning) after.

    * :meth:`before_turn` takes the messages the host is about to send and
      returns a :class:`TurnContext`: the stable prefix (for the system prompt)
      and this turn's block (for the user's message), built by
      :class:`PromptContext` for the last user message.
    * :meth:`after_turn` logs the turns not logged yet in the
      :class:`ConversationLog` and, when given an :class:`Extractor`, hands it
      the new messages. An extractor that fails never loses the turn: the
      failure is logged by type only, counted (:attr:`extraction_failures`)
      and reported.

    The scope comes from the host: ``scope=`` or a
    :class:`~memoryport.ToolContext` (``context=``, through ``scope_from``) —
    the same context the host gives its memory tools, for OpenAI, Anthropic
    and MCP hosts alike.

    Args:
        memory: the curated memory.
        context: the :class:`PromptContext` (default: one with GAIA's defaults).
        log: the :class:`ConversationLog` (default: one over ``memory``).
        scope_from: how a ``ToolContext`` becomes a scope.
        log_system: log system messages too (off: they are the host's, not the conversation).
        log_tools: log tool results too (off: they may hold personal data the user never said).
        extract_timeout: seconds an extractor may take (``None``: its own timeouts).

    Example:
        >>> import asyncio, os, tempfile
        >>> from memoryport import MemoryScope, SQLiteMemory
        >>> from memoryport.curated import AgentMemory
        >>> from memoryport.loop import AutoRecall
        >>> memory = AgentMemory(SQLiteMemory(os.path.join(tempfile.mkdtemp(), "m.db")))
        >>> chat = MemoryScope(user_id="ann", session_id="chat-1")
        >>> _ = memory.remember_sync("Ann is vegetarian", scope=chat, kind="fact")
        >>> hook = AutoRecall(memory)
        >>> messages = [{"role": "user", "content": "Suggest a dinner recipe"}]
        >>> ctx = hook.before_turn_sync(messages, scope=chat)
        >>> sent = ctx.openai(messages)
        >>> [m["role"] for m in sent], '"Ann is vegetarian"' in sent[0]["content"]
        (['system', 'user'], True)
        >>> messages.append({"role": "assistant", "content": "Try a mushroom risotto."})
        >>> [t.role for t in hook.after_turn_sync(messages, scope=chat).turns]
        ['user', 'assistant']
        >>> hook.after_turn_sync(messages, scope=chat).turns   # already logged
        ()
        >>> memory.close()
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        context: PromptContext | None = None,
        log: ConversationLog | None = None,
        scope_from: ScopeFrom = scope_from_context,
        log_system: bool = False,
        log_tools: bool = False,
        extract_timeout: float | None = None,
    ) -> None:
        if not isinstance(memory, AgentMemory):
            raise UsageError(f"AutoRecall() takes an AgentMemory, not {type(memory).__name__}")
        if context is None:
            context = PromptContext(memory)
        if not isinstance(context, PromptContext):
            raise UsageError(f"context must be a PromptContext, not {type(context).__name__}")
        if log is None:
            log = ConversationLog(memory)
        if not isinstance(log, ConversationLog):
            raise UsageError(f"log must be a ConversationLog, not {type(log).__name__}")
        if context.memory.memory is not memory.memory or log.memory is not memory.memory:
            raise UsageError("context and log must work on the same memory as the hook")
        if not callable(scope_from):
            raise UsageError("scope_from must be a function (ToolContext) -> MemoryScope")
        if not isinstance(log_system, bool) or not isinstance(log_tools, bool):
            raise UsageError("log_system and log_tools must be True or False")
        if extract_timeout is not None and (
            isinstance(extract_timeout, bool) or not isinstance(extract_timeout, (int, float)) or extract_timeout <= 0
        ):
            raise UsageError("extract_timeout must be a positive number of seconds, or None")
        self.memory = memory
        self.context = context
        self.log = log
        self.scope_from = scope_from
        self.log_system = log_system
        self.log_tools = log_tools
        self.extract_timeout = extract_timeout
        self.extraction_failures = 0

    def __repr__(self) -> str:
        return f"AutoRecall(backend={self.memory.memory.backend!r})"

    def _scope(self, scope: MemoryScope | None, context: ToolContext | None) -> MemoryScope:
        if (scope is None) == (context is None):
            raise UsageError("pass exactly one of scope=MemoryScope(...) or context=ToolContext(...)")
        if context is not None:
            if not isinstance(context, ToolContext):
                raise UsageError(f"context must be a ToolContext, not {type(context).__name__}")
            scope = self.scope_from(context)
        if not isinstance(scope, MemoryScope):
            raise UsageError(f"scope must be a MemoryScope, not {type(scope).__name__}")
        return scope

    @staticmethod
    def _messages(messages: object) -> Sequence[Any]:
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise UsageError("messages must be a list of messages ({'role': ..., 'content': ...})")
        for i, message in enumerate(messages):
            if not isinstance(message, Mapping) and not hasattr(message, "role"):
                raise UsageError(f"messages[{i}] is a {type(message).__name__}, not a message with a role")
        return messages

    async def before_turn(
        self,
        messages: Sequence[Any],
        *,
        scope: MemoryScope | None = None,
        context: ToolContext | None = None,
        ctx: EventSink | None = None,
    ) -> TurnContext:
        """The memory context for the next model call, for the last user message in ``messages``.

        Example:
            >>> who = ToolContext(user_id="ann", session_id="c1")            # doctest: +SKIP
            >>> turn = await hook.before_turn(messages, context=who)         # doctest: +SKIP
        """
        messages = self._messages(messages)
        who = self._scope(scope, context)
        query = ""
        for message in reversed(messages):
            if message_role(message) == "user":
                query = message_text(message).strip()
                if query:
                    break
        prefix, turn = await self.context.build(query, scope=who, ctx=ctx)
        return TurnContext(prefix=prefix, turn=turn, query=query, scope=who)

    def _loggable(self, messages: Sequence[Any]) -> list[NewTurn]:
        out: list[NewTurn] = []
        for message in messages:
            role = message_role(message)
            if role is None or (role == "system" and not self.log_system):
                continue
            if role == "tool" and not self.log_tools:
                continue
            text = message_text(message, tool_results=False)
            if role == "user" and not text.strip() and self.log_tools:
                # An Anthropic user message holding only tool results.
                text, role = message_text(message, tool_results=True), "tool"
            if not text.strip():
                continue
            name = _get(message, "name")
            out.append(NewTurn(role, text, name=name if isinstance(name, str) and name.strip() else None))
        return out

    async def after_turn(
        self,
        messages: Sequence[Any],
        *,
        scope: MemoryScope | None = None,
        context: ToolContext | None = None,
        extractor: Extractor | None = None,
        transcript: bool = True,
        ctx: EventSink | None = None,
    ) -> AfterTurn:
        """Log the turn (the messages not logged yet) and, with an ``extractor``, learn from it.

        With ``transcript=True`` (the default) ``messages`` is the whole
        conversation as the host sends it each time: the session's turns already
        logged are skipped by position (system messages and messages without
        words do not count). With ``transcript=False`` every message given is new.
        The scope must name a session. Turns are logged before the extractor
        runs, so a failing extractor never loses them.

        Example:
            >>> done = await hook.after_turn(messages, scope=chat, extractor=my_extractor)   # doctest: +SKIP
            >>> done.extraction                                                              # doctest: +SKIP
            'done'
        """
        messages = self._messages(messages)
        who = self._scope(scope, context)
        if extractor is not None and not isinstance(extractor, Extractor):
            raise UsageError(
                "extractor must have `async def extract(self, messages, *, scope)` (see memoryport.loop.Extractor)"
            )
        if not isinstance(transcript, bool):
            raise UsageError("transcript must be True or False")
        loggable = self._loggable(messages)
        if transcript:
            done = await self.log.next_index(scope=who, ctx=ctx)
            loggable = loggable[done:]
        turns = await self.log.store_turns(loggable, scope=who, ctx=ctx) if loggable else []
        new = tuple({"role": t.role, "content": t.text} for t in turns if t.role in ("user", "assistant"))
        if extractor is None or not new:
            return AfterTurn(turns=tuple(turns), messages=new)
        try:
            call = extractor.extract(list(new), scope=who)
            result = await (asyncio.wait_for(call, self.extract_timeout) if self.extract_timeout else call)
        except Exception as exc:
            self.extraction_failures += 1
            logger.warning("memory extraction failed after a turn (%s); the turn is logged", type(exc).__name__)
            return AfterTurn(turns=tuple(turns), extraction="failed", error=type(exc).__name__, messages=new)
        return AfterTurn(turns=tuple(turns), extraction="done", extracted=result, messages=new)

    # -- blocking twins ------------------------------------------------------------

    def before_turn_sync(self, messages: Sequence[Any], **kwargs: Any) -> TurnContext:
        """Blocking twin of :meth:`before_turn`."""
        return run_sync(self.before_turn(messages, **kwargs), method="before_turn", owner="hook")

    def after_turn_sync(self, messages: Sequence[Any], **kwargs: Any) -> AfterTurn:
        """Blocking twin of :meth:`after_turn`."""
        return run_sync(self.after_turn(messages, **kwargs), method="after_turn", owner="hook")

