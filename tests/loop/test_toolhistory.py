"""Tool history: calls as records (no arguments unless opted in), errors, stats, errors as curated memories."""

from __future__ import annotations

from typing import Any

import pytest

from memoryport import Capability, GuardedMemory, InvalidInput, MemoryScope, UnsupportedCapability, UsageError
from memoryport.curated import AgentMemory
from memoryport.loop import ToolHistory
from memoryport.testing import InMemoryStore

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
ANN_1 = MemoryScope(user_id="ann", session_id="chat-1")
BEN = MemoryScope(user_id="ben")


async def test_calls_errors_and_stats(memory: GuardedMemory) -> None:
    history = ToolHistory(memory)
    await history.log_tool_call("web_search", scope=ANN_1, duration_ms=100.0, arguments={"q": "ann's address"})
    await history.log_tool_call("web_search", scope=ANN_1, duration_ms=300.0)
    await history.log_tool_call("web_search", scope=ANN_1, duration_ms=3000.0, error=TimeoutError("took 3s"))
    await history.log_tool_call("calendar", scope=ANN_1, error="PermissionError")
    await history.log_tool_call("web_search", scope=BEN, error=ValueError("ben's"))
    errors = await history.errors(scope=ANN)
    assert [(c.tool, c.error_type) for c in errors] == [("calendar", "PermissionError"),
                                                        ("web_search", "TimeoutError")]
    assert [c.tool for c in await history.errors(scope=ANN, limit=1)] == ["calendar"]
    assert len(await history.calls(scope=ANN, tool="web_search")) == 3
    assert len(await history.calls(scope=ANN, outcome="ok")) == 2
    stats = await history.stats(scope=ANN)
    assert list(stats) == ["web_search", "calendar"]
    web = stats["web_search"]
    assert (web.calls, web.errors, web.median_ms, web.max_ms) == (3, 1, 300.0, 3000.0)
    assert web.error_types == {"TimeoutError": 1} and round(web.error_rate, 3) == 0.333
    assert stats["calendar"].median_ms is None
    # arguments and messages are not stored by default
    texts = [r.text for r in await memory.export(ANN)]
    assert not any("address" in t or "took 3s" in t for t in texts)
    assert all(r.metadata["mp:log"] == "tool" for r in await memory.export(ANN))


async def test_details_only_when_the_host_opts_in(memory: GuardedMemory) -> None:
    history = ToolHistory(memory, capture_details=True)
    call = await history.log_tool_call("book", scope=ANN_1, arguments={"table": 2, "name": "Ann"},
                                       error=RuntimeError("fully booked"))
    assert "arguments: " in call.text and '"table": 2' in call.text and "fully booked" in call.text
    assert call.record is not None and call.record.metadata["mp:arguments"] is True


async def test_track_times_a_block_and_logs_its_error() -> None:
    memory = GuardedMemory(InMemoryStore())
    history = ToolHistory(memory)
    async with history.track("ok_tool", scope=ANN_1):
        pass
    with pytest.raises(KeyError):
        async with history.track("bad_tool", scope=ANN_1):
            raise KeyError("x")
    calls = {c.tool: c for c in await history.calls(scope=ANN)}
    assert calls["ok_tool"].outcome == "ok" and calls["ok_tool"].duration_ms is not None
    assert (calls["bad_tool"].outcome, calls["bad_tool"].error_type) == ("error", "KeyError")


async def test_errors_can_become_curated_memories(memory: GuardedMemory) -> None:
    agent = AgentMemory(memory)
    history = ToolHistory(agent, errors_as_memories=True)
    await history.log_tool_call("weather", scope=ANN_1, error=TimeoutError("slow"))
    await history.log_tool_call("weather", scope=ANN_1, error=TimeoutError("slow again"))
    errors = await agent.list_memories(scope=ANN, kind="error")
    assert [m.text for m in errors] == ["The tool weather failed with TimeoutError"]  # the repeat reinforced it
    assert errors[0].source == "tool" and errors[0].uses == 1
    assert await agent.recall("weather", scope=ANN, kind="fact") == []
    with pytest.raises(UsageError):
        ToolHistory(memory, errors_as_memories=True)  # needs curated memory


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tool": ""}, "tool"),
        ({"tool": "x" * 65}, "tool"),
        ({"tool": "a\nb"}, "tool"),
        ({"tool": 3}, "tool"),
        ({"tool": "t", "outcome": "maybe"}, "outcome"),
        ({"tool": "t", "outcome": "ok", "error": "KeyError"}, "outcome"),
        ({"tool": "t", "duration_ms": -1}, "duration_ms"),
        ({"tool": "t", "duration_ms": float("nan")}, "duration_ms"),
        ({"tool": "t", "duration_ms": True}, "duration_ms"),
        ({"tool": "t", "error": ""}, "error"),
        ({"tool": "t", "arguments": {"x": object()}}, "arguments"),
        ({"tool": "t", "arguments": {"x": "y" * 40_000}}, "arguments"),
    ],
)
async def test_bad_input_is_refused_and_nothing_stored(kwargs: dict[str, Any], field: str) -> None:
    memory = GuardedMemory(InMemoryStore())
    history = ToolHistory(memory, capture_details=True)
    tool = kwargs.pop("tool")
    with pytest.raises(InvalidInput) as err:
        await history.log_tool_call(tool, scope=ANN_1, **kwargs)
    assert err.value.field == field
    assert await memory.export(ANN) == []


async def test_capabilities_are_checked() -> None:
    everything = InMemoryStore().capabilities
    with pytest.raises(UnsupportedCapability):
        ToolHistory(GuardedMemory(InMemoryStore(capabilities=everything - {Capability.METADATA})))
    no_export = ToolHistory(GuardedMemory(InMemoryStore(capabilities=everything - {Capability.EXPORT})))
    await no_export.log_tool_call("t", scope=ANN_1)
    with pytest.raises(UnsupportedCapability, match="export"):
        await no_export.stats(scope=ANN)
    with pytest.raises(UnsupportedCapability, match="expiry"):
        ToolHistory(GuardedMemory(InMemoryStore(capabilities=everything - {Capability.EXPIRY})), ttl="7d")
