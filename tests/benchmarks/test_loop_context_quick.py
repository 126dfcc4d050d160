"""The per-turn context benchmark runs end to end at a tiny size (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import loop_context


def test_quick_run_writes_a_row_per_way(tmp_path: Path) -> None:
    out = tmp_path / "loop.md"
    text = loop_context.main(["--size", "300", "--turns", "3", "--out", str(out)])
    assert out.read_text() == text
    for way in ("AgentMemory.recall", "PromptContext.turn", "PromptContext.prefix", "AutoRecall.before_turn"):
        assert way in text
