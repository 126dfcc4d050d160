"""LangChain's create_agent (the current form of create_react_agent) with a MemoryportStore and a scripted model.

The user comes from the run's context (``context_schema``), the store from the tool runtime, as LangChain's
docs write it; the model names another user or passes another user's key and gets nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import AIMessage, ToolMessage
from lc_support import call, script

from memoryport import GuardedMemory
from memoryport.integrations.langgraph import MemoryportStore


@dataclass
class UserContext:
    user_id: str


@tool
def save(text: str, runtime: ToolRuntime[UserContext]) -> str:
    """Save a fact about the user."""
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    assert runtime.store is not None
    runtime.store.put(("memories", runtime.context.user_id), key, {"text": text})
    return key


@tool
def search(query: str, runtime: ToolRuntime[UserContext]) -> str:
    """Search the user's memories."""
    assert runtime.store is not None
    items = runtime.store.search(("memories", runtime.context.user_id), query=query)
    return json.dumps([i.value["text"] for i in items])


@tool
def read(key: str, runtime: ToolRuntime[UserContext]) -> str:
    """Read one memory by key."""
    assert runtime.store is not None
    item = runtime.store.get(("memories", runtime.context.user_id), key)
    return "not found" if item is None else item.value["text"]


def run_current(store: MemoryportStore, user: str, *calls: dict[str, Any]) -> list[ToolMessage]:
    model = script(*(AIMessage(content="", tool_calls=[c]) for c in calls), AIMessage(content="done"))
    agent = create_agent(model, [save, search, read], store=store, context_schema=UserContext)
    out = agent.invoke({"messages": [("user", "hi")]}, context=UserContext(user_id=user))
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def test_create_agent_with_the_user_in_the_runtime_context(sqlite_memory: GuardedMemory) -> None:
    store = MemoryportStore(sqlite_memory, namespace=("memories", "{user_id}"), index={"fields": ["text"]})
    [saved] = run_current(store, "ann", call("save", {"text": "Ann's alarm code is 2718"}, "c1"))
    key = str(saved.content)
    found = run_current(store, "ann", call("search", {"query": "alarm code"}, "c2"))
    assert json.loads(str(found[0].content)) == ["Ann's alarm code is 2718"]
    stolen = run_current(
        store,
        "ben",
        call("search", {"query": "alarm code"}, "b1"),
        call("read", {"key": key}, "b2"),
        call("search", {"query": "alarm code", "user_id": "ann"}, "b3"),
    )
    assert json.loads(str(stolen[0].content)) == []
    assert stolen[1].content == "not found"
    assert "2718" not in str(stolen[2].content)
