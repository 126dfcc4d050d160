"""PostgresMemory's own behaviour: search, update, count, time ranges, filter operators, schema, erasure."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from memoryport import (
    EmbedderMismatch,
    GuardedMemory,
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    UsageError,
)
from memoryport._filters import matches
from memoryport._records import MemoryUpdate
from memoryport.adapters.postgres import SCHEMA_VERSION, PostgresMemory, PostgresStore, _vectors, migrate_dsn

from .support import Server, bow_embedder, fresh_schema

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


@pytest.fixture
async def memory(pg: Server) -> AsyncIterator[GuardedMemory[PostgresStore]]:
    m = PostgresMemory(pg.app_dsn, embedder=bow_embedder(), schema=fresh_schema(), pool_size=2)
    yield m
    await m.aclose()


async def test_keyword_search_stems_ranks_and_takes_any_text(memory: GuardedMemory[PostgresStore]) -> None:
    await memory.add(
        [
            MemoryRecord(scope=ANN, text="Ann drinks green tea every morning"),
            MemoryRecord(scope=ANN, text="Ann painted a sunset over the harbour"),
            MemoryRecord(scope=ANN, text="The harbour was full of boats"),
        ]
    )
    hits = await memory.search("paintings of sunsets", scope=ANN, k=3)
    assert hits[0].record.text == "Ann painted a sunset over the harbour"
    for query in ['"', "AND OR NOT", "(((", "a & b | !c", "'; DROP TABLE x; --", "🍵", "<->", "tea:*", "\\"]:
        await memory.search(query, scope=ANN, k=3)  # never a syntax error
    assert (await memory.search("tea & | !", scope=ANN, k=1))[0].record.text.startswith("Ann drinks")


async def test_keyword_only_mode_and_vector_mode(pg: Server) -> None:
    schema = fresh_schema()
    for mode in ("keyword", "vector", "hybrid"):
        m = PostgresMemory(pg.app_dsn, embedder=bow_embedder(), schema=schema, search_mode=mode)
        if mode == "keyword":
            await m.add([MemoryRecord(scope=ANN, text=f"note {w}") for w in ("apple", "pear", "plum")])
        hits = await m.search("note pear", scope=ANN, k=3)
        assert hits[0].record.text == "note pear"
        assert hits[0].signal == mode
        await m.aclose()


async def test_update_changes_in_place_and_reindexes(memory: GuardedMemory[PostgresStore]) -> None:
    [a, b] = await memory.add(
        [
            MemoryRecord(scope=ANN, text="Ann drinks green tea", metadata={"kind": "fact"}),
            MemoryRecord(scope=ANN, text="Ann likes jazz"),
        ]
    )
    [other] = await memory.add([MemoryRecord(scope=BEN, text="Ben likes jazz")])
    before = await memory.get(a, scope=ANN)
    assert before is not None
    done = await memory.update(
        [
            MemoryUpdate(id=b, metadata={"kind": "taste"}),
            MemoryUpdate(id=a, text="Ann now drinks black coffee"),
            MemoryUpdate(id=other, text="stolen"),  # Ben's: outside the scope, skipped
            MemoryUpdate(id="no-such-id", text="x"),
        ],
        scope=ANN,
    )
    assert done == [b, a]
    after = await memory.get(a, scope=ANN)
    assert after is not None
    assert after.text == "Ann now drinks black coffee"
    assert after.metadata == {"kind": "fact"} and after.created_at == before.created_at
    assert after.updated_at is not None and after.updated_at >= after.created_at
    assert [h.record.id for h in await memory.search("coffee", scope=ANN, k=1)] == [a]
    assert all(h.record.id != a for h in await memory.search("green tea", scope=ANN, k=5, filters=None)
               if "tea" in h.record.text)
    assert (await memory.get(other, scope=BEN)).text == "Ben likes jazz"  # type: ignore[union-attr]
    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert await memory.update([MemoryUpdate(id=b, expires_at=later)], scope=ANN) == [b]
    assert (await memory.get(b, scope=ANN)).expires_at == later  # type: ignore[union-attr]
    assert await memory.update([MemoryUpdate(id=b, expires_at=None)], scope=ANN) == [b]
    assert (await memory.get(b, scope=ANN)).expires_at is None  # type: ignore[union-attr]


async def test_count_and_time_ranges(memory: GuardedMemory[PostgresStore]) -> None:
    now = datetime.now(timezone.utc)
    records = [
        MemoryRecord(scope=ANN, text=f"day {d} note", created_at=now - timedelta(days=d), metadata={"d": d})
        for d in range(10)
    ]
    await memory.add(records)
    await memory.add([MemoryRecord(scope=BEN, text="ben note")])
    assert await memory.count(ANN) == 10
    assert await memory.count(ANN, since="3d") == 3 or await memory.count(ANN, since="3d") == 4
    assert await memory.count(ANN, since=now - timedelta(days=3, hours=1)) == 4
    assert await memory.count(ANN, until=now - timedelta(days=7, hours=1)) == 2
    assert await memory.count(ANN, filters={"d": {"$gte": 5}}) == 5
    week = await memory.export(ANN, since=now - timedelta(days=6, hours=1), until=now - timedelta(days=1, hours=1))
    assert [r.metadata["d"] for r in week] == [6, 5, 4, 3, 2]
    hits = await memory.search("note", scope=ANN, k=10, since=now - timedelta(days=2, hours=1))
    assert sorted(int(h.record.metadata["d"]) for h in hits) == [0, 1, 2]  # type: ignore[call-overload]
    recent = await memory.search("", scope=ANN, k=10, until=now - timedelta(days=8, hours=1))
    assert [h.record.metadata["d"] for h in recent] == [9]


VALUES = [None, True, False, 0, 1, 1.0, 2, -3, 2.5, 10**20, "", "a", "b", "1", "ä", "Z"]


def _random_filter(rng: random.Random) -> dict[str, object]:
    key = rng.choice(["x", "y"])
    op = rng.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "plain"])
    if op == "plain":
        return {key: rng.choice(VALUES)}
    if op == "$exists":
        return {key: {op: rng.choice([True, False])}}
    if op in ("$in", "$nin"):
        return {key: {op: rng.sample(VALUES, 3)}}
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return {key: {op: rng.choice([0, 1, 2.5, -1, "a", "b", "Z", ""])}}
    return {key: {op: rng.choice(VALUES)}}


async def test_filter_operators_agree_with_the_reference_semantics(memory: GuardedMemory[PostgresStore]) -> None:
    """Every operator, on values of every JSON kind, selects exactly what memoryport's reference matcher selects."""
    rng = random.Random(14)
    records = []
    for i in range(60):
        metadata: dict[str, object] = {}
        for key in ("x", "y"):
            if rng.random() < 0.8:
                metadata[key] = rng.choice(VALUES)
        records.append(MemoryRecord(scope=ANN, text=f"record {i}", metadata=metadata))  # type: ignore[arg-type]
    await memory.add(records)
    stored = await memory.export(ANN)
    for _ in range(80):
        filters = _random_filter(rng) | (_random_filter(rng) if rng.random() < 0.3 else {})
        expected = sorted(r.text for r in stored if matches(r.metadata, filters))  # type: ignore[arg-type]
        found = sorted(h.record.text for h in await memory.search("", scope=ANN, k=100, filters=filters))  # type: ignore[arg-type]
        assert found == expected, filters
        assert await memory.count(ANN, filters=filters) == len(expected), filters  # type: ignore[arg-type]


