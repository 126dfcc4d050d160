"""MemoryExtractor behind the loop's after-turn hook (AutoRecall.after_turn): learn after the turn is logged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoryport import MemoryScope, SQLiteMemory
from memoryport.curated import AgentMemory
from memoryport.extraction import ExtractionResult, MemoryExtractor
from memoryport.loop import AutoRecall, Extractor

from .conftest import Script

pytestmark = pytest.mark.anyio

CHAT = MemoryScope(user_id="ann", session_id="chat-1")
SAID = ("I'm vegetarian since last spring and allergic to peanuts, so please keep both in mind whenever "
        "you suggest a recipe or a restaurant to me.")


async def test_after_turn_logs_then_extracts(tmp_path: Path) -> None:
    memory = AgentMemory(SQLiteMemory(tmp_path / "m.db"))
    hook = AutoRecall(memory)
    good = Script(lambda m: {"decisions": [
        {"action": "ADD", "text": "Ann is vegetarian", "kind": "preference", "confidence": 0.9},
        {"action": "ADD", "text": "Ann is allergic to peanuts", "kind": "fact", "confidence": 0.95}]})
    extractor = MemoryExtractor(memory, good.model)
    assert isinstance(extractor, Extractor)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a cook."},
                                      {"role": "user", "content": SAID}]
    ctx = await hook.before_turn(messages, scope=CHAT)
    assert ctx is not None
    messages.append({"role": "assistant", "content": "Noted: vegetarian and no peanuts."})
    done = await hook.after_turn(messages, scope=CHAT, extractor=extractor)
    assert done.extraction == "done" and [t.role for t in done.turns] == ["user", "assistant"]
    assert isinstance(done.extracted, ExtractionResult) and done.extracted.count("ADD") == 2
    texts = sorted(m.text for m in await memory.list_memories(scope=MemoryScope(user_id="ann")))
    assert texts == ["Ann is allergic to peanuts", "Ann is vegetarian"]

    # a broken model: the turn is still logged, extraction reports the failure, nothing is written
    broken = MemoryExtractor(memory, Script(lambda m: "Sure!").model)
    messages += [{"role": "user", "content": SAID.replace("vegetarian", "vegan")},
                 {"role": "assistant", "content": "Vegan it is."}]
    again = await hook.after_turn(messages, scope=CHAT, extractor=broken)
    assert [t.role for t in again.turns] == ["user", "assistant"]
    assert isinstance(again.extracted, ExtractionResult)
    assert (again.extracted.status, again.extracted.reason) == ("failed", "malformed")
    assert len(await memory.list_memories(scope=MemoryScope(user_id="ann"))) == 2
    assert [t.text for t in await hook.log.history(scope=CHAT)][-2:] == [messages[-2]["content"], "Vegan it is."]
    await memory.aclose()
