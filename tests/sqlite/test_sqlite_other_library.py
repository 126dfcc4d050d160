"""A second SQLite library of the same process opens the store's file and closes it: nothing acknowledged is lost.

That library does not see the store's locks (POSIX locks belong to the
process), so closing its connection it takes itself for the file's last user:
it copies the WAL into the file and deletes ``-wal`` and ``-shm``. The store's
connections would go on writing into the deleted WAL (acknowledged, then lost at
close) and reading without seeing other processes' writes.

On Linux the store holds OFD locks on SQLite's lock bytes (``_locks.py``): the
other library's close cannot take the EXCLUSIVE lock, the WAL stays, and every
add is kept with no error. Where those locks are not available (tested here by
switching them off: the ``unlocked`` fixture) the store notices the removal
before every read and write and raises :class:`WalRemoved` instead; what it
acknowledged before is in the file, and reopening the store continues.

Both directions are tested (Python's ``sqlite3`` under a ``pysqlite3`` store and
the reverse), with and without the write-behind log; the same library is safe
(SQLite's own bookkeeping of its connections in the process) and must not raise.
Last, the same harm without a second library: any descriptor of the file closed
in the process releases its locks, so opening a second store must not open and
close the file itself.
"""

from __future__ import annotations

import multiprocessing
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory, WalRemoved
from memoryport.adapters.sqlite import SQLiteStore, _locks, _store, available_drivers, load_driver

from .support import DRIVERS, WORKER, bow_embedder, logging_child, python

ANN = MemoryScope(user_id="ann")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        any(d not in available_drivers() for d in DRIVERS), reason="needs both SQLite libraries (the dev extra)"
    ),
]


