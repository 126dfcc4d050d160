"""function_tools: OpenAI Agents SDK tools whose scope comes from the run context, with a scripted model provider."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, set_tracing_disabled
from agents_support import ScriptedModel, ScriptedProvider

from memoryport import GuardedMemory, MemoryScope, ToolContext, memory_tools
from memoryport.integrations.openai_agents import function_tools

set_tracing_disabled(True)  # nothing may call out


@dataclass
class AppContext:
    """A host's own run context: memoryport reads the ids off it."""

    user_id: str
    session_id: str | None = None


async def run(memory: GuardedMemory, context: Any, *turns: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Run an agent whose model makes ``turns`` of tool calls; return what the tools answered in the last turn."""
    model = ScriptedModel(*turns)
    agent = Agent(name="assistant", instructions="Use memory.", tools=function_tools(memory_tools(memory)))
    config = RunConfig(model_provider=ScriptedProvider(model), tracing_disabled=True)
    everything: list[dict[str, Any]] = []
    result = await Runner.run(agent, "hi", context=context, run_config=config)
    for item in result.new_items:
        if item.type == "tool_call_output_item":
            everything.append(json.loads(item.output))
    return everything


@pytest.mark.anyio
async def test_the_tools_are_the_memory_tools(sqlite_memory: GuardedMemory) -> None:
    tools = memory_tools(sqlite_memory)
    made = function_tools(tools)
    assert [t.name for t in made] == tools.names
    for tool, core in zip(made, tools, strict=True):
        assert tool.description == core.description and tool.params_json_schema == core.parameters
        assert tool.strict_json_schema


@pytest.mark.anyio
async def test_remember_and_recall_for_two_users(sqlite_memory: GuardedMemory) -> None:
    await run(sqlite_memory, AppContext("ann", "chat-1"), [("remember", {"text": "Ann collects stamps"})])
    await run(sqlite_memory, ToolContext(user_id="ben"), [("remember", {"text": "Ben collects coins"})])
    [ann] = await run(sqlite_memory, {"user_id": "ann"}, [("recall", {"query": "collects"})])
    [ben] = await run(sqlite_memory, AppContext("ben"), [("recall", {"query": "collects"})])
    assert [m["text"] for m in ann["memories"]] == ["Ann collects stamps"]
    assert [m["text"] for m in ben["memories"]] == ["Ben collects coins"]
    [record] = await sqlite_memory.export(MemoryScope(user_id="ann"))
    assert record.scope.session_id == "chat-1"


@pytest.mark.anyio
async def test_the_model_cannot_read_or_forget_another_users_memories(sqlite_memory: GuardedMemory) -> None:
    [saved] = await run(sqlite_memory, AppContext("ann"), [("remember", {"text": "Ann's safe word is heron"})])
    anns_id = saved["id"]
    results = await run(
        sqlite_memory,
        AppContext("ben"),
        [("recall", {"query": "safe word", "user_id": "ann"})],
        [("recall", {"query": "safe word"})],
        [("forget", {"id": anns_id}), ("forget", {"id": anns_id, "user_id": "ann"})],
    )
    assert results[0]["error"]["code"] == "invalid_arguments" and "user_id" in results[0]["error"]["message"]
    assert results[1]["memories"] == []
    assert results[2] == {"id": anns_id, "forgotten": False}
    assert results[3]["error"]["code"] == "invalid_arguments"
    assert "heron" not in json.dumps(results)
    assert [r.text for r in await sqlite_memory.export(MemoryScope(user_id="ann"))] == ["Ann's safe word is heron"]


@pytest.mark.anyio
async def test_no_context_is_anonymous(sqlite_memory: GuardedMemory) -> None:
    [result] = await run(sqlite_memory, None, [("remember", {"text": "x"})])
    assert result["error"]["code"] == "anonymous"


@pytest.mark.anyio
async def test_forget_own_memory(sqlite_memory: GuardedMemory) -> None:
    [saved] = await run(sqlite_memory, AppContext("ann"), [("remember", {"text": "Ann owns a kayak"})])
    [gone] = await run(sqlite_memory, AppContext("ann"), [("forget", {"id": saved["id"]})])
    assert gone == {"id": saved["id"], "forgotten": True}
    assert await sqlite_memory.export(MemoryScope(user_id="ann")) == []
