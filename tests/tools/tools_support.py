"""The tools tests' store: the public in-memory reference store, recording what was deleted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryport import Capability, GuardedMemory, MemoryScope
from memoryport.testing import InMemoryStore

# What the tools tests have always run on: whole records (sessions, agents,
# metadata, filters, expiry) with get, delete, export and purge.
FULL = frozenset(
    {
        Capability.SESSION_SCOPE,
        Capability.AGENT_SCOPE,
        Capability.METADATA,
        Capability.FILTERS,
        Capability.EXPIRY,
        Capability.GET,
        Capability.DELETE,
        Capability.EXPORT,
        Capability.PURGE,
    }
)
# A user-only backend, like Zep.
USER_ONLY = frozenset({Capability.KEYWORD_SEARCH, Capability.GET, Capability.DELETE, Capability.EXPORT})


class DictStore(InMemoryStore):
    """InMemoryStore named "dict" that remembers the ids it deleted, in order."""

    def __init__(self, capabilities: frozenset[Capability] = FULL, name: str = "dict") -> None:
        super().__init__(capabilities=capabilities, name=name)
        self.deleted: list[str] = []

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        doomed = self.doomed(ids, scope)
        self.deleted.extend(doomed)
        return await super().delete(doomed, scope=scope)

    def memory(self, **kwargs: Any) -> GuardedMemory[DictStore]:
        return GuardedMemory(self, **kwargs)

    def user_only_memory(self) -> GuardedMemory[DictStore]:
        """A second view of the same rows declaring no sessions, agents or metadata (like Zep)."""
        view = DictStore(USER_ONLY, name="dict-user-only")
        view.rows = self.rows
        view.deleted = self.deleted
        return GuardedMemory(view)
