"""A scripted model for the OpenAI Agents SDK: plays back tool calls, then a message; no network."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelProvider, ModelResponse, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText


class ScriptedModel(Model):
    """Each turn is a list of ``(tool name, arguments)``; after the last turn it answers "done".

    ``outputs`` collects what the tools returned (the function_call_output items it was sent).
    ``tools`` holds the tools it was offered on its first call.
    """

    def __init__(self, *turns: list[tuple[str, dict[str, Any]]]) -> None:
        self.turns = list(turns)
        self.step = 0
        self.outputs: list[dict[str, Any]] = []
        self.tools: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if not self.tools:
            self.tools = list(tools)
        if isinstance(input, list):
            self.outputs = [json.loads(i["output"]) for i in input if i.get("type") == "function_call_output"]
        step, self.step = self.step, self.step + 1
        usage = Usage(requests=1, input_tokens=0, output_tokens=0, total_tokens=0)
        if step < len(self.turns):
            calls = [
                ResponseFunctionToolCall(
                    type="function_call",
                    name=name,
                    arguments=json.dumps(args),
                    call_id=f"call-{step}-{i}",
                    id=f"fc-{step}-{i}",
                )
                for i, (name, args) in enumerate(self.turns[step])
            ]
            return ModelResponse(output=list(calls), usage=usage, response_id=None)
        text = ResponseOutputText(type="output_text", text="done", annotations=[])
        message = ResponseOutputMessage(type="message", id="m", role="assistant", status="completed", content=[text])
        return ModelResponse(output=[message], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


class ScriptedProvider(ModelProvider):
    """A model provider that hands out one scripted model, whatever the name."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def get_model(self, model_name: str | None) -> Model:
        return self.model
