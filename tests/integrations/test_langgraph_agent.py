"""A LangGraph agent (create_react_agent, a scripted chat model) keeps its memory in a MemoryportStore."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedStore, create_react_agent
from langgraph.store.base import BaseStore
from lc_support import call, script

from memoryport import GuardedMemory, MemoryScope
from memoryport.integrations.langgraph import MemoryportStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:create_react_agent:Warning")


# The tools as LangGraph's docs write them: the user comes from the run's config, the store is injected.
@tool
def save_memory(text: str, config: RunnableConfig, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Save a fact about the user."""
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    store.put(("memories", config["configurable"]["user_id"]), key, {"text": text})
    return key


@tool
def search_memory(query: str, config: RunnableConfig, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Search the user's memories."""
    items = store.search(("memories", config["configurable"]["user_id"]), query=query)
    return json.dumps([{"key": i.key, "text": i.value["text"]} for i in items])


@tool
def get_memory(key: str, config: RunnableConfig, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Read one memory by key."""
    item = store.get(("memories", config["configurable"]["user_id"]), key)
    return "not found" if item is None else item.value["text"]


def run(store: MemoryportStore, user: str, *calls: dict[str, Any]) -> list[ToolMessage]:
    model = script(*(AIMessage(content="", tool_calls=[c]) for c in calls), AIMessage(content="done"))
    agent = create_react_agent(model, [save_memory, search_memory, get_memory], store=store)
    out = agent.invoke({"messages": [("user", "hi")]}, config={"configurable": {"user_id": user}})
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def test_agent_remembers_and_recalls_through_the_store(sqlite_memory: GuardedMemory) -> None:
    store = MemoryportStore(sqlite_memory, namespace=("memories", "{user_id}"), index={"fields": ["text"]})
    saved = run(store, "ann", call("save_memory", {"text": "Ann likes green tea"}, "c1"))
    key = str(saved[0].content)
    assert store.get(("memories", "ann"), key).value == {"text": "Ann likes green tea"}  # type: ignore[union-attr]
    # stored through the guard, in Ann's scope
    assert [r.text for r in sqlite_memory.export_sync(MemoryScope(user_id="ann"))] == ["Ann likes green tea"]
    found = run(store, "ann", call("search_memory", {"query": "tea"}, "c2"))
    assert json.loads(str(found[0].content)) == [{"key": key, "text": "Ann likes green tea"}]


def test_the_model_cannot_reach_another_users_memories(sqlite_memory: GuardedMemory) -> None:
    store = MemoryportStore(sqlite_memory, namespace=("memories", "{user_id}"), index={"fields": ["text"]})
    anns_key = str(run(store, "ann", call("save_memory", {"text": "Ann's door code is 4711"}, "c1"))[0].content)
    results = run(
        store,
        "ben",
        call("search_memory", {"query": "door code"}, "b1"),
        call("get_memory", {"key": anns_key}, "b2"),  # Ann's key, learned somehow
        call("search_memory", {"query": "door code", "user_id": "ann"}, "b3"),  # names Ann
    )
    assert json.loads(str(results[0].content)) == []
    assert results[1].content == "not found"
    assert "4711" not in str(results[2].content)
    assert store.get(("memories", "ann"), anns_key) is not None
