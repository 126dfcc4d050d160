"""The default store logs its small adds (``write_behind=True``): what a user relies on must hold for a record
still in the log.

Expired and retained-out records are never returned; many users' logged records drained in one batch stay in
their scopes (every search mode, warm caches, get, delete); a logged record erased by another process, or left
by a killed one, leaves no byte in the files and never comes back. The drain thread is held back (it would
drain after an hour), so that reads and writes must drain the log themselves: no test depends on timing. Real
files, and real processes where another process matters.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _store, load_driver
from memoryport.curated import AgentMemory

from .support import WORKER, bow_embedder, logging_child, python, raw_bytes

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")
MODES = ("vector", "hybrid", "keyword")


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drain thread of stores opened in this test waits an hour: only reads and writes drain the log."""
    monkeypatch.setattr(_store, "DRAIN_DELAY", 3600.0)
    monkeypatch.setattr(_store, "DRAIN_ROWS", 10**9)


def logged(path: str, driver: str) -> int:
    """Rows in the file's write-behind log, read by a plain connection of the same driver (never drains).

    The same driver matters: a connection of another SQLite library in this process would drop the store's
    POSIX locks when it closes (SQLite's "multiple copies of SQLite in one process")."""
    conn = load_driver(driver)[1].connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM inbox").fetchone()[0])
    finally:
        conn.close()


def marker() -> str:
    # Digits end the word, so the porter stemmer stores it as written.
    return "zqx" + uuid.uuid4().hex + "9"


def leaks(path: str, markers: list[str]) -> list[str]:
    data = raw_bytes(path)
    # The FTS5 index stores terms prefix-compressed: look for a tail of each marker too.
    return [m for m in markers if m.encode() in data or m[-16:].encode() in data]


# -- expiry and retention ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["expired", "retained out"])
def test_a_logged_record_past_its_expiry_or_retention_is_never_returned(
    tmp_path: Path, driver: str, held: None, how: str
) -> None:
    path = str(tmp_path / "m.db")
    memory = SQLiteMemory(
        path, embedder=bow_embedder(), driver=driver, retention_days=30 if how == "retained out" else None
    )
    [kept] = memory.add_sync([MemoryRecord(scope=ANN, text="ann keeps a walnut")])
    for mode in MODES:  # every cache warm: the drain extends them, and a warm vector search runs inline
        memory.store.search_mode = mode  # type: ignore[assignment]
        memory.search_sync("walnut", scope=ANN)
    long_ago = utcnow() - timedelta(days=400)
    if how == "expired":
        expires = long_ago + timedelta(days=1)
        old = MemoryRecord(scope=ANN, text="ann stale walnut", created_at=long_ago, expires_at=expires)
    else:
        old = MemoryRecord(scope=ANN, text="ann stale walnut", created_at=long_ago)
    [gone] = memory.add_sync([old])
    assert logged(path, driver) == 1
    for mode in MODES:
        memory.store.search_mode = mode  # type: ignore[assignment]
        assert [h.record.id for h in memory.search_sync("stale walnut", scope=ANN, k=5)] == [kept], mode
    assert logged(path, driver) == 0
    assert [h.record.id for h in memory.search_sync("", scope=ANN, k=5)] == [kept]
    assert memory.get_sync(gone, scope=ANN) is None
    assert [r.id for r in memory.export_sync(ANN)] == [kept]
    assert memory.count_sync(ANN) == 1
    memory.close()


@pytest.mark.parametrize("how", ["expired", "retained out"])
def test_purge_right_after_a_logged_add_past_its_expiry_erases_it(
    tmp_path: Path, driver: str, held: None, how: str
) -> None:
    path = str(tmp_path / "m.db")
    memory = SQLiteMemory(path, driver=driver, retention_days=30 if how == "retained out" else None)
    memory.add_sync([MemoryRecord(scope=ANN, text="ann keeps a walnut")])
    memory.search_sync("walnut", scope=ANN)
    secret = marker()
    long_ago = utcnow() - timedelta(days=400)
    expires = long_ago + timedelta(days=1) if how == "expired" else None
    memory.add_sync([MemoryRecord(scope=ANN, text=f"ann {secret}", created_at=long_ago, expires_at=expires)])
    assert logged(path, driver) == 1
    assert memory.purge_sync() == 1
    assert logged(path, driver) == 0
    assert leaks(path, [secret]) == []
    assert [r.text for r in memory.export_sync(ANN)] == ["ann keeps a walnut"]
    memory.close()


