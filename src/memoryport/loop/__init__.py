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

from ._conversation import ROLES, ConversationLog, NewTurn, Role, Turn
from ._tools import LOOP_TOOLS, LoopTools, SearchPastConversations, loop_tools

__all__ = [
    "LOOP_TOOLS",
    "ROLES",
    "ConversationLog",
    "LoopTools",
    "NewTurn",
    "Role",
    "SearchPastConversations",
    "Turn",
    "loop_tools",
]
