"""``write_behind=True``: a small add commits one row to the log table ``inbox``; everything else drains it first.

The drain thread is held back in most tests here (``held`` fixture: it would
drain only after an hour), so that every read and write must find the record
in the log and drain it itself; no test depends on timing. Real files, and
real processes where another process matters (visibility, a crash, two
writers).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryport import (
    EmbedderMismatch,
    GuardedMemory,
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    MemoryUpdate,
    SQLiteMemory,
    UsageError,
    copy_memories_sync,
)
from memoryport.adapters.sqlite import SQLiteStore, _store, load_driver
from memoryport.contracts import MemoryContract

from .support import WORKER, bow_embedder, logging_child, python, raw_bytes

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drain thread of stores opened in this test waits an hour: only reads and writes drain the log."""
    monkeypatch.setattr(_store, "DRAIN_DELAY", 3600.0)
    monkeypatch.setattr(_store, "DRAIN_ROWS", 10**9)


def logged(path: str, driver: str) -> int:
    """Rows in the file's write-behind log, read by a plain connection (never drains)."""
    conn = load_driver(driver)[1].connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM inbox").fetchone()[0])
    finally:
        conn.close()


def wb_memory(path: str, driver: str, embed: bool = False, **options: Any) -> GuardedMemory[SQLiteStore]:
    return SQLiteMemory(path, embedder=bow_embedder() if embed else None, driver=driver, write_behind=True, **options)


# -- the contract suite, on a store whose adds all stay in the log until something reads -----------------------


class TestWriteBehindContract(MemoryContract):
    @pytest.fixture(params=[False, True], ids=["keyword", "embedder"])
    async def memory(
        self, request: pytest.FixtureRequest, tmp_path: Path, driver: str, held: None
    ) -> AsyncIterator[GuardedMemory[SQLiteStore]]:
        embedder = bow_embedder() if request.param else None
        m = GuardedMemory(SQLiteStore(tmp_path / "memory.db", embedder=embedder, driver=driver, write_behind=True))
        yield m
        await m.aclose()


# -- the option -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, "yes", None])
def test_a_bad_value_is_refused_naming_the_field(db_path: str, value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        SQLiteMemory(db_path, write_behind=value)  # type: ignore[arg-type]
    assert info.value.field == "write_behind"


def test_an_add_commits_one_log_row_and_nothing_else(db_path: str, driver: str, held: None) -> None:
    memory = wb_memory(db_path, driver)
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="Ann drinks green tea")])
    conn = load_driver(driver)[1].connect(db_path)
    # Committed (another connection sees it) in the log; the records table untouched.
    assert conn.execute("SELECT id, user_id, text FROM inbox").fetchall() == [(rid, "ann", "Ann drinks green tea")]
    assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0
    conn.close()
    # The first read drains it: found, and the log is empty.
    assert [h.record.id for h in memory.search_sync("teas", scope=ANN)] == [rid]
    assert logged(db_path, driver) == 0
    assert memory.store.stats()["records"] == 1
    memory.close()


def test_the_drain_thread_drains_on_its_own(db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A whole batch of DRAIN_ROWS wakes it at once (the delay is an hour): no timing involved.
    monkeypatch.setattr(_store, "DRAIN_DELAY", 3600.0)
    monkeypatch.setattr(_store, "DRAIN_ROWS", 3)
    memory = wb_memory(db_path, driver)
    store = memory.store
    drained = threading.Event()
    real = store._drain_log

    def watch(conn: Any, here: bool) -> Any:
        after = real(conn, here)
        if after is None or threading.current_thread().name != "memoryport-sqlite-drain":
            return after

        def committed() -> None:  # what the drain runs once its transaction committed: only then is the log empty
            after()
            drained.set()

        return committed

    store.db.drain = watch
    for i in range(3):
        memory.add_sync([MemoryRecord(scope=ANN, text=f"note {i}")])
    assert drained.wait(60)
    assert logged(db_path, driver) == 0
    memory.close()



def test_a_store_dropped_without_closing_is_collected_and_its_drain_thread_ends(
    db_path: str, driver: str, held: None
) -> None:
    import gc
    import weakref

    memory = wb_memory(db_path, driver)
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="left in the log")])
    thread = memory.store._drainer
    assert thread is not None and thread.is_alive()
    ref = weakref.ref(memory.store)
    del memory
    gc.collect()
    assert ref() is None  # the drain thread does not keep the store (its connections, caches) alive
    thread.join(60)
    assert not thread.is_alive()
    assert logged(db_path, driver) == 1  # durable in the log; the next open drains it
    again = SQLiteMemory(db_path, driver=driver)
    assert again.get_sync(rid, scope=ANN) is not None and logged(db_path, driver) == 0
    again.close()

