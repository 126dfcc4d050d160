"""The OpenAI and Anthropic loops of docs/agent-memory.md run as shown.

They run with the real ``openai`` and ``anthropic`` SDKs; only the remote API is
replaced, by an ``httpx.MockTransport`` that plays a model and checks each
request the SDK actually sends (tool definitions, tool results).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from memoryport import MemoryScope, SQLiteMemory

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _anthropic_httpx() -> Any:
    # anthropic 2.x runs on the httpx2 fork and refuses an httpx.Client.
    try:
        import httpx2
    except ImportError:
        return httpx
    return httpx2


PAGE = Path(__file__).resolve().parents[2] / "docs" / "agent-memory.md"


def block(heading: str) -> str:
    section = PAGE.read_text().split(f"## {heading}", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert found is not None, heading
    return found.group(1)


def fake_api(
    replies: list[Callable[[dict[str, Any]], dict[str, Any]]], seen: list[dict[str, Any]], http: Any = httpx
) -> Any:
    """An HTTP client (of the SDK's own httpx flavour) whose transport plays the model."""

    def handle(request: Any) -> Any:
        body = json.loads(request.content)
        seen.append(body)
        return http.Response(200, json=replies.pop(0)(body))

    return http.Client(transport=http.MockTransport(handle))


def test_openai_then_anthropic_loops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    seen: list[dict[str, Any]] = []

    def chat(message: dict[str, Any], finish: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        return lambda body: {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}],
        }

    remember_call = {
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "remember", "arguments": json.dumps({"text": "Ann is vegetarian"})},
            }
        ],
    }
    openai_client = fake_api([chat(remember_call, "tool_calls"), chat({"content": "Noted!"}, "stop")], seen)
    real_openai = openai.OpenAI
    monkeypatch.setattr(openai, "OpenAI", lambda: real_openai(api_key="test", http_client=openai_client))

    namespace: dict[str, Any] = {}
    exec(compile(block("OpenAI (Chat Completions)"), "agent-memory.md[openai]", "exec"), namespace)
    tools = namespace["tools"]
    first, second = seen
    assert first["tools"] == tools.openai()
    [tool_msg] = [m for m in second["messages"] if m.get("role") == "tool"]
    assert tool_msg["tool_call_id"] == "call_1" and json.loads(tool_msg["content"])["remembered"] is True
    assert namespace["msg"].content == "Noted!"

    def message(content: list[dict[str, Any]], stop: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        return lambda body: {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    seen.clear()
    recall_use = [{"type": "tool_use", "id": "toolu_1", "name": "recall", "input": {"query": "vegetarian"}}]
    anthropic_client = fake_api(
        [message(recall_use, "tool_use"), message([{"type": "text", "text": "You're vegetarian."}], "end_turn")],
        seen,
        http=_anthropic_httpx(),
    )
    real_anthropic = anthropic.Anthropic
    monkeypatch.setattr(anthropic, "Anthropic", lambda: real_anthropic(api_key="test", http_client=anthropic_client))
    exec(compile(block("Anthropic (Messages API)"), "agent-memory.md[anthropic]", "exec"), namespace)
    first, second = seen
    assert first["tools"] == tools.anthropic()
    [result] = second["messages"][-1]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1" and result["is_error"] is False
    assert [m["text"] for m in json.loads(result["content"])["memories"]] == ["Ann is vegetarian"]

    tools.memory.close()
    memory = SQLiteMemory(tmp_path / "memory.db")
    [record] = memory.export_sync(MemoryScope(user_id="ann"))
    assert record.scope == MemoryScope(user_id="ann", session_id="chat-42") and record.text == "Ann is vegetarian"
    memory.close()
