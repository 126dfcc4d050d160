"""A scripted LangChain chat model: plays back AI messages (tool calls included) and records what it saw."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool


class ScriptedChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts ``bind_tools`` (the script decides the calls) and logs its inputs."""

    seen: list[list[BaseMessage]] = []  # noqa: RUF012 - a pydantic field, copied per instance
    bound: list[dict[str, Any]] = []  # noqa: RUF012 - the tools as a provider would receive them

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound = [convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def script(*messages: AIMessage | str) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter(messages), seen=[])


def call(name: str, args: dict[str, Any], id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": id, "type": "tool_call"}
