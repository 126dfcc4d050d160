"""The single-add benchmark runs (tiny sizes; no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sqlite_add_bench import main


@pytest.mark.anyio
@pytest.mark.parametrize("profile", [False, True])
async def test_sqlite_add_bench_runs_at_a_tiny_size(tmp_path: Path, profile: bool) -> None:
    text = await main(["--quick", "--folder", str(tmp_path), *(["--profile"] if profile else [])])
    if profile:
        assert "`COMMIT`" in text and "empty hop" in text
    else:
        assert "durability='full'" in text and "wal, synchronous=NORMAL" in text and "synchronous=FULL" in text
        assert "durability='normal', write_behind" in text and "records per CPU second" in text


@pytest.mark.anyio
async def test_sqlite_add_bench_times_another_page_size(tmp_path: Path) -> None:
    text = await main(["--quick", "--no-fsync", "--page-size", "16384", "--folder", str(tmp_path)])
    assert "memoryport SQLiteMemory (page_size=16,384)" in text and "WAL KiB per add" in text
