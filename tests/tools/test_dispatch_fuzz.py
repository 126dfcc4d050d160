"""Whatever the model sends, ``dispatch`` answers with a JSON result: only host mistakes raise.

Each tool gets ``MEMORYPORT_FUZZ_PAYLOADS`` random argument payloads (default
10,000; set it higher for a longer run): random JSON values sent as text, as
bytes and as already-parsed objects (the OpenAI, raw and Anthropic/MCP shapes),
random bytes and strings, and objects with the tool's own argument names
holding random values. Hypothesis draws them in batches of 10, all run on one event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tools_support import DictStore

from memoryport import SQLiteMemory, ToolContext, memory_tools

PAYLOADS = int(os.environ.get("MEMORYPORT_FUZZ_PAYLOADS", "10000"))
BATCH = 10
SQLITE_PAYLOADS = max(BATCH, PAYLOADS // 20)
EXAMPLES, SQLITE_EXAMPLES = -(-PAYLOADS // BATCH), -(-SQLITE_PAYLOADS // BATCH)  # batches, rounded up
TOOLS = ["remember", "recall", "forget"]
ARGUMENT_NAMES = {"remember": "text", "recall": "query", "forget": "id"}

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=0, max_value=3).map(lambda n: 10 ** (4300 + n))  # past Python's int-to-str limit
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=24)
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=6,
)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _as_text(value: Any) -> str:
    try:
        return json.dumps(value)
    except ValueError:  # an integer past Python's str limit
        return "1" * 5000


def payloads_for(tool: str) -> st.SearchStrategy[Any]:
    own = st.fixed_dictionaries({ARGUMENT_NAMES[tool]: json_values}, optional={"user_id": json_values})
    objects = st.dictionaries(st.text(max_size=12), json_values, max_size=4) | own
    return st.one_of(
        json_values,  # already parsed (Anthropic input, MCP arguments)
        json_values.map(_as_text),  # the JSON text of OpenAI tool calls
        json_values.map(lambda v: _as_text(v).encode("utf-8", "surrogatepass")),
        objects,
        objects.map(_as_text),
        st.binary(max_size=64),
        st.text(max_size=64),
        st.sampled_from([10, 999, 1_001, 100_000]).map(_deep),
        st.sampled_from(['{"text": ' * 50_000, "{" * 100_000, '{"a":' * 60_000 + "1" + "}" * 60_000]),
    )


def _check(result: Any) -> None:
    assert isinstance(result, dict)
    json.dumps(result)  # always serialisable for the host
    if "error" in result:
        assert set(result["error"]) == {"code", "message"}


async def _run_batch(tools: Any, tool: str, batch: list[Any], ctx: ToolContext, seen: list[int]) -> None:
    for payload in batch:
        _check(await tools.dispatch(tool, payload, ctx))
        seen[0] += 1


@pytest.mark.parametrize("tool", TOOLS)
def test_dispatch_never_raises_on_model_input(tool: str) -> None:
    store = DictStore()
    tools = memory_tools(store.memory())
    ctx = ToolContext(user_id="ann", session_id="t1")
    seen = [0]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(batch=st.lists(payloads_for(tool), min_size=BATCH, max_size=BATCH))
    def run(batch: list[Any]) -> None:
        loop.run_until_complete(_run_batch(tools, tool, batch, ctx, seen))

    loop = asyncio.new_event_loop()
    try:
        run()
    finally:
        loop.close()
    assert seen[0] >= PAYLOADS
    # Nothing reached another user's memory; whatever was stored belongs to the caller.
    assert all(r.scope.user_id == "ann" for r in store.rows.values())


@pytest.mark.parametrize("tool", TOOLS)
def test_dispatch_on_sqlite_never_raises_on_model_input(tool: str, tmp_path: Any) -> None:
    """The same on a real file (FTS5 queries, Unicode texts), with fewer payloads."""
    memory = SQLiteMemory(tmp_path / "fuzz.db")
    tools = memory_tools(memory)
    ctx = ToolContext(user_id="ann")
    seen = [0]

    @settings(
        max_examples=SQLITE_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(batch=st.lists(payloads_for(tool), min_size=BATCH, max_size=BATCH))
    def run(batch: list[Any]) -> None:
        loop.run_until_complete(_run_batch(tools, tool, batch, ctx, seen))

    loop = asyncio.new_event_loop()
    try:
        run()
        loop.run_until_complete(memory.aclose())
    finally:
        loop.close()
    assert seen[0] >= SQLITE_PAYLOADS


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(
    "payload",
    [_deep(100_000), _deep(100_000).encode(), bytearray(_deep(100_000).encode()), '{"a":' * 100_000],
    ids=["str", "bytes", "bytearray", "objects"],
)
def test_deeply_nested_json_is_an_error_result(tool: str, payload: Any) -> None:
    tools = memory_tools(DictStore().memory())
    result = tools.dispatch_sync(tool, payload, ToolContext(user_id="ann"))
    assert result["error"]["code"] == "invalid_arguments"


def test_host_mistakes_still_raise() -> None:
    from memoryport import UsageError

    tools = memory_tools(DictStore().memory())
    with pytest.raises(UsageError, match="ToolContext"):
        tools.dispatch_sync("recall", '{"query": ""}', {"user_id": "ann"})  # type: ignore[arg-type]
