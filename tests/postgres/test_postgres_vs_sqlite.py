"""The same records and queries on SQLite and PostgreSQL rank alike: the ranking code is shared."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.postgres import PostgresMemory

from .support import Server, bow_embedder, fresh_schema

pytestmark = pytest.mark.anyio

WORDS = [
    "apple", "harbour", "violin", "granite", "meadow", "lantern", "pepper", "glacier", "saddle", "orchid",
    "compass", "thunder", "biscuit", "falcon", "marble", "velvet", "canyon", "ember", "willow", "quartz",
]  # fmt: skip


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
async def test_top_results_agree(pg: Server, tmp_path: Path, mode: str) -> None:
    rng = random.Random(7)
    ann = MemoryScope(user_id="ann")
    texts = [" ".join(rng.sample(WORDS, 4)) + f" note{i}" for i in range(120)]
    embedder = bow_embedder()
    sqlite = SQLiteMemory(tmp_path / "m.db", embedder=embedder, search_mode=mode)
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), search_mode=mode)
    try:
        for memory in (sqlite, postgres):
            await memory.add([MemoryRecord(scope=ann, text=t) for t in texts])
        same_first = overlap = 0
        queries = [" ".join(rng.sample(WORDS, 2)) for _ in range(20)] + [texts[i] for i in range(0, 120, 12)]
        for query in queries:
            a = [h.record.text for h in await sqlite.search(query, scope=ann, k=5)]
            b = [h.record.text for h in await postgres.search(query, scope=ann, k=5)]
            same_first += a[0] == b[0]
            overlap += len(set(a) & set(b))
        # Ties among equally scored records may break differently (row order); the rankings agree.
        assert same_first >= 0.8 * len(queries), (mode, same_first)
        assert overlap >= 0.8 * 5 * len(queries), (mode, overlap)
    finally:
        await sqlite.aclose()
        await postgres.aclose()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_a_date_in_the_query_lifts_the_same_records(pg: Server, tmp_path: Path, mode: str) -> None:
    from datetime import datetime, timedelta, timezone

    ann = MemoryScope(user_id="ann")
    start = datetime(2023, 1, 15, 9, tzinfo=timezone.utc)
    # one record a month, each with the same words: only the date tells them apart
    records = [(f"ann hiked the {w} trail", start + timedelta(days=30 * i)) for i, w in enumerate(WORDS[:12])]
    embedder = bow_embedder()
    sqlite = SQLiteMemory(tmp_path / "d.db", embedder=embedder, search_mode=mode)
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), search_mode=mode)
    try:
        for memory in (sqlite, postgres):
            await memory.add([MemoryRecord(scope=ann, text=t, created_at=at) for t, at in records])
        for query, expected in [("where did ann hike in June 2023?", records[5][0]),
                                ("ann hiked on 16 March, 2023", records[2][0])]:
            for memory in (sqlite, postgres):
                hits = await memory.search(query, scope=ann, k=3)
                assert hits[0].record.text == expected, (memory, query, [h.record.text for h in hits])
    finally:
        await sqlite.aclose()
        await postgres.aclose()
