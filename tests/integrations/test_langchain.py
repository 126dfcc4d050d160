"""langchain_tools: LangChain BaseTools whose scope comes from config["configurable"], never from arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from lc_support import ScriptedChatModel, call, script

from memoryport import GuardedMemory, MemoryScope, ToolContext, UsageError, memory_tools
from memoryport.integrations.langchain import context_from_config, langchain_tools


def turn(model: ScriptedChatModel, memory: GuardedMemory, config: RunnableConfig) -> list[dict[str, Any]]:
    """One chat turn the LangChain way: bind the tools, run each tool call the model makes, feed results back."""
    tools = {t.name: t for t in langchain_tools(memory_tools(memory))}
    bound = model.bind_tools(list(tools.values()))
    messages: list[BaseMessage] = [HumanMessage("hi")]
    results: list[dict[str, Any]] = []
    while True:
        ai = bound.invoke(messages, config=config)
        assert isinstance(ai, AIMessage)
        messages.append(ai)
        if not ai.tool_calls:
            return results
        for tool_call in ai.tool_calls:
            out = tools[tool_call["name"]].invoke(tool_call, config=config)
            assert isinstance(out, ToolMessage)
            messages.append(out)
            results.append(json.loads(str(out.content)))


def user(user_id: str, **more: str) -> RunnableConfig:
    return {"configurable": {"user_id": user_id, **more}}


def test_bound_tools_are_the_memory_tools(sqlite_memory: GuardedMemory) -> None:
    tools = memory_tools(sqlite_memory)
    model = script("ok")
    turn(model, sqlite_memory, user("ann"))
    assert [b["function"]["name"] for b in model.bound] == tools.names
    for bound, tool in zip(model.bound, tools, strict=True):
        assert bound["function"]["name"] == tool.name
        assert bound["function"]["parameters"] == tool.parameters


def test_remember_and_recall_for_two_users(sqlite_memory: GuardedMemory) -> None:
    turn(
        script(AIMessage("", tool_calls=[call("remember", {"text": "Ann plays the cello"}, "1")]), "ok"),
        sqlite_memory,
        user("ann", thread_id="t1"),
    )
    turn(
        script(AIMessage("", tool_calls=[call("remember", {"text": "Ben plays the drums"}, "1")]), "ok"),
        sqlite_memory,
        user("ben"),
    )
    [ann] = turn(
        script(AIMessage("", tool_calls=[call("recall", {"query": "plays"}, "2")]), "ok"), sqlite_memory, user("ann")
    )
    [ben] = turn(
        script(AIMessage("", tool_calls=[call("recall", {"query": "plays"}, "2")]), "ok"), sqlite_memory, user("ben")
    )
    assert [m["text"] for m in ann["memories"]] == ["Ann plays the cello"]
    assert [m["text"] for m in ben["memories"]] == ["Ben plays the drums"]
    [record] = sqlite_memory.export_sync(MemoryScope(user_id="ann"))
    assert record.scope.session_id == "t1"  # LangGraph's thread_id is the session


def test_the_model_cannot_read_or_forget_another_users_memories(sqlite_memory: GuardedMemory) -> None:
    [saved] = turn(
        script(AIMessage("", tool_calls=[call("remember", {"text": "Ann's PIN hint is 'rose'"}, "1")]), "k"),
        sqlite_memory,
        user("ann"),
    )
    anns_id = saved["id"]
    attack = script(
        AIMessage("", tool_calls=[call("recall", {"query": "PIN hint", "user_id": "ann"}, "a")]),
        AIMessage("", tool_calls=[call("recall", {"query": "PIN hint"}, "b")]),
        AIMessage("", tool_calls=[call("forget", {"id": anns_id}, "c")]),
        AIMessage(
            "", tool_calls=[call("forget", {"id": anns_id, "config": {"configurable": {"user_id": "ann"}}}, "d")]
        ),
        "done",
    )
    results = turn(attack, sqlite_memory, user("ben"))
    assert results[0]["error"]["code"] == "invalid_arguments"
    assert results[1]["memories"] == []
    assert results[2] == {"id": anns_id, "forgotten": False}
    assert results[3]["error"]["code"] == "invalid_arguments"  # a "config" argument is not the host's config
    assert "config" in results[3]["error"]["message"]
    assert "rose" not in json.dumps(results)
    assert [r.text for r in sqlite_memory.export_sync(MemoryScope(user_id="ann"))] == ["Ann's PIN hint is 'rose'"]


def test_no_user_in_the_config_is_anonymous(sqlite_memory: GuardedMemory) -> None:
    [result] = turn(script(AIMessage("", tool_calls=[call("recall", {"query": ""}, "1")]), "ok"), sqlite_memory, {})
    assert result["error"]["code"] == "anonymous"
    [result] = turn(
        script(AIMessage("", tool_calls=[call("recall", {"query": ""}, "1")]), "ok"),
        sqlite_memory,
        {"configurable": {"thread_id": "t1"}},
    )
    assert result["error"]["code"] == "anonymous"


def test_a_tool_context_in_the_config_is_used_as_is(sqlite_memory: GuardedMemory) -> None:
    ctx = ToolContext(user_id="ann")
    turn(
        script(AIMessage("", tool_calls=[call("remember", {"text": "Ann hikes"}, "1")]), "ok"),
        sqlite_memory,
        {"configurable": {"tool_context": ctx}},
    )
    assert ctx.operations["memory.added"] == 1
    with pytest.raises(UsageError):
        context_from_config({"configurable": {"tool_context": {"user_id": "ann"}}})


@pytest.mark.anyio
async def test_async_invocation(sqlite_memory: GuardedMemory) -> None:
    tools = {t.name: t for t in langchain_tools(sqlite_memory)}
    out = await tools["remember"].ainvoke({"text": "Ann sails"}, config=user("ann"))
    assert json.loads(out)["remembered"] is True
    found = json.loads(await tools["recall"].ainvoke({"query": "sails"}, config=user("ann")))
    assert [m["text"] for m in found["memories"]] == ["Ann sails"]
    assert json.loads(await tools["recall"].ainvoke({"query": "sails"}, config=user("ben")))["memories"] == []


def test_in_a_langgraph_agent(sqlite_memory: GuardedMemory) -> None:
    pytest.importorskip("langgraph.prebuilt")
    import warnings

    from langgraph.prebuilt import create_react_agent

    model = script(AIMessage("", tool_calls=[call("remember", {"text": "Ann bakes bread"}, "1")]), "ok")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, langchain_tools(sqlite_memory))
    agent.invoke({"messages": [("user", "remember I bake")]}, user("ann", thread_id="t9"))
    [record] = sqlite_memory.export_sync(MemoryScope(user_id="ann"))
    assert (record.text, record.scope.session_id) == ("Ann bakes bread", "t9")


@pytest.mark.anyio
async def test_a_sync_invoke_inside_a_running_loop_names_ainvoke(sqlite_memory: GuardedMemory) -> None:
    tool = langchain_tools(sqlite_memory)[1]
    with pytest.raises(UsageError, match="ainvoke"):
        tool.invoke({"query": "x"}, config=user("ann"))
