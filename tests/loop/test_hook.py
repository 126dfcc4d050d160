"""Auto-recall around scripted model loops (OpenAI- and Anthropic-shaped), logging after the turn, extractors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from memoryport import GuardedMemory, MemoryScope, ToolContext, UsageError, memory_tools
from memoryport.curated import AgentMemory
from memoryport.loop import AutoRecall, ConversationLog, Extractor, PromptContext, loop_tools, message_text
from memoryport.testing import InMemoryStore

pytestmark = pytest.mark.anyio

CHAT = MemoryScope(user_id="ann", session_id="chat-1")


def openai_model(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A scripted chat model: answers from the memory it was given; asks to remember what the user states."""
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    last = messages[-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": "Saved."}
    user = message_text(last)
    if user.endswith("remember that."):
        fact = user.split("\n\n")[-1].removesuffix(", remember that.")
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call-1", "type": "function",
            "function": {"name": "remember", "arguments": json.dumps({"text": fact})}}]}
    if '"Ann is vegetarian"' in system or "vegetarian" in user.split("</memory-context>")[0]:
        return {"role": "assistant", "content": "A mushroom risotto, since you are vegetarian."}
    return {"role": "assistant", "content": "A steak."}


async def test_openai_shaped_loop(memory: GuardedMemory) -> None:
    agent = AgentMemory(memory)
    hook = AutoRecall(agent)
    tools = memory_tools(memory)
    ctx = ToolContext(user_id="ann", session_id="chat-1")
    messages: list[Any] = [{"role": "system", "content": "You are a cook."}]
    systems: list[str] = []

    async def user_turn(text: str) -> str:
        messages.append({"role": "user", "content": text})
        while True:
            turn = await hook.before_turn(messages, context=ctx)
            sent = turn.openai(messages)
            assert messages[-1] is not sent[-1] or messages[-1]["role"] != "user"  # the input is not changed
            systems.append(sent[0]["content"])
            reply = openai_model(sent)
            messages.append(reply)
            if not reply.get("tool_calls"):
                break
            for call in reply["tool_calls"]:
                result = await tools.dispatch(call["function"]["name"], call["function"]["arguments"], ctx)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
        await hook.after_turn(messages, context=ctx)
        return str(messages[-1]["content"])

    assert await user_turn("What should I cook tonight?") == "A steak."
    assert await user_turn("Ann is vegetarian, remember that.") == "Saved."
    await agent.update((await agent.recall("vegetarian", scope=CHAT))[0].id, kind="fact", scope=CHAT)
    assert await user_turn("What should I cook tonight?") == "A mushroom risotto, since you are vegetarian."
    assert systems[0] == "You are a cook."  # nothing in memory yet: the system prompt as is
    assert systems[-1].startswith("You are a cook.\n\n<memory-context part=\"profile\">")
    log = ConversationLog(agent)
    turns = await log.history(scope=CHAT)
    assert [(t.index, t.role) for t in turns] == [
        (0, "user"), (1, "assistant"), (2, "user"), (3, "assistant"), (4, "user"), (5, "assistant")]
    assert "memory-context" not in "".join(t.text for t in turns)  # the log holds what was said, not the context


def anthropic_model(system: str, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    last = messages[-1]
    blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
    if any(b.get("type") == "tool_result" for b in blocks):
        return {"role": "assistant", "content": [{"type": "text", "text": "Found it."}]}
    words = message_text(last)
    if "past" in words:
        return {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "tu-1", "name": "search_past_conversations",
             "input": {"query": "Lisbon", "since": None}}]}
    known = "Lisbon" in system or "Lisbon" in words.split("</memory-context>")[0]
    return {"role": "assistant", "content": [{"type": "text", "text": "Lisbon!" if known else "No idea."}]}


async def test_anthropic_shaped_loop(memory: GuardedMemory) -> None:
    agent = AgentMemory(memory)
    log = ConversationLog(agent)
    hook = AutoRecall(agent, log=log)
    tools = loop_tools(log)
    ctx = ToolContext(user_id="ann", session_id="chat-2")
    await log.store_turn("user", "I am flying to Lisbon in May", scope=MemoryScope(user_id="ann", session_id="c0"))
    await agent.remember("Ann's favourite city is Lisbon", scope=MemoryScope(user_id="ann"), kind="preference")
    messages: list[Any] = []
    for text in ("Which city do I like?", "What did I say in the past about travel?"):
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        while True:
            turn = await hook.before_turn(messages, context=ctx)
            system = turn.anthropic_system("Be brief.")
            assert isinstance(system, str) and '"Ann\'s favourite city is Lisbon"' in system
            sent = turn.anthropic(messages)
            reply = anthropic_model(system, sent)
            messages.append(reply)
            uses = [b for b in reply["content"] if b["type"] == "tool_use"]
            if not uses:
                break
            results = []
            for use in uses:
                result = await tools.dispatch(use["name"], use["input"], ctx)
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": json.dumps(result)})
            messages.append({"role": "user", "content": results})
            # the next call's block goes after the tool results, in the last user message with words
            placed = (await hook.before_turn(messages, context=ctx)).anthropic(messages)
            assert placed[-1] == messages[-1]  # a tool-result-only message gets no block
        await hook.after_turn(messages, context=ctx)
    assert [message_text(m) for m in messages if m["role"] == "assistant"] == ["Lisbon!", "Let me look.", "Found it."]
    turns = await log.history(scope=MemoryScope(user_id="ann", session_id="chat-2"))
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant", "assistant"]


