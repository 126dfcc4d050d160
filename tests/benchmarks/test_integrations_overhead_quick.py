"""The integrations' overhead benchmark runs end to end at a tiny size (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

for module in ("langgraph.store.base", "langchain_core", "pydantic_ai", "agents"):
    pytest.importorskip(module)

from benchmarks import integrations_overhead  # noqa: E402


def test_quick_run_writes_a_row_per_way(tmp_path: Path) -> None:
    out = tmp_path / "overhead.md"
    text = integrations_overhead.main(["--records", "40", "--repeat", "3", "--out", str(out)])
    assert out.read_text() == text
    ways = [line.split("|")[2].strip() for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    for way in (
        "langchain_tools → ainvoke",
        "function_tools → on_invoke_tool",
        "memory_toolset, agent run",
        "MemoryportStore.asearch(query, limit=5)",
        "MemoryportStore.aget",
    ):
        assert way in ways
    assert ways.count("tools.dispatch (direct)") == 3
