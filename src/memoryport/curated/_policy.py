"""The policies' settings, the similarity measures and the salience score."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Literal

from .._errors import InvalidInput

__all__ = ["DEFAULT_KINDS", "CurationPolicy", "Salience", "containment", "cosine", "word_overlap", "words"]

DEFAULT_KINDS: tuple[str, ...] = ("fact", "preference", "error", "skill", "note", "reminder")
"""GAIA's six kinds; a host adds its own through :attr:`CurationPolicy.kinds`."""

_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_WORD = re.compile(r"\w+")


def words(text: str) -> frozenset[str]:
    """The case-folded word set of ``text`` (what keyword-mode similarity compares).

    Example:
        >>> sorted(words("Ann likes TEA, ann!"))
        ['ann', 'likes', 'tea']
    """
    return frozenset(_WORD.findall(text.casefold()))


def word_overlap(a: str, b: str) -> float:
    """Jaccard overlap of two texts' word sets: shared words / all words, in [0, 1].

    Example:
        >>> word_overlap("Ann likes green tea", "Ann really likes green tea")
        0.8
    """
    wa, wb = words(a), words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def containment(query: str, text: str) -> float:
    """The share of the query's words that ``text`` contains, in [0, 1].

    Example:
        >>> containment("green tea", "Ann likes green tea")
        1.0
    """
    wq = words(query)
    if not wq:
        return 0.0
    return len(wq & words(text)) / len(wq)