def test_curated_memory_dedups_and_forgets_a_record_still_in_the_log(tmp_path: Path, driver: str, held: None) -> None:
    path = str(tmp_path / "m.db")
    memory = AgentMemory(SQLiteMemory(path, driver=driver))
    secret = marker()
    first = memory.remember_sync(f"Ann's locker code is {secret}", scope=ANN)
    assert first.action == "added" and logged(path, driver) == 1
    # The near-duplicate is found although the first is only in the log (the dedup search drains it).
    again = memory.remember_sync(f"ann's locker code is {secret}!", scope=ANN)
    assert again.action == "updated" and again.id == first.id
    other = memory.remember_sync(f"Ann's bike lock is {secret}0", scope=ANN)
    assert other.action == "added" and logged(path, driver) == 1
    assert memory.delete_sync([other.id], scope=ANN) == 1  # straight after the logged add, no read between
    assert memory.forget_sync(secret, scope=ANN, dry_run=False).removed >= 1
    assert memory.memory.count_sync(ANN) == 0
    assert leaks(path, [secret, secret + "0"]) == []
    memory.close()


# -- isolation ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, _store.HEAD_TENANTS + 8], ids=["few", "more than HEAD_TENANTS"])
def test_many_users_logged_records_drained_in_one_batch_stay_in_their_scopes(
    tmp_path: Path, driver: str, held: None, n: int
) -> None:
    # One drain moves every user's logged adds in one batch: an add of many users, which applications rarely
    # made before; it must extend (or drop) each user's warm caches with that user's rows only. Beyond
    # HEAD_TENANTS users the batch reads its bookkeeping the other way.
    path = str(tmp_path / "m.db")
    memory = SQLiteMemory(path, embedder=bow_embedder(), driver=driver)
    users = [MemoryScope(user_id=f"user{i}") for i in range(n)]
    for scope in users:
        memory.add_sync([MemoryRecord(scope=scope, text=f"{scope.user_id} likes walnut")])
    for mode in MODES:
        memory.store.search_mode = mode  # type: ignore[assignment]
        for scope in users[: max(2, n // 2)]:  # some users' caches warm, some cold
            memory.search_sync("walnut", scope=scope)
    ids = {}
    for scope in users:
        [ids[scope.user_id]] = memory.add_sync([MemoryRecord(scope=scope, text=f"{scope.user_id} hides pecan")])
    assert logged(path, driver) == len(users)
    for mode in MODES:
        memory.store.search_mode = mode  # type: ignore[assignment]
        for scope in users:
            texts = sorted(h.record.text for h in memory.search_sync("pecan walnut", scope=scope, k=10))
            assert texts == [f"{scope.user_id} hides pecan", f"{scope.user_id} likes walnut"], (mode, scope)
    assert logged(path, driver) == 0
    for scope in users:
        assert [h.record.text for h in memory.search_sync("", scope=scope, k=1)] == [f"{scope.user_id} hides pecan"]
    other = users[1]
    assert memory.get_sync(ids[users[0].user_id], scope=other) is None
    assert memory.delete_sync([ids[users[0].user_id]], scope=other) == 0
    assert memory.get_sync(ids[users[0].user_id], scope=users[0]) is not None
    memory.close()


def test_a_logged_record_keeps_its_session_and_agent(tmp_path: Path, driver: str, held: None) -> None:
    path = str(tmp_path / "m.db")
    memory = SQLiteMemory(path, embedder=bow_embedder(), driver=driver)
    mine = MemoryScope(user_id="ann", session_id="s1", agent_id="a1")
    others = [MemoryScope(user_id="ann", session_id="s2"), MemoryScope(user_id="ann", agent_id="a2"), BEN]
    for scope in [mine, *others]:  # caches warm for every scope
        memory.search_sync("pecan", scope=scope)
    [rid] = memory.add_sync([MemoryRecord(scope=mine, text="ann pecan")])
    assert logged(path, driver) == 1
    for scope in others:
        for mode in MODES:
            memory.store.search_mode = mode  # type: ignore[assignment]
            assert memory.search_sync("pecan", scope=scope) == [], (scope, mode)
        assert memory.search_sync("", scope=scope) == []
        assert memory.get_sync(rid, scope=scope) is None
        assert memory.export_sync(scope) == []
        assert memory.delete_sync([rid], scope=scope) == 0
    for scope in (mine, ANN, MemoryScope(user_id="ann", session_id="s1")):
        assert [h.record.id for h in memory.search_sync("pecan", scope=scope)] == [rid], scope
    found = memory.get_sync(rid, scope=mine)
    assert found is not None and found.scope == mine
    memory.close()


# -- erasure across processes ------------------------------------------------------------------------------------


def test_a_user_erased_by_another_process_takes_a_record_still_in_the_log(tmp_path: Path, driver: str) -> None:
    path = str(tmp_path / "m.db")
    # Opened (and written) before the child logs: opening would drain the log, the erasure must.
    memory = SQLiteMemory(path, embedder=bow_embedder(), driver=driver, write_behind=False)
    memory.add_sync([MemoryRecord(scope=BEN, text="ben bakes bread")])
    secret = marker()
    with logging_child(path, driver, "bow", text=f"ann whispers {secret}") as rid:
        assert logged(path, driver) == 1
        assert leaks(path, [secret]) == [secret]
        # The child still runs, its drain thread and its adds' caches alive: the erasure drains its log first.
        assert memory.delete_sync(scope=ANN) == 1
        assert leaks(path, [secret]) == []
        assert logged(path, driver) == 0
    # the child closed (its close drains: nothing left) and exited cleanly
    assert leaks(path, [secret]) == []
    memory.close()
    again = SQLiteMemory(path, embedder=bow_embedder(), driver=driver)
    assert again.get_sync(rid, scope=ANN) is None
    assert again.search_sync(secret, scope=ANN) == []
    assert [h.record.text for h in again.search_sync("bread", scope=BEN)] == ["ben bakes bread"]
    again.close()
    assert leaks(path, [secret]) == []


def test_a_record_logged_by_a_killed_process_is_erased_by_a_store_open_before_it(tmp_path: Path, driver: str) -> None:
    path = str(tmp_path / "m.db")
    memory = SQLiteMemory(path, driver=driver)  # open before the child logs: the erasure drains, not the open
    secret = marker()
    child = subprocess.run(
        [python(), str(WORKER), "log_and_die", path, driver, "ann", f"ann whispers {secret}", "none", "normal"],
        capture_output=True,
        text=True,
    )
    assert child.returncode == -9, child.stderr
    rid = child.stdout.strip()
    assert logged(path, driver) == 1
    assert memory.delete_sync(scope=ANN) == 1
    assert leaks(path, [secret]) == []
    memory.close()
    again = SQLiteMemory(path, driver=driver)
    assert again.get_sync(rid, scope=ANN) is None
    assert again.count_sync(ANN) == 0
    again.close()
    assert leaks(path, [secret]) == []


# -- a process that ends without closing its store -------------------------------------------------------------

EXITS = """
import sys
from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import _store
_store.DRAIN_DELAY = 3600.0  # the drain thread would not drain before the exit
_store.DRAIN_ROWS = 10**9
memory = SQLiteMemory(sys.argv[1], driver=sys.argv[2])
[rid] = memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="ann leaves a walnut")])
print(rid, flush=True)
"""


def test_a_script_that_exits_without_closing_leaves_its_adds_drained(tmp_path: Path, driver: str) -> None:
    # A script that adds and ends (no close: the common one-shot hook) must leave its records in the tables,
    # as close would: a read-only opener or a raw SQL reader cannot drain the log.
    path = str(tmp_path / "m.db")
    SQLiteMemory(path, driver=driver).close()
    child = subprocess.run([python(), "-c", EXITS, path, driver], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stderr == ""
    rid = child.stdout.strip()
    assert logged(path, driver) == 0
    conn = load_driver(driver)[1].connect(path)
    try:
        assert conn.execute("SELECT id, text FROM records").fetchall() == [(rid, "ann leaves a walnut")]
    finally:
        conn.close()


FORKS = (
    EXITS
    + """
import os
child = os.fork()
if child == 0:
    sys.exit(0)  # a normal exit of the child: its atexit must leave the parent's store alone
os.waitpid(child, 0)
from memoryport.adapters.sqlite import load_driver
conn = load_driver(sys.argv[2])[1].connect(sys.argv[1])
print(conn.execute("SELECT count(*) FROM inbox").fetchone()[0], flush=True)
conn.close()
"""
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_that_exits_leaves_its_parents_log_alone(tmp_path: Path, driver: str) -> None:
    path = str(tmp_path / "m.db")
    SQLiteMemory(path, driver=driver).close()
    child = subprocess.run([python(), "-c", FORKS, path, driver], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    rid, in_log = child.stdout.split()
    assert in_log == "1"  # the child drained nothing with its parent's connections
    assert logged(path, driver) == 0  # the parent's own exit did
    conn = load_driver(driver)[1].connect(path)
    try:
        assert conn.execute("SELECT id FROM records").fetchall() == [(rid,)]
    finally:
        conn.close()
