"""The bulk-add benchmark runs (a tiny size, no peers; no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sqlite_bulk_bench import main


@pytest.mark.anyio
async def test_sqlite_bulk_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    text = await main(["--quick", "--no-peers", "--dir", str(tmp_path)])
    assert "memoryport, keyword-only | 2,000" in text
    assert "memoryport, with given vectors | 2,000" in text
    assert "floor: plain SQL (row + FTS5 row + vector row)" in text
    assert "of 60,000" in text and "of 100,000" in text


def test_sqlite_layout_probe_runs_at_a_tiny_size() -> None:
    from benchmarks.sqlite_layout_probe import main as probe

    text = probe(["--records", "1500", "--runs", "1", "--only", "K0", "K4", "V2", "V5"])
    assert "| K0 floor" in text and "| V5 K4 + one BLOB per batch" in text
    assert "| K3" not in text
