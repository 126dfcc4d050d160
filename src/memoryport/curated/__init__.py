"""Curated memory: kinds, importance, dedup, supersession, reinforcement, decay, caps, reminders, forgetting.

:class:`AgentMemory` holds a :class:`~memoryport.GuardedMemory` and adds the
policies an agent's long-term memory needs; everything it stores is an ordinary
record whose metadata carries the well-known keys below, so export, copy and
erasure work on it unchanged, on any backend with the capabilities it needs.

======================  =========  ==============================================
key                     type       meaning
======================  =========  ==============================================
``mp:kind``             str        ``fact``, ``preference``, ``error``, ``skill``, ``note``, ``reminder`` or the host's
``mp:importance``       float      0 to 1
``mp:source``           str        ``user``, ``tool``, ``extraction`` or the host's
``mp:pinned``           bool       present (``True``) when pinned
``mp:entity:<name>``    bool       one key per entity, name case-folded
``mp:due_at``           int        epoch seconds (UTC) when due
``mp:reminded_at``      int        epoch seconds of the last reminder
``mp:done_at``          int        epoch seconds when marked done
``mp:last_used``        int        epoch seconds of the last use
``mp:uses``             int        recall hits and reinforcements
``mp:decayed_at``       int        epoch seconds of the last decay
``mp:supersedes``       str        id of the older version
``mp:superseded_by``    str        id of the newer version (hidden from recall)
======================  =========  ==============================================

Host metadata keys may not start with ``mp:``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import lazy_exports
from ._keys import PREFIX, entity_key, normalise_entity
from ._memory import AgentMemory, Outcome, owner
from ._policy import DEFAULT_KINDS, CurationPolicy, Salience, containment, cosine, word_overlap, words
from ._types import (
    DecayReport,
    ImportanceChange,
    MemoryItem,
    MemoryStats,
    NewMemory,
    Remembered,
    Removal,
    RemovalItem,
    parse_duration,
)

if TYPE_CHECKING:
    from ._tools import PendingForget, curated_tools

_LAZY = {"PendingForget": "memoryport.curated._tools", "curated_tools": "memoryport.curated._tools"}

__all__ = [
    "DEFAULT_KINDS",
    "PREFIX",
    "AgentMemory",
    "CurationPolicy",
    "DecayReport",
    "ImportanceChange",
    "MemoryItem",
    "MemoryStats",
    "NewMemory",
    "Outcome",
    "PendingForget",
    "Remembered",
    "Removal",
    "RemovalItem",
    "Salience",
    "containment",
    "cosine",
    "curated_tools",
    "entity_key",
    "normalise_entity",
    "owner",
    "parse_duration",
    "word_overlap",
    "words",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
