"""The benchmark harness runs (at a tiny size; no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sqlite_bench import main


@pytest.mark.anyio
async def test_sqlite_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    text = await main(
        [
            "--sizes",
            "300",
            "--tenant-mine",
            "200",
            "--tenant-others",
            "600",
            "--queries",
            "3",
            "--runs",
            "1",
            "--dir",
            str(tmp_path / "scratch"),
            "--out",
            str(out),
        ]
    )
    assert out.read_text() == text
    for heading in ("Add throughput", "Search latency", "Tenant test"):
        assert heading in text
    assert "numpy brute force" in text and "| hybrid |" in text


@pytest.mark.anyio
async def test_erase_bench_runs_at_a_tiny_size() -> None:
    from benchmarks.sqlite_erase_bench import measure, table

    rows = [await measure(300, False, 1), await measure(300, True, 1)]
    text = table(rows)
    assert text.count("\n| 300 |") == 2
    # Every erase path measured is a whole erasure: the rebuild is part of it.
    assert all(r["delete 1 by id"] > 0 and r["erase a user"] > 0 and r["VACUUM + checkpoint"] > 0 for r in rows)


@pytest.mark.anyio
async def test_sqlite_bench_plain_hybrid_row(tmp_path: Path) -> None:
    """``--plain-hybrid``: hybrid with every contextual step off, in the same rotation, and its own table."""
    text = await main(
        ["--only", "search", "--sizes", "300", "--queries", "3", "--plain-hybrid", "--dir", str(tmp_path / "s")]
    )
    assert "| hybrid, contextual steps off (fusion only) | 300 |" in text
    assert "fusion only / slower half" in text and "\n| 300 | " in text.split("fusion only / slower half")[1]
