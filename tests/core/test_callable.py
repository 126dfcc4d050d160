"""CallableMemory: capabilities from the functions given, result shapes, failures."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from memoryport import (
    BackendError,
    CallableMemory,
    Capability,
    GuardedMemory,
    MemoryHit,
    MemoryRecord,
    MemoryScope,
    UnsupportedCapability,
    UsageError,
)

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
SECRET = "ann's secret"


def nothing(**kw: Any) -> None:
    return None


def test_capabilities_follow_the_functions() -> None:
    bare = CallableMemory(add=nothing, search=nothing)
    assert Capability.GET not in bare.capabilities and Capability.EXPORT not in bare.capabilities
    assert {Capability.SESSION_SCOPE, Capability.METADATA, Capability.EXPIRY} <= bare.capabilities
    full = CallableMemory(add=nothing, search=nothing, get=nothing, delete=nothing, export=nothing, purge=nothing)
    assert {Capability.GET, Capability.DELETE, Capability.EXPORT, Capability.PURGE} <= full.capabilities
    assert isinstance(full, GuardedMemory)
    exact = CallableMemory(add=nothing, search=nothing, get=nothing, capabilities=["get"])
    assert exact.capabilities == {Capability.GET} and exact.user_only


def test_construction_errors() -> None:
    with pytest.raises(UsageError, match="export"):
        CallableMemory(add=nothing, search=nothing, capabilities=["export"])
    with pytest.raises(UsageError, match="function"):
        CallableMemory(add=nothing, search="not callable")
    with pytest.raises(ValueError):
        CallableMemory(add=nothing, search=nothing, capabilities=["teleport"])


async def test_missing_function_is_refused_before_anything_runs() -> None:
    memory = CallableMemory(add=nothing, search=nothing)
    with pytest.raises(UnsupportedCapability):
        await memory.get("x", scope=ANN)
    with pytest.raises(UnsupportedCapability):
        await memory.delete(scope=ANN)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_search_accepts_records_hits_and_pairs(asynchronous: bool) -> None:
    a = MemoryRecord(scope=ANN, text="a")
    b = MemoryRecord(scope=ANN, text="b")
    c = MemoryRecord(scope=ANN, text="c")
    result = [a, MemoryHit(record=b, score=0.75, signal="vector"), (c, 0.1)]

    def sync_search(**kw: Any) -> Any:
        return result

    async def async_search(**kw: Any) -> Any:
        return result

    memory = CallableMemory(add=nothing, search=async_search if asynchronous else sync_search)
    hits = await memory.search("q", scope=ANN)
    assert [(h.record.text, h.score) for h in hits] == [("a", 1.0), ("b", 0.75), ("c", 0.1)]
    assert hits.mode == "backend"  # type: ignore[attr-defined]


async def test_functions_get_keyword_arguments_named_as_in_the_port() -> None:
    seen: dict[str, dict[str, Any]] = {}

    def recorder(op: str, value: Any) -> Any:
        def fn(**kw: Any) -> Any:
            seen[op] = kw
            return value

        return fn

    memory = CallableMemory(
        add=recorder("add", None),
        search=recorder("search", []),
        get=recorder("get", None),
        delete=recorder("delete", 0),
        export=recorder("export", []),
        purge=recorder("purge", 0),
    )
    ids = await memory.add([MemoryRecord(scope=ANN, text="x")])
    await memory.search("q", scope=ANN, k=2, filters={"a": 1})
    await memory.get("i", scope=ANN)
    await memory.delete(["i"], scope=ANN)
    await memory.delete(scope=ANN)
    await memory.export(ANN)
    await memory.purge()
    assert len(ids) == 1 and len(ids[0]) == 32  # None from add: the guard's ids
    assert {op: sorted(kw) for op, kw in seen.items()} == {
        "add": ["records"],
        "search": ["filters", "k", "query", "scope"],
        "get": ["id", "scope"],
        "delete": ["ids", "scope"],
        "export": ["scope"],
        "purge": ["created_before", "now"],
    }
    assert seen["delete"]["ids"] is None


async def test_failures_become_backend_errors_and_logs_carry_only_the_type(caplog: pytest.LogCaptureFixture) -> None:
    def broken(**kw: Any) -> Any:
        raise ConnectionError(f"lost while storing {SECRET}")

    memory = CallableMemory(add=broken, search=nothing, name="mine")
    with caplog.at_level(logging.DEBUG, logger="memoryport"), pytest.raises(BackendError) as info:
        await memory.add([MemoryRecord(scope=ANN, text=SECRET)])
    assert isinstance(info.value.__cause__, ConnectionError)
    assert (info.value.backend, info.value.operation) == ("mine", "add")
    assert SECRET not in str(info.value)
    assert "ConnectionError" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(
    ("op", "value"),
    [("search", 5), ("search", ["text"]), ("search", [(1, 2)]), ("get", "text"), ("delete", "1"), ("export", 3)],
)
async def test_wrong_result_shapes_are_backend_errors(op: str, value: Any) -> None:
    fns: dict[str, Any] = {"add": nothing, "search": nothing, "get": nothing, "delete": nothing, "export": nothing}
    fns[op] = lambda **kw: value
    memory = CallableMemory(**fns)
    with pytest.raises(BackendError):
        if op == "search":
            await memory.search("q", scope=ANN)
        elif op == "get":
            await memory.get("i", scope=ANN)
        elif op == "delete":
            await memory.delete(scope=ANN)
        else:
            await memory.export(ANN)