async def test_block_placement_in_content_parts() -> None:
    agent = AgentMemory(GuardedMemory(InMemoryStore()))
    await agent.remember("Ann likes tea", scope=CHAT, kind="preference")
    hook = AutoRecall(agent)
    messages = [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "x", "content": "42"}, {"type": "text", "text": "and tea?"}]}]
    turn = await hook.before_turn(messages, scope=CHAT)
    sent = turn.anthropic(messages)
    assert [b["type"] for b in sent[0]["content"]] == ["tool_result", "text", "text"]
    assert sent[0]["content"][1]["text"] == turn.turn.text
    assert messages[0]["content"][1] == {"type": "text", "text": "and tea?"}  # the input is unchanged
    blocks = turn.anthropic_system([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}])
    assert isinstance(blocks, list) and blocks[-1] == {"type": "text", "text": turn.prefix.text}
    openai = turn.openai([{"role": "developer", "content": [{"type": "text", "text": "Rules"}]},
                          {"role": "user", "content": "tea?"}])
    assert openai[0]["content"][-1]["text"] == turn.prefix.text
    assert openai[1]["content"].startswith("<memory-context part=\"turn\">") and openai[1]["content"].endswith("tea?")

    class Message(BaseModel):  # an SDK message object
        role: str
        content: str

    sdk = await hook.before_turn([Message(role="user", content="tea please")], scope=CHAT)
    assert sdk.query == "tea please"
    assert isinstance(sdk.openai([Message(role="user", content="tea please")])[1], dict)


class Remembering:
    """A scripted extractor: remembers what the user says after 'remember:'."""

    def __init__(self, agent: AgentMemory) -> None:
        self.agent = agent
        self.seen: list[list[dict[str, Any]]] = []

    async def extract(self, messages: Sequence[Mapping[str, Any]], *, scope: MemoryScope) -> object:
        self.seen.append([dict(m) for m in messages])
        done = []
        for m in messages:
            if m["role"] == "user" and "remember:" in m["content"]:
                fact = m["content"].split("remember:", 1)[1].strip()
                done.append(await self.agent.remember(fact, scope=scope, source="extraction"))
        return done


class Failing:
    async def extract(self, messages: Sequence[Mapping[str, Any]], *, scope: MemoryScope) -> object:
        raise RuntimeError("model said something secret: Ann's PIN is 1234")


class Slow:
    """Answers after 30 s: the hook's 0.2 s timeout ends it first (a broken timeout fails, not hangs)."""

    async def extract(self, messages: Sequence[Mapping[str, Any]], *, scope: MemoryScope) -> object:
        await asyncio.sleep(30)
        return None


