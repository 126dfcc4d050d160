"""Erasure is real: erased texts leave the raw bytes of the database, -wal and -shm."""

from __future__ import annotations

import os
import uuid
from datetime import timedelta

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import load_driver

from .support import bow_embedder

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


def marker() -> str:
    # Digits end the word, so the porter stemmer stores it as written.
    return "zqx" + uuid.uuid4().hex + "9"


def raw_bytes(path: str) -> bytes:
    out = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            with open(path + suffix, "rb") as f:
                out += f.read()
    return out


def leaks(path: str, markers: list[str]) -> list[str]:
    data = raw_bytes(path)
    # The FTS5 index stores terms prefix-compressed: look for a tail of each marker too.
    return [m for m in markers if m.encode() in data or m[-16:].encode() in data]


@pytest.mark.parametrize("use_fts5", [True, False], ids=["fts5", "like"])
@pytest.mark.parametrize("with_embedder", [False, True], ids=["keyword", "embedder"])
def test_deleted_erased_and_purged_texts_leave_the_files(
    db_path: str, driver: str, use_fts5: bool, with_embedder: bool
) -> None:
    memory = SQLiteMemory(
        db_path,
        embedder=bow_embedder() if with_embedder else None,
        retention_days=30,
        driver=driver,
        use_fts5=use_fts5,
    )
    # Enough other records that the index has several segments and pages.
    memory.add_sync(
        [MemoryRecord(scope=MemoryScope(user_id=f"u{i % 7}"), text=f"filler text {i} about tea") for i in range(300)]
    )
    ann_markers = [marker() for _ in range(3)]
    ben_deleted, ben_expired, ben_retained = marker(), marker(), marker()
    ben_kept = [marker() for _ in range(2)]
    ids = memory.add_sync([MemoryRecord(scope=ANN, text=f"Ann said {m} over tea") for m in ann_markers])
    assert len(ids) == 3
    past = utcnow() - timedelta(days=40)
    [deleted_id, *_] = memory.add_sync(
        [
            MemoryRecord(scope=BEN, text=f"Ben said {ben_deleted} once"),
            MemoryRecord(
                scope=BEN,
                text=f"Ben said {ben_expired} expiring",
                created_at=utcnow() - timedelta(hours=2),
                expires_at=utcnow() - timedelta(hours=1),
            ),
            MemoryRecord(scope=BEN, text=f"Ben said {ben_retained} long ago", created_at=past),
            *[MemoryRecord(scope=BEN, text=f"Ben keeps {m} and tea") for m in ben_kept],
        ]
    )
    assert memory.store.checkpoint()
    # The check sees markers while they exist.
    assert leaks(db_path, [ben_expired, ben_retained]) == [ben_expired, ben_retained]
    for i in range(5):  # more writes: the expired record goes with the first of them, the retained with ben's
        memory.add_sync(
            [MemoryRecord(scope=MemoryScope(user_id="u9"), text=f"later filler {i} {j}") for j in range(40)]
        )
    memory.add_sync([MemoryRecord(scope=BEN, text="Ben's later write")])
    # Past due, and no write after them: purge() removes them.
    ben_expired_last, ben_retained_last = marker(), marker()
    memory.add_sync(
        [
            MemoryRecord(
                scope=BEN,
                text=f"Ben said {ben_expired_last}",
                created_at=utcnow() - timedelta(hours=2),
                expires_at=utcnow() - timedelta(hours=1),
            ),
            MemoryRecord(scope=BEN, text=f"Ben said {ben_retained_last} long ago", created_at=past),
        ]
    )
    assert memory.store.checkpoint()
    assert leaks(db_path, [ben_expired, ben_retained]) == []
    alive = [*ann_markers, ben_deleted, ben_expired_last, ben_retained_last, *ben_kept]
    assert leaks(db_path, alive) == alive

    assert memory.delete_sync([deleted_id], scope=BEN) == 1
    assert memory.delete_sync(scope=ANN) == 3
    assert memory.purge_sync() == 2

    erased = [*ann_markers, ben_deleted, ben_expired, ben_expired_last, ben_retained, ben_retained_last]
    assert leaks(db_path, erased) == []
    assert leaks(db_path, ben_kept) == ben_kept
    for m in ben_kept:
        assert [h.record.text for h in memory.search_sync(m, scope=BEN, k=1)] == [f"Ben keeps {m} and tea"]
    assert len(memory.export_sync(BEN)) == 3
    assert memory.export_sync(ANN) == []
    for m in ann_markers:
        assert memory.search_sync(m, scope=ANN) == []
    memory.close()
    assert leaks(db_path, erased) == []


def test_a_reader_blocking_the_checkpoint_is_a_warning(
    db_path: str, driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="to be erased")])
    memory.add_sync([MemoryRecord(scope=BEN, text="later write")])
    # The same SQLite library: two libraries in one process would break each other's POSIX locks.
    _, module = load_driver(driver)
    reader = module.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM records").fetchone()  # holds a snapshot
    with caplog.at_level("WARNING", logger="memoryport"):
        assert memory.delete_sync([rid], scope=ANN) == 1
    assert any("reader holds a transaction" in r.getMessage() for r in caplog.records)
    reader.execute("COMMIT")
    reader.close()
    assert memory.store.checkpoint()
    memory.close()


def test_a_file_written_by_new_sqlite_is_erased_by_old_sqlite(db_path: str) -> None:
    import subprocess

    from memoryport.adapters.sqlite import available_drivers

    from .support import WORKER, python

    if "pysqlite3" not in available_drivers():
        pytest.skip("needs the pysqlite3 driver")
    secret = marker()
    # Written by SQLite 3.51 (FTS5 secure-delete on) in another process...
    subprocess.run([python(), str(WORKER), "add", db_path, "pysqlite3", "ann", f"Ann said {secret}", "0"], check=True)
    subprocess.run([python(), str(WORKER), "add", db_path, "pysqlite3", "ben", "Ben keeps tea", "0"], check=True)
    # ...then opened, searched and erased by Python's own sqlite3.
    memory = SQLiteMemory(db_path, driver="sqlite3")
    assert [h.record.text for h in memory.search_sync(secret, scope=ANN)] == [f"Ann said {secret}"]
    assert memory.delete_sync(scope=ANN) == 1
    memory.close()
    assert leaks(db_path, [secret]) == []
    conn = load_driver("sqlite3")[1].connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
    conn.close()
