"""What one tool is: a small class with its model-facing schema beside its handler, and the registry.

Adding a tool to :func:`~memoryport.memory_tools` is one addition: a class in
``_builtin.py`` decorated with :func:`register`::

    @register
    class Pin(Tool):
        name = "pin"
        effect = "additive"

        class Args(ToolArgs):
            id: str = Field(description="The id of the memory to pin, exactly as recall returned it.")

        def description(self) -> str:
            return "Pin one memory of the current user so that recall lists it first."

        def offered(self) -> bool:              # optional: when the tools include it
            return Capability.UPDATE in self.tools.memory.capabilities

        async def run(self, args: Args, call: ToolCall) -> dict[str, Any]:
            ...                                  # call.read_scope, call.ctx, call.guarded(...)
            return {"id": args.id, "pinned": True}

Every tool then appears in every host shape (OpenAI, Anthropic, MCP, the
dispatcher, the HTTP server and the framework integrations), in registration
order. The scope is never an argument: ``run`` gets it from ``call``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from .._errors import BackendError, InvalidInput
from .._events import EventSink, MemoryEvent, deliver
from .._records import MemoryScope
from ._context import ToolContext, ToolError

if TYPE_CHECKING:
    from ._tools import MemoryTools, PendingWrite

__all__ = ["REGISTRY", "Effect", "Tool", "ToolArgs", "ToolCall", "register"]

logger = logging.getLogger("memoryport")

Effect = Literal["additive", "read_only", "destructive"]
"""What a tool does to memory: adds to it, only reads it, or deletes from it."""

T = TypeVar("T")


class ToolArgs(BaseModel):
    """The arguments of a tool: strict types, no extra keys (the scope is never an argument)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Tool:
    """One tool offered to a model. Subclass it and :func:`register` it (see the module docstring).

    Attributes:
        name: what the model calls (``snake_case``).
        effect: ``additive``, ``read_only`` or ``destructive``.
        Args: the :class:`ToolArgs` model; its JSON schema is what the model sees.
        tools: the :class:`~memoryport.tools.MemoryTools` this tool belongs to:
            the memory and the host's options (``k``, hooks, ...).
    """

    name: ClassVar[str]
    effect: ClassVar[Effect]
    Args: ClassVar[type[ToolArgs]]

    def __init__(self, tools: MemoryTools) -> None:
        self.tools = tools

    def offered(self) -> bool:
        """Whether these tools include this one (an option, a capability of the memory)."""
        return True

    def description(self) -> str:
        """What the model reads about the tool."""
        raise NotImplementedError

    async def run(self, args: Any, call: ToolCall) -> dict[str, Any]:
        """Do the work for validated ``args``; raise :class:`ToolError` for what the model should hear."""
        raise NotImplementedError


REGISTRY: list[type[Tool]] = []
"""Every tool, in the order the model sees them."""


def register(cls: type[Tool]) -> type[Tool]:
    """Add a tool class to :data:`REGISTRY` (names are unique)."""
    for attribute in ("name", "effect", "Args"):
        if not hasattr(cls, attribute):
            raise TypeError(f"tool class {cls.__name__} has no {attribute}")
    if any(other.name == cls.name for other in REGISTRY):
        raise TypeError(f"a tool named {cls.name!r} is registered already")
    REGISTRY.append(cls)
    return cls


class _Relay:
    """Sends a call's events to the context, and to the memory's own sink when the context has none."""

    def __init__(self, context: ToolContext, fallback: EventSink | None) -> None:
        self._context = context
        self._fallback = fallback if context.sink is None else None
        self.capture_content = context.capture_content or bool(getattr(self._fallback, "capture_content", False))

    def emit(self, event: MemoryEvent) -> None:
        self._context.emit(event)
        deliver(self._fallback, event)


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass
class ToolCall:
    """One call of a tool: who it is for, the scopes it may touch, and the host's hooks.

    Attributes:
        tools: the tools the call belongs to.
        context: the host's :class:`ToolContext`.
        write_scope: where new memories go (the session included).
        read_scope: what recall and deletes may see (all of the user's
            sessions with ``across_sessions=True``).
        ctx: pass as ``ctx=`` to the memory's methods: events reach the context.
    """

    tools: MemoryTools
    context: ToolContext
    write_scope: MemoryScope
    read_scope: MemoryScope
    ctx: _Relay

    async def guarded(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run a memory operation; invalid input and backend failures become :class:`ToolError`."""
        try:
            return await call()
        except InvalidInput as exc:
            raise ToolError("invalid_input", str(exc)) from None
        except BackendError as exc:
            logger.warning("memory tool: backend %r failed (%s)", exc.backend, type(exc.__cause__ or exc).__name__)
            raise ToolError("unavailable", "memory is unavailable right now; try again later.") from exc

    async def hook(self, hook: Callable[..., Any], *args: Any) -> Any:
        """Run a host hook, sync or async; a hook that raises fails closed (``hook_failed``)."""
        try:
            return await _maybe_await(hook(*args))
        except ToolError:
            raise
        except Exception as exc:
            logger.warning("memory tool hook %s failed: %s", getattr(hook, "__name__", "hook"), type(exc).__name__)
            raise ToolError("hook_failed", "memory is not available for this request right now.") from exc

    async def check_write(self, text: str) -> None:
        """The host's write check (default :func:`~memoryport.pii_check`): refuse ``text`` with its reason."""
        check = self.tools.write_check
        if check is not None:
            reason = await self.hook(check, text, self.context)
            if reason is not None:
                raise ToolError("refused", str(reason))

    async def approve(self, pending: PendingWrite, refused: str) -> None:
        """With ``confirm_writes=True``, ask the host's ``approve``; raise ``not_approved`` with ``refused``."""
        if not self.tools.confirm_writes:
            return
        approve = self.tools.approve
        if approve is None or (await self.hook(approve, pending)) is not True:
            raise ToolError("not_approved", refused)

    async def visible(self, text: str) -> str | None:
        """What the model may see of a stored text (the host's read filter); ``None`` hides it."""
        read_filter = self.tools.read_filter
        if read_filter is None:
            return text
        shown = await self.hook(read_filter, text, self.context)
        return None if shown is None else str(shown)
