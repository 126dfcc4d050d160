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


@pytest.mark.anyio
async def test_sqlite_bulk_bench_loads_files_of_another_page_size(tmp_path: Path) -> None:
    text = await main(["--quick", "--no-peers", "--page-size", "16384", "--dir", str(tmp_path)])
    assert "memoryport, with given vectors, page_size=16,384 | 2,000" in text
    assert "memoryport, keyword-only, page_size=16,384 | 2,000" in text


def test_sqlite_layout_probe_runs_at_a_tiny_size() -> None:
    from benchmarks.sqlite_layout_probe import main as probe

    text = probe(["--records", "1500", "--runs", "1", "--only", "K0", "K4", "V2", "V5", "V6"])
    assert "| K0 floor" in text and "| V5 K4 + one BLOB per batch" in text and "| V6 K4 + blocks of 16" in text
    assert "| K3" not in text


@pytest.mark.anyio
async def test_sqlite_page_size_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    from benchmarks.sqlite_page_size_bench import main as reads

    text = await reads(["--quick", "--dir", str(tmp_path)])
    assert "same hits in every file: yes" in text
    assert "| hybrid search, page_size=16,384 |" in text and "| open + first vector search, page_size=4,096 |" in text


@pytest.mark.anyio
async def test_sqlite_bulk_paths_runs_at_a_tiny_size(tmp_path: Path) -> None:
    from benchmarks.sqlite_bulk_paths import main as paths

    text = await paths(["--quick", "--page-size", "4096", "--dir", str(tmp_path)])
    assert "| copy_memories, page_size=4,096 | 2,000 |" in text
    assert "| import_knowledge, batch_size=256, page_size=4,096 |" in text
