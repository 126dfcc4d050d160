"""The well-known metadata keys of the agent loop's records, and the checks they share.

Every record the loop stores is an ordinary :class:`~memoryport.MemoryRecord`
marked ``mp:log`` (``turn``, ``tool`` or ``scratch``): export, copy, erasure and
retention treat it like any other record, and curated memory leaves it out of
recall, dedup, decay, the cap and stats (see :data:`memoryport.curated._keys.LOG`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from .._errors import InvalidInput, UnsupportedCapability, UsageError
from .._guard import GuardedMemory
from .._port import Capability
from .._records import MemoryScope
from ..curated._keys import LOG, PREFIX
from ..curated._types import Duration, parse_duration

__all__ = [
    "ARGUMENTS",
    "DURATION_MS",
    "ERROR_TYPE",
    "KEY",
    "LOG",
    "NAME",
    "OUTCOME",
    "PREFIX",
    "ROLE",
    "SCRATCH",
    "TOOL",
    "TOOL_NAME",
    "TURN",
    "TURN_INDEX",
]

TURN = "turn"
"""``mp:log`` value of a conversation turn."""
TOOL = "tool"
"""``mp:log`` value of a tool call."""
SCRATCH = "scratch"
"""``mp:log`` value of a scratchpad item."""

ROLE = "mp:role"
"""``str``: who spoke a turn: ``user``, ``assistant``, ``system`` or ``tool``."""
TURN_INDEX = "mp:turn"
"""``int``: the turn's position in its session, from 0."""
NAME = "mp:name"
"""``str``: the speaker's name on a turn (a tool's name on a ``tool`` turn), when given."""
TOOL_NAME = "mp:tool"
"""``str``: the name of the tool called."""
OUTCOME = "mp:outcome"
"""``str``: ``ok`` or ``error``."""
DURATION_MS = "mp:duration_ms"
"""``float``: how long the call took, in milliseconds."""
ERROR_TYPE = "mp:error_type"
"""``str``: the error's type name (``TimeoutError``), never its message."""
ARGUMENTS = "mp:arguments"
"""``bool``: the record's text holds the call's arguments (only when the host opted in)."""
KEY = "mp:key"
"""``str``: a scratchpad item's key (writing the same key again replaces the item)."""

MAX_NAME_CHARS = 64
"""Tool names, speaker names and scratch keys are at most this long."""


def require(memory: GuardedMemory, capabilities: Iterable[Capability], what: str) -> None:
    """Refuse a backend that lacks one of ``capabilities``, naming the first missing."""
    needed = list(capabilities)
    for capability in needed:
        if capability not in memory.capabilities:
            raise UnsupportedCapability(
                f"{what} needs the {capability.value!r} capability, which the {memory.backend!r} backend does not "
                f"have (it needs {', '.join(c.value for c in needed)})",
                capability=capability.value,
                backend=memory.backend,
            )


def check_scope(scope: object, *, session: bool, what: str) -> MemoryScope:
    """``scope`` if it is a :class:`MemoryScope` (with a session when ``session``), else a clear error."""
    if not isinstance(scope, MemoryScope):
        raise UsageError(f"{what} needs scope=MemoryScope(...), not {type(scope).__name__}")
    if session and scope.session_id is None:
        raise UsageError(
            f"{what} belongs to a session: pass scope=MemoryScope(user_id=..., session_id=...) "
            "(the session is the conversation)"
        )
    return scope


def check_name(value: object, field: str) -> str:
    """A short single-line name (tool name, speaker, scratch key): non-empty, bounded, no control characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, not {type(value).__name__}", field=field)
    if not value.strip():
        raise InvalidInput(f"{field} must not be empty", field=field)
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(
            f"{field} is {len(value)} characters; the limit is {MAX_NAME_CHARS}", field=field, limit="max_name_chars"
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise InvalidInput(f"{field} must not contain control characters", field=field)
    return value


def check_text(value: object, field: str, limit: int) -> str:
    """A non-empty text of at most ``limit`` characters (never truncated)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, not {type(value).__name__}", field=field)
    if not value.strip():
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    if len(value) > limit:
        raise InvalidInput(
            f"{field} is {len(value):,} characters; the limit is {limit:,} (nothing is truncated: split it or "
            "raise the limit)",
            field=field,
            limit="max_text_chars",
        )
    return value


def check_limit(value: object, field: str, high: int) -> int:
    """An integer from 1 to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidInput(f"{field} must be an integer from 1 to {high}", field=field, limit="max_k")
    return value


def is_log(metadata: Any, kind: str | None = None) -> bool:
    """Whether a record's metadata marks it as the loop's (of ``kind`` when given)."""
    value = metadata.get(LOG) if hasattr(metadata, "get") else None
    return isinstance(value, str) and (kind is None or value == kind)


def text_cap(memory: GuardedMemory, max_chars: object) -> int:
    """A part's ``max_chars``: None means the guard's ``max_text_chars``; otherwise 1 to that limit."""
    limit = memory.limits.max_text_chars
    if max_chars is None:
        return limit
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or not 1 <= max_chars <= limit:
        raise UsageError(f"max_chars must be an integer from 1 to the guard's max_text_chars ({limit:,})")
    return max_chars


def ttl_of(memory: GuardedMemory, ttl: Duration | None, what: str) -> timedelta | None:
    """A part's ``ttl`` as a timedelta (None: none); a ttl needs the ``expiry`` capability."""
    if ttl is None:
        return None
    period = parse_duration(ttl, "ttl")
    require(memory, (Capability.EXPIRY,), f"{what}(ttl=...)")
    return period


def aware_now(clock: Callable[[], datetime], what: str) -> datetime:
    """The host's clock in UTC; UsageError naming ``what`` when it does not return an aware datetime."""
    now = clock()
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise UsageError(f"{what}'s clock must return an aware datetime")
    return now.astimezone(timezone.utc)
