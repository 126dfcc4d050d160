"""memory_toolset: pydantic-ai agents (FunctionModel, TestModel) with the scope taken from the run's deps."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from memoryport import GuardedMemory, MemoryScope, ToolContext, UsageError, memory_tools
from memoryport.integrations.pydantic_ai import memory_toolset


@dataclass
class Deps:
    """A host's own deps: memoryport reads the ids off it."""

    user_id: str | None
    session_id: str | None = None


def scripted(*turns: list[tuple[str, dict[str, Any]]]) -> tuple[FunctionModel, list[dict[str, Any]]]:
    """A model that makes the given tool calls, one turn each, then answers; and the tool results it saw."""
    seen: list[dict[str, Any]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        for m in messages[-1:]:
            seen.extend(
                p.content if isinstance(p.content, dict) else json.loads(str(p.content))
                for p in m.parts
                if isinstance(p, ToolReturnPart)
            )
        if step < len(turns):
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=f"c{step}-{i}") for i, (name, args) in enumerate(turns[step])
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond), seen


def run(memory: GuardedMemory, deps: Any, *turns: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    model, seen = scripted(*turns)
    agent = Agent(model, deps_type=type(deps), toolsets=[memory_toolset(memory_tools(memory))])
    agent.run_sync("hi", deps=deps)
    return seen


def test_the_toolset_mirrors_the_memory_tools(sqlite_memory: GuardedMemory) -> None:
    tools = memory_tools(sqlite_memory)
    seen: dict[str, Any] = {}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t for t in info.function_tools})
        return ModelResponse(parts=[TextPart("ok")])

    Agent(FunctionModel(respond), toolsets=[memory_toolset(tools)]).run_sync("hi", deps=None)
    assert list(seen) == tools.names
    for tool in tools:
        assert seen[tool.name].description == tool.description
        assert seen[tool.name].parameters_json_schema == tool.parameters


def test_remember_and_recall_for_two_users(sqlite_memory: GuardedMemory) -> None:
    run(sqlite_memory, ToolContext(user_id="ann"), [("remember", {"text": "Ann likes green tea"})])
    run(sqlite_memory, Deps(user_id="ben", session_id="s1"), [("remember", {"text": "Ben likes black coffee"})])
    ann = run(sqlite_memory, {"user_id": "ann"}, [("recall", {"query": "likes"})])
    ben = run(sqlite_memory, Deps(user_id="ben"), [("recall", {"query": "likes"})])
    assert [m["text"] for m in ann[0]["memories"]] == ["Ann likes green tea"]
    assert [m["text"] for m in ben[0]["memories"]] == ["Ben likes black coffee"]
    [bens] = sqlite_memory.export_sync(MemoryScope(user_id="ben"))
    assert bens.scope.session_id == "s1"


def test_the_model_cannot_read_or_forget_another_users_memories(sqlite_memory: GuardedMemory) -> None:
    [saved] = run(sqlite_memory, Deps(user_id="ann"), [("remember", {"text": "Ann's locker code is 3141"})])
    anns_id = saved["id"]
    results = run(
        sqlite_memory,
        Deps(user_id="ben"),
        [("recall", {"query": "locker code", "user_id": "ann"})],  # names Ann
        [("recall", {"query": "locker code"})],
        [("forget", {"id": anns_id})],  # Ann's id, learned somehow
        [("forget", {"id": anns_id, "user_id": "ann"})],
    )
    assert results[0]["error"]["code"] == "invalid_arguments" and "user_id" in results[0]["error"]["message"]
    assert results[1]["memories"] == []
    assert results[2] == {"id": anns_id, "forgotten": False}
    assert results[3]["error"]["code"] == "invalid_arguments"
    assert "3141" not in json.dumps(results)
    assert [r.text for r in sqlite_memory.export_sync(MemoryScope(user_id="ann"))] == ["Ann's locker code is 3141"]


def test_anonymous_runs_are_refused(sqlite_memory: GuardedMemory) -> None:
    [result] = run(sqlite_memory, None, [("remember", {"text": "something"})])
    assert result["error"]["code"] == "anonymous"
    assert sqlite_memory.export_sync(MemoryScope(user_id="anyone")) == []


def test_deps_without_ids_are_a_host_error(sqlite_memory: GuardedMemory) -> None:
    model, _ = scripted([("recall", {"query": "x"})])
    agent = Agent(model, deps_type=int, toolsets=[memory_toolset(sqlite_memory)])
    with pytest.raises(UsageError, match="whose memory"):
        agent.run_sync("hi", deps=42)


def test_test_model_calls_every_tool(sqlite_memory: GuardedMemory) -> None:
    """pydantic-ai's TestModel calls each tool with arguments made from its schema."""
    agent = Agent(TestModel(), deps_type=ToolContext, toolsets=[memory_toolset(sqlite_memory)])
    ctx = ToolContext(user_id="ann")
    result = agent.run_sync("hi", deps=ctx)
    assert ctx.operations["memory.added"] == 1
    # TestModel fills recall's optional `since` with a made-up string, which recall refuses as
    # invalid input before searching; the call itself still reaches the tool and comes back.
    assert "remember" in result.output and "recall" in result.output


@pytest.mark.anyio
async def test_async_run(sqlite_memory: GuardedMemory) -> None:
    model, seen = scripted([("remember", {"text": "Ann swims"})], [("recall", {"query": "swims"})])
    agent = Agent(model, deps_type=ToolContext, toolsets=[memory_toolset(sqlite_memory)])
    await agent.run("hi", deps=ToolContext(user_id="ann"))
    assert [m["text"] for m in seen[1]["memories"]] == ["Ann swims"]
