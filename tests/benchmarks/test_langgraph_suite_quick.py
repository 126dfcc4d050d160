"""The contract suite on LangGraph's stores runs and writes its comparison table (failures are reported, not raised)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.sqlite")

from benchmarks import langgraph_suite


def test_quick_run_writes_the_table(tmp_path: Path) -> None:
    out = tmp_path / "comparison.md"
    text = langgraph_suite.main(["--quick", "--out", str(out), "--dir", str(tmp_path / "work")])
    assert out.read_text() == text
    header = next(line for line in text.splitlines() if line.startswith("| Contract test"))
    assert header == "| Contract test | InMemoryStore | SqliteStore |"
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")}
    # every base promise of the suite has a row, with a verdict per store
    for test in (
        "test_users_are_isolated",
        "test_erasing_a_user_removes_exactly_that_user",
        "test_get_round_trips_a_record",
    ):
        assert rows[test].count("✅") + rows[test].count("❌") == 2, rows[test]
    assert "**total**" in text
    # the known gap of LangGraph's stores without an index: the query is ignored
    assert rows["test_keyword_search_finds_words"].count("❌") == 2
    assert "## Why they fail" in text


def test_the_adapter_maps_scopes_onto_namespaces() -> None:
    from langgraph.store.memory import InMemoryStore

    from memoryport import MemoryRecord, MemoryScope

    port = langgraph_suite.LangGraphPort(InMemoryStore(), name="lg", ttl=False)
    ann = MemoryScope(user_id="ann", session_id="s1")
    import asyncio

    [rid] = asyncio.run(port.add([MemoryRecord(id="r1", scope=ann, text="hello", metadata={"k": 1})]))
    assert port.store.get(("mp", "ann", "s1", "~"), rid).value["text"] == "hello"
    got = asyncio.run(port.get(rid, scope=MemoryScope(user_id="ann")))
    assert got is not None and got.scope == ann and got.metadata == {"k": 1}
    assert asyncio.run(port.get(rid, scope=MemoryScope(user_id="ann", session_id="s2"))) is None
