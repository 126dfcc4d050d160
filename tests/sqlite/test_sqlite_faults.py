"""Concurrency across processes and threads, SIGKILL mid-batch, hostile queries, fuzzing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import SQLiteStore, load_driver

from .support import WORKER, bow_embedder, python

ANN = MemoryScope(user_id="ann")


def test_processes_and_threads_add_and_search_one_file(db_path: str, driver: str) -> None:
    SQLiteMemory(db_path, driver=driver).close()  # create it once, as an app would
    procs, batches, size = 4, 6, 10
    children = [
        subprocess.Popen(
            [python(), str(WORKER), "concurrent", db_path, driver, str(p), str(batches), str(size)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(procs)
    ]
    for child in children:
        _, err = child.communicate(timeout=240)
        assert child.returncode == 0, err
    memory = SQLiteMemory(db_path, driver=driver)
    seen: Counter[tuple[int, int, int, int]] = Counter()
    for u in range(3):
        for r in memory.export_sync(MemoryScope(user_id=f"user{u}")):
            m = r.metadata
            seen[(int(m["p"]), int(m["t"]), int(m["b"]), int(m["i"]))] += 1  # type: ignore[arg-type]
    expected = {(p, t, b, i) for p in range(procs) for t in range(2) for b in range(batches) for i in range(size)}
    assert set(seen) == expected
    assert set(seen.values()) == {1}
    assert memory.store.stats()["records"] == len(expected)
    memory.close()
    assert_counts_consistent(db_path, driver)


def assert_fts_index_matches(conn: Any) -> None:
    """FTS5's own check: it raises (SQLITE_CORRUPT_VTAB) when the index and the records table disagree."""
    conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")


def test_the_fts_check_fails_on_a_damaged_index(db_path: str, driver: str) -> None:
    """The check used after a kill can fail: a torn index segment is caught."""
    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="a"), text=f"word{i} filler text") for i in range(50)])
    memory.close()
    module = load_driver(driver)[1]
    conn = module.connect(db_path)
    assert_fts_index_matches(conn)  # a healthy file passes
    # Zero the tail of the largest index segment, as a torn write would.
    conn.execute(
        "UPDATE records_fts_data SET block = substr(block, 1, length(block) - 8) || zeroblob(8) "
        "WHERE id = (SELECT max(id) FROM records_fts_data)"
    )
    conn.commit()
    with pytest.raises(module.DatabaseError):
        assert_fts_index_matches(conn)
    conn.close()


def assert_counts_consistent(db_path: str, driver: str) -> None:
    """The per-user counts and the file's record counter match the rows (they steer the FTS5 plan)."""
    conn = load_driver(driver)[1].connect(db_path)
    total = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    assert conn.execute("SELECT n FROM generations WHERE tenant = ''").fetchone()[0] == total
    assert conn.execute("SELECT coalesce(sum(n), 0) FROM generations WHERE tenant != ''").fetchone()[0] == total
    conn.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_sigkill_mid_batch_leaves_whole_batches(db_path: str, driver: str) -> None:
    size = 200
    committed: set[int] = set()
    start = 0
    for _ in range(4):
        child = subprocess.Popen(
            [python(), str(WORKER), "crash", db_path, driver, str(start), str(size)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        for _ in range(3):  # let it commit a few batches, then kill it wherever it is
            line = child.stdout.readline()
            assert line.startswith("committed"), child.stderr.read() if child.stderr else line
            committed.add(int(line.split()[1]))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        if child.stderr:
            child.stderr.close()
        start = max(committed) + 100  # batch numbers of each run never overlap
    conn = load_driver(driver)[1].connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert_fts_index_matches(conn)
    conn.close()
    memory = SQLiteMemory(db_path, driver=driver)
    counts = Counter(int(r.metadata["batch"]) for r in memory.export_sync(MemoryScope(user_id="crash")))  # type: ignore[arg-type]
    assert set(counts.values()) == {size}, counts  # every batch whole or absent
    assert committed <= set(counts)
    assert memory.search_sync("filler", scope=MemoryScope(user_id="crash"), k=3)
    memory.delete_sync(scope=MemoryScope(user_id="crash"))
    memory.close()
    assert_counts_consistent(db_path, driver)


HOSTILE = [
    '"',
    '""',
    "'",
    '"unterminated',
    "NEAR(",
    "NEAR(a b",
    "a AND",
    "OR",
    "NOT",
    "AND OR NOT",
    "a NOT b",
    "*",
    "a*",
    "^",
    "^a",
    "body:",
    "col:tea",
    "tenant:x",
    "{body tenant}: tea",
    "(",
    ")",
    "()",
    "a + b",
    "-",
    "🍵",
    "🍵 tea 🍵",
    "\x01\x02\x1f",
    "tea\x07",
    "\t\n\r",
    "%",
    "_",
    "\\",
    "%_\\",
    "'; DROP TABLE records; --",
    " ".join(f"w{i}" for i in range(2000)),
    "tea " * 2500,
    "x" * 10_000,
    "",
    "   ",
]


@pytest.mark.parametrize("use_fts5", [True, False], ids=["fts5", "like"])
def test_hostile_queries_raise_nothing(db_path: str, driver: str, use_fts5: bool) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver, use_fts5=use_fts5)
    memory.add_sync([MemoryRecord(scope=ANN, text="Ann drinks tea NEAR the park AND more")])
    for query in HOSTILE:
        hits = memory.search_sync(query, scope=ANN, k=3)
        assert len(hits) <= 3
        memory.search_sync(query, scope=ANN, k=3, filters={"kind": query[:100] or "x"})
    assert [h.record.text for h in memory.search_sync("tea", scope=ANN)] == ["Ann drinks tea NEAR the park AND more"]
    memory.close()


# Texts as records accept them: no NUL, no lone surrogate, no control character but tab, LF, CR.
_text = st.text(
    alphabet=st.one_of(st.characters(blacklist_categories=("Cs", "Cc")), st.sampled_from(["\t", "\n", "\r"])),
    min_size=1,
    max_size=300,
).filter(lambda s: s.strip() != "")
_query = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
)
_key = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_text, metadata=st.dictionaries(_key, _scalar, max_size=5), query=_query)
def test_fuzzed_texts_and_metadata_round_trip_and_search(
    fuzz_memory: GuardedMemory[SQLiteStore], text: str, metadata: dict[str, object], query: str
) -> None:
    import uuid

    scope = MemoryScope(user_id=uuid.uuid4().hex)
    record = MemoryRecord(scope=scope, text=text, metadata=metadata)  # type: ignore[arg-type]
    [rid] = fuzz_memory.add_sync([record])
    assert fuzz_memory.get_sync(rid, scope=scope) == record.model_copy(update={"id": rid})
    assert len(fuzz_memory.search_sync(query, scope=scope, k=5)) <= 1
    assert [h.record.id for h in fuzz_memory.search_sync(text, scope=scope, k=5)] in ([rid], [])
    if metadata:
        key, value = next(iter(metadata.items()))
        found = fuzz_memory.search_sync("", scope=scope, k=5, filters={key: value})  # type: ignore[dict-item]
        assert [h.record.id for h in found] == [rid]


@pytest.fixture
def fuzz_memory(db_path: str, driver: str) -> GuardedMemory[SQLiteStore]:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    yield memory  # type: ignore[misc]
    memory.close()
