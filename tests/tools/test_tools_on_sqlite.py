"""The tools on the embedded default, SQLiteMemory: isolation and forget hold on a real file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memoryport import GuardedMemory, MemoryScope, SQLiteMemory, ToolContext, memory_tools, session_scope
from memoryport.adapters.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[GuardedMemory[SQLiteStore]]:
    m = SQLiteMemory(tmp_path / "memory.db")
    yield m
    await m.aclose()


async def test_two_users_on_one_file(memory: GuardedMemory[SQLiteStore]) -> None:
    tools = memory_tools(memory)
    ann1, ann2 = ToolContext(user_id="ann", session_id="a1"), ToolContext(user_id="ann", session_id="a2")
    ben = ToolContext(user_id="ben", session_id="b1")
    a = await tools.dispatch("remember", '{"text": "Ann drinks green tea"}', ann1)
    b = await tools.dispatch("remember", '{"text": "Ben drinks green tea too"}', ben)
    found = await tools.dispatch("recall", '{"query": "green tea"}', ann2)
    assert [m["id"] for m in found["memories"]] == [a["id"]]
    assert (await tools.dispatch("recall", '{"query": "tea", "user_id": "ben"}', ann2))["error"]["code"] == (
        "invalid_arguments"
    )
    assert await tools.dispatch("forget", {"id": b["id"]}, ann2) == {"id": b["id"], "forgotten": False}
    assert await tools.dispatch("forget", {"id": "f" * 32}, ann2) == {"id": "f" * 32, "forgotten": False}
    assert [r.text for r in await memory.export(MemoryScope(user_id="ben"))] == ["Ben drinks green tea too"]
    assert await tools.dispatch("forget", {"id": a["id"]}, ann2) == {"id": a["id"], "forgotten": True}
    assert await memory.export(MemoryScope(user_id="ann")) == []
    [record] = await memory.export(MemoryScope(user_id="ben"))
    assert record.scope == MemoryScope(user_id="ben", session_id="b1")


async def test_anonymous_threads_stay_apart(memory: GuardedMemory[SQLiteStore]) -> None:
    tools = memory_tools(memory, scope_from=session_scope)
    one, two = ToolContext(session_id="visitor-1"), ToolContext(session_id="visitor-2")
    await tools.dispatch("remember", '{"text": "Visitor likes jazz"}', one)
    assert [m["text"] for m in (await tools.dispatch("recall", '{"query": "jazz"}', one))["memories"]] == [
        "Visitor likes jazz"
    ]
    assert (await tools.dispatch("recall", '{"query": "jazz"}', two))["memories"] == []
    assert (await tools.dispatch("recall", '{"query": ""}', two))["memories"] == []