@pytest.fixture(params=[True, False], ids=["write_behind", "direct"])
def write_behind(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drain thread waits an hour: only reads and writes drain the write-behind log."""
    monkeypatch.setattr(_store, "DRAIN_DELAY", 3600.0)
    monkeypatch.setattr(_store, "DRAIN_ROWS", 10**9)


@pytest.fixture
def unlocked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores opened in this test hold no OFD locks (as off Linux): they check the WAL before each read and write."""
    monkeypatch.setattr(_locks, "HAS_OFD", False)


locked = pytest.mark.skipif(not _locks.HAS_OFD, reason="OFD locks are Linux-only")


def other_library(driver: str) -> ModuleType:
    """The SQLite library that is not the store's."""
    [other] = [d for d in DRIVERS if d != driver]
    return load_driver(other)[1]


def look(path: Path, library: ModuleType) -> int:
    """What a user does to peek into the file: connect, count, close."""
    conn = library.connect(str(path))
    try:
        # Stored records, and records still in the write-behind log.
        return int(conn.execute("SELECT (SELECT count(*) FROM records) + (SELECT count(*) FROM inbox)").fetchone()[0])
    finally:
        conn.close()


def open_memory(path: Path, driver: str, write_behind: bool) -> GuardedMemory[SQLiteStore]:
    return SQLiteMemory(path, driver=driver, write_behind=write_behind)


async def texts(path: Path, driver: str) -> list[str]:
    """Every text in the file, read by a fresh store (which drains a log left in it)."""
    memory = SQLiteMemory(path, driver=driver)
    try:
        return sorted(r.text for r in await memory.export(scope=ANN))
    finally:
        await memory.aclose()


def note(text: str) -> list[MemoryRecord]:
    return [MemoryRecord(scope=ANN, text=text)]


async def test_unlocked_the_other_library_closing_makes_reads_and_writes_raise(
    tmp_path: Path, driver: str, write_behind: bool, unlocked: None
) -> None:
    path = tmp_path / "m.db"
    memory = open_memory(path, driver, write_behind)
    await memory.add(note("first walnut"))
    assert [h.record.text for h in await memory.search("walnut", scope=ANN, k=5)] == ["first walnut"]
    assert look(path, other_library(driver)) == 1
    assert not (tmp_path / "m.db-wal").exists()  # the hazard itself: the other library deleted the WAL
    with pytest.raises(WalRemoved, match=r"m\.db: its -wal file was removed.*open it again") as caught:
        await memory.add(note("second walnut"))
    assert caught.value.operation == "write"
    with pytest.raises(WalRemoved) as read:
        await memory.search("walnut", scope=ANN, k=5)
    assert read.value.operation == "read"
    with pytest.raises(WalRemoved):
        await memory.count(scope=ANN)
    await memory.aclose()  # closing logs the failed drain, and raises nothing
    assert await texts(path, driver) == ["first walnut"]
    # Reopened, the store works again.
    again = open_memory(path, driver, write_behind)
    await again.add(note("third walnut"))
    await again.aclose()
    assert await texts(path, driver) == ["first walnut", "third walnut"]


async def test_the_same_library_is_safe(tmp_path: Path, driver: str, write_behind: bool) -> None:
    path = tmp_path / "m.db"
    memory = open_memory(path, driver, write_behind)
    await memory.add(note("first walnut"))
    assert look(path, load_driver(driver)[1]) == 1  # the store's own module: SQLite sees the store's connections
    assert (tmp_path / "m.db-wal").exists()
    await memory.add(note("second walnut"))
    assert len(await memory.search("walnut", scope=ANN, k=5)) == 2
    await memory.aclose()
    assert await texts(path, driver) == ["first walnut", "second walnut"]


async def test_unlocked_the_other_library_opened_first_and_closed_later(
    tmp_path: Path, driver: str, write_behind: bool, unlocked: None
) -> None:
    path = tmp_path / "m.db"
    await open_memory(path, driver, write_behind).aclose()  # the file exists, without records
    peek = other_library(driver).connect(str(path))
    assert peek.execute("SELECT count(*) FROM records").fetchone()[0] == 0
    memory = open_memory(path, driver, write_behind)
    await memory.add(note("first walnut"))
    peek.close()
    with pytest.raises(WalRemoved):
        await memory.add(note("second walnut"))
    await memory.aclose()
    assert await texts(path, driver) == ["first walnut"]


async def test_unlocked_a_logged_add_survives_and_a_read_that_would_drain_raises(
    tmp_path: Path, driver: str, held: None, unlocked: None
) -> None:
    path = tmp_path / "m.db"
    memory = open_memory(path, driver, True)
    await memory.add(note("first walnut"))  # drained by the search below
    await memory.search("walnut", scope=ANN, k=5)
    await memory.add(note("logged walnut"))  # in the write-behind log
    assert look(path, other_library(driver)) == 2
    with pytest.raises(WalRemoved):  # the read would drain the log into the deleted WAL
        await memory.search("walnut", scope=ANN, k=5)
    await memory.aclose()
    # The log's row was copied into the file by the other library's checkpoint; the next open drains it.
    assert await texts(path, driver) == ["first walnut", "logged walnut"]


async def test_unlocked_several_stores_on_the_file_all_notice(
    tmp_path: Path, driver: str, write_behind: bool, unlocked: None
) -> None:
    path = tmp_path / "m.db"
    one = open_memory(path, driver, write_behind)
    two = open_memory(path, driver, not write_behind)
    await one.add(note("first walnut"))
    await two.add(note("second walnut"))
    assert look(path, other_library(driver)) == 2
    for memory in (one, two):
        with pytest.raises(WalRemoved):
            await memory.add(note("lost walnut"))
        with pytest.raises(WalRemoved):
            await memory.search("walnut", scope=ANN, k=5)
    await one.aclose()
    await two.aclose()
    assert await texts(path, driver) == ["first walnut", "second walnut"]


def test_unlocked_sync_calls_raise_too(tmp_path: Path, driver: str, unlocked: None) -> None:
    path = tmp_path / "m.db"
    memory = SQLiteMemory(path, driver=driver)
    memory.add_sync(note("first walnut"))
    look(path, other_library(driver))
    with pytest.raises(WalRemoved):
        memory.add_sync(note("second walnut"))
    with pytest.raises(WalRemoved):
        memory.search_sync("walnut", scope=ANN, k=5)
    memory.close()


async def test_unlocked_with_an_embedder_vector_searches_raise_too(
    tmp_path: Path, driver: str, write_behind: bool, unlocked: None
) -> None:
    path = tmp_path / "m.db"
    memory = SQLiteMemory(path, driver=driver, embedder=bow_embedder(), search_mode="vector", write_behind=write_behind)
    await memory.add(note("first walnut"))
    assert len(await memory.search("walnut", scope=ANN, k=5)) == 1  # the vectors are in RAM now
    look(path, other_library(driver))
    with pytest.raises(WalRemoved):
        await memory.search("walnut", scope=ANN, k=5)
    with pytest.raises(WalRemoved):
        await memory.add(note("second walnut"))
    await memory.aclose()
    again = SQLiteMemory(path, driver=driver, embedder=bow_embedder())
    assert [r.text for r in await again.export(scope=ANN)] == ["first walnut"]
    await again.aclose()


async def test_unlocked_reopening_waits_for_every_store_of_the_process_on_the_file(
    tmp_path: Path, driver: str, unlocked: None
) -> None:
    path = tmp_path / "m.db"
    one = open_memory(path, driver, True)
    two = open_memory(path, driver, False)
    await one.add(note("first walnut"))
    look(path, other_library(driver))
    await one.aclose()
    # ``two`` keeps SQLite's map of the deleted -shm alive: a store opened now would share it with ``two``
    # while other processes use a new -shm.
    with pytest.raises(WalRemoved, match="close every store of this process on the file first") as caught:
        open_memory(path, driver, True)
    assert caught.value.operation == "open"
    await two.aclose()
    again = open_memory(path, driver, True)
    assert (tmp_path / "m.db-shm").exists()  # a -shm of its own again, the one other processes use
    with logging_child(str(path), driver, "none", "child walnut"):  # another process adds meanwhile
        await again.add(note("second walnut"))
        found = sorted(h.record.text for h in await again.search("walnut", scope=ANN, k=5))
        assert found == ["child walnut", "first walnut", "second walnut"]
    await again.aclose()
    assert await texts(path, driver) == ["child walnut", "first walnut", "second walnut"]


def test_opening_a_second_store_keeps_the_first_ones_locks(tmp_path: Path, driver: str, write_behind: bool) -> None:
    """Opening the file (even only to check it can be read) and closing it releases every POSIX lock of the
    process on it: a process closing after that would take itself for the last one and delete the -wal."""
    path = tmp_path / "m.db"
    one = open_memory(path, driver, write_behind)
    one.add_sync(note("first walnut"))
    two = open_memory(path, driver, write_behind)  # a second store of this process on the file
    subprocess.run([python(), str(WORKER), "add", str(path), driver, "ann", "child walnut", "0"], check=True)
    assert (tmp_path / "m.db-wal").exists()  # the other process saw this one's locks and left the WAL
    one.add_sync(note("second walnut"))
    assert len(one.search_sync("walnut", scope=ANN, k=5)) == 3
    one.close()
    two.close()
    again = SQLiteMemory(path, driver=driver)
    assert sorted(r.text for r in again.export_sync(scope=ANN)) == ["child walnut", "first walnut", "second walnut"]
    again.close()


@locked
async def test_the_locks_keep_the_wal_and_every_add(tmp_path: Path, driver: str, write_behind: bool) -> None:
    path = tmp_path / "m.db"
    memory = open_memory(path, driver, write_behind)
    await memory.add(note("first walnut"))
    assert len(await memory.search("walnut", scope=ANN, k=5)) == 1
    assert look(path, other_library(driver)) == 1
    assert (tmp_path / "m.db-wal").exists() and (tmp_path / "m.db-shm").exists()
    await memory.add(note("second walnut"))
    assert len(await memory.search("walnut", scope=ANN, k=5)) == 2
    assert look(path, other_library(driver)) == 2  # sees the store's commits: one WAL, one -shm
    with logging_child(str(path), driver, "none", "child walnut"):  # another process too
        await memory.add(note("third walnut"))
        assert len(await memory.search("walnut", scope=ANN, k=5)) == 4
    await memory.aclose()
    # The last store closed: SQLite's own clean-up ran as usual (the locks were released first).
    assert not (tmp_path / "m.db-wal").exists() and not (tmp_path / "m.db-shm").exists()
    assert await texts(path, driver) == ["child walnut", "first walnut", "second walnut", "third walnut"]


@locked
async def test_the_locks_with_the_other_library_opened_first(tmp_path: Path, driver: str, write_behind: bool) -> None:
    path = tmp_path / "m.db"
    await open_memory(path, driver, write_behind).aclose()
    peek = other_library(driver).connect(str(path))
    assert peek.execute("SELECT count(*) FROM records").fetchone()[0] == 0
    memory = open_memory(path, driver, write_behind)
    await memory.add(note("first walnut"))
    peek.close()
    assert (tmp_path / "m.db-wal").exists()
    await memory.add(note("second walnut"))
    await memory.aclose()
    assert await texts(path, driver) == ["first walnut", "second walnut"]


@locked
async def test_the_locks_are_shared_by_the_stores_on_a_file(tmp_path: Path, driver: str, write_behind: bool) -> None:
    path = tmp_path / "m.db"
    one = open_memory(path, driver, write_behind)
    two = open_memory(path, driver, not write_behind)
    await one.add(note("first walnut"))
    await one.aclose()  # ``two`` still holds the locks
    look(path, other_library(driver))
    assert (tmp_path / "m.db-wal").exists()
    await two.add(note("second walnut"))
    assert len(await two.search("walnut", scope=ANN, k=5)) == 2
    await two.aclose()
    assert not (tmp_path / "m.db-wal").exists()
    assert await texts(path, driver) == ["first walnut", "second walnut"]


def _close_inherited(memory: GuardedMemory[SQLiteStore]) -> None:
    """A forked child's work: close the store it inherited from its parent (as a child's clean-up may)."""
    memory.close()


def _open_and_close(path: str, driver: str) -> None:
    """A forked child's work: a store of its own on the parent's file, then closed."""
    mine = SQLiteMemory(path, driver=driver)
    mine.add_sync(note("child walnut"))
    mine.close()


@locked
@pytest.mark.parametrize("child", [_close_inherited, _open_and_close], ids=["closes the inherited", "opens its own"])
def test_a_forked_child_leaves_its_parents_locks(tmp_path: Path, driver: str, child: Any) -> None:
    """OFD locks belong to the open file description, which a forked child shares with its parent: the child
    unlocking the descriptors it inherited would unlock the parent's, and the next close elsewhere (here the
    other library's) would delete the -wal under the parent's store."""
    path = tmp_path / "m.db"
    memory = open_memory(path, driver, False)
    memory.add_sync(note("first walnut"))
    args = (memory,) if child is _close_inherited else (str(path), driver)
    process = multiprocessing.get_context("fork").Process(target=child, args=args)
    process.start()
    process.join(60)
    assert process.exitcode == 0
    look(path, other_library(driver))
    assert (tmp_path / "m.db-wal").exists()  # still held by the parent's locks
    memory.add_sync(note("second walnut"))
    memory.close()
    again = SQLiteMemory(path, driver=driver)
    found = sorted(r.text for r in again.export_sync(scope=ANN))
    again.close()
    assert found == sorted(["first walnut", "second walnut"] + (["child walnut"] if child is _open_and_close else []))
