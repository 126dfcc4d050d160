"""memoryport: long-term memory for AI agents through one small port.

A host picks a backend, holds it as a :class:`GuardedMemory`, and hands its
model ``remember``, ``recall`` and ``forget`` tools::

    from memoryport import MemoryRecord, MemoryScope, SQLiteMemory

    memory = SQLiteMemory("memory.db")
    ann = MemoryScope(user_id="ann")
    memory.add_sync([MemoryRecord(scope=ann, text="Ann likes green tea")])
    hits = memory.search_sync("tea", scope=ann)

Backends and SDK adapters are resolved lazily on first use, so importing
memoryport imports no SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._embedding import CallableEmbedder, EmbeddingPort
from ._errors import (
    BackendError,
    EmbedderMismatch,
    EmbeddingError,
    InvalidInput,
    MemoryportError,
    MissingExtra,
    ModelError,
    UnsupportedCapability,
    UsageError,
    WalRemoved,
)
from ._events import EventSink, MemoryEvent
from ._extras import lazy_exports
from ._filters import OPERATORS
from ._guard import GuardedMemory, GuardOptions
from ._port import (
    Capability,
    MemoryPort,
    SearchResults,
    SupportsCheckpoint,
    SupportsCheckRecords,
    SupportsClose,
    SupportsSettle,
    SupportsStats,
)
from ._records import (
    DEFAULT_LIMITS,
    Limits,
    MemoryHit,
    MemoryRecord,
    MemoryScope,
    MemoryUpdate,
    MetadataValue,
    SearchMode,
)
from ._timerange import TimeBound

if TYPE_CHECKING:
    from ._copy import CopyReport, copy_memories, copy_memories_sync
    from ._graph import Fact, GraphPort, KnowledgeGraph, NewFact, Related, SupportsGraph
    from ._graph_extract import FactExtraction
    from ._rerank import CallableReranker, RerankerPort
    from .adapters.callable import CallableMemory
    from .adapters.graphiti import GraphitiMemory
    from .adapters.mem0 import Mem0Memory
    from .adapters.postgres import PostgresMemory
    from .adapters.sqlite import SQLiteGraph, SQLiteMemory
    from .adapters.zep import ZepMemory
    from .curated import AgentMemory, CurationPolicy, NewMemory, curated_tools
    from .embedders.local import LocalEmbedder
    from .embedders.openai import OpenAIEmbedder
    from .embedders.rerank import CrossEncoderReranker
    from .embedders.sentence_transformers import SentenceTransformerEmbedder
    from .extraction import ExtractionPolicy, MemoryExtractor
    from .knowledge import ChunkOptions, ImportReport, import_knowledge, import_knowledge_sync
    from .loop import AutoRecall, ContextPolicy, ConversationLog, PromptContext, Scratchpad, ToolHistory, loop_tools
    from .models import CallableModel, ModelPort
    from .models.openai import OpenAIModel
    from .tools import (
        MemoryTool,
        MemoryTools,
        PendingWrite,
        ToolContext,
        ToolError,
        find_pii,
        graph_tools,
        memory_tools,
        pii_check,
        redact_pii,
        scope_from_context,
        session_scope,
        user_scope,
    )

__version__ = "0.1.0"

# name -> module that defines it; imported on first attribute access.
_LAZY: dict[str, str] = {
    "CallableMemory": "memoryport.adapters.callable",
    "MemoryTool": "memoryport.tools",
    "MemoryTools": "memoryport.tools",
    "PendingWrite": "memoryport.tools",
    "ToolContext": "memoryport.tools",
    "ToolError": "memoryport.tools",
    "find_pii": "memoryport.tools",
    "memory_tools": "memoryport.tools",
    "pii_check": "memoryport.tools",
    "redact_pii": "memoryport.tools",
    "scope_from_context": "memoryport.tools",
    "session_scope": "memoryport.tools",
    "user_scope": "memoryport.tools",
    "CallableReranker": "memoryport._rerank",
    "CopyReport": "memoryport._copy",
    "GraphitiMemory": "memoryport.adapters.graphiti",
    "LocalEmbedder": "memoryport.embedders.local",
    "OpenAIEmbedder": "memoryport.embedders.openai",
    "SentenceTransformerEmbedder": "memoryport.embedders.sentence_transformers",
    "CrossEncoderReranker": "memoryport.embedders.rerank",
    "Mem0Memory": "memoryport.adapters.mem0",
    "PostgresMemory": "memoryport.adapters.postgres",
    "RerankerPort": "memoryport._rerank",
    "SQLiteMemory": "memoryport.adapters.sqlite",
    "ZepMemory": "memoryport.adapters.zep",
    "copy_memories": "memoryport._copy",
    "copy_memories_sync": "memoryport._copy",
    "ChunkOptions": "memoryport.knowledge",
    "Fact": "memoryport._graph",
    "FactExtraction": "memoryport._graph_extract",
    "GraphPort": "memoryport._graph",
    "KnowledgeGraph": "memoryport._graph",
    "NewFact": "memoryport._graph",
    "Related": "memoryport._graph",
    "SupportsGraph": "memoryport._graph",
    "SQLiteGraph": "memoryport.adapters.sqlite",
    "graph_tools": "memoryport.tools",
    "ImportReport": "memoryport.knowledge",
    "import_knowledge": "memoryport.knowledge",
    "import_knowledge_sync": "memoryport.knowledge",
    "AgentMemory": "memoryport.curated",
    "CallableModel": "memoryport.models",
    "ExtractionPolicy": "memoryport.extraction",
    "MemoryExtractor": "memoryport.extraction",
    "ModelPort": "memoryport.models",
    "OpenAIModel": "memoryport.models.openai",
    "CurationPolicy": "memoryport.curated",
    "NewMemory": "memoryport.curated",
    "curated_tools": "memoryport.curated",
    "AutoRecall": "memoryport.loop",
    "ContextPolicy": "memoryport.loop",
    "ConversationLog": "memoryport.loop",
    "PromptContext": "memoryport.loop",
    "Scratchpad": "memoryport.loop",
    "ToolHistory": "memoryport.loop",
    "loop_tools": "memoryport.loop",
}

__all__ = [
    "DEFAULT_LIMITS",
    "OPERATORS",
    "AgentMemory",
    "AutoRecall",
    "BackendError",
    "CallableEmbedder",
    "CallableMemory",
    "CallableModel",
    "CallableReranker",
    "Capability",
    "ChunkOptions",
    "ContextPolicy",
    "ConversationLog",
    "CopyReport",
    "CrossEncoderReranker",
    "CurationPolicy",
    "EmbedderMismatch",
    "EmbeddingError",
    "EmbeddingPort",
    "EventSink",
    "ExtractionPolicy",
    "Fact",
    "FactExtraction",
    "GraphPort",
    "GraphitiMemory",
    "GuardOptions",
    "GuardedMemory",
    "ImportReport",
    "InvalidInput",
    "KnowledgeGraph",
    "Limits",
    "LocalEmbedder",
    "Mem0Memory",
    "MemoryEvent",
    "MemoryExtractor",
    "MemoryHit",
    "MemoryPort",
    "MemoryRecord",
    "MemoryScope",
    "MemoryTool",
    "MemoryTools",
    "MemoryUpdate",
    "MemoryportError",
    "MetadataValue",
    "MissingExtra",
    "ModelError",
    "ModelPort",
    "NewFact",
    "NewMemory",
    "OpenAIEmbedder",
    "OpenAIModel",
    "PendingWrite",
    "PostgresMemory",
    "PromptContext",
    "Related",
    "RerankerPort",
    "SQLiteGraph",
    "SQLiteMemory",
    "Scratchpad",
    "SearchMode",
    "SearchResults",
    "SentenceTransformerEmbedder",
    "SupportsCheckRecords",
    "SupportsCheckpoint",
    "SupportsClose",
    "SupportsGraph",
    "SupportsSettle",
    "SupportsStats",
    "TimeBound",
    "ToolContext",
    "ToolError",
    "ToolHistory",
    "UnsupportedCapability",
    "UsageError",
    "WalRemoved",
    "ZepMemory",
    "__version__",
    "copy_memories",
    "copy_memories_sync",
    "curated_tools",
    "find_pii",
    "graph_tools",
    "import_knowledge",
    "import_knowledge_sync",
    "loop_tools",
    "memory_tools",
    "pii_check",
    "redact_pii",
    "scope_from_context",
    "session_scope",
    "user_scope",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
