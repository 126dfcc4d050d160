"""The searches-after-an-add benchmark runs (tiny sizes; no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sqlite_after_add_bench import main


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_sqlite_after_add_bench_runs_at_a_tiny_size(tmp_path: Path, mode: str) -> None:
    text = await main(["--quick", "--mode", mode, "--folder", str(tmp_path)])
    assert f"{mode} search" in text and "| #1 |" in text and "| #4 |" in text
