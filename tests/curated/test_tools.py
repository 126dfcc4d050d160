"""Curated tools in tiers: arguments validated, scope only from the context, forget_matching previews first."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memoryport import GuardedMemory, ToolContext, UsageError
from memoryport._records import utcnow
from memoryport.curated import AgentMemory, CurationPolicy, PendingForget, curated_tools

from .support import ANN, BEN

pytestmark = pytest.mark.anyio

ANN_CTX = ToolContext(user_id="ann", session_id="chat-1")
BEN_CTX = ToolContext(user_id="ben", session_id="chat-2")


def make(memory: GuardedMemory, tier: str = "standard", **kwargs: object) -> tuple[AgentMemory, object]:
    agent = AgentMemory(memory, policy=CurationPolicy(kinds=("fact", "preference", "reminder", "visit")))
    return agent, curated_tools(agent, tier=tier, **kwargs)  # type: ignore[arg-type]


async def test_tiers_hold_the_documented_tools(memory: GuardedMemory) -> None:
    agent = AgentMemory(memory)
    assert curated_tools(agent, tier="basic").names == ["remember", "recall", "forget"]
    assert curated_tools(agent).names == ["remember", "recall", "forget", "update_memory", "upcoming"]
    assert curated_tools(agent, tier="full").names == [
        "remember", "recall", "forget", "update_memory", "upcoming", "reinforce", "forget_matching"]
    basic = curated_tools(agent, tier="basic")
    assert set(basic["remember"].parameters["properties"]) == {"text", "kind", "importance"}
    assert set(basic["recall"].parameters["properties"]) == {"query"}
    standard = curated_tools(agent)
    assert set(standard["recall"].parameters["properties"]) == {"query", "since", "kind"}
    assert set(standard["remember"].parameters["properties"]) == {"text", "kind", "importance", "due_at"}
    for tool in curated_tools(agent, tier="full"):
        schema = tool.parameters
        assert schema["additionalProperties"] is False and schema["required"] == list(schema["properties"])
        assert not {"user_id", "scope", "session_id", "agent_id"} & set(schema["properties"])
    with pytest.raises(UsageError, match="tier"):
        curated_tools(agent, tier="admin")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="AgentMemory"):
        curated_tools(memory)  # type: ignore[arg-type]


async def test_kind_and_importance_are_optional_and_validated(memory: GuardedMemory) -> None:
    agent, tools = make(memory)
    r = await tools.dispatch("remember", {"text": "Went to Lyon", "kind": "visit", "importance": 1}, ANN_CTX)
    assert r["action"] == "added"
    item = await agent.get(r["id"], scope=ANN)
    assert item is not None and item.kind == "visit" and item.importance == 1.0 and item.source == "tool"
    plain = await tools.dispatch("remember", {"text": "Likes jazz", "kind": None, "importance": None}, ANN_CTX)
    item = await agent.get(plain["id"], scope=ANN)
    assert item is not None and item.kind == "fact" and item.importance == 0.5
    for bad in ({"kind": "skill"}, {"importance": 1.5}, {"importance": -0.01}, {"importance": "high"}):
        result = await tools.dispatch("remember", {"text": "Bad one", **bad}, ANN_CTX)
        assert result["error"]["code"] == "invalid_arguments", bad
    dup = await tools.dispatch("remember", {"text": "likes JAZZ"}, ANN_CTX)
    assert dup["id"] == plain["id"] and dup["action"] == "updated" and "note" in dup
    assert len(await memory.export(ANN)) == 2


async def test_the_model_never_names_a_user(memory: GuardedMemory) -> None:
    agent, tools = make(memory, tier="full", approve=lambda pending: True)
    ann = await tools.dispatch("remember", {"text": "Ann's secret plan for Lyon", "kind": "fact"}, ANN_CTX)
    for name, args in [
        ("remember", {"text": "x", "user_id": "ann"}),
        ("recall", {"query": "plan", "user_id": "ann"}),
        ("forget_matching", {"query": "plan", "scope": "ann"}),
    ]:
        result = await tools.dispatch(name, args, BEN_CTX)
        assert result["error"]["code"] == "invalid_arguments"
        assert "never from arguments" in result["error"]["message"]
    assert (await tools.dispatch("recall", {"query": "secret plan Lyon"}, BEN_CTX))["count"] == 0
    assert (await tools.dispatch("forget", {"id": ann["id"]}, BEN_CTX)) == {"id": ann["id"], "forgotten": False}
    upd = await tools.dispatch("update_memory", {"id": ann["id"], "text": "Ben's now"}, BEN_CTX)
    assert upd == {"id": ann["id"], "updated": False}
    assert (await tools.dispatch("reinforce", {"ids": [ann["id"]], "outcome": "negative"}, BEN_CTX))["count"] == 0
    matched = await tools.dispatch("forget_matching", {"query": "secret plan for Lyon", "threshold": 0.1}, BEN_CTX)
    assert matched["would_forget"] == [] and matched["forgotten"] == 0
    [record] = await memory.export(ANN)
    assert record.text == "Ann's secret plan for Lyon" and record.metadata["mp:importance"] == 0.5
    anonymous = await tools.dispatch("recall", {"query": "plan"}, ToolContext())
    assert anonymous["error"]["code"] == "anonymous"
    assert await agent.get(ann["id"], scope=BEN) is None


async def test_forget_matching_previews_and_deletes_only_when_approved(memory: GuardedMemory) -> None:
    seen: list[PendingForget] = []
    answer = {"value": False}

    def approve(pending: PendingForget) -> bool:
        seen.append(pending)
        return answer["value"]

    _, tools = make(memory, tier="full", approve=approve)
    a = await tools.dispatch("remember", {"text": "Ann works at Acme Corp"}, ANN_CTX)
    await tools.dispatch("remember", {"text": "Ann likes green tea"}, ANN_CTX)
    refused = await tools.dispatch("forget_matching", {"query": "works at Acme"}, ANN_CTX)
    assert refused["approved"] is False and refused["forgotten"] == 0
    assert [m["id"] for m in refused["would_forget"]] == [a["id"]]
    assert len(seen) == 1 and seen[0].preview is not None and seen[0].preview.ids == [a["id"]]
    assert seen[0].tool == "forget_matching" and seen[0].text == "works at Acme" and seen[0].context is ANN_CTX
    assert len(await memory.export(ANN)) == 2
    answer["value"] = True
    done = await tools.dispatch("forget_matching", {"query": "works at Acme", "threshold": None}, ANN_CTX)
    assert done["approved"] is True and done["forgotten"] == 1
    assert [r.text for r in await memory.export(ANN)] == ["Ann likes green tea"]
    _, no_approver = make(memory, tier="full")
    await no_approver.dispatch("remember", {"text": "Ann works at Initech"}, ANN_CTX)
    only = await no_approver.dispatch("forget_matching", {"query": "works at Initech"}, ANN_CTX)
    assert only["forgotten"] == 0 and len(only["would_forget"]) == 1
    assert len(await memory.export(ANN)) == 2


async def test_standard_tools_reminders_update_and_recall_filters(memory: GuardedMemory) -> None:
    agent, tools = make(memory, tier="full")
    due = (utcnow() + timedelta(days=2)).replace(microsecond=0)
    r = await tools.dispatch("remember", {"text": "Dentist appointment", "kind": "reminder",
                                          "due_at": due.isoformat().replace("+00:00", "Z")}, ANN_CTX)
    naive = await tools.dispatch("remember", {"text": "Call mum", "due_at": "2026-05-01T09:00:00"}, ANN_CTX)
    assert naive["error"]["code"] == "invalid_arguments" and "timezone" in naive["error"]["message"]
    up = await tools.dispatch("upcoming", {}, ANN_CTX)
    assert [d["id"] for d in up["due"]] == [r["id"]] and up["due"][0]["due_at"] == due.isoformat()
    assert (await tools.dispatch("upcoming", {"within": "1d"}, ANN_CTX))["count"] == 0
    pref = await tools.dispatch("remember", {"text": "Prefers window seats", "kind": "preference"}, ANN_CTX)
    found = await tools.dispatch("recall", {"query": "seats", "kind": "preference", "since": "1h"}, ANN_CTX)
    assert [m["id"] for m in found["memories"]] == [pref["id"]] and found["memories"][0]["kind"] == "preference"
    assert (await tools.dispatch("recall", {"query": "seats", "kind": "reminder"}, ANN_CTX))["count"] == 0
    bad = await tools.dispatch("recall", {"query": "seats", "since": "yesterday-ish"}, ANN_CTX)
    assert bad["error"]["code"] == "invalid_input"
    upd = await tools.dispatch("update_memory", {"id": pref["id"], "text": "Prefers aisle seats"}, ANN_CTX)
    assert upd["updated"] is True and upd["replaces"] == pref["id"] and upd["id"] != pref["id"]
    now = await tools.dispatch("recall", {"query": "seats"}, ANN_CTX)
    assert [m["text"] for m in now["memories"]] == ["Prefers aisle seats"]
    fb = await tools.dispatch("reinforce", {"ids": [upd["id"]], "outcome": "positive"}, ANN_CTX)
    assert fb == {"reinforced": [upd["id"]], "count": 1}
    item = await agent.get(upd["id"], scope=ANN)
    assert item is not None and item.importance > 0.5
    gone = await tools.dispatch("forget", {"id": upd["id"]}, ANN_CTX)
    assert gone["forgotten"] is True
    assert await agent.get(pref["id"], scope=ANN) is None  # the older version went with it
    assert await agent.get(r["id"], scope=BEN) is None
    assert BEN  # Ben's scope stays empty throughout
    assert await memory.export(BEN) == []


async def test_session_scoped_tools_dedup_only_inside_the_thread(memory: GuardedMemory) -> None:
    from memoryport import session_scope

    agent = AgentMemory(memory)
    tools = curated_tools(agent, scope_from=session_scope)
    one = ToolContext(user_id="ann", session_id="t1")
    two = ToolContext(user_id="ann", session_id="t2")
    a = await tools.dispatch("remember", {"text": "Ann likes green tea"}, one)
    b = await tools.dispatch("remember", {"text": "Ann likes green tea"}, two)
    assert a["action"] == b["action"] == "added" and a["id"] != b["id"]
    c = await tools.dispatch("remember", {"text": "Ann likes green tea."}, two)
    assert c["action"] == "updated" and c["id"] == b["id"]
    with pytest.raises(UsageError, match="within"):
        await agent.remember("x", scope=ANN, within=BEN)
