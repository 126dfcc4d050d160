"""The conversation log: turns as ordinary records, per session, out of curated recall, searchable, erasable."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memoryport import (
    Capability,
    GuardedMemory,
    InvalidInput,
    MemoryScope,
    ToolContext,
    UnsupportedCapability,
    UsageError,
)
from memoryport.curated import AgentMemory
from memoryport.loop import ConversationLog, NewTurn, loop_tools
from memoryport.testing import InMemoryStore

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
ANN_1 = MemoryScope(user_id="ann", session_id="chat-1")
ANN_2 = MemoryScope(user_id="ann", session_id="chat-2")
BEN_1 = MemoryScope(user_id="ben", session_id="chat-1")


async def test_turns_are_indexed_per_session_and_read_back_in_order(memory: GuardedMemory) -> None:
    log = ConversationLog(memory)
    first = await log.store_turn("user", "Book a table at Luigi's for Friday", scope=ANN_1)
    second = await log.store_turn("assistant", "Booked: Friday 8 pm at Luigi's.", scope=ANN_1)
    other = await log.store_turn("user", "What's the weather in Porto?", scope=ANN_2)
    assert (first.index, second.index, other.index) == (0, 1, 0)
    assert first.at <= second.at
    history = await log.history(scope=ANN_1)
    assert [(t.role, t.index) for t in history] == [("user", 0), ("assistant", 1)]
    assert [t.session_id for t in await log.history(scope=ANN)] == ["chat-1", "chat-1", "chat-2"]
    assert [t.text for t in await log.history(scope=ANN, limit=1)] == ["What's the weather in Porto?"]
    # a new object reads the last index from the store
    again = ConversationLog(memory)
    assert (await again.store_turn("user", "Thanks!", scope=ANN_1)).index == 2
    assert await again.next_index(scope=ANN_1) == 3


async def test_batches_are_one_write_and_keep_order(memory: GuardedMemory) -> None:
    log = ConversationLog(memory)
    turns = await log.store_turns(
        [NewTurn("system", "You are helpful."), NewTurn("user", "hello"), NewTurn("assistant", "hi!", name="bot")],
        scope=ANN_1,
    )
    assert [t.index for t in turns] == [0, 1, 2]
    assert [t.at for t in turns] == sorted(t.at for t in turns) and len({t.at for t in turns}) == 3
    assert [t.name for t in await log.history(scope=ANN_1)] == [None, None, "bot"]
    # one bad turn: nothing stored
    with pytest.raises(InvalidInput) as err:
        await log.store_turns([NewTurn("user", "fine"), NewTurn("robot", "bad")], scope=ANN_1)
    assert err.value.field == "turns[1].role"
    assert len(await log.history(scope=ANN_1)) == 3


async def test_search_by_words_time_and_role(memory: GuardedMemory) -> None:
    log = ConversationLog(memory)
    old = datetime.now(timezone.utc) - timedelta(days=30)
    await log.store_turn("user", "I loved the sushi place downtown", scope=ANN_1, at=old)
    await log.store_turn("assistant", "Noted, the sushi place downtown.", scope=ANN_1, at=old + timedelta(seconds=5))
    await log.store_turn("user", "Any sushi tips for Lisbon?", scope=ANN_2)
    await log.store_turn("user", "sushi is my favourite", scope=BEN_1)
    hits = await log.search("sushi", scope=ANN)
    assert {t.text for t in hits} == {
        "I loved the sushi place downtown", "Noted, the sushi place downtown.", "Any sushi tips for Lisbon?"}
    assert all(t.score is not None for t in hits)
    assert [t.text for t in await log.search("sushi", scope=ANN, since="7d")] == ["Any sushi tips for Lisbon?"]
    assert [t.role for t in await log.search("sushi downtown", scope=ANN, role="assistant")] == ["assistant"]
    assert [t.text for t in await log.recent(scope=ANN, within="7d")] == ["Any sushi tips for Lisbon?"]
    until = await log.search("sushi", scope=ANN, until=datetime.now(timezone.utc) - timedelta(days=1))
    assert len(until) == 2


async def test_turns_stay_out_of_curated_recall_unless_asked(memory: GuardedMemory) -> None:
    agent = AgentMemory(memory)
    log = ConversationLog(agent)
    await agent.remember("Ann likes green tea", scope=ANN_1, kind="preference")
    await log.store_turn("user", "I like green tea, remember that", scope=ANN_1)
    assert [m.text for m in await agent.recall("green tea", scope=ANN)] == ["Ann likes green tea"]
    assert [m.text for m in await agent.list_memories(scope=ANN)] == ["Ann likes green tea"]
    both = await agent.recall("green tea", scope=ANN, include_log=True)
    assert {m.text for m in both} == {"Ann likes green tea", "I like green tea, remember that"}
    # dedup does not merge a memory into a turn, forget and decay leave turns alone
    result = await agent.remember("I like green tea, remember that", scope=ANN_1)
    assert result.action == "added"
    preview = await agent.forget("green tea remember", scope=ANN, threshold=0.1)
    assert all("remember that" not in i.text or i.id == result.id for i in preview.items)
    report = await agent.decay(scope=ANN, prune_below=1.0)
    assert all(i.text != "I like green tea, remember that" or i.id == result.id for i in report.pruned.items)
    turn = (await log.history(scope=ANN_1))[0]
    assert turn.record is not None and "mp:importance" not in turn.record.metadata
    stats = await agent.stats(scope=ANN)
    assert stats.total == 2 and stats.current == 2


async def test_turns_are_exported_and_erased_with_the_user(memory: GuardedMemory) -> None:
    log = ConversationLog(memory)
    await log.store_turn("user", "My sister Eva lives in Graz", scope=ANN_1)
    await log.store_turn("user", "Ben's own turn", scope=BEN_1)
    exported = await memory.export(ANN)
    assert [(r.text, r.metadata["mp:log"], r.metadata["mp:role"]) for r in exported] == [
        ("My sister Eva lives in Graz", "turn", "user")]
    assert await memory.delete(scope=ANN) == 1
    assert await log.history(scope=ANN) == []
    assert [t.text for t in await log.history(scope=MemoryScope(user_id="ben"))] == ["Ben's own turn"]


async def test_delete_session_previews_first(memory: GuardedMemory) -> None:
    log = ConversationLog(memory)
    await log.store_turns([NewTurn("user", "a b c"), NewTurn("assistant", "d e f")], scope=ANN_1)
    await log.store_turn("user", "other chat", scope=ANN_2)
    assert await log.delete_session(scope=ANN_1) == 2
    assert len(await log.history(scope=ANN_1)) == 2
    assert await log.delete_session(scope=ANN_1, dry_run=False) == 2
    assert [t.text for t in await log.history(scope=ANN)] == ["other chat"]
    assert (await log.store_turn("user", "again", scope=ANN_1)).index == 0


async def test_retention_applies_to_turns(tmp_path: Any) -> None:
    from memoryport import SQLiteMemory

    memory = SQLiteMemory(tmp_path / "r.db")
    log = ConversationLog(memory, ttl="1d")
    old = datetime.now(timezone.utc) - timedelta(days=2)
    await log.store_turn("user", "an old turn", scope=ANN_1, at=old)
    await log.store_turn("user", "a new turn", scope=ANN_1)
    assert [t.text for t in await log.history(scope=ANN_1)] == ["a new turn"]
    await memory.purge()  # SQLite already deletes expired records on every write
    assert [r.text for r in await memory.export(ANN)] == ["a new turn"]
    await memory.aclose()


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda log: log.store_turn("", "hi", scope=ANN_1), "role"),
        (lambda log: log.store_turn("robot", "hi", scope=ANN_1), "role"),
        (lambda log: log.store_turn(None, "hi", scope=ANN_1), "role"),
        (lambda log: log.store_turn("user", "", scope=ANN_1), "text"),
        (lambda log: log.store_turn("user", "   ", scope=ANN_1), "text"),
        (lambda log: log.store_turn("user", 42, scope=ANN_1), "text"),
        (lambda log: log.store_turn("user", "x" * 101, scope=ANN_1), "text"),
        (lambda log: log.store_turn("user", "a\x00b", scope=ANN_1), "text"),
        (lambda log: log.store_turn("user", "hi", scope=ANN_1, name="a\nb"), "name"),
        (lambda log: log.store_turn("user", "hi", scope=ANN_1, name="n" * 65), "name"),
        (lambda log: log.store_turn("user", "hi", scope=ANN_1, at=datetime(2020, 1, 1)), "at"),
        (lambda log: log.store_turn("user", "hi", scope=ANN_1,
                                    at=datetime.now(timezone.utc) + timedelta(days=1)), "created_at"),
        (lambda log: log.store_turn("user", "hi", scope=ANN_1, metadata={"mp:role": "x"}), "metadata"),
        (lambda log: log.history(scope=ANN_1, limit=0), "limit"),
        (lambda log: log.search("x", scope=ANN_1, k=100_000), "k"),
        (lambda log: log.search("x", scope=ANN_1, role="boss"), "role"),
        (lambda log: log.search("x", scope=ANN_1, since="yesterday"), "since"),
    ],
)
async def test_bad_input_is_a_typed_error_and_stores_nothing(call: Any, field: str) -> None:
    memory = GuardedMemory(InMemoryStore())
    log = ConversationLog(memory, max_chars=100)
    with pytest.raises(InvalidInput) as err:
        await call(log)
    assert field in err.value.field
    assert await memory.export(ANN) == []


async def test_turns_in_order_and_sessions_required() -> None:
    memory = GuardedMemory(InMemoryStore())
    log = ConversationLog(memory)
    await log.store_turn("user", "now", scope=ANN_1)
    with pytest.raises(InvalidInput, match="in order"):
        await log.store_turn("user", "earlier", scope=ANN_1, at=datetime.now(timezone.utc) - timedelta(hours=1))
    with pytest.raises(UsageError, match="session"):
        await log.store_turn("user", "no session", scope=ANN)
    with pytest.raises(UsageError):
        await log.store_turn("user", "no scope", scope=None)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await log.store_turns(NewTurn("user", "one"), scope=ANN_1)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        ConversationLog(memory, max_chars=0)
    with pytest.raises(UsageError):
        ConversationLog("memory.db")  # type: ignore[arg-type]


async def test_backends_without_the_capabilities_are_refused() -> None:
    everything = InMemoryStore().capabilities
    no_filters = GuardedMemory(InMemoryStore(capabilities=everything - {Capability.FILTERS}))
    with pytest.raises(UnsupportedCapability) as err:
        ConversationLog(no_filters)
    assert err.value.capability == "filters"
    users_only = GuardedMemory(InMemoryStore(capabilities=everything - {Capability.SESSION_SCOPE}))
    with pytest.raises(UnsupportedCapability, match="session_scope"):
        ConversationLog(users_only)


async def test_search_tool_takes_the_scope_from_the_context(memory: GuardedMemory) -> None:
    log = ConversationLog(memory)
    await log.store_turn("user", "Remind me: the plumber is Karl, call ann@example.com", scope=ANN_1)
    await log.store_turn("user", "The plumber Karl is great", scope=BEN_1)
    tools = loop_tools(log)
    assert tools.names == ["search_past_conversations"]
    schema = tools["search_past_conversations"].parameters
    assert set(schema["properties"]) == {"query", "since"}
    ctx = ToolContext(user_id="ann", session_id="chat-9")
    result = await tools.dispatch("search_past_conversations", json.dumps({"query": "plumber", "since": None}), ctx)
    assert result["count"] == 1
    assert result["turns"][0]["conversation"] == "chat-1"
    assert "ann@example.com" not in result["turns"][0]["text"] and "[email]" in result["turns"][0]["text"]
    assert "not instructions" in result["note"]
    sneaky = await tools.dispatch("search_past_conversations", {"query": "plumber", "since": None, "user_id": "ben"},
                                  ctx)
    assert sneaky["error"]["code"] == "invalid_arguments"
    anonymous = await tools.dispatch("search_past_conversations", {"query": "plumber", "since": None}, ToolContext())
    assert anonymous["error"]["code"] == "anonymous"
    empty = await tools.dispatch("search_past_conversations", {"query": " ", "since": None}, ctx)
    assert empty["error"]["code"] == "invalid_arguments"
    assert tools.openai()[0]["function"]["name"] == "search_past_conversations"
    assert tools.anthropic()[0]["input_schema"]["type"] == "object"


def test_blocking_twins(tmp_path: Any) -> None:
    from memoryport import SQLiteMemory

    memory = SQLiteMemory(tmp_path / "s.db")
    log = ConversationLog(memory)
    log.store_turns_sync([NewTurn("user", "hello there")], scope=ANN_1)
    assert [t.text for t in log.search_sync("hello", scope=ANN)] == ["hello there"]
    assert [t.text for t in log.recent_sync(scope=ANN)] == ["hello there"]
    memory.close()
