"""What the file's layout costs a bulk add: plain SQL into shapes from the floor's up to memoryport's, in one run.

Run from the repository root::

    python -m benchmarks.sqlite_layout_probe --records 20000 --runs 3
    python -m benchmarks.sqlite_layout_probe --records 2000 --runs 1     # a smoke run

Issue 17, goal 2 asks ≥ 100,000 records/s keyword-only and ≥ 60,000 with given
vectors (batches of 1,000). ``sqlite_bulk_bench``'s floor writes fewer columns,
no index and one FTS5 column; this probe adds memoryport's layout piece by piece
(the ``id`` column and its UNIQUE index, the scope and time columns, the two
indexes, the FTS5 ``tenant`` column, the vector rows) and tries cheaper ways to
write the same bytes (FTS5 rows by ``INSERT ... SELECT``, vector rows from one
BLOB, larger pages, one BLOB per batch). No checks, no Python per record beyond
building the rows: each row is the thread CPU per record of the SQL alone
(median of the runs), split by statement. When a shape's floor is under the
goal, no Python can reach the goal on that shape.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.compare import Data
from memoryport._records import new_ids
from memoryport.adapters.sqlite import load_driver

BATCH = 1_000
BLOCK = 16  # vectors per row in shape V6
TENANT = "t123456789012345678901234"  # a tenant token's length

REC_MIN = "CREATE TABLE records(rid INTEGER PRIMARY KEY, user_id TEXT, text TEXT NOT NULL, created_at INTEGER)"
REC_FULL = (
    "CREATE TABLE records(rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, user_id TEXT, session_id TEXT, "
    "agent_id TEXT, text TEXT NOT NULL, metadata TEXT, created_at INTEGER NOT NULL, expires_at INTEGER, "
    "updated_at INTEGER)"
)
INDEXES = (
    "CREATE INDEX records_user_time ON records(user_id, created_at)",
    "CREATE INDEX records_expiry ON records(expires_at) WHERE expires_at IS NOT NULL",
)
FTS_BODY = "CREATE VIRTUAL TABLE records_fts USING fts5(body, content='', tokenize='porter unicode61')"
FTS_TENANT = (
    "CREATE VIRTUAL TABLE records_fts USING fts5(body, tenant, content='', "
    "tokenize='porter unicode61 remove_diacritics 2')"
)
VECTORS = "CREATE TABLE vectors(rid INTEGER PRIMARY KEY, vec BLOB NOT NULL)"
CHUNKS = "CREATE TABLE vector_chunks(first INTEGER PRIMARY KEY, vecs BLOB NOT NULL)"
VECTORS_SQL = (
    "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3) "
    "INSERT INTO vectors(rid, vec) SELECT ?1 + i, substr(?2, i * ?4 + 1, ?4) FROM k"
)


@dataclass
class Shape:
    label: str
    ddl: Sequence[str]
    full: bool = False  # memoryport's records columns (else the floor's four)
    tenant: bool = False  # the FTS5 tenant column
    fts_select: bool = False  # FTS5 rows by INSERT ... SELECT from records
    vectors: str = ""  # "", "rows" (bound), "sql" (one statement), "chunk" (one BLOB per batch), "block" (16 a row)
    page: int = 4096
    extra: list[str] = field(default_factory=list)


SHAPES = [
    Shape("K0 floor: 4 columns + FTS5 body", [REC_MIN, FTS_BODY]),
    Shape("K1 + id UNIQUE, 10 columns", [REC_FULL, FTS_BODY], full=True),
    Shape("K2 + the 2 indexes", [REC_FULL, *INDEXES, FTS_BODY], full=True),
    Shape("K3 + FTS5 tenant column (memoryport's layout)", [REC_FULL, *INDEXES, FTS_TENANT], full=True, tenant=True),
    Shape("K4 K3, FTS5 rows by INSERT ... SELECT", [REC_FULL, *INDEXES, FTS_TENANT], True, True, True),
    Shape("V0 floor + vector rows (bound)", [REC_MIN, FTS_BODY, VECTORS], vectors="rows"),
    Shape("V1 K3 + vector rows (bound)", [REC_FULL, *INDEXES, FTS_TENANT, VECTORS], True, True, vectors="rows"),
    Shape(
        "V2 K4 + vector rows from one BLOB (memoryport now)",
        [REC_FULL, *INDEXES, FTS_TENANT, VECTORS],
        True,
        True,
        True,
        vectors="sql",
    ),
    Shape("V3 V2 with 16 KiB pages", [REC_FULL, *INDEXES, FTS_TENANT, VECTORS], True, True, True, "sql", 16384),
    Shape("V3a V2 with 8 KiB pages", [REC_FULL, *INDEXES, FTS_TENANT, VECTORS], True, True, True, "sql", 8192),
    Shape(
        "V6 K4 + blocks of 16 vectors (a row each)", [REC_FULL, *INDEXES, FTS_TENANT, CHUNKS], True, True, True, "block"
    ),
    Shape("V4 floor + one BLOB per batch", [REC_MIN, FTS_BODY, CHUNKS], vectors="chunk"),
    Shape("V5 K4 + one BLOB per batch", [REC_FULL, *INDEXES, FTS_TENANT, CHUNKS], True, True, True, "chunk"),
]


def load(shape: Shape, folder: str, texts: list[str], ids: list[str], vectors: Any) -> tuple[float, dict[str, float]]:
    """Thread CPU seconds of the whole load and per statement."""
    _, driver = load_driver(None)
    path = os.path.join(folder, shape.label.split()[0] + ".db")
    conn = driver.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {shape.page}")
    for sql in ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL", "PRAGMA wal_autocheckpoint = 10000"):
        conn.execute(sql)
    for sql in shape.ddl:
        conn.execute(sql)
    steps: dict[str, float] = {}
    now = time.time_ns() // 1000

    def timed(label: str, sql: str, params: Any, many: bool = False) -> None:
        c = time.thread_time()
        if many:
            conn.executemany(sql, params)
        else:
            conn.execute(sql, params)
        steps[label] = steps.get(label, 0.0) + time.thread_time() - c

    full_sql = (
        "INSERT INTO records(rid, id, user_id, session_id, agent_id, text, metadata, created_at, expires_at, "
        "updated_at) VALUES (?, ?, ?, NULL, NULL, ?, NULL, ?, NULL, NULL)"
    )
    high = 1 << 40
    n = len(texts)
    start = time.thread_time()
    for i in range(0, n, BATCH):
        end = min(n, i + BATCH)
        span = range(i, end)
        conn.execute("BEGIN")
        if shape.full:
            timed("records", full_sql, [(j + 1, ids[j], "u", texts[j], now) for j in span], many=True)
        else:
            rows4 = [(j + 1, "u", texts[j], now) for j in span]
            timed("records", "INSERT INTO records VALUES (?, ?, ?, ?)", rows4, many=True)
        if shape.fts_select:
            sql = (
                "INSERT INTO records_fts(rowid, body, tenant) SELECT ?1 + rid, text, ?2 FROM records "
                "WHERE rid BETWEEN ?3 AND ?4"
            )
            timed("fts5", sql, (high, TENANT, i + 1, end))
        elif shape.tenant:
            sql = "INSERT INTO records_fts(rowid, body, tenant) VALUES (?, ?, ?)"
            timed("fts5", sql, [(high | (j + 1), texts[j], TENANT) for j in span], many=True)
        else:
            timed("fts5", "INSERT INTO records_fts(rowid, body) VALUES (?, ?)", [(j + 1, texts[j]) for j in span], True)
        if shape.vectors:
            blob = vectors[i:end].tobytes()
            size = len(blob) // (end - i)
            if shape.vectors == "rows":
                rows = [(i + 1 + k, blob[at : at + size]) for k, at in enumerate(range(0, len(blob), size))]
                timed("vectors", "INSERT INTO vectors VALUES (?, ?)", rows, many=True)
            elif shape.vectors == "sql":
                timed("vectors", VECTORS_SQL, (i + 1, blob, end - i, size))
            elif shape.vectors == "block":
                step = BLOCK * size
                blocks = [(i + 1 + k // size, blob[k : k + step]) for k in range(0, len(blob), step)]
                timed("vectors", "INSERT INTO vector_chunks VALUES (?, ?)", blocks, many=True)
            else:
                timed("vectors", "INSERT INTO vector_chunks VALUES (?, ?)", (i + 1, blob))
        timed("commit", "COMMIT", ())
    total = time.thread_time() - start
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return total, steps


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="+", help="shape codes to run (K0 K3 V2 ...)")
    args = parser.parse_args(argv)
    shapes = [s for s in SHAPES if not args.only or s.label.split()[0] in args.only]
    data = Data(args.records, 0, 0)
    texts = list(data.texts[: args.records])
    vectors = np.ascontiguousarray(data.vectors[: args.records], dtype=np.float32)
    ids = new_ids(args.records)
    results: dict[str, list[tuple[float, dict[str, float]]]] = {s.label: [] for s in shapes}
    with tempfile.TemporaryDirectory() as folder:
        for run in range(args.runs):
            shift = run % len(shapes)
            for shape in shapes[shift:] + shapes[:shift]:  # a rotating order
                results[shape.label].append(load(shape, folder, texts, ids, vectors))
    n = args.records
    lines = [
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}; {n:,} records in batches of {BATCH:,}, "
        f"{args.runs} runs; thread CPU µs per record (median)",
        "",
        "| shape | µs/record | records per CPU s | records | FTS5 | vectors | COMMIT |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, runs in results.items():
        total = statistics.median(r[0] for r in runs)

        def part(key: str, runs: list[tuple[float, dict[str, float]]] = runs) -> str:
            if key not in runs[0][1]:
                return "–"
            return f"{statistics.median(r[1][key] for r in runs) / n * 1e6:.2f}"

        lines.append(
            f"| {label} | {total / n * 1e6:.2f} | {n / total:,.0f} | {part('records')} | {part('fts5')} | "
            f"{part('vectors')} | {part('commit')} |"
        )
    out = "\n".join(lines)
    print(out)
    return out


if __name__ == "__main__":
    main()