async def test_schema_is_versioned_and_migrators_run_once(pg: Server) -> None:
    schema = fresh_schema()
    results = await asyncio.gather(*(migrate_dsn(pg.app_dsn, schema=schema) for _ in range(4)))
    assert {r["schema_version"] for r in results} == {SCHEMA_VERSION}
    again = await migrate_dsn(pg.app_dsn, schema=schema)
    assert again["text_search_config"] == "english"
    async with await psycopg.AsyncConnection.connect(pg.app_dsn) as conn:
        cur = await conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'")
        assert await cur.fetchone() == (str(SCHEMA_VERSION),)
    m = PostgresMemory(pg.app_dsn, schema=schema)
    await m.add([MemoryRecord(scope=ANN, text="hello")])
    await m.aclose()


async def test_text_search_config_is_recorded_and_fixed(pg: Server) -> None:
    schema = fresh_schema()
    m = PostgresMemory(pg.app_dsn, schema=schema, text_search_config="simple")
    await m.add([MemoryRecord(scope=ANN, text="running dogs")])
    assert [h.record.text for h in await m.search("running", scope=ANN)] == ["running dogs"]
    assert await m.search("run", scope=ANN) == []  # 'simple' does not stem
    await m.aclose()
    other = PostgresMemory(pg.app_dsn, schema=schema, text_search_config="english")
    with pytest.raises(UsageError, match="simple"):
        await other.search("x", scope=ANN)
    await other.aclose()
    with pytest.raises(UsageError, match="no text-search configuration"):
        await migrate_dsn(pg.app_dsn, schema=fresh_schema(), text_search_config="klingon")


