"""What extraction, consolidation and reconciliation take and return, and their settings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from .._errors import InvalidInput
from . import _prompts as P

__all__ = [
    "ConsolidationResult",
    "DecisionOutcome",
    "ExtractionPolicy",
    "ExtractionResult",
    "PairOutcome",
    "ReconciliationResult",
    "Session",
    "Turn",
]


def _number(value: object, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"ExtractionPolicy.{field} must be a number", field=field)
    if not low <= value <= high:
        raise InvalidInput(f"ExtractionPolicy.{field} must be from {low:g} to {high:g}, got {value}", field=field)
    return float(value)


def _count(value: object, field: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidInput(f"ExtractionPolicy.{field} must be an integer of at least {low}", field=field)
    return value


@dataclass(frozen=True)
class ExtractionPolicy:
    """The settings of extraction, consolidation and reconciliation, with GAIA's numbers as defaults.

    Attributes:
        min_words: a turn (its user and assistant messages) shorter than this is not sent to the model (20).
        max_turn_chars: a longer turn is not sent either (skipped as ``long``, counted; never cut) (20,000).
        candidates: how many of the most similar memories the model is shown (10).
        min_confidence: decisions below this confidence are dropped and counted (0.4).
        timeout: seconds the model gets per call, retries included (3).
        keep_history: an UPDATE supersedes the old version (kept, hidden from recall) instead of
            overwriting it (True).
        source: the ``mp:source`` of extracted memories (``extraction``).
        consolidate_after: a session whose last turn is at least this old is consolidated (14 days).
        min_session_turns: sessions with fewer turns are not consolidated (5).
        consolidation_source: the ``mp:source`` of consolidation notes (``consolidation``).
        consolidation_kind: their kind (``note``).
        max_session_chars: a longer transcript goes to the model in parts of at most this size (20,000).
        reconcile_cosine: pairs above this cosine similarity are reconciled (0.85).
        reconcile_overlap: without an embedder, pairs above this word overlap (Jaccard) are (0.6).
        reinforce_step: importance added to the older memory of a pair that agrees (0.05).
        weaken_step: importance taken from the older memory of a pair that casts doubt on it (0.1).
        max_pairs: pairs reconciled per call of ``reconcile`` (20); call again for more.
        pairs_per_call: pairs per model call (10).
        max_scan: the newest memories compared by ``reconcile`` (2,000).
        extract_prompt, consolidate_prompt, reconcile_prompt: the system prompts (see
            :mod:`memoryport.extraction._prompts`); ``extract_prompt`` has a ``{kinds}`` field.

    Example:
        >>> ExtractionPolicy(min_words=5, timeout=10).min_words
        5
    """

    min_words: int = 20
    max_turn_chars: int = 20_000
    candidates: int = 10
    min_confidence: float = 0.4
    timeout: float = 3.0
    keep_history: bool = True
    source: str = "extraction"
    consolidate_after: timedelta = timedelta(days=14)
    min_session_turns: int = 5
    consolidation_source: str = "consolidation"
    consolidation_kind: str = "note"
    max_session_chars: int = 20_000
    reconcile_cosine: float = 0.85
    reconcile_overlap: float = 0.6
    reinforce_step: float = 0.05
    weaken_step: float = 0.1
    max_pairs: int = 20
    pairs_per_call: int = 10
    max_scan: int = 2_000
    extract_prompt: str = P.EXTRACT_SYSTEM
    consolidate_prompt: str = P.CONSOLIDATE_SYSTEM
    reconcile_prompt: str = P.RECONCILE_SYSTEM

    def __post_init__(self) -> None:
        _count(self.min_words, "min_words", 0)
        _count(self.candidates, "candidates", 0)
        _count(self.max_turn_chars, "max_turn_chars", 100)
        _count(self.min_session_turns, "min_session_turns", 1)
        _count(self.max_session_chars, "max_session_chars", 1_000)
        _count(self.max_pairs, "max_pairs", 1)
        _count(self.pairs_per_call, "pairs_per_call", 1)
        _count(self.max_scan, "max_scan", 2)
        _number(self.min_confidence, "min_confidence", 0, 1)
        _number(self.timeout, "timeout", 0.001, 3600)
        for name in ("reconcile_cosine", "reconcile_overlap", "reinforce_step", "weaken_step"):
            _number(getattr(self, name), name, 0, 1)
        if not isinstance(self.consolidate_after, timedelta) or self.consolidate_after < timedelta(0):
            raise InvalidInput("ExtractionPolicy.consolidate_after must be a timedelta", field="consolidate_after")
        for name in ("source", "consolidation_source", "consolidation_kind", "extract_prompt",
                     "consolidate_prompt", "reconcile_prompt"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"ExtractionPolicy.{name} must be a non-empty string", field=name)
        if not isinstance(self.keep_history, bool):
            raise InvalidInput("ExtractionPolicy.keep_history must be true or false", field="keep_history")
        try:
            self.extract_prompt.format(kinds="fact")
        except (KeyError, IndexError, ValueError) as exc:
            raise InvalidInput("ExtractionPolicy.extract_prompt may use only the {kinds} field "
                               "(double other braces: {{ }})", field="extract_prompt") from exc


@dataclass(frozen=True)
class Turn:
    """One turn of a past session, for :meth:`MemoryExtractor.consolidate`.

    Example:
        >>> from datetime import datetime, timezone
        >>> Turn("user", "I moved to Lyon", datetime(2026, 1, 5, tzinfo=timezone.utc)).role
        'user'
    """

    role: str
    text: str
    at: datetime


@dataclass(frozen=True)
class Session:
    """A past session: its id and its turns, oldest first.

    Example:
        >>> Session("chat-1", ()).id
        'chat-1'
    """

    id: str
    turns: Sequence[Turn]


@dataclass(frozen=True)
class DecisionOutcome:
    """What became of one decision of the model.

    Attributes:
        action: ``ADD``, ``UPDATE``, ``DELETE`` or ``NOOP``.
        status: ``applied``; ``rejected`` (it named a memory it was not shown, or a pinned or
            changed one); ``low_confidence``; or ``unchanged`` (a NOOP, an UPDATE to the same text).
        memory_id: the memory written, updated or deleted (``None`` when nothing changed).
        result: for ADD, what curated memory did: ``added``, ``updated`` or ``reinforced`` (dedup).
        reason: why it was rejected, when it was.
    """

    action: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    status: Literal["applied", "rejected", "low_confidence", "unchanged"]
    memory_id: str | None = None
    result: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ExtractionResult:
    """What one :meth:`MemoryExtractor.extract` call did.

    Attributes:
        status: ``applied`` (the model's decisions were applied, possibly none), ``skipped``
            (``reason``: ``short``, ``long``, ``empty``) or ``failed`` (``reason``: ``timeout``, ``malformed``,
            ``http``, ``connect``, ``refused``, ``error``, ``store``); a failed call changed nothing.
        decisions: the outcome of each decision, in the model's order.
        shown: how many existing memories the model was shown.

    Example:
        >>> ExtractionResult(status="skipped", reason="short").written
        []
    """

    status: Literal["applied", "skipped", "failed"]
    reason: str | None = None
    decisions: tuple[DecisionOutcome, ...] = ()
    shown: int = 0

    @property
    def written(self) -> list[str]:
        """Ids of the memories added or updated (the new versions)."""
        return [d.memory_id for d in self.decisions
                if d.status == "applied" and d.action in ("ADD", "UPDATE") and d.memory_id is not None]

    def count(self, action: str, status: str = "applied") -> int:
        """How many decisions of ``action`` ended with ``status``."""
        return sum(d.action == action and d.status == status for d in self.decisions)


@dataclass(frozen=True)
class ConsolidationResult:
    """What :meth:`MemoryExtractor.consolidate` did.

    Attributes:
        consolidated: session id -> ids of the notes written for it.
        skipped: session id -> why not: ``too short``, ``too recent``, ``already consolidated``,
            or a model failure (``timeout``, ``malformed``, ...) that left that session unchanged.
    """

    consolidated: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PairOutcome:
    """One reconciled pair: the older and newer memory, their similarity, the verdict and whether it applied."""

    older: str
    newer: str
    similarity: float
    relation: str
    applied: bool
    reason: str | None = None


@dataclass(frozen=True)
class ReconciliationResult:
    """What :meth:`MemoryExtractor.reconcile` did (or, with ``dry_run``, would do).

    Attributes:
        pairs: each pair above the threshold sent to the model, with its verdict.
        measure: ``cosine`` (an embedder) or ``overlap`` (word overlap, no embedder).
        scanned: how many memories were compared.
        failed: model failures (by reason) that left their batch of pairs unchanged.
        dry_run: whether nothing was changed.
    """

    pairs: tuple[PairOutcome, ...] = ()
    measure: str = "cosine"
    scanned: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False
