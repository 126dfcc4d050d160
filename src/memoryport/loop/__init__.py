"""The agent loop side of memory: conversation log, tool history, prompt context, auto-recall, scratchpad.

Everything here works above the guard, like curated memory: what it stores are
ordinary records marked with well-known ``mp:`` metadata, so export, copy,
erasure and retention keep working, on any backend with the capabilities each
part needs (each refuses clearly otherwise). :class:`~memoryport.AgentMemory`
leaves these records out of recall, dedup, decay, the cap and stats unless
asked (``include_log=True``).

=================  =======  =========================================================
key                type     meaning
=================  =======  =========================================================
``mp:log``         str      ``turn``, ``tool`` or ``scratch``: a record of the loop
``mp:role``        str      a turn's speaker: ``user``, ``assistant``, ``system``, ``tool``
``mp:turn``        int      a turn's index in its session, from 0
``mp:name``        str      a turn's speaker or tool name, when given
=================  =======  =========================================================
"""

from __future__ import annotations

from ._context import (
    BLOCK_NOTE,
    ContextBlock,
    ContextItem,
    ContextPolicy,
    PromptContext,
    TextFilter,
    complexity,
    is_sensitive,
    quote,
)
from ._conversation import ROLES, ConversationLog, NewTurn, Role, Turn
from ._hook import AfterTurn, AutoRecall, Extractor, TurnContext, message_role, message_text
from ._scratch import ScratchEnd, ScratchItem, Scratchpad
from ._toolhistory import ToolCallRecord, ToolHistory, ToolStats
from ._tools import LOOP_TOOLS, LoopTools, MemoryContext, SearchPastConversations, loop_tools

__all__ = [
    "BLOCK_NOTE",
    "LOOP_TOOLS",
    "ROLES",
    "AfterTurn",
    "AutoRecall",
    "ContextBlock",
    "ContextItem",
    "ContextPolicy",
    "ConversationLog",
    "Extractor",
    "LoopTools",
    "MemoryContext",
    "NewTurn",
    "PromptContext",
    "Role",
    "ScratchEnd",
    "ScratchItem",
    "Scratchpad",
    "SearchPastConversations",
    "TextFilter",
    "ToolCallRecord",
    "ToolHistory",
    "ToolStats",
    "Turn",
    "TurnContext",
    "complexity",
    "is_sensitive",
    "loop_tools",
    "message_role",
    "message_text",
    "quote",
]
