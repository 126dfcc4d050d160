"""Small adds commit on the caller's thread when they can finish without waiting (``inline_writes``).

Every case where they cannot (the write lock taken, another process writing,
expired records to delete, an erasure to finish, ``durability="full"``, a large
batch) goes to the writer thread and gives the same result.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from memoryport import EmbedderMismatch, InvalidInput, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import load_driver

from .support import bow_embedder

ANN = MemoryScope(user_id="ann")
pytestmark = pytest.mark.anyio


def writer_threads(memory: SQLiteMemory) -> int:  # type: ignore[valid-type]
    """How many threads the store's writer pool started (it starts them on first use)."""
    return len(memory.store._writer._threads)  # type: ignore[attr-defined]


async def test_a_small_add_commits_on_the_callers_thread(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, embedder=bow_embedder())
    for i in range(5):
        await memory.add([MemoryRecord(scope=ANN, text=f"Ann drinks tea number {i}")])
    assert writer_threads(memory) == 0
    assert [h.record.text for h in await memory.search("tea number 3", scope=ANN, k=1)] == ["Ann drinks tea number 3"]
    assert memory.store.stats()["records"] == 5
    await memory.aclose()


@pytest.mark.parametrize(
    ("options", "batch"),
    [({"inline_writes": False}, 1), ({"durability": "full"}, 1), ({}, 9)],
    ids=["inline_writes=False", "durability=full", "batch-of-9"],
)
async def test_other_adds_go_to_the_writer_thread(db_path: str, driver: str, options: dict, batch: int) -> None:  # type: ignore[type-arg]
    memory = SQLiteMemory(db_path, driver=driver, **options)
    await memory.add([MemoryRecord(scope=ANN, text=f"tea {i}") for i in range(batch)])
    assert writer_threads(memory) == 1
    assert memory.store.stats()["records"] == batch
    await memory.aclose()


def test_inline_writes_must_be_a_bool(db_path: str, driver: str) -> None:
    with pytest.raises(InvalidInput) as err:
        SQLiteMemory(db_path, driver=driver, inline_writes="yes")  # type: ignore[arg-type]
    assert err.value.field == "inline_writes"


