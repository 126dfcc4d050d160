"""The scratchpad: notes per session, think, replace by key, promotion at the end with a dry run first."""

from __future__ import annotations

import pytest

from memoryport import Capability, GuardedMemory, InvalidInput, MemoryScope, UnsupportedCapability, UsageError
from memoryport.curated import AgentMemory
from memoryport.loop import Scratchpad
from memoryport.testing import InMemoryStore

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
TRIP = MemoryScope(user_id="ann", session_id="trip")
OTHER = MemoryScope(user_id="ann", session_id="other")


async def test_scratch_think_and_end(memory: GuardedMemory) -> None:
    agent = AgentMemory(memory)
    pad = Scratchpad(agent)
    await pad.scratch("Budget is 800 EUR", key="budget", scope=TRIP)
    await pad.scratch("Flight LH 1234 at 9:40", key="flight", scope=TRIP)
    await pad.scratch("Maybe the museum on Monday", scope=TRIP)
    await pad.scratch("unrelated note", scope=OTHER)
    replaced = await pad.scratch("Budget is 950 EUR", key="budget", scope=TRIP)
    assert replaced.key == "budget" and replaced.content == "Budget is 950 EUR"
    everything = await pad.think(scope=TRIP)
    assert [i.content for i in everything] == ["Budget is 950 EUR", "Flight LH 1234 at 9:40",
                                               "Maybe the museum on Monday"]
    assert [i.content for i in await pad.think("flight", scope=TRIP)] == ["Flight LH 1234 at 9:40"]
    assert await agent.recall("budget", scope=ANN) == []  # working memory is not long-term memory
    preview = await pad.end(scope=TRIP, promote=["budget", everything[1].id], kind="fact")
    assert preview.dry_run and [i.key for i in preview.promote] == ["budget", "flight"]
    assert [i.content for i in preview.discard] == ["Maybe the museum on Monday"]
    assert len(await pad.think(scope=TRIP)) == 3  # nothing changed
    done = await pad.end(scope=TRIP, promote=["budget", "flight"], kind="fact", dry_run=False)
    assert [r.action for r in done.promoted] == ["added", "added"] and done.removed == 3
    assert await pad.think(scope=TRIP) == []
    facts = await agent.list_memories(scope=ANN, kind="fact")
    assert sorted(m.text for m in facts) == ["Budget is 950 EUR", "Flight LH 1234 at 9:40"]
    assert {m.source for m in facts} == {"scratchpad"}
    assert [i.content for i in await pad.think(scope=OTHER)] == ["unrelated note"]


async def test_misuse_is_refused_and_nothing_changes() -> None:
    memory = GuardedMemory(InMemoryStore())
    agent = AgentMemory(memory)
    pad = Scratchpad(agent, max_items=2, max_chars=50)
    await pad.scratch("one", key="a", scope=TRIP)
    with pytest.raises(InvalidInput):
        await pad.scratch("", scope=TRIP)
    with pytest.raises(InvalidInput):
        await pad.scratch("x" * 51, scope=TRIP)
    with pytest.raises(InvalidInput):
        await pad.scratch("ok", key="bad\nkey", scope=TRIP)
    with pytest.raises(UsageError, match="session"):
        await pad.scratch("ok", scope=ANN)
    await pad.scratch("two", scope=TRIP)
    with pytest.raises(InvalidInput, match="full"):
        await pad.scratch("three", scope=TRIP)
    await pad.scratch("one again", key="a", scope=TRIP)  # replacing works on a full pad
    with pytest.raises(InvalidInput) as err:
        await pad.end(scope=TRIP, promote=["a", "nope"], dry_run=False)
    assert err.value.field == "promote[1]"
    with pytest.raises(InvalidInput):
        await pad.end(scope=TRIP, promote=["a"], kind="gossip")  # the dry run checks what would be stored
    with pytest.raises(UsageError):
        await pad.end(scope=TRIP, promote="a")  # type: ignore[arg-type]
    assert len(await pad.think(scope=TRIP)) == 2 and await agent.list_memories(scope=ANN) == []
    assert await pad.discard(["a"], scope=TRIP) == 1
    everything = InMemoryStore().capabilities
    no_sessions = AgentMemory(GuardedMemory(InMemoryStore(capabilities=everything - {Capability.SESSION_SCOPE})))
    with pytest.raises(UnsupportedCapability, match="session_scope"):
        Scratchpad(no_sessions)
    with pytest.raises(UsageError):
        Scratchpad(memory)  # type: ignore[arg-type]
