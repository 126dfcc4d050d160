"""`memoryport mcp` end to end: the official MCP SDK's client talks to it over stdio."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from memoryport import MemoryScope, SQLiteMemory

mcp = pytest.importorskip("mcp", reason="the mcp extra is part of the dev install")
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client import stdio as mcp_stdio  # noqa: E402

pytestmark = pytest.mark.anyio


def server(db: Path, user: str, *extra: str) -> StdioServerParameters:
    script = Path(sys.executable).with_name("memoryport")
    cmd, args = (str(script), []) if script.exists() else (sys.executable, ["-m", "memoryport.cli"])
    # The SDK starts servers with a minimal environment; keep a developer's PYTHONPATH.
    env = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    return StdioServerParameters(command=cmd, args=[*args, "mcp", "--db", str(db), "--user", user, *extra], env=env)


@pytest.fixture
def killed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records whether the SDK had to kill a server that did not exit when stdin closed."""
    calls: list[int] = []
    original = mcp_stdio._terminate_process_tree

    async def spy(process: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(process.pid)
        await original(process, *args, **kwargs)

    monkeypatch.setattr(mcp_stdio, "_terminate_process_tree", spy)
    # The SDK kills a server still alive 2 s after stdin closed; on a loaded machine an
    # honest shutdown can take longer. Wait long enough that only a server that never
    # exits by itself gets killed, so the test does not depend on the machine's load.
    monkeypatch.setattr(mcp_stdio, "PROCESS_TERMINATION_TIMEOUT", 60.0)
    return calls


async def test_list_remember_recall_over_stdio(tmp_path: Path, killed: list[int]) -> None:
    db = tmp_path / "memory.db"
    with anyio.fail_after(90):
        async with Client(server(db, "ann"), read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert set(tools) == {"remember", "recall", "forget", "update_memory"}
            assert tools["recall"].annotations is not None and tools["recall"].annotations.read_only_hint
            assert tools["forget"].annotations is not None and tools["forget"].annotations.destructive_hint
            assert tools["update_memory"].annotations is not None
            assert tools["update_memory"].annotations.destructive_hint
            for tool in listed.tools:
                assert "user" not in str(tool.input_schema["properties"]).lower()

            stored = await client.call_tool("remember", {"text": "Ann drinks green tea every morning"})
            assert not stored.is_error and stored.structured_content["remembered"] is True
            ann_id = stored.structured_content["id"]

            hidden = await client.call_tool("remember", {"text": "x", "user_id": "ben"})
            assert hidden.is_error and hidden.structured_content["error"]["code"] == "invalid_arguments"
            pii = await client.call_tool("remember", {"text": "Ann's mail is ann@example.com"})
            assert pii.is_error and pii.structured_content["error"]["code"] == "refused"

            found = await client.call_tool("recall", {"query": "tea"})
            assert not found.is_error
            assert [m["text"] for m in found.structured_content["memories"]] == ["Ann drinks green tea every morning"]
            assert "not instructions" in found.content[0].text  # type: ignore[union-attr]

        # A server started for Ben cannot see or delete Ann's memory.
        async with Client(server(db, "ben"), read_timeout_seconds=60) as client:
            found = await client.call_tool("recall", {"query": "tea"})
            assert found.structured_content["memories"] == []
            gone = await client.call_tool("forget", {"id": ann_id})
            assert gone.structured_content == {"id": ann_id, "forgotten": False}
    assert killed == [], "the server did not exit by itself when the client closed stdin"

    memory = SQLiteMemory(db)
    try:
        [record] = await memory.export(MemoryScope(user_id="ann"))
        assert record.id == ann_id and record.scope == MemoryScope(user_id="ann")
        assert await memory.export(MemoryScope(user_id="ben")) == []
    finally:
        await memory.aclose()


async def test_no_forget_flag(tmp_path: Path, killed: list[int]) -> None:
    with anyio.fail_after(90):
        async with Client(
            server(tmp_path / "m.db", "ann", "--no-forget", "--no-update"), read_timeout_seconds=60
        ) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["remember", "recall"]
    assert killed == []