async def test_embedder_mismatch_is_refused(pg: Server) -> None:
    schema = fresh_schema()
    m = PostgresMemory(pg.app_dsn, embedder=bow_embedder(), schema=schema)
    await m.add([MemoryRecord(scope=ANN, text="hello")])
    await m.aclose()
    for embedder in (bow_embedder(32, "bow-32"), bow_embedder(64, "other-64")):
        wrong = PostgresMemory(pg.app_dsn, embedder=embedder, schema=schema)
        with pytest.raises(EmbedderMismatch):
            await wrong.search("hello", scope=ANN)
        await wrong.aclose()
    keyword_only = PostgresMemory(pg.app_dsn, schema=schema)
    assert [h.record.text for h in await keyword_only.search("hello", scope=ANN)] == ["hello"]
    with pytest.raises(EmbedderMismatch):
        await keyword_only.add([MemoryRecord(scope=ANN, text="no vector")])
    await keyword_only.aclose()
    # Records without vectors, then an embedder: refused too.
    plain = fresh_schema()
    m = PostgresMemory(pg.app_dsn, schema=plain)
    await m.add([MemoryRecord(scope=ANN, text="hello")])
    await m.aclose()
    late = PostgresMemory(pg.app_dsn, embedder=bow_embedder(), schema=plain)
    with pytest.raises(EmbedderMismatch, match="without vectors"):
        await late.search("hello", scope=ANN)
    await late.aclose()


async def test_duplicate_ids_are_refused_whole(memory: GuardedMemory[PostgresStore]) -> None:
    [first] = await memory.add([MemoryRecord(scope=ANN, text="one")])
    with pytest.raises(InvalidInput) as info:
        await memory.add([MemoryRecord(scope=BEN, text="two"), MemoryRecord(id=first, scope=BEN, text="three")])
    assert info.value.field == "records[1].id"
    assert await memory.export(BEN) == []


async def test_bad_arguments_are_clear(pg: Server) -> None:
    with pytest.raises(UsageError):
        PostgresMemory(42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="schema"):
        PostgresMemory(pg.app_dsn, schema="Robert'); DROP")
    with pytest.raises(InvalidInput, match="ef_search"):
        PostgresMemory(pg.app_dsn, ef_search=0)
    m = PostgresMemory("postgresql://nobody@127.0.0.1:1/none", schema=fresh_schema())
    m._store.connect_timeout = 1.0
    with pytest.raises(Exception, match="cannot connect"):
        await m.search("x", scope=ANN)
    await m.aclose()


