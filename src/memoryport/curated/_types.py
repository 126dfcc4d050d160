"""What curated memory takes and returns: new memories, items, write results and removal previews."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, Union

from .._errors import InvalidInput
from .._records import MemoryRecord, MemoryScope, MetadataValue
from . import _keys as K

__all__ = [
    "DecayReport",
    "ImportanceChange",
    "MemoryItem",
    "MemoryStats",
    "NewMemory",
    "Remembered",
    "Removal",
    "RemovalItem",
    "parse_duration",
]

Duration = Union[timedelta, str]
"""A span: a positive :class:`~datetime.timedelta` or ``"90m"``, ``"24h"``, ``"7d"``, ``"2w"``."""

_DURATION = re.compile(r"^\s*(\d{1,9})\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(value: object, field: str) -> timedelta:
    """A positive span from a timedelta or a string such as ``"7d"`` (s, m, h, d, w).

    Example:
        >>> parse_duration("36h", "ttl")
        datetime.timedelta(days=1, seconds=43200)
    """
    if isinstance(value, timedelta):
        span = value
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        span = timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    else:
        raise InvalidInput(
            f"{field} must be a positive timedelta or a duration such as '90m', '24h', '7d' or '2w'", field=field
        )
    if span <= timedelta(0):
        raise InvalidInput(f"{field} must be a positive span", field=field)
    return span


@dataclass(frozen=True)
class NewMemory:
    """One memory to store with :meth:`AgentMemory.remember_many`.

    Attributes:
        text: the memory, one self-contained sentence.
        kind: one of the policy's kinds (default: its ``default_kind``).
        importance: 0 to 1 (default: by ``source``, see :class:`CurationPolicy`).
        source: who said it: ``user``, ``tool``, ``extraction`` or the host's own.
        entities: the people, places or things it is about (normalised: case-folded).
        pinned: never decayed, evicted or pruned.
        due_at: an aware datetime when it is a reminder.
        ttl: how long to keep it (a timedelta or ``"7d"``); sets ``expires_at``.
        metadata: the host's own keys (not starting with ``mp:``).

    Example:
        >>> NewMemory("Dentist on Friday at 9", kind="reminder", entities=["dentist"]).kind
        'reminder'
    """

    text: str
    kind: str | None = None
    importance: float | None = None
    source: str | None = None
    entities: Sequence[str] = ()
    pinned: bool = False
    due_at: datetime | None = None
    ttl: Duration | None = None
    metadata: Mapping[str, MetadataValue] | None = None


@dataclass(frozen=True)
class MemoryItem:
    """A curated memory as the layer reads it from its record.

    Attributes:
        id, text, scope, created_at, updated_at, expires_at: the record's own.
        kind, importance, source, entities, pinned: see :class:`NewMemory`
            (``kind``/``source`` are ``None`` on a record the layer did not write).
        due_at, reminded_at, done_at: reminder times, or ``None``.
        last_used: the last recall hit, reinforcement or duplicate write.
        uses: how many times it was recalled or reinforced.
        supersedes, superseded_by: the lineage of versions.
        metadata: the host's own keys.
        score: the backend's relevance (recall and forget only).
        salience: the combined score recall ordered by (recall only).
        record: the underlying record.
    """

    id: str
    text: str
    scope: MemoryScope
    kind: str | None
    importance: float
    source: str | None
    entities: tuple[str, ...]
    pinned: bool
    due_at: datetime | None
    reminded_at: datetime | None
    done_at: datetime | None
    last_used: datetime | None
    uses: int
    supersedes: str | None
    superseded_by: str | None
    created_at: datetime
    updated_at: datetime | None
    expires_at: datetime | None
    metadata: dict[str, MetadataValue]
    record: MemoryRecord = field(repr=False, compare=False)
    score: float | None = None
    salience: float | None = None

    @property
    def last_touched(self) -> datetime:
        """The last use, else the creation time: what recency and decay count from."""
        return self.last_used if self.last_used is not None and self.last_used > self.created_at else self.created_at

    @classmethod
    def from_record(cls, record: MemoryRecord, default_importance: float) -> MemoryItem:
        """Read the well-known keys of ``record`` (missing or odd values take their defaults)."""
        md = record.metadata
        importance = md.get(K.IMPORTANCE)
        if isinstance(importance, bool) or not isinstance(importance, (int, float)):
            importance = default_importance
        uses = md.get(K.USES)
        kind = md.get(K.KIND)
        source = md.get(K.SOURCE)
        supersedes = md.get(K.SUPERSEDES)
        superseded_by = md.get(K.SUPERSEDED_BY)
        assert record.id is not None
        return cls(
            id=record.id,
            text=record.text,
            scope=record.scope,
            kind=kind if isinstance(kind, str) else None,
            importance=min(1.0, max(0.0, float(importance))),
            source=source if isinstance(source, str) else None,
            entities=K.entities_of(md),
            pinned=md.get(K.PINNED) is True,
            due_at=K.from_epoch(md.get(K.DUE_AT)),
            reminded_at=K.from_epoch(md.get(K.REMINDED_AT)),
            done_at=K.from_epoch(md.get(K.DONE_AT)),
            last_used=K.from_epoch(md.get(K.LAST_USED)),
            uses=uses if isinstance(uses, int) and not isinstance(uses, bool) else 0,
            supersedes=supersedes if isinstance(supersedes, str) else None,
            superseded_by=superseded_by if isinstance(superseded_by, str) else None,
            created_at=record.created_at,
            updated_at=getattr(record, "updated_at", None),
            expires_at=record.expires_at,
            metadata=K.host_metadata(md),
            record=record,
        )


@dataclass(frozen=True)
class Remembered:
    """What a write did.

    Attributes:
        id: the memory that now holds the text (the existing one after a duplicate).
        action: ``"added"`` (a new memory), ``"updated"`` (a near-duplicate took
            the new text) or ``"reinforced"`` (a near-duplicate kept its text and
            gained importance).
        duplicate_of: the existing memory's id when it was a duplicate, else ``None``.
        similarity: how similar the duplicate was (cosine or word overlap).
        measure: ``"cosine"`` or ``"overlap"`` for a duplicate, else ``None``.
        evicted: ids the capacity cap removed to make room (see ``max_memories``).

    Example:
        >>> Remembered(id="a1", action="added").action
        'added'
    """

    id: str
    action: Literal["added", "updated", "reinforced"]
    duplicate_of: str | None = None
    similarity: float | None = None
    measure: Literal["cosine", "overlap"] | None = None
    evicted: tuple[str, ...] = ()


@dataclass(frozen=True)
class RemovalItem:
    """One memory a destructive policy takes (or would take).

    Attributes:
        id, text: the memory.
        score: why it goes, as a number: the similarity for ``forget``, the
            (new) importance for ``decay``, the standing (salience without
            relevance) for the capacity cap.
        reason: ``"match"``, ``"older version"``, ``"below threshold"`` or ``"over capacity"``.
    """

    id: str
    text: str
    score: float
    reason: str


@dataclass(frozen=True)
class Removal:
    """The one form of every destructive policy's answer: what goes, and whether it went.

    With ``dry_run=True`` (the default of :meth:`AgentMemory.forget`,
    :meth:`AgentMemory.decay` and :meth:`AgentMemory.evict`) nothing is changed
    and ``removed`` is 0; ``items`` is what a real run would take now.

    Attributes:
        dry_run: whether this was only a preview.
        items: what goes (or would go), best match / least salient first.
        removed: how many memories were deleted (0 in a dry run).
        kept_pinned: ids that matched but are pinned, so they stay.
        measure: for ``forget``, ``"cosine"`` or ``"words"``; else ``None``.
        threshold: the line applied, when there was one.

    Example:
        >>> Removal(dry_run=True, items=()).ids
        []
    """

    dry_run: bool
    items: tuple[RemovalItem, ...]
    removed: int = 0
    kept_pinned: tuple[str, ...] = ()
    measure: str | None = None
    threshold: float | None = None

    @property
    def ids(self) -> list[str]:
        """The ids of :attr:`items`, in order."""
        return [item.id for item in self.items]


@dataclass(frozen=True)
class ImportanceChange:
    """One memory whose importance decay lowers (or would lower)."""

    id: str
    before: float
    after: float


@dataclass(frozen=True)
class DecayReport:
    """What :meth:`AgentMemory.decay` did or, in a dry run, would do.

    Attributes:
        dry_run: whether this was only a preview.
        changed: memories whose importance decays, with before and after.
        pruned: what falls below ``prune_below`` and goes (the :class:`Removal` form).
    """

    dry_run: bool
    changed: tuple[ImportanceChange, ...]
    pruned: Removal


@dataclass(frozen=True)
class MemoryStats:
    """Counts of one scope's memories.

    Attributes:
        total: live memories (versions superseded included).
        current: those not superseded.
        by_kind: per kind of the policy (0 included), counted by the backend.
        by_month: ``"YYYY-MM"`` -> memories created that month, counted by the
            backend over the last ``months`` months (UTC), oldest first.
        by_entity: entity -> memories naming it, most first (from one export).
        pinned: pinned memories.
        due: memories with a due time not marked done.
    """

    total: int
    current: int
    by_kind: dict[str, int]
    by_month: dict[str, int]
    by_entity: dict[str, int] | None
    pinned: int
    due: int
