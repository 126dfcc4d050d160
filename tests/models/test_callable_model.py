"""CallableModel: sync and async functions, answers as dicts, text or pydantic models, failures typed."""

from __future__ import annotations

import asyncio
import doctest
import json
from typing import Any

import pytest
from pydantic import BaseModel

from memoryport import CallableModel, InvalidInput, MemoryEvent, ModelError, ModelPort
from memoryport.models import _port, check_messages, parse_json_object

pytestmark = pytest.mark.anyio

HI = [{"role": "user", "content": "hi"}]


class Answer(BaseModel):
    ok: bool


async def test_answers_in_every_shape(events: list[MemoryEvent]) -> None:
    async def async_fn(messages: list[dict[str, str]]) -> dict[str, Any]:
        return {"n": len(messages)}

    for fn in (lambda m: {"ok": True}, lambda m: '{"ok": true}', lambda m: "```json\n{\"ok\": true}\n```",
               lambda m: b'{"ok": true}', lambda m: Answer(ok=True)):
        assert await CallableModel(fn).complete_json(HI) == {"ok": True}
    assert await CallableModel(async_fn).complete_json(HI * 2) == {"n": 2}
    assert [e.name for e in events][-1] == "model.used"
    assert isinstance(CallableModel(async_fn), ModelPort)


async def test_schema_is_passed_when_the_function_takes_it() -> None:
    seen: list[Any] = []

    def fn(messages: list[dict[str, str]], schema: Any = None) -> dict[str, Any]:
        seen.append(schema)
        return {}

    await CallableModel(fn).complete_json(HI, schema={"type": "object"})
    assert seen == [{"type": "object"}]
    # a function without the keyword is called without it
    assert await CallableModel(lambda m: {}).complete_json(HI, schema={"type": "object"}) == {}


@pytest.mark.parametrize("answer", ["not json", "[1, 2]", "42", '{"a": NaN', None, 3, {"a": {1, 2}}, b"\xff"])
async def test_malformed_answers(answer: Any) -> None:
    with pytest.raises(ModelError) as err:
        await CallableModel(lambda m: answer, name="m").complete_json(HI)
    assert err.value.reason == "malformed"
    assert "not json" not in str(err.value)


async def test_failures_are_typed_and_name_no_content() -> None:
    def boom(messages: list[dict[str, str]]) -> dict[str, Any]:
        raise RuntimeError("secret: " + messages[0]["content"])

    with pytest.raises(ModelError) as err:
        await CallableModel(boom).complete_json([{"role": "user", "content": "my pin is 1234"}])
    assert err.value.reason == "error" and "1234" not in str(err.value) and "RuntimeError" in str(err.value)

    async def slow(messages: list[dict[str, str]]) -> dict[str, Any]:
        raise asyncio.TimeoutError

    with pytest.raises(ModelError) as err:
        await CallableModel(slow).complete_json(HI)
    assert err.value.reason == "timeout"


async def test_a_sync_function_runs_off_the_loop_so_a_timeout_can_fire() -> None:
    import threading

    release = threading.Event()
    model = CallableModel(lambda m: release.wait(5) and {})
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(model.complete_json(HI), 0.05)
    release.set()


@pytest.mark.parametrize(
    "messages",
    ["hi", [], [{"role": "robot", "content": "x"}], [{"role": "user", "content": 3}], [("user", "x")],
     {"role": "user", "content": "x"}],
)
async def test_bad_messages_are_refused(messages: Any) -> None:
    with pytest.raises(InvalidInput):
        await CallableModel(lambda m: {}).complete_json(messages)


def test_configuration_errors() -> None:
    with pytest.raises(InvalidInput):
        CallableModel("not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        CallableModel(lambda m: {}, name="")


def test_helpers() -> None:
    assert check_messages([{"role": "system", "content": "s", "extra": 1}]) == [{"role": "system", "content": "s"}]
    assert parse_json_object(json.dumps({"a": [1]}), backend="m") == {"a": [1]}
    assert parse_json_object("```\n{}\n```", backend="m") == {}


def test_docstring_examples() -> None:
    result = doctest.testmod(_port, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
