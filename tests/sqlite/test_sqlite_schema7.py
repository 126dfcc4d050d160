"""Schema 7: the file's generation and record count live in ``generations`` (row ``''``), not ``meta``.

The files under ``data/`` were written by memoryport at schema 6 (see
``data/make_schema6.py``); each test opens a copy, so the migration runs on
what the old code wrote. Also here: an add survives its process being killed
right after it returned (the default durability, ``"normal"``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import SCHEMA_VERSION, _schema, load_driver
from memoryport.adapters.sqlite._rows import tenant_token

from .support import WORKER, bow_embedder, python

DATA = Path(__file__).parent / "data"
ANN, BEN, CY = MemoryScope(user_id="ann"), MemoryScope(user_id="ben"), MemoryScope(user_id="cy")

# What schema 6's code answered on these files (keyword-only file; texts and scores rounded to 4 places).
V6_KEYWORD = {
    ("ann", "lemon number 7"): [
        ("ann note 7: green tea with lemon number 7", 1.8091),
        ("ann note 6: green tea with lemon number 6", 1.3270),
        ("ann note 8: green tea with lemon number 8", 1.3270),
        ("ann note 5: green tea with lemon number 5", 1.0681),
        ("ann note 9: green tea with lemon number 9", 1.0681),
    ],
    ("ben", "river"): [(f"ben note {i}: coffee by the river bank {i}", 2.9056) for i in range(2, 7)],
    ("cy", "tea"): [("cy drinks mint tea", 1.3216)],
    ("ann", "piano"): [("ann keeps a piano in the hall", 1.3348)],
}


def copy_of(name: str, tmp_path: Path) -> str:
    path = tmp_path / name
    shutil.copy(DATA / name, path)
    return str(path)


def raw(path: str, driver: str) -> object:
    return load_driver(driver)[1].connect(path)


def hits(memory: SQLiteMemory, user: str, query: str) -> list[tuple[str, float]]:  # type: ignore[valid-type]
    found = memory.search_sync(query, scope=MemoryScope(user_id=user), k=5)  # type: ignore[attr-defined]
    return sorted((h.record.text, round(h.score, 4)) for h in found)


def test_a_schema_6_file_is_migrated_with_its_counters_and_answers(tmp_path: Path, driver: str) -> None:
    path = copy_of("schema6.db", tmp_path)
    memory = SQLiteMemory(path, driver=driver, write_behind=False)
    assert memory.store.stats()["schema_version"] == SCHEMA_VERSION >= 7
    conn = raw(path, driver)
    assert conn.execute("SELECT count(*) FROM meta WHERE key IN ('generation', 'records')").fetchone()[0] == 0  # type: ignore[attr-defined]
    # Schema 6 left generation 3 and 22 records: both carried over.
    assert conn.execute("SELECT gen, n FROM generations WHERE tenant = ''").fetchone() == (3, 22)  # type: ignore[attr-defined]
    for (user, query), expected in V6_KEYWORD.items():
        assert hits(memory, user, query) == sorted(expected), (user, query)
    # The next write continues the generation (never back to a value a cache may hold) and both counts.
    before = dict(conn.execute("SELECT tenant, gen FROM generations").fetchall())  # type: ignore[attr-defined]
    memory.add_sync([MemoryRecord(scope=ANN, text="ann brews oolong tea")])
    after = dict(conn.execute("SELECT tenant, n FROM generations").fetchall())  # type: ignore[attr-defined]
    gens = dict(conn.execute("SELECT tenant, gen FROM generations").fetchall())  # type: ignore[attr-defined]
    assert gens[""] == gens[tenant_token("ann")] == 4 > max(before.values())
    assert gens[tenant_token("ben")] == before[tenant_token("ben")]
    assert after[""] == 23 == sum(n for t, n in after.items() if t)
    assert [text for text, _ in hits(memory, "ann", "oolong")] == ["ann brews oolong tea"]
    conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]
    memory.close()
    # Opening again migrates nothing more.
    memory = SQLiteMemory(path, driver=driver)
    assert hits(memory, "ann", "piano") == sorted(V6_KEYWORD[("ann", "piano")])
    memory.close()


def test_a_migration_that_fails_leaves_the_schema_6_file_as_it_was(
    tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = copy_of("schema6.db", tmp_path)
    # The last group fails after moving the counters: one transaction, so nothing of it stays.
    fold = _schema.MIGRATIONS.index(_schema.FOLD_DDL)
    broken = [
        *_schema.MIGRATIONS[:fold],
        (*_schema.FOLD_DDL, "SELECT * FROM no_such_table"),
        *_schema.MIGRATIONS[fold + 1 :],
    ]
    monkeypatch.setattr(_schema, "MIGRATIONS", broken)
    with pytest.raises(Exception, match="no_such_table"):
        SQLiteMemory(path, driver=driver)
    conn = raw(path, driver)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())  # type: ignore[attr-defined]
    assert (int(meta["schema_version"]), int(meta["generation"]), int(meta["records"])) == (6, 3, 22)
    assert conn.execute("SELECT count(*) FROM generations WHERE tenant = ''").fetchone()[0] == 0  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]
    monkeypatch.undo()
    memory = SQLiteMemory(path, driver=driver)
    assert memory.store.stats()["schema_version"] == SCHEMA_VERSION
    assert hits(memory, "cy", "tea") == V6_KEYWORD[("cy", "tea")]
    memory.close()


def test_running_the_fold_again_never_moves_the_generation_back(tmp_path: Path, driver: str) -> None:
    path = copy_of("schema6.db", tmp_path)
    SQLiteMemory(path, driver=driver).close()
    conn = raw(path, driver)
    conn.execute("UPDATE meta SET value = 6 WHERE key = 'schema_version'")  # type: ignore[attr-defined]
    conn.commit()  # type: ignore[attr-defined]
    memory = SQLiteMemory(path, driver=driver, write_behind=False)
    memory.add_sync([MemoryRecord(scope=BEN, text="ben again")])
    assert conn.execute("SELECT gen, n FROM generations WHERE tenant = ''").fetchone() == (4, 23)  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]
    memory.close()


def test_the_vector_file_migrates_and_other_processes_still_see_new_records(tmp_path: Path, driver: str) -> None:
    path = copy_of("schema6-vectors.db", tmp_path)
    memory = SQLiteMemory(path, embedder=bow_embedder(), driver=driver)
    found = memory.search_sync("lemon number 7", scope=ANN, k=3)
    assert found[0].record.text == "ann note 7: green tea with lemon number 7"
    assert round(found[0].score, 4) == 2.0515  # as schema 6 answered (hybrid)
    # This process's vector cache of ann is warm (a hybrid search always finds some neighbours).
    assert "walnut" not in memory.search_sync("walnut", scope=ANN, k=1)[0].record.text
    child = subprocess.run(
        [python(), str(WORKER), "add_and_die", path, driver, "ann", "ann cracks a walnut", "bow"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    # The generation the child wrote tells this process's cache that ann changed.
    [hit] = memory.search_sync("walnut", scope=ANN, k=1)
    assert hit.record.id == child.stdout.split()[0] and hit.record.text == "ann cracks a walnut"
    memory.close()


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.parametrize("embed", ["none", "bow"])
def test_an_add_survives_its_process_killed_right_after_it_returned(db_path: str, driver: str, embed: str) -> None:
    embedder = bow_embedder() if embed == "bow" else None
    memory = SQLiteMemory(db_path, embedder=embedder, driver=driver)
    memory.add_sync([MemoryRecord(scope=BEN, text=f"ben note {i}") for i in range(50)])
    memory.close()
    ids = []
    for i in range(3):
        child = subprocess.run(
            [python(), str(WORKER), "add_and_die", db_path, driver, "ben", f"zebra crossing number {i}", embed],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert child.returncode == -signal.SIGKILL, child.stderr
        ids.append(child.stdout.split()[0])
    assert os.path.getsize(db_path + "-wal") > 0  # the adds are in the WAL, never checkpointed
    memory = SQLiteMemory(db_path, embedder=embedder, driver=driver)
    for i, record_id in enumerate(ids):
        record = memory.get_sync(record_id, scope=BEN)
        assert record is not None and record.text == f"zebra crossing number {i}"
    assert {h.record.id for h in memory.search_sync("zebra", scope=BEN, k=3)} == set(ids)
    assert memory.count_sync(scope=BEN) == 53
    conn = raw(db_path, driver)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # type: ignore[attr-defined]
    assert conn.execute("SELECT n FROM generations WHERE tenant = ''").fetchone()[0] == 53  # type: ignore[attr-defined]
    # Their words are in the keyword index (not only the rows in the table).
    sql = "SELECT count(*) FROM records_fts WHERE records_fts MATCH 'zebra'"
    assert conn.execute(sql).fetchone()[0] == 3  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]
    memory.close()
