"""Learning from conversations: extraction after a turn, consolidation of old sessions, reconciliation.

:class:`MemoryExtractor` sits on :class:`~memoryport.curated.AgentMemory` and a
:class:`~memoryport.models.ModelPort`; :class:`ExtractionPolicy` holds its
thresholds (GAIA's by default) and prompts (all in
:mod:`memoryport.extraction._prompts`, exported here as ``EXTRACT_SYSTEM``,
``CONSOLIDATE_SYSTEM`` and ``RECONCILE_SYSTEM``).
"""

from __future__ import annotations

from ._extractor import SESSION_KEY, MemoryExtractor, last_turn, session_key
from ._prompts import CONSOLIDATE_SYSTEM, EXTRACT_SYSTEM, RECONCILE_SYSTEM
from ._types import (
    ConsolidationResult,
    DecisionOutcome,
    ExtractionPolicy,
    ExtractionResult,
    PairOutcome,
    ReconciliationResult,
    Session,
    Turn,
)

__all__ = [
    "CONSOLIDATE_SYSTEM",
    "EXTRACT_SYSTEM",
    "RECONCILE_SYSTEM",
    "SESSION_KEY",
    "ConsolidationResult",
    "DecisionOutcome",
    "ExtractionPolicy",
    "ExtractionResult",
    "MemoryExtractor",
    "PairOutcome",
    "ReconciliationResult",
    "Session",
    "Turn",
    "last_turn",
    "session_key",
]
