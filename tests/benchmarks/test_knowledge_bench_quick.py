"""The knowledge import benchmark runs end to end at a tiny size (no timing is asserted)."""

from __future__ import annotations

import pytest

from benchmarks import knowledge_bench

pytestmark = pytest.mark.anyio


async def test_quick_run_has_a_row_per_run() -> None:
    table = await knowledge_bench.main(120, 0)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split("|")[1].strip() for r in rows] == [
        "first import, keyword-only",
        "re-run, nothing changed",
        "re-run, 6 files edited",
    ]
    assert rows[1].split("|")[3].strip() == "0"  # nothing written when nothing changed
