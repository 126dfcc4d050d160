"""Knowledge: import folders of documents as records, re-indexing only what changed.

A layer over any :class:`~memoryport.GuardedMemory` whose store keeps metadata and
can export and delete. Each chunk is an ordinary record with ``kind="knowledge"``,
so recall includes it (``filters={"kind": "knowledge"}``) or leaves it out
(``filters={"kind": {"$ne": "knowledge"}}``), and export and erasure cover it.

Example:
    >>> from memoryport.knowledge import import_knowledge  # doctest: +SKIP
    >>> report = await import_knowledge(memory, "handbook/", scope=MemoryScope(user_id="ann"))  # doctest: +SKIP
"""

from __future__ import annotations

from ._chunk import ChunkOptions
from ._import import KNOWLEDGE_KIND, ImportReport, import_knowledge, import_knowledge_sync
from ._parse import SUFFIXES

__all__ = ["KNOWLEDGE_KIND", "SUFFIXES", "ChunkOptions", "ImportReport", "import_knowledge", "import_knowledge_sync"]