# -- every operation sees an add still in the log ----------------------------------------------------------------


def _ops() -> dict[str, Callable[[GuardedMemory[SQLiteStore], str, str], None]]:
    def search(mode: str) -> Callable[[GuardedMemory[SQLiteStore], str, str], None]:
        def op(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
            m.store.search_mode = mode  # type: ignore[assignment]
            assert [h.record.id for h in m.search_sync("walnut", scope=ANN, k=3)][:1] == [rid]

        return op

    def recent(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        assert [h.record.id for h in m.search_sync("", scope=ANN, k=1)] == [rid]

    def get(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        found = m.get_sync(rid, scope=ANN)
        assert found is not None and found.text == "Ann cracks a walnut"

    def export(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        assert [r.id for r in m.export_sync(ANN)][-1] == rid

    def count(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        assert m.count_sync(ANN) == 3

    def delete(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        assert m.delete_sync([rid], scope=ANN) == 1
        assert m.get_sync(rid, scope=ANN) is None

    def update(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        assert m.update_sync([MemoryUpdate(id=rid, text="Ann cracks a pecan")], scope=ANN) == [rid]
        assert [h.record.id for h in m.search_sync("pecan", scope=ANN, k=1)] == [rid]

    def purge(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        m.purge_sync()
        assert m.get_sync(rid, scope=ANN) is not None

    def stats(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        assert m.store.stats()["records"] == 3

    def checkpoint(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        assert m.store.checkpoint()

    def build_index(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        from memoryport._sync import run_sync

        assert run_sync(m.store.build_index(ANN), method="build_index") == 3

    def copy(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        target = SQLiteMemory(str(Path(tmp) / "copy.db"), embedder=bow_embedder())
        report = copy_memories_sync(m, target, ANN)
        assert rid in report.ids
        target.close()

    def close(m: GuardedMemory[SQLiteStore], rid: str, tmp: str) -> None:
        m.close()

    return {
        "search-hybrid": search("hybrid"),
        "search-vector": search("vector"),
        "search-keyword": search("keyword"),
        "search-recent": recent,
        "get": get,
        "export": export,
        "count": count,
        "delete": delete,
        "update": update,
        "purge": purge,
        "stats": stats,
        "checkpoint": checkpoint,
        "build_index": build_index,
        "copy": copy,
        "close": close,
    }


OPS = _ops()


@pytest.mark.parametrize("name", list(OPS))
def test_every_operation_sees_an_add_still_in_the_log(tmp_path: Path, driver: str, held: None, name: str) -> None:
    path = str(tmp_path / "memory.db")
    memory = wb_memory(path, driver, embed=True)
    memory.add_sync([MemoryRecord(scope=ANN, text="Ann drinks tea"), MemoryRecord(scope=ANN, text="Ann reads")])
    # A search drains the first two: a vector search of a warm cache then runs inline, on the caller's thread.
    memory.search_sync("tea", scope=ANN)
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="Ann cracks a walnut")])
    assert logged(path, driver) == 1
    OPS[name](memory, rid, str(tmp_path))
    assert logged(path, driver) == 0
    memory.close()
    if name not in ("delete",):
        reopened = SQLiteMemory(path, embedder=bow_embedder(), driver=driver)
        assert reopened.get_sync(rid, scope=ANN) is not None
        reopened.close()


def test_the_same_adds_give_the_same_hits_with_and_without_the_log(tmp_path: Path, driver: str, held: None) -> None:
    t0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
    texts = [
        "Ann: I went to the fair with Jon yesterday",
        "Jon: did you try the walnut cake?",
        "Ann: yes, twice! and green tea",
        "Ann likes hiking in May",
        "Jon: the river walk was long",
        "Ann: we should bring tea next time",
    ]
    records = [
        MemoryRecord(
            scope=MemoryScope(user_id="ann", session_id=f"s{i % 2}"),
            text=text,
            id=f"r{i}",
            created_at=t0 + timedelta(minutes=i),
            metadata={"i": i} if i % 3 == 0 else {},
            expires_at=t0 + timedelta(days=3650) if i == 4 else None,
        )
        for i, text in enumerate(texts)
    ]
    stores = {}
    for wb in (False, True):
        m = SQLiteMemory(str(tmp_path / f"{wb}.db"), embedder=bow_embedder(), driver=driver, write_behind=wb)
        for r in records[:3]:
            m.add_sync([r])
        m.add_sync(records[3:])
        stores[wb] = m
    assert logged(str(tmp_path / "True.db"), driver) == 6
    for mode in ("hybrid", "vector", "keyword"):
        answers = []
        for m in stores.values():
            m.store.search_mode = mode  # type: ignore[assignment]
            found = []
            for query in ("tea", "walnut cake", "When did Ann go to the fair?", "river"):
                found.append([(h.record.id, h.record.text, round(h.score, 9)) for h in m.search_sync(query, scope=ANN)])
            found.append([r.model_dump() for r in m.export_sync(ANN)])
            answers.append(found)
        assert answers[0] == answers[1], mode
    for m in stores.values():
        m.close()


# -- what an add refuses, as without the log ---------------------------------------------------------------------


def test_duplicates_are_refused_against_the_tables_and_the_log(db_path: str, driver: str, held: None) -> None:
    memory = wb_memory(db_path, driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="stored", id="a")])
    memory.search_sync("stored", scope=ANN)  # drained: "a" is in the records table
    memory.add_sync([MemoryRecord(scope=ANN, text="pending", id="b")])  # "b" stays in the log
    assert logged(db_path, driver) == 1
    for batch, index in (
        ([MemoryRecord(scope=ANN, text="x", id="a")], 0),
        ([MemoryRecord(scope=ANN, text="x", id="b")], 0),
        ([MemoryRecord(scope=ANN, text="x", id="c"), MemoryRecord(scope=BEN, text="y", id="b")], 1),
    ):
        with pytest.raises(InvalidInput) as info:
            memory.add_sync(batch)
        assert info.value.field == f"records[{index}].id"
    # Nothing of a refused batch stays ("c" went in before "b" failed: rolled back).
    assert logged(db_path, driver) == 1
    plain = SQLiteMemory(db_path, driver=driver)  # opening drains the log: "b" is in the table now
    assert memory.add_sync([MemoryRecord(scope=ANN, text="fresh", id="c")]) == ["c"]
    assert logged(db_path, driver) == 1
    # A store without the option sees the log's ids too (it drains before its add).
    with pytest.raises(InvalidInput):
        plain.add_sync([MemoryRecord(scope=ANN, text="x", id="c")])
    plain.close()
    assert sorted(r.id for r in memory.export_sync(ANN)) == ["a", "b", "c"]
    memory.close()


def test_an_add_without_the_embedder_of_a_vector_file_is_refused(db_path: str, driver: str, held: None) -> None:
    SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver).close()
    memory = wb_memory(db_path, driver)
    with pytest.raises(EmbedderMismatch):
        memory.add_sync([MemoryRecord(scope=ANN, text="no vector")])
    assert logged(db_path, driver) == 0
    memory.close()


def test_records_in_the_log_without_vectors_keep_an_embedder_out(db_path: str, driver: str, held: None) -> None:
    memory = wb_memory(db_path, driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="no vector")])
    # Another store opening the file with an embedder: refused as if the record were in the table, and
    # before it records its embedder in the file (the keyword-only store goes on: its log drains as it was).
    with pytest.raises(EmbedderMismatch):
        SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    assert [h.record.text for h in memory.search_sync("vector", scope=ANN)] == ["no vector"]
    memory.close()


def test_a_closed_or_read_only_store_refuses_an_add(tmp_path: Path, driver: str, held: None) -> None:
    memory = wb_memory(str(tmp_path / "m.db"), driver)
    memory.close()
    with pytest.raises(UsageError, match="closed"):
        memory.add_sync([MemoryRecord(scope=ANN, text="late")])


# -- erasure -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["user", "ids", "drained first"])
def test_an_erasure_leaves_no_byte_of_a_logged_record(tmp_path: Path, driver: str, held: None, how: str) -> None:
    path = str(tmp_path / "m.db")
    memory = wb_memory(path, driver, embed=True)
    memory.add_sync([MemoryRecord(scope=BEN, text="ben keeps bread")])
    memory.search_sync("bread", scope=BEN)
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="ann zanzibarsecret quokkaword")])
    if how == "drained first":
        memory.search_sync("quokkaword", scope=ANN)
    else:
        assert logged(path, driver) == 1
    assert b"zanzibarsecret" in raw_bytes(path)
    assert memory.delete_sync(None if how == "user" else [rid], scope=ANN) == 1
    data = raw_bytes(path)
    assert b"zanzibarsecret" not in data and b"quokkaword" not in data
    assert logged(path, driver) == 0
    assert memory.get_sync(rid, scope=ANN) is None
    assert [h.record.text for h in memory.search_sync("bread", scope=BEN)] == ["ben keeps bread"]
    memory.close()


# -- other processes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_an_add_survives_its_process_killed_right_after_it_returned(
    tmp_path: Path, driver: str, durability: str
) -> None:
    path = str(tmp_path / "m.db")
    SQLiteMemory(path, embedder=bow_embedder(), driver=driver).close()
    child = subprocess.run(
        [python(), str(WORKER), "log_and_die", path, driver, "ann", "ann cracks a walnut", "bow", durability],
        capture_output=True,
        text=True,
    )
    assert child.returncode == -9, child.stderr
    rid = child.stdout.strip()
    # Killed before any drain: the record is in the log only; opening the file drains it.
    assert logged(path, driver) == 1
    memory = SQLiteMemory(path, embedder=bow_embedder(), driver=driver)
    assert logged(path, driver) == 0
    found = memory.get_sync(rid, scope=ANN)
    assert found is not None and found.text == "ann cracks a walnut"
    assert [h.record.id for h in memory.search_sync("walnut", scope=ANN)] == [rid]
    memory.close()


