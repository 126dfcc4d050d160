"""Metadata filters: the side table SQLiteMemory uses vs json_extract on the JSON column, side by side.

    python -m benchmarks.sqlite_filters_bench

Same file, same records (one user, metadata ``{"kind": <one of 10>, "n": i}``),
same query shape as ``search("", filters={"kind": ...}, k=10)``: newest first
among the records whose ``kind`` matches.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import load_driver

N = 100_000
QUERIES = 200


async def main() -> str:
    path = Path(tempfile.mkdtemp(prefix="memoryport-filters-")) / "f.db"
    user = MemoryScope(user_id="bench")
    memory = SQLiteMemory(path)
    for start in range(0, N, 10_000):
        await memory.add(
            [
                MemoryRecord(scope=user, text=f"note {i}", metadata={"kind": f"k{i % 10}", "n": i})
                for i in range(start, start + 10_000)
            ]
        )
    driver = memory.store.driver_name
    await memory.aclose()
    conn = load_driver(driver)[1].connect(str(path))
    side = (
        "SELECT r.rid FROM records r WHERE r.user_id IS ? AND EXISTS (SELECT 1 FROM record_meta m "
        "WHERE m.rid = r.rid AND m.key = ? AND m.tag = 's' AND m.value IS ?) ORDER BY r.created_at DESC LIMIT 10"
    )
    extract = (
        "SELECT r.rid FROM records r WHERE r.user_id IS ? AND json_extract(r.metadata, ?) = ? "
        "ORDER BY r.created_at DESC LIMIT 10"
    )
    times: dict[str, list[float]] = {"side table (record_meta)": [], "json_extract": []}
    for q in range(QUERIES):
        kind = f"k{q % 10}"
        for name in list(times)[:: 1 if q % 2 else -1]:
            start = time.perf_counter()
            if name == "json_extract":
                rows = conn.execute(extract, ("bench", '$."kind"', kind)).fetchall()
            else:
                rows = conn.execute(side, ("bench", "kind", kind)).fetchall()
            times[name].append(time.perf_counter() - start)
            assert len(rows) == 10
    lines = [f"| filter on 1 of 10 kinds, {N:,} records, k=10 | median ms |", "|---|---|"]
    lines += [f"| {name} | {statistics.median(t) * 1000:.3f} |" for name, t in times.items()]
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    asyncio.run(main())