async def test_erasure_removes_rows_counts_and_index_entries(pg: Server, memory: GuardedMemory[PostgresStore]) -> None:
    secret = "zanzibar-" + fresh_schema()
    await memory.add([MemoryRecord(scope=ANN, text=f"ann's {secret} code {i}") for i in range(20)])
    await memory.add([MemoryRecord(scope=BEN, text="ben stays")])
    assert await memory.delete(scope=ANN) == 20
    await memory.store.vacuum(full=True)
    async with await psycopg.AsyncConnection.connect(pg.admin_dsn, autocommit=True) as admin:
        schema = memory.store.schema
        cur = await admin.execute(f"SELECT count(*) FROM {schema}.records WHERE text LIKE %s", (f"%{secret}%",))
        assert await cur.fetchone() == (0,)
        cur = await admin.execute(f"SELECT tenant FROM {memory.store.schema}.tenants")
        assert await cur.fetchall() == [("u:ben",)]
        # After VACUUM FULL no page of the table or its indexes holds the erased text.
        cur = await admin.execute(f"SELECT count(*) FROM {memory.store.schema}.postings")
        assert await cur.fetchone() == (2,)  # Ben's two stems: "ben", "stay"
        files = []
        for table in ("records", "postings"):
            cur = await admin.execute(
                "SELECT current_setting('data_directory') || '/' || pg_relation_filepath(c.oid) FROM pg_class c "
                "WHERE c.oid = %s::regclass "
                "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass) "
                "OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = %s::regclass)",
                (f"{memory.store.schema}.{table}",) * 3,
            )
            files += [str(r[0]) for r in await cur.fetchall()]
    assert len(files) >= 6
    await admin_checkpoint(pg)
    for path in files:
        data = await asyncio.to_thread(Path(path).read_bytes)
        assert b"zanzibar" not in data, path  # neither the text nor its stem in the keyword index
    assert [r.text for r in await memory.export(BEN)] == ["ben stays"]


async def admin_checkpoint(pg: Server) -> None:
    async with await psycopg.AsyncConnection.connect(pg.admin_dsn, autocommit=True) as admin:
        await admin.execute("CHECKPOINT")


async def test_retention_hides_and_purge_removes(pg: Server) -> None:
    m = PostgresMemory(pg.app_dsn, schema=fresh_schema(), retention_days=1)
    old = datetime.now(timezone.utc) - timedelta(days=2)
    await m.add([MemoryRecord(scope=ANN, text="old tea", created_at=old), MemoryRecord(scope=ANN, text="new tea")])
    assert [h.record.text for h in await m.search("tea", scope=ANN)] == ["new tea"]
    assert await m.count(ANN) == 1
    assert await m.purge() == 1
    stats = await m.store.stats()
    assert stats["records"] == 1 and stats["rls_enforced"] is True
    await m.aclose()


