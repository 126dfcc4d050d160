"""The graph benchmark runs end to end at a tiny size, SQLite and PostgreSQL side by side (no timing asserted)."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks import graph_bench

pytestmark = pytest.mark.anyio


async def test_quick_run_has_a_row_per_query() -> None:
    backends = ["sqlite"]
    if importlib.util.find_spec("pgserver") is not None and importlib.util.find_spec("psycopg") is not None:
        backends.append("postgres")  # the two must agree on every query's result count (the run asserts it)
    table = await graph_bench.main(600, 120, 3, backends)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split("|")[1].strip() for r in rows] == [
        "facts_about (current)",
        "related, depth 1",
        "related, depth 2",
        "paths, max_depth 3",
    ]
    assert ("PostgreSQL median ms" in table) == ("postgres" in backends)
