"""The time-range, operator and update benchmark runs end to end at a tiny size (no timing is asserted)."""

from __future__ import annotations

import pytest

from benchmarks import port_bench

pytestmark = pytest.mark.anyio


async def test_quick_run_measures_every_shape() -> None:
    result = await port_bench.main(n=600, queries=2, batch=50, total=120)
    shapes = {(row["search"], row["restriction"]) for row in result["searches"]}
    assert len(shapes) == 12 and all(row["with_ms"] > 0 for row in result["searches"])
    assert set(result["update_per_s"]) == {
        "text, keyword-only file (FTS5 re-index)",
        "text, with embedder (re-embed + vector write)",
        "metadata only",
    }
    table = port_bench.table(result)
    assert table.count("\n| ") == 12 + 3 + 2