def test_cli_migrate_vacuum_and_copy_between_sqlite_and_postgres(
    pg: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memoryport migrate`, `copy` SQLite -> PostgreSQL -> SQLite, `vacuum`; a mistake is one line."""
    import json

    from memoryport import SQLiteMemory
    from memoryport.cli import main

    schema = fresh_schema()
    assert main(["migrate", "--dsn", pg.app_dsn, "--schema", schema]) == 0
    assert json.loads(capsys.readouterr().out)["schema_version"] == SCHEMA_VERSION
    source = tmp_path / "old.db"
    old = SQLiteMemory(source)
    now = datetime.now(timezone.utc)
    old.add_sync(
        [
            MemoryRecord(scope=ANN, text="Ann drinks green tea", metadata={"kind": "fact"},
                         created_at=now - timedelta(days=3)),
            MemoryRecord(scope=MemoryScope(user_id="ann", session_id="s1"), text="Ann is in Lisbon",
                         expires_at=now + timedelta(days=1)),
            MemoryRecord(scope=BEN, text="Ben's secret"),
        ]
    )
    old.close()
    assert main(["copy", str(source), pg.app_dsn, "--schema", schema, "--user", "ann"]) == 0
    assert "copied 2 of 2" in capsys.readouterr().out
    back = tmp_path / "back.db"
    assert main(["copy", pg.app_dsn, str(back), "--schema", schema, "--user", "ann", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["copied"] == 2
    again = SQLiteMemory(back)
    rows = again.export_sync(ANN)
    again.close()
    assert [(r.text, r.metadata, r.scope.session_id) for r in rows] == [
        ("Ann drinks green tea", {"kind": "fact"}, None),
        ("Ann is in Lisbon", {}, "s1"),
    ]
    assert abs(rows[0].created_at - (now - timedelta(days=3))) < timedelta(milliseconds=1)
    assert rows[1].expires_at is not None
    assert main(["migrate", "--dsn", pg.app_dsn, "--schema", schema, "--hnsw"]) == 2  # no vectors kept
    assert "keeps no vectors" in capsys.readouterr().err
    assert main(["vacuum", "--dsn", pg.app_dsn, "--schema", schema, "--full"]) == 0
    assert "vacuumed" in capsys.readouterr().out
    monkeypatch.delenv("MEMORYPORT_PG_DSN", raising=False)
    assert main(["migrate"]) == 2
    assert "--dsn" in capsys.readouterr().err


async def test_hnsw_index_serves_large_scopes_and_stays_correct(pg: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    m = PostgresMemory(pg.app_dsn, embedder=bow_embedder(), schema=fresh_schema(), exact_below=50,
                       search_mode="vector")
    try:
        words = ["apple", "harbour", "violin", "granite", "meadow", "lantern", "pepper", "glacier", "saddle", "orchid"]
        texts = [f"{a} {b} {c} {i}" for i, (a, b, c) in enumerate(
            (words[i % 10], words[(i // 10) % 10], words[(i // 100) % 10]) for i in range(300))]
        await m.add([MemoryRecord(scope=ANN, text=t) for t in texts])
        await m.add([MemoryRecord(scope=BEN, text=t) for t in texts[:20]])
        used: list[bool] = []
        original = _vectors.use_hnsw

        async def spy(*args: object) -> bool:
            used.append(await original(*args))  # type: ignore[arg-type]
            return used[-1]

        monkeypatch.setattr(_vectors, "use_hnsw", spy)
        before = [h.record.text for h in await m.search(texts[123], scope=ANN, k=5)]
        assert used == []  # no index yet: exact
        assert await m.store.create_hnsw_index() is True
        assert await m.store.create_hnsw_index() is False
        after = [h.record.text for h in await m.search(texts[123], scope=ANN, k=5)]
        assert used == [True]
        assert after[0] == before[0] == texts[123]
        assert len(set(after) & set(before)) >= 4  # approximate, but close on a small graph
        # Ben is small: exact scan of his own rows, never Ann's.
        hits = await m.search(texts[5], scope=BEN, k=5)
        assert used[-1] is False and {h.record.scope.user_id for h in hits} == {"ben"}
        await m.add([MemoryRecord(scope=ANN, text="lantern lantern new")])  # inserted into the graph too
        assert (await m.search("lantern lantern new", scope=ANN, k=1))[0].record.text == "lantern lantern new"
    finally:
        await m.aclose()


def test_without_psycopg_the_error_names_the_extra() -> None:
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from memoryport import PostgresMemory\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "MissingExtra" in proc.stderr and 'pip install "memoryport[postgres]"' in proc.stderr


async def test_durability_sets_synchronous_commit_of_writes_only(pg: Server) -> None:
    """``durability="normal"`` turns the WAL flush off for memoryport's write transactions; bad values are refused."""
    from memoryport.adapters.postgres import _connection

    with pytest.raises(InvalidInput, match="durability"):
        PostgresMemory(pg.app_dsn, durability="fast")
    with pytest.raises(InvalidInput, match="durability"):
        PostgresMemory(pg.app_dsn, durability=["normal"])  # type: ignore[arg-type]
    for durability, expected in ((None, "on"), ("normal", "off"), ("full", "on")):
        m = PostgresMemory(pg.app_dsn, schema=fresh_schema(), durability=durability, pool_size=1)
        seen: list[str] = []

        async def show(seen: list[str] = seen) -> None:
            conn = _connection._WRITING.get()
            cur = await conn.execute("SHOW synchronous_commit")  # type: ignore[union-attr]
            row = await cur.fetchone()
            seen.append(str(row[0]) if row else "")

        try:
            m.store._before_commit = show
            await m.add([MemoryRecord(scope=ANN, text="tea")])
            assert seen == [expected], durability
            async with await psycopg.AsyncConnection.connect(pg.app_dsn) as conn:  # other sessions keep theirs
                cur = await conn.execute("SHOW synchronous_commit")
                assert await cur.fetchone() == ("on",)
            assert [h.record.text for h in await m.search("tea", scope=ANN)] == ["tea"]
        finally:
            await m.aclose()