@pytest.mark.parametrize("embed", [False, True])
def test_another_process_that_can_write_drains_the_log_before_reading(db_path: str, driver: str, embed: bool) -> None:
    # Open (and searched once: caches warm, a vector search then runs inline) before the other process logs.
    memory = SQLiteMemory(db_path, embedder=bow_embedder() if embed else None, driver=driver)  # no write_behind
    memory.add_sync([MemoryRecord(scope=ANN, text="ann drinks tea")])
    memory.search_sync("tea", scope=ANN)
    with logging_child(db_path, driver, "bow" if embed else "none") as rid:
        assert logged(db_path, driver) == 1
        for mode in ("hybrid", "vector", "keyword") if embed else ("keyword",):
            memory.store.search_mode = mode  # type: ignore[assignment]
            assert [h.record.id for h in memory.search_sync("walnut", scope=ANN)][:1] == [rid], mode
        assert logged(db_path, driver) == 0
    memory.close()


def test_another_process_that_writes_drains_the_log_first(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    with logging_child(db_path, driver, "none") as rid:
        # A plain add drains the log in its own transaction first: the logged record keeps the earlier rid.
        [mine] = memory.add_sync([MemoryRecord(scope=ANN, text="ann eats a pecan")])
        assert logged(db_path, driver) == 0
    conn = load_driver(driver)[1].connect(db_path)
    assert [r[0] for r in conn.execute("SELECT id FROM records ORDER BY rid")] == [rid, mine]
    conn.close()
    memory.close()


def test_two_processes_adding_lose_nothing_and_catch_every_duplicate(db_path: str, driver: str) -> None:
    SQLiteMemory(db_path, driver=driver).close()
    n = 60
    procs = [
        subprocess.Popen(
            [python(), str(WORKER), "log_many", db_path, driver, str(p), str(n), ids],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Two with the same ids (each id must be stored once: one of the two gets the error), one with its own.
        for p, ids in ((0, "same"), (1, "same"), (2, "own"))
    ]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outs.append(json.loads(out))
    assert outs[0]["added"] + outs[1]["added"] == n
    assert outs[0]["refused"] + outs[1]["refused"] == n
    assert outs[2] == {"added": n, "refused": 0}
    memory = SQLiteMemory(db_path, driver=driver)
    ids = [r.id for r in memory.export_sync(MemoryScope(user_id="many"))]
    assert sorted(ids) == sorted([f"same{i}" for i in range(n)] + [f"own{i}" for i in range(n)])
    assert logged(db_path, driver) == 0
    memory.close()


def test_two_threads_adding_lose_nothing_and_catch_every_duplicate(db_path: str, driver: str) -> None:
    memory = wb_memory(db_path, driver)
    n = 80
    results: dict[int, list[str]] = {0: [], 1: []}

    def run(t: int) -> None:
        for i in range(n):
            try:
                memory.add_sync([MemoryRecord(scope=ANN, text=f"thread {t} note {i}", id=f"id{i}")])
                results[t].append(f"id{i}")
            except InvalidInput:
                pass

    threads = [threading.Thread(target=run, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results[0] + results[1]) == sorted(f"id{i}" for i in range(n))
    assert sorted(r.id for r in memory.export_sync(ANN)) == sorted(f"id{i}" for i in range(n))
    memory.close()
