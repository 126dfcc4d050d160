"""``recall(since=...)`` and the ``update_memory`` tool, on SQLite: scope from the context only."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memoryport import (
    MemoryRecord,
    MemoryScope,
    PendingWrite,
    SQLiteMemory,
    ToolContext,
    UsageError,
    memory_tools,
)
from memoryport._records import utcnow

pytestmark = pytest.mark.anyio

ANN = ToolContext(user_id="ann", session_id="chat-1")
BEN = ToolContext(user_id="ben", session_id="chat-9")


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SQLiteMemory]:
    m = SQLiteMemory(tmp_path / "m.db")
    yield m
    m.close()


async def test_recall_since_keeps_only_recent_memories(sqlite: SQLiteMemory) -> None:
    now = utcnow()
    ann = MemoryScope(user_id="ann")
    await sqlite.add(
        [
            MemoryRecord(scope=ann, text="Ann adopted a cat", created_at=now - timedelta(days=30)),
            MemoryRecord(scope=ann, text="Ann named the cat Miso", created_at=now - timedelta(hours=2)),
            MemoryRecord(scope=MemoryScope(user_id="ben"), text="Ben has a cat too"),
        ]
    )
    tools = memory_tools(sqlite)
    recent = await tools.dispatch("recall", {"query": "cat", "since": "7d"}, ANN)
    assert [m["text"] for m in recent["memories"]] == ["Ann named the cat Miso"]
    everything = await tools.dispatch("recall", {"query": "cat", "since": None}, ANN)
    assert {m["text"] for m in everything["memories"]} == {"Ann adopted a cat", "Ann named the cat Miso"}
    assert len((await tools.dispatch("recall", {"query": "cat"}, ANN))["memories"]) == 2
    bad = await tools.dispatch("recall", {"query": "cat", "since": "last week"}, ANN)
    assert bad["error"]["code"] == "invalid_input" and "since" in bad["error"]["message"]
    # The model cannot widen the scope through arguments.
    sneaky = await tools.dispatch("recall", {"query": "cat", "since": "7d", "user_id": "ben"}, ANN)
    assert sneaky["error"]["code"] == "invalid_arguments"


async def test_update_memory_changes_only_the_callers_own_memory(sqlite: SQLiteMemory) -> None:
    tools = memory_tools(sqlite)
    assert tools.names == ["remember", "recall", "forget", "update_memory"]
    assert tools["update_memory"].effect == "destructive"
    [ann_id] = await sqlite.add([MemoryRecord(scope=MemoryScope(user_id="ann", session_id="chat-0"),
                                              text="Ann lives in Lyon")])  # fmt: skip
    done = await tools.dispatch("update_memory", {"id": ann_id, "text": "Ann lives in Porto"}, ANN)
    assert done == {"id": ann_id, "updated": True}  # another chat of Ann's: across_sessions
    got = await sqlite.get(ann_id, scope=MemoryScope(user_id="ann"))
    assert got is not None and got.text == "Ann lives in Porto" and got.updated_at is not None
    # Ben names Ann's id: the same answer as a missing id, nothing changes.
    theirs = await tools.dispatch("update_memory", {"id": ann_id, "text": "Ben was here"}, BEN)
    missing = await tools.dispatch("update_memory", {"id": "no-such-id", "text": "Ben was here"}, BEN)
    assert theirs == {"id": ann_id, "updated": False}
    assert missing == {"id": "no-such-id", "updated": False}
    named = await tools.dispatch("update_memory", {"id": ann_id, "text": "Ben", "user_id": "ann"}, BEN)
    assert named["error"]["code"] == "invalid_arguments"
    got = await sqlite.get(ann_id, scope=MemoryScope(user_id="ann"))
    assert got is not None and got.text == "Ann lives in Porto"
    odd = await tools.dispatch("update_memory", {"id": "bad\x00id", "text": "x"}, ANN)
    assert odd == {"id": "bad\x00id", "updated": False}
    empty = await tools.dispatch("update_memory", {"id": ann_id, "text": "  "}, ANN)
    assert empty["error"]["code"] == "invalid_arguments"


async def test_update_memory_goes_through_the_pii_check_and_approval(sqlite: SQLiteMemory) -> None:
    [rid] = await sqlite.add([MemoryRecord(scope=MemoryScope(user_id="ann"), text="Ann's phone is private")])
    pending: list[PendingWrite] = []

    def refuse(p: PendingWrite) -> bool:
        pending.append(p)
        return False

    tools = memory_tools(sqlite, confirm_writes=True, approve=refuse)
    refused = await tools.dispatch("update_memory", {"id": rid, "text": "Ann moved to Porto"}, ANN)
    assert refused["error"]["code"] == "not_approved"
    assert [(p.tool, p.id, p.text) for p in pending] == [("update_memory", rid, "Ann moved to Porto")]
    pii = await tools.dispatch("update_memory", {"id": rid, "text": "Call Ann at +33 6 12 34 56 78"}, ANN)
    assert pii["error"]["code"] == "refused"
    got = await sqlite.get(rid, scope=MemoryScope(user_id="ann"))
    assert got is not None and got.text == "Ann's phone is private" and got.updated_at is None
    allowed = memory_tools(sqlite, confirm_writes=True, approve=lambda p: True)
    assert (await allowed.dispatch("update_memory", {"id": rid, "text": "Ann moved to Porto"}, ANN))["updated"]


def test_update_memory_is_offered_only_where_the_backend_can_update(sqlite: SQLiteMemory) -> None:
    from tools_support import DictStore

    plain = DictStore().memory()
    assert "update_memory" not in memory_tools(plain).names
    with pytest.raises(UsageError, match="update=False"):
        memory_tools(plain, update=True)
    assert "update_memory" not in memory_tools(sqlite, update=False).names
    schema = memory_tools(sqlite)["update_memory"].parameters
    assert schema["required"] == ["id", "text"] and schema["additionalProperties"] is False
