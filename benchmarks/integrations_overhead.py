"""What each framework integration costs on top of calling the memory tools directly.

Side by side in one run, on one SQLite file, the same ``recall`` (keyword search,
k=5) made four ways per framework:

- **tools directly**: ``await tools.dispatch("recall", {...}, ctx)``, the baseline;
- **hand-written glue**: the tool a user would write for that framework by hand,
  calling ``tools.dispatch`` (``StructuredTool``, ``@function_tool``, ``@agent.tool``);
- **memoryport integration**: ``langchain_tools``, ``function_tools``, ``memory_toolset``;
- for LangGraph, ``MemoryportStore.asearch`` against ``memory.search`` (the store
  maps one search onto the guard).

Where a framework can call one tool on its own (LangChain ``ainvoke``, the Agents
SDK's ``on_invoke_tool``), that is what is timed; pydantic-ai has no such call, so
a whole agent run with a scripted ``FunctionModel`` that makes one tool call is
timed, hand-written and ours alike. Medians of ``--repeat`` calls after a warm-up.

Run:  .venv/bin/python -m benchmarks.integrations_overhead [--records 2000] [--repeat 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import RunContextWrapper, function_tool
from agents.tool_context import ToolContext as AgentsToolContext
from langchain_core.tools import StructuredTool
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from memoryport import MemoryRecord, MemoryScope, ToolContext, memory_tools
from memoryport.adapters.sqlite import SQLiteMemory
from memoryport.integrations.langchain import langchain_tools
from memoryport.integrations.langgraph import MemoryportStore, _record_id
from memoryport.integrations.openai_agents import function_tools
from memoryport.integrations.pydantic_ai import memory_toolset

from .tools_overhead import fact

QUERY = "tea lisbon"


async def medians_us(fns: Sequence[Callable[[], Awaitable[object]]], repeat: int) -> list[float]:
    """Median µs of each function, called in turn (a, b, c, a, b, c, ...): drift hits all alike."""
    for _ in range(min(10, repeat)):
        for fn in fns:
            await fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            await fn()
            samples[i].append((time.perf_counter() - t) * 1e6)
    return [statistics.median(s) for s in samples]


async def measure(records: int, repeat: int, folder: Path) -> list[tuple[str, str, float, float]]:
    """``[(framework, way, median µs, ratio to the direct tool call)]``."""
    memory = SQLiteMemory(folder / "bench.db")
    users = [f"user-{u}" for u in range(20)]
    batch = [MemoryRecord(scope=MemoryScope(user_id=users[i % 20]), text=fact(i)) for i in range(records)]
    await memory.add(batch)
    tools = memory_tools(memory)
    ctx = ToolContext(user_id=users[0])
    args = {"query": QUERY}

    async def direct() -> object:
        return await tools.dispatch("recall", args, ctx)

    rows: list[tuple[str, str, float, float]] = []

    async def group(
        framework: str,
        named: Sequence[tuple[str, Callable[[], Awaitable[object]]]],
        reps: int,
        baseline: tuple[str, Callable[[], Awaitable[object]]] = ("tools.dispatch (direct)", direct),
    ) -> None:
        calls = [baseline, *named]
        got = await medians_us([fn for _, fn in calls], reps)
        for (way, _), us in zip(calls, got, strict=True):
            rows.append((framework, way, us, us / got[0]))

    # LangChain: one tool call through BaseTool.ainvoke, config carrying the user.
    config = {"configurable": {"user_id": users[0]}}

    async def by_hand(query: str) -> str:
        return json.dumps(await tools.dispatch("recall", {"query": query}, ctx))

    hand_lc = StructuredTool.from_function(coroutine=by_hand, name="recall", description="recall")
    ours_lc = {t.name: t for t in langchain_tools(tools)}["recall"]
    await group(
        "LangChain",
        [
            ("hand-written StructuredTool.ainvoke", lambda: hand_lc.ainvoke(args)),
            ("langchain_tools → ainvoke", lambda: ours_lc.ainvoke(args, config=config)),
        ],
        repeat,
    )

    # OpenAI Agents SDK: one tool call through FunctionTool.on_invoke_tool.
    @function_tool(name_override="recall")
    async def recall_by_hand(wrapper: RunContextWrapper[Any], query: str) -> str:
        """Recall."""
        return json.dumps(await tools.dispatch("recall", {"query": query}, ctx))

    ours_oa = {t.name: t for t in function_tools(tools)}["recall"]
    raw = json.dumps(args)

    def agents_ctx() -> AgentsToolContext[Any]:
        return AgentsToolContext(context=ctx, tool_name="recall", tool_call_id="c1", tool_arguments=raw)

    await group(
        "OpenAI Agents SDK",
        [
            ("hand-written @function_tool", lambda: recall_by_hand.on_invoke_tool(agents_ctx(), raw)),
            ("function_tools → on_invoke_tool", lambda: ours_oa.on_invoke_tool(agents_ctx(), raw)),
        ],
        repeat,
    )

    # pydantic-ai: a whole agent run whose scripted model makes one recall call.
    def scripted(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("recall", args)])
        return ModelResponse(parts=[TextPart("ok")])

    hand_agent = Agent(FunctionModel(scripted), deps_type=ToolContext)

    @hand_agent.tool
    async def recall(run: RunContext[ToolContext], query: str) -> dict[str, Any]:
        """Recall."""
        return await tools.dispatch("recall", {"query": query}, run.deps)

    ours_agent = Agent(FunctionModel(scripted), deps_type=ToolContext, toolsets=[memory_toolset(tools)])
    await group(
        "pydantic-ai",
        [
            ("hand-written @agent.tool, agent run", lambda: hand_agent.run("hi", deps=ctx)),
            ("memory_toolset, agent run", lambda: ours_agent.run("hi", deps=ctx)),
        ],
        max(20, repeat // 4),
    )

    # LangGraph store: MemoryportStore against the same guard calls it makes.
    store = MemoryportStore(memory, namespace=("memories", "{user_id}"))
    ns = ("memories", users[0])
    for i in range(200):
        await store.aput(ns, f"k{i}", {"text": fact(i)})
    scope = MemoryScope(user_id=users[0])
    pushed = {"lg_namespace": json.dumps(list(ns)), "lg_unindexed": False}
    await group(
        "LangGraph store",
        [
            ("MemoryportStore.asearch(query, limit=5)", lambda: store.asearch(ns, query=QUERY, limit=5)),
        ],
        repeat,
        baseline=(
            "memory.search(query, k=5, same filters)",
            lambda: memory.search(QUERY, scope=scope, k=5, filters=pushed),
        ),
    )
    seventh = _record_id(ns, "k7")
    await group(
        "LangGraph store",
        [
            ("MemoryportStore.aget", lambda: store.aget(ns, "k7")),
        ],
        repeat,
        baseline=("memory.get", lambda: memory.get(seventh, scope=scope)),
    )
    await memory.aclose()
    return rows


def table(rows: Sequence[tuple[str, str, float, float]]) -> str:
    lines = ["| framework | how it is called | µs (median) | × first row of its group |", "|---|---|---:|---:|"]
    lines += [f"| {f} | {w} | {us:,.0f} | {ratio:.2f} |" for f, w, us, ratio in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mp-integrations-bench-") as folder:
        rows = asyncio.run(measure(args.records, args.repeat, Path(folder)))
    text = table(rows)
    if args.out is not None:
        args.out.write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