async def test_after_turn_logs_then_extracts(memory: GuardedMemory, caplog: pytest.LogCaptureFixture) -> None:
    agent = AgentMemory(memory)
    # A timeout no working extractor meets on a loaded machine (a 0.2 s one failed CI-like runs at
    # load 5 on PostgreSQL); the slow extractor below gets a short one, and never answers.
    hook = AutoRecall(agent, extract_timeout=60)
    extractor = Remembering(agent)
    assert isinstance(extractor, Extractor)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "remember: Ann plays the cello"},
        {"role": "assistant", "content": "Noted!"},
    ]
    done = await hook.after_turn(messages, scope=CHAT, extractor=extractor)
    assert done.extraction == "done" and [t.role for t in done.turns] == ["user", "assistant"]
    assert extractor.seen == [[{"role": "user", "content": "remember: Ann plays the cello"},
                               {"role": "assistant", "content": "Noted!"}]]
    assert [m.text for m in await agent.recall("cello", scope=CHAT)] == ["Ann plays the cello"]
    again = await hook.after_turn(messages, scope=CHAT, extractor=extractor)
    assert again.turns == () and again.extraction == "skipped" and len(extractor.seen) == 1
    messages += [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    with caplog.at_level("WARNING", logger="memoryport"):
        failed = await hook.after_turn(messages, scope=CHAT, extractor=Failing())
    assert failed.extraction == "failed" and failed.error == "RuntimeError" and len(failed.turns) == 2
    assert "1234" not in caplog.text and "RuntimeError" in caplog.text
    messages += [{"role": "user", "content": "slow one"}]
    hook.extract_timeout = 0.2
    slow = await hook.after_turn(messages, scope=CHAT, extractor=Slow())
    assert slow.extraction == "failed" and slow.error == "TimeoutError" and len(slow.turns) == 1
    assert hook.extraction_failures == 2
    assert len(await ConversationLog(agent).history(scope=CHAT)) == 5
    only_new = await hook.after_turn([{"role": "assistant", "content": "bye"}], scope=CHAT, transcript=False)
    assert [t.index for t in only_new.turns] == [5]


async def test_misuse_is_refused() -> None:
    agent = AgentMemory(GuardedMemory(InMemoryStore()))
    hook = AutoRecall(agent)
    with pytest.raises(UsageError):
        await hook.before_turn([{"role": "user", "content": "x"}])  # no scope
    with pytest.raises(UsageError):
        await hook.before_turn([{"role": "user", "content": "x"}], scope=CHAT, context=ToolContext(user_id="a"))
    with pytest.raises(UsageError):
        await hook.before_turn("hello", scope=CHAT)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await hook.before_turn([42], scope=CHAT)  # type: ignore[list-item]
    with pytest.raises(UsageError):
        await hook.after_turn([{"role": "user", "content": "x"}], scope=CHAT, extractor=object())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="session"):
        await hook.after_turn([{"role": "user", "content": "x"}], scope=MemoryScope(user_id="ann"))
    other = AgentMemory(GuardedMemory(InMemoryStore()))
    with pytest.raises(UsageError):
        AutoRecall(agent, context=PromptContext(other))
    with pytest.raises(UsageError):
        AutoRecall(agent, extract_timeout=0)


async def test_memory_context_tool_for_mcp_hosts() -> None:
    agent = AgentMemory(GuardedMemory(InMemoryStore()))
    await agent.remember("Ann likes tea", scope=MemoryScope(user_id="ann"), kind="preference")
    await agent.remember("Ben likes coffee", scope=MemoryScope(user_id="ben"), kind="preference")
    log = ConversationLog(agent)
    assert loop_tools(log).names == ["search_past_conversations"]
    tools = loop_tools(log, context=PromptContext(agent))
    assert tools.names == ["search_past_conversations", "memory_context"]
    result = await tools.dispatch("memory_context", {"message": "tea or coffee?"}, ToolContext(user_id="ann"))
    assert '"Ann likes tea"' in result["profile"] and "coffee" not in result["profile"]
    assert result["turn"].startswith('<memory-context part="turn">')
    sneaky = await tools.dispatch("memory_context", {"message": "x", "user_id": "ben"}, ToolContext(user_id="ann"))
    assert sneaky["error"]["code"] == "invalid_arguments"


async def test_after_turn_with_the_memory_extractor_and_a_scripted_model(memory: GuardedMemory) -> None:
    """The extract helper's MemoryExtractor is an Extractor: a scripted model's ADD lands in the next prefix."""
    from memoryport import CallableModel
    from memoryport.extraction import MemoryExtractor

    agent = AgentMemory(memory)
    calls: list[list[dict[str, str]]] = []

    def model(messages: list[dict[str, str]]) -> dict[str, Any]:
        calls.append(messages)
        return {"decisions": [{"action": "ADD", "text": "Ann plays the cello every Sunday", "kind": "fact",
                               "confidence": 0.9}]}

    extractor = MemoryExtractor(agent, CallableModel(model, name="scripted"))
    assert isinstance(extractor, Extractor)
    hook = AutoRecall(agent)
    messages = [
        {"role": "user", "content": "On Sundays I always play the cello with my quartet, it is the best part of "
                                    "my week and I would never miss it for anything"},
        {"role": "assistant", "content": "That sounds lovely, a quartet every Sunday!"},
    ]
    done = await hook.after_turn(messages, scope=CHAT, extractor=extractor)
    assert done.extraction == "done" and getattr(done.extracted, "status", None) == "applied"
    assert len(calls) == 1 and "memory-context" not in json.dumps(calls[0])
    prefix = (await hook.before_turn([{"role": "user", "content": "plans for Sunday?"}], scope=CHAT)).prefix
    assert '"Ann plays the cello every Sunday"' in prefix.text