def cosine(a: object, b: object) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros), computed in float64."""
    import numpy as np

    va = np.asarray(a, dtype=np.float64).ravel()
    vb = np.asarray(b, dtype=np.float64).ravel()
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(va, vb) / (na * nb))


def _unit(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{field} must be a number from 0 to 1", field=field)
    if not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{field} must be from 0 to 1, got {value}", field=field)
    return float(value)


def _nonneg(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidInput(f"{field} must be a non-negative number", field=field)
    return float(value)


def _positive_delta(value: object, field: str) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidInput(f"{field} must be a positive timedelta", field=field)
    return value


@dataclass(frozen=True)
class Salience:
    """How recall orders memories: ``relevance·r + importance·i + recency·t``.

    * ``r`` is the backend's score relative to the best candidate's (``score / best``
      when no score is negative, else rescaled from worst 0 to best 1), so that
      any backend's scores combine the same way and near-ties stay near 1;
    * ``i`` is the memory's importance in [0, 1];
    * ``t`` is ``0.5 ** (age / half_life)``, the age counted from the last use
      (recall hit, reinforcement, duplicate write) or else from creation.

    With every weight but ``relevance`` at 0 the order is the backend's own.
    The defaults let importance and recency break near-ties of relevance
    without overriding a clearly better match (on LoCoMo, with uniform
    importance, recall@10 stays within a point of plain search; see
    ``docs/curated-memory.md``).

    Example:
        >>> Salience(importance=0.5).importance
        0.5
    """

    relevance: float = 1.0
    importance: float = 0.2
    recency: float = 0.1
    half_life: timedelta = timedelta(days=30)

    def __post_init__(self) -> None:
        for name in ("relevance", "importance", "recency"):
            object.__setattr__(self, name, _nonneg(getattr(self, name), f"Salience.{name}"))
        _positive_delta(self.half_life, "Salience.half_life")

    def freshness(self, last: datetime, now: datetime) -> float:
        """``0.5 ** (age / half_life)``, 1 for a memory used just now (or dated in the future)."""
        age = (now - last).total_seconds()
        if age <= 0:
            return 1.0
        return float(0.5 ** (age / self.half_life.total_seconds()))

    def standing(self, importance: float, last: datetime, now: datetime) -> float:
        """The salience without relevance: what eviction by the capacity cap orders by."""
        return self.importance * importance + self.recency * self.freshness(last, now)


@dataclass(frozen=True)
class CurationPolicy:
    """Every setting of :class:`AgentMemory`'s policies, with the defaults of the systems it follows.

    Attributes:
        kinds: the kinds a memory may have: GAIA's six and any the host adds
            (lower-case identifiers, up to 32 characters).
        default_kind: the kind of a memory stored without one.
        importance_by_source: the importance a memory gets from its source when
            none is given (GAIA's table: user 0.8, tool 0.5, extraction 0.4).
        default_importance: for a source not in the table, and for records the
            layer did not write (so plain records rank as equals).
        default_source: the source of a memory stored without one.
        dedup: look for a near-duplicate before every write.
        dedup_cosine: in vector mode, a candidate at this cosine similarity or
            more is a duplicate (Daita's 0.95).
        dedup_overlap: in keyword mode, a candidate at this word overlap
            (Jaccard) or more is a duplicate (GAIA's 80%).
        dedup_candidates: how many search hits are compared with a new memory.
        on_duplicate: ``"update"`` (the existing memory takes the new text and
            the larger importance; GAIA) or ``"reinforce"`` (it keeps its text
            and is reinforced).
        recall_boost: importance added to each memory recall returns (0 turns
            reinforcement on recall off; recall then writes nothing).
        feedback_step: importance added or taken by ``reinforce(ids, "positive"/"negative")``.
        decay_factor: importance is multiplied by this once per ``decay_period``
            a memory stays unused (GAIA: 0.9 per 30 days).
        decay_period: see ``decay_factor``.
        salience: how recall orders memories (see :class:`Salience`).
        candidates: recall re-orders this many backend hits per ``k`` asked
            (at least ``k + 10``, at most the guard's ``max_k``).
        max_memories: the capacity cap per owner (a user, or user and agent);
            ``None`` (default) for none. Daita uses 2000.
        max_entities: how many entities one memory may name.
        forget_threshold: the similarity at which ``forget(query)`` takes a
            memory (Agent Zero: 0.75).

    Example:
        >>> policy = CurationPolicy(kinds=(*DEFAULT_KINDS, "visit"), max_memories=2000)
        >>> policy.importance_for("tool")
        0.5
    """

    kinds: tuple[str, ...] = DEFAULT_KINDS
    default_kind: str = "fact"
    importance_by_source: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({"user": 0.8, "tool": 0.5, "extraction": 0.4})
    )
    default_importance: float = 0.5
    default_source: str = "user"
    dedup: bool = True
    dedup_cosine: float = 0.95
    dedup_overlap: float = 0.8
    dedup_candidates: int = 5
    on_duplicate: Literal["update", "reinforce"] = "update"
    recall_boost: float = 0.02
    feedback_step: float = 0.1
    decay_factor: float = 0.9
    decay_period: timedelta = timedelta(days=30)
    salience: Salience = field(default_factory=Salience)
    candidates: int = 3
    max_memories: int | None = None
    max_entities: int = 8
    forget_threshold: float = 0.75

    def __post_init__(self) -> None:
        kinds = tuple(self.kinds) if not isinstance(self.kinds, str) else (self.kinds,)
        if not kinds:
            raise InvalidInput("CurationPolicy.kinds must name at least one kind", field="kinds")
        for kind in kinds:
            if not isinstance(kind, str) or not _KIND.match(kind):
                raise InvalidInput(
                    f"CurationPolicy.kinds: {kind!r} is not a kind (lower-case letters, digits, '_' or '-', "
                    "up to 32 characters, starting with a letter)",
                    field="kinds",
                )
        object.__setattr__(self, "kinds", tuple(dict.fromkeys(kinds)))
        if self.default_kind not in self.kinds:
            raise InvalidInput(
                f"CurationPolicy.default_kind {self.default_kind!r} is not among kinds", field="default_kind"
            )
        if not isinstance(self.importance_by_source, Mapping):
            raise InvalidInput("CurationPolicy.importance_by_source must be a mapping", field="importance_by_source")
        table = {}
        for source, value in self.importance_by_source.items():
            if not isinstance(source, str) or not source:
                raise InvalidInput("CurationPolicy.importance_by_source keys must be non-empty strings",
                                   field="importance_by_source")
            table[source] = _unit(value, f"importance_by_source[{source!r}]")
        object.__setattr__(self, "importance_by_source", MappingProxyType(table))
        _unit(self.default_importance, "default_importance")
        if not isinstance(self.default_source, str) or not self.default_source:
            raise InvalidInput("CurationPolicy.default_source must be a non-empty string", field="default_source")
        _unit(self.dedup_cosine, "dedup_cosine")
        _unit(self.dedup_overlap, "dedup_overlap")
        _unit(self.forget_threshold, "forget_threshold")
        _unit(self.recall_boost, "recall_boost")
        _unit(self.feedback_step, "feedback_step")
        _unit(self.decay_factor, "decay_factor")
        _positive_delta(self.decay_period, "decay_period")
        if self.on_duplicate not in ("update", "reinforce"):
            raise InvalidInput("CurationPolicy.on_duplicate must be 'update' or 'reinforce'", field="on_duplicate")
        if not isinstance(self.salience, Salience):
            raise InvalidInput("CurationPolicy.salience must be a Salience", field="salience")
        for name, low in (("dedup_candidates", 1), ("candidates", 1), ("max_entities", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidInput(f"CurationPolicy.{name} must be an integer of at least {low}", field=name)
        if self.max_memories is not None and (
            isinstance(self.max_memories, bool) or not isinstance(self.max_memories, int) or self.max_memories < 1
        ):
            raise InvalidInput("CurationPolicy.max_memories must be a positive integer or None", field="max_memories")

    def importance_for(self, source: str) -> float:
        """The default importance of a memory from ``source``."""
        return float(self.importance_by_source.get(source, self.default_importance))
