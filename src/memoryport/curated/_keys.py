"""The well-known metadata keys curated memories carry, and how values are encoded.

Every curated memory is an ordinary :class:`~memoryport.MemoryRecord`; what the
layer knows about it lives in metadata under keys that start with ``mp:``. The
layer refuses host metadata keys with that prefix, so the two cannot collide.
Times are whole seconds since the Unix epoch (UTC) so that every backend's
filter operators compare them as numbers. An entity is one key per entity,
``mp:entity:<name>`` = ``True``, so that a plain equality filter finds a
memory by any one of its entities on every backend.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from .._errors import InvalidInput
from .._records import MetadataValue

__all__ = [
    "DONE_AT",
    "DUE_AT",
    "ENTITY",
    "IMPORTANCE",
    "KIND",
    "LAST_USED",
    "LOG",
    "PINNED",
    "PREFIX",
    "REMINDED_AT",
    "SOURCE",
    "SUPERSEDED_BY",
    "SUPERSEDES",
    "USES",
    "DECAYED_AT",
    "entity_key",
    "normalise_entity",
    "to_epoch",
    "from_epoch",
]

PREFIX = "mp:"
"""Every key of the layer starts with this; host keys may not."""

KIND = "mp:kind"
"""``str``: what the memory is (``fact``, ``preference``, ...)."""
IMPORTANCE = "mp:importance"
"""``float`` in [0, 1]."""
SOURCE = "mp:source"
"""``str``: who said it (``user``, ``tool``, ``extraction`` or the host's own)."""
PINNED = "mp:pinned"
"""``True`` when pinned (absent otherwise): never decayed, evicted or pruned."""
DUE_AT = "mp:due_at"
"""``int`` epoch seconds: when a reminder is due."""
REMINDED_AT = "mp:reminded_at"
"""``int`` epoch seconds: when the host last reminded the user."""
DONE_AT = "mp:done_at"
"""``int`` epoch seconds: when the reminder was marked done (then no longer upcoming)."""
LAST_USED = "mp:last_used"
"""``int`` epoch seconds: the last recall hit, reinforcement or duplicate write."""
USES = "mp:uses"
"""``int``: how many times the memory was recalled or reinforced."""
DECAYED_AT = "mp:decayed_at"
"""``int`` epoch seconds: when :meth:`AgentMemory.decay` last lowered the importance."""
SUPERSEDES = "mp:supersedes"
"""``str``: the id of the older version this memory replaced."""
SUPERSEDED_BY = "mp:superseded_by"
"""``str``: the id of the newer version (the memory is hidden from recall by default)."""
LOG = "mp:log"
"""``str``: marks a record of the agent loop (``turn``, ``tool`` or ``scratch``; see
:mod:`memoryport.loop`), not a curated memory. Curated reads, dedup, decay, the
cap, stats and forgetting leave such records out unless asked (``include_log=True``)."""
ENTITY = "mp:entity:"
"""Prefix of the entity keys: ``mp:entity:<normalised name>`` = ``True``."""

MAX_ENTITY_CHARS = 64 - len(ENTITY)
"""Entity names are bounded so that their key fits the default ``Limits.max_metadata_key_chars`` (64)."""

_SPACES = re.compile(r"\s+")


def normalise_entity(name: object, field: str = "entities") -> str:
    """The canonical form of an entity name: NFKC, case-folded, single spaces, trimmed.

    Example:
        >>> normalise_entity("  Ann   Lee ")
        'ann lee'
    """
    if not isinstance(name, str):
        raise InvalidInput(f"{field} must hold strings, not {type(name).__name__}", field=field)
    canon = _SPACES.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()
    if not canon:
        raise InvalidInput(f"{field} holds an empty entity name", field=field)
    if any(unicodedata.category(ch) == "Cc" for ch in canon):
        raise InvalidInput(f"{field} holds an entity name with a control character", field=field)
    if len(canon) > MAX_ENTITY_CHARS:
        raise InvalidInput(
            f"{field} holds an entity name of {len(canon)} characters; the limit is {MAX_ENTITY_CHARS}",
            field=field,
        )
    return canon


def entity_key(name: str) -> str:
    """The metadata key that marks a memory as about ``name`` (normalised).

    Example:
        >>> entity_key("Ann")
        'mp:entity:ann'
    """
    return ENTITY + normalise_entity(name)


def entities_of(metadata: Mapping[str, MetadataValue]) -> tuple[str, ...]:
    """The entity names a record's metadata marks, sorted."""
    return tuple(sorted(k[len(ENTITY) :] for k, v in metadata.items() if k.startswith(ENTITY) and v is True))


def to_epoch(value: datetime, field: str) -> int:
    """Whole seconds since the epoch of an aware datetime (naive ones are refused)."""
    if not isinstance(value, datetime):
        raise InvalidInput(f"{field} must be a datetime, not {type(value).__name__}", field=field)
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InvalidInput(f"{field} must be timezone-aware (got a naive datetime)", field=field)
    return int(value.timestamp())


def from_epoch(value: Any) -> datetime | None:
    """The aware UTC datetime of an epoch-seconds metadata value (``None`` for a missing or odd one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(value, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def host_metadata(metadata: Mapping[str, MetadataValue]) -> dict[str, MetadataValue]:
    """The host's own keys of a record's metadata (every key not starting with ``mp:``)."""
    return {k: v for k, v in metadata.items() if not k.startswith(PREFIX)}


def check_host_metadata(metadata: Mapping[str, MetadataValue] | None, field: str) -> dict[str, MetadataValue]:
    """A copy of the host's metadata, refusing the layer's reserved prefix."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"{field} must be a mapping of str to JSON scalars", field=field)
    for key in metadata:
        if isinstance(key, str) and key.startswith(PREFIX):
            raise InvalidInput(
                f"{field} has the key {key!r}; keys starting with {PREFIX!r} are reserved for curated memory",
                field=field,
            )
    return dict(metadata)