async def test_another_thread_holding_the_write_lock_sends_the_add_to_the_writer(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    lock = memory.store.db.write_lock
    lock.acquire()
    threading.Timer(0.2, lock.release).start()
    await memory.add([MemoryRecord(scope=ANN, text="tea")])
    assert writer_threads(memory) == 1
    assert memory.store.stats()["records"] == 1
    await memory.aclose()


async def test_another_process_writing_never_blocks_the_event_loop(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, busy_timeout=10)
    await memory.add([MemoryRecord(scope=ANN, text="first")])
    _, module = load_driver(driver)
    other = module.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # what another process's write looks like
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    adding = asyncio.create_task(memory.add([MemoryRecord(scope=ANN, text="second")]))
    await asyncio.sleep(0.3)
    assert not adding.done() and ticks >= 5  # the add waits on the writer thread, the loop runs
    other.execute("ROLLBACK")
    other.close()
    await adding
    ticker.cancel()
    assert memory.store.stats()["records"] == 2
    await memory.aclose()


async def test_expired_records_send_the_add_to_the_writer_which_erases_them(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    soon = utcnow() + timedelta(milliseconds=300)
    [old] = await memory.add([MemoryRecord(scope=ANN, text="secret plan", expires_at=soon)])
    await asyncio.sleep(0.35)
    await memory.add([MemoryRecord(scope=ANN, text="tea")])
    assert writer_threads(memory) == 1
    conn = memory.store.db.conn()
    assert conn.execute("SELECT count(*) FROM records WHERE id = ?", (old,)).fetchone()[0] == 0
    assert conn.execute("SELECT value FROM meta WHERE key = 'erase_pending'").fetchone() is None
    await memory.aclose()


async def test_a_pending_erasure_sends_the_add_to_the_writer_which_finishes_it(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    await memory.add([MemoryRecord(scope=ANN, text="tea")])
    with memory.store.db.write_lock:  # as a process killed after its erasing commit leaves the file
        memory.store.db.writer().execute("INSERT INTO meta(key, value) VALUES ('erase_pending', 1)")
    await memory.add([MemoryRecord(scope=ANN, text="coffee")])
    assert writer_threads(memory) == 1
    assert memory.store.db.conn().execute("SELECT value FROM meta WHERE key = 'erase_pending'").fetchone() is None
    await memory.aclose()


async def test_a_due_checkpoint_runs_on_the_writer_thread(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    db = memory.store.db
    db.wal_pages = 10**9
    await memory.add([MemoryRecord(scope=ANN, text="tea")])
    await asyncio.get_running_loop().run_in_executor(memory.store._writer, lambda: None)  # type: ignore[attr-defined]
    assert db.wal_pages == 0
    await memory.aclose()


async def test_errors_on_the_callers_thread_leave_nothing_written(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    await memory.add([MemoryRecord(id="a1", scope=ANN, text="tea")])
    with pytest.raises(InvalidInput):
        await memory.add([MemoryRecord(id="b1", scope=ANN, text="new"), MemoryRecord(id="a1", scope=ANN, text="dup")])
    assert [r.text for r in await memory.export(ANN)] == ["tea"]
    await memory.aclose()
    other = db_path + ".2"
    await SQLiteMemory(other, driver=driver, embedder=bow_embedder()).aclose()  # the file keeps vectors
    plain = SQLiteMemory(other, driver=driver)
    with pytest.raises(EmbedderMismatch):
        await plain.add([MemoryRecord(scope=ANN, text="tea")])
    assert writer_threads(plain) == 0
    await plain.aclose()


async def test_the_writer_waits_for_other_processes_again_after_adds_on_the_callers_thread(
    db_path: str, driver: str
) -> None:
    # Adds on the caller's thread leave the writer connection's busy timeout at 0 (no PRAGMA per add);
    # the writer thread's next use puts it back, so it waits for another process's lock as before.
    memory = SQLiteMemory(db_path, driver=driver, busy_timeout=7)
    await memory.add([MemoryRecord(scope=ANN, text="tea")])
    db = memory.store.db
    with db.write_lock:
        assert db.writer().execute("PRAGMA busy_timeout").fetchone()[0] == 7000
    await memory.add([MemoryRecord(scope=ANN, text="coffee")])
    await memory.add([MemoryRecord(scope=ANN, text=f"more {i}") for i in range(20)])  # the writer thread
    with db.write_lock:
        assert db.writer().execute("PRAGMA busy_timeout").fetchone()[0] == 7000
    assert memory.store.stats()["records"] == 22
    await memory.aclose()


async def test_a_lock_taken_by_another_process_inside_the_transaction_sends_the_add_to_the_writer(
    db_path: str, driver: str
) -> None:
    # A statement of the add (here its COMMIT) finding the file busy rolls back and hands the add to the writer.
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    await memory.add([MemoryRecord(scope=ANN, text="tea")])
    db = memory.store.db
    _, module = load_driver(driver)
    real = db.writer()
    calls = 0

    class BusyOnce:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def execute(self, sql: str, *args: object) -> object:
            nonlocal calls
            if sql == "COMMIT" and not calls:
                calls += 1
                raise module.OperationalError("database is locked")
            return real.execute(sql, *args)

        def executemany(self, sql: str, *args: object) -> object:
            return real.executemany(sql, *args)

    db._writer = BusyOnce()  # type: ignore[assignment]
    try:
        [new] = await memory.add([MemoryRecord(scope=ANN, text="coffee")])
    finally:
        db._writer = real
    assert calls == 1 and writer_threads(memory) == 1
    assert [r.text for r in await memory.export(ANN)] == ["tea", "coffee"]
    assert db.conn().execute("SELECT count(*) FROM records WHERE id = ?", (new,)).fetchone()[0] == 1
    await memory.aclose()


async def test_a_batch_of_many_users_keeps_each_users_count_slot_and_generation(db_path: str, driver: str) -> None:
    # More users than the add's first statement reads at once (HEAD_TENANTS): the rest are read one by one.
    from memoryport.adapters.sqlite._store import HEAD_TENANTS

    users = [MemoryScope(user_id=f"u{i}") for i in range(HEAD_TENANTS + 8)]
    memory = SQLiteMemory(db_path, driver=driver)
    await memory.add([MemoryRecord(scope=users[0], text="first words of u0")])
    for round_ in range(2):
        await memory.add([MemoryRecord(scope=u, text=f"note {round_} of {u.user_id}") for u in users])
    conn = memory.store.db.conn()
    counts = dict(conn.execute("SELECT tenant, n FROM generations WHERE tenant != ''"))
    slots = [s for (s,) in conn.execute("SELECT slot FROM generations WHERE tenant != ''")]
    assert len(counts) == len(users) and sorted(counts.values()) == [2] * (len(users) - 1) + [3]
    assert len(set(slots)) == len(users)  # one slot each
    assert conn.execute("SELECT n FROM generations WHERE tenant = ''").fetchone()[0] == 2 * len(users) + 1
    for u in (users[0], users[HEAD_TENANTS + 3]):
        hits = await memory.search(f"note of {u.user_id}", scope=u, k=10)
        assert {h.record.scope.user_id for h in hits} == {u.user_id}
    await memory.aclose()
