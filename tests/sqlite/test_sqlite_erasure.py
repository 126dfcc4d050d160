"""Erasure is real: erased texts leave the raw bytes of the database, -wal and -shm."""

from __future__ import annotations

import os
import uuid
from datetime import timedelta

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import load_driver

from .support import bow_embedder, raw_bytes

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


def marker() -> str:
    # Digits end the word, so the porter stemmer stores it as written.
    return "zqx" + uuid.uuid4().hex + "9"


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


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.parametrize("stop", ["after-commit", "after-vacuum"])
@pytest.mark.parametrize("then", ["open", "write", "erase-again", "log-then-read"])
def test_an_erasure_killed_before_its_checkpoint_is_finished_next_time(
    db_path: str, driver: str, stop: str, then: str
) -> None:
    import signal
    import subprocess

    from .support import WORKER, python

    # "write": an add to the tables finishes it; "log-then-read": an add to the write-behind log (the default)
    # leaves it to the drain, which the next read runs if the drain thread has not yet.
    memory = SQLiteMemory(db_path, driver=driver, write_behind=then == "log-then-read")
    secrets = [marker() for _ in range(300)]
    ids = memory.add_sync(
        [MemoryRecord(scope=ANN, text=f"Ann said {m} " + "tea " * (i % 40)) for i, m in enumerate(secrets)]
    )
    memory.add_sync([MemoryRecord(scope=BEN, text=f"Ben keeps tea {i}") for i in range(300)])
    memory.delete_sync(ids[::7], scope=ANN)  # pages split and merged: the case VACUUM is for
    assert memory.store.checkpoint()
    if then == "open":
        memory.close()
    child = subprocess.run(
        [python(), str(WORKER), "erase_and_die", db_path, driver, "ann", stop], capture_output=True, text=True
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    # Killed between the erasure's commit and its checkpoint: the old pages are still in the file.
    assert leaks(db_path, secrets)
    if then == "open":
        memory = SQLiteMemory(db_path, driver=driver)
    elif then in ("write", "log-then-read"):
        memory.add_sync([MemoryRecord(scope=BEN, text="Ben writes again")])
        if then == "log-then-read":
            assert memory.get_sync("no-such-id", scope=BEN) is None
    else:
        assert memory.delete_sync(scope=ANN) == 0  # nothing left to delete, but the cleanup still runs
    assert leaks(db_path, secrets) == []
    assert memory.export_sync(ANN) == []
    assert len(memory.export_sync(BEN)) == 300 + (then in ("write", "log-then-read"))
    memory.close()
    assert leaks(db_path, secrets) == []
    conn = load_driver(driver)[1].connect(db_path)
    assert conn.execute("SELECT count(*) FROM meta WHERE key = 'erase_pending'").fetchone()[0] == 0
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_erasures_rebuild_the_file_while_other_processes_read_and_write(db_path: str, driver: str) -> None:
    """VACUUM and the truncating checkpoint under other processes' mapped, open connections."""
    import subprocess

    from .support import WORKER, python

    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync([MemoryRecord(scope=BEN, text=f"Ben keeps tea {i} " + "words " * (i % 50)) for i in range(500)])
    children = [
        subprocess.Popen(
            [python(), str(WORKER), "concurrent", db_path, driver, str(p), "8", "20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(2)
    ]
    secrets = []
    for _ in range(4):
        secret = marker()
        secrets.append(secret)
        memory.add_sync([MemoryRecord(scope=ANN, text=f"Ann said {secret} {i}") for i in range(50)])
        assert memory.delete_sync(scope=ANN) == 50
        assert len(memory.export_sync(BEN)) == 500
    for child in children:
        _, err = child.communicate(timeout=240)
        assert child.returncode == 0, err
    assert memory.store.checkpoint()
    assert leaks(db_path, secrets) == []
    memory.close()
    conn = load_driver(driver)[1].connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


@pytest.mark.parametrize("write_behind", [False, True], ids=["direct", "logged"])
def test_a_failed_rebuild_fails_the_erasure_not_the_add_and_is_retried(
    db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, write_behind: bool
) -> None:
    from memoryport import BackendError
    from memoryport.adapters.sqlite import _erasure, _store

    if write_behind:  # the drain thread held back: the reads below drain the log (no timing)
        monkeypatch.setattr(_store, "DRAIN_DELAY", 3600.0)
        monkeypatch.setattr(_store, "DRAIN_ROWS", 10**9)
    memory = SQLiteMemory(db_path, driver=driver, write_behind=write_behind)
    expired, deleted = marker(), marker()
    [deleted_id] = memory.add_sync([MemoryRecord(scope=ANN, text=f"Ann said {deleted}")])
    memory.add_sync(
        [
            MemoryRecord(
                scope=BEN,
                text=f"Ben said {expired}",
                created_at=utcnow() - timedelta(hours=2),
                expires_at=utcnow() - timedelta(hours=1),
            )
        ]
    )
    assert memory.get_sync(deleted_id, scope=ANN) is not None  # (logged: drained into the tables here)
    _, module = load_driver(driver)
    real = _erasure.finish_erasure

    def disk_full(db: object, conn: object) -> bool:
        raise module.OperationalError("database or disk is full")

    monkeypatch.setattr(_erasure, "finish_erasure", disk_full)
    with caplog.at_level("WARNING", logger="memoryport"):
        # This write removes the expired record; its own records are stored and it must say so. Logged, the
        # drain that the next read runs is that write: the read must not fail either.
        [kept] = memory.add_sync([MemoryRecord(scope=BEN, text="Ben keeps tea")])
        assert memory.get_sync(kept, scope=BEN) is not None
    assert any("finishing an erasure failed (OperationalError)" in r.getMessage() for r in caplog.records)
    assert memory.get_sync(kept, scope=BEN) is not None
    with pytest.raises(BackendError, match="the records were deleted, but rebuilding the file"):
        memory.delete_sync([deleted_id], scope=ANN)
    assert memory.get_sync(deleted_id, scope=ANN) is None
    monkeypatch.setattr(_erasure, "finish_erasure", real)
    memory.add_sync([MemoryRecord(scope=BEN, text="Ben writes again")])  # the next write finishes it
    assert memory.get_sync(kept, scope=BEN) is not None  # (logged: its drain is that write)
    assert leaks(db_path, [expired, deleted]) == []
    memory.close()
