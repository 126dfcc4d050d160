"""Tools are classes registered in one place: a new one appears in every host shape, scoped by the context."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import Field
from tools_support import DictStore

import memoryport
import memoryport.tools
from memoryport import MemoryScope, MemoryTools, ToolContext, memory_tools
from memoryport.tools._tool import REGISTRY, Tool, ToolArgs, ToolCall, register

pytestmark = pytest.mark.anyio


class Count(Tool):
    """A tool added the way the next issues add theirs: one class, registered."""

    name = "count_memories"
    effect = "read_only"

    class Args(ToolArgs):
        about: str = Field(description="Words to look for; empty counts everything.")

    def description(self) -> str:
        return f"Count the current user's memories (at most {self.tools.k})."

    async def run(self, args: Args, call: ToolCall) -> dict[str, Any]:
        memory, k = self.tools.memory, self.tools.k
        hits = await call.guarded(lambda: memory.search(args.about, scope=call.read_scope, k=k, ctx=call.ctx))
        return {"count": len(hits)}


@pytest.fixture
def with_count() -> Iterator[None]:
    register(Count)
    try:
        yield
    finally:
        REGISTRY.remove(Count)


@pytest.mark.usefixtures("with_count")
async def test_a_registered_tool_is_in_every_shape(store: DictStore) -> None:
    tools = memory_tools(store.memory(), k=7)
    assert tools.names[-1] == "count_memories" and tools.names[:3] == ["remember", "recall", "forget"]
    [openai] = [t for t in tools.openai() if t["function"]["name"] == "count_memories"]
    assert openai["function"]["description"] == "Count the current user's memories (at most 7)."
    assert openai["function"]["parameters"] == {
        "type": "object",
        "properties": {"about": {"type": "string", "description": "Words to look for; empty counts everything."}},
        "required": ["about"],
        "additionalProperties": False,
    }
    assert [t["name"] for t in tools.anthropic()][-1] == "count_memories"
    assert tools["count_memories"].effect == "read_only"


@pytest.mark.usefixtures("with_count")
async def test_a_registered_tool_takes_its_scope_from_the_context_only(store: DictStore) -> None:
    tools = memory_tools(store.memory())
    ann, ben = ToolContext(user_id="ann"), ToolContext(user_id="ben")
    for text in ("Ann likes tea", "Ann likes green tea"):
        assert (await tools.dispatch("remember", {"text": text}, ann))["remembered"] is True
    assert await tools.dispatch("count_memories", {"about": "tea"}, ann) == {"count": 2}
    assert await tools.dispatch("count_memories", {"about": "tea"}, ben) == {"count": 0}
    # The model naming another user gets an error, never Ann's memories.
    named = await tools.dispatch("count_memories", {"about": "tea", "user_id": "ann"}, ben)
    assert named["error"]["code"] == "invalid_arguments"
    assert len(await tools.memory.export(MemoryScope(user_id="ben"))) == 0


def test_tool_names_are_unique_and_the_shape_is_checked() -> None:
    class Again(Count):
        name = "recall"

    with pytest.raises(TypeError, match="registered already"):
        register(Again)

    class Shapeless(Tool):
        name = "shapeless"

    with pytest.raises(TypeError, match="no effect"):
        register(Shapeless)
    assert [cls.name for cls in REGISTRY] == ["remember", "recall", "forget", "update_memory", "facts_about", "related"]


def test_one_way_to_each_host_shape() -> None:
    """The shapes are methods of MemoryTools; the old free functions and spellings are gone."""
    for gone in ("openai_tools", "anthropic_tools", "dispatch_tool_call", "mcp_server", "serve_stdio", "thread_scope"):
        assert not hasattr(memoryport.tools, gone), gone
        assert gone not in memoryport.__all__
    for method in ("openai", "anthropic", "dispatch", "dispatch_sync", "mcp_server", "serve_stdio"):
        assert callable(getattr(MemoryTools, method))
    assert "session_id" in ToolContext.__dataclass_fields__
    assert "thread_id" not in ToolContext.__dataclass_fields__


def test_memory_tools_is_the_friendly_constructor_of_memory_tools(store: DictStore) -> None:
    memory = store.memory()
    built = memory_tools(memory, forget=False, k=3)
    direct = MemoryTools(memory, forget=False, k=3)
    assert built.names == direct.names == ["remember", "recall"]
    assert built.openai() == direct.openai()
