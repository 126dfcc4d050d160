"""AgentMemory on Mem0Memory: it works when the adapter can update, and refuses early, naming why, when not."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

pytest.importorskip("mem0")

from memoryport import Capability, Mem0Memory, MemoryScope, UnsupportedCapability
from memoryport.curated import AgentMemory


@pytest.mark.anyio
async def test_curated_memory_on_mem0(mem0_client: Any) -> None:
    memory = Mem0Memory(mem0_client)
    if Capability.UPDATE not in memory.capabilities:
        with pytest.raises(UnsupportedCapability, match="'update'") as info:
            AgentMemory(memory)
        assert info.value.backend == memory.backend
        return
    agent = AgentMemory(memory)
    ann = MemoryScope(user_id="ann-" + secrets.token_hex(4))
    first = await agent.remember("Ann likes green tea", scope=ann, kind="preference")
    again = await agent.remember("Ann really likes green tea", scope=ann)
    assert again.action == "updated" and again.id == first.id
    [item] = await agent.recall("green tea", scope=ann)
    assert item.kind == "preference" and item.uses == 1
    preview = await agent.forget("green tea", scope=ann)
    assert preview.dry_run and preview.ids == [first.id] and len(await memory.export(ann)) == 1
    await memory.delete(scope=ann)
