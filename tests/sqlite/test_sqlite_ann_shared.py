"""The index's decoded lists shared across processes through tmpfs (``_shm.py``).

Two real processes on one file: the second maps the first one's segments
instead of decoding (same hits); a write in one is seen by the other (a stale
segment never used); an erasure in one leaves none of the erased codes in any
segment; garbage, truncated, foreign or loose segments are never trusted;
without a usable tmpfs, or with sharing off, each process keeps its own copy.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from memoryport import CallableEmbedder, InvalidInput, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import _shm
from memoryport.adapters.sqlite._ann import fine_of, packed_rows
from memoryport.storekit import embed_unit

from .support import WORKER
from .worker import ann_memory, clustered

pytestmark = pytest.mark.skipif(not _shm.usable(), reason="needs Linux and a tmpfs /dev/shm")

DRIVER = "sqlite3"
ANN = MemoryScope(user_id="ann")
QUERIES = [f"c{i} query {i}" for i in range(4)]


def start(path: str, ops: list[list[Any]], **env: str) -> subprocess.Popen[str]:
    """Run ``ops`` in another process on the file (tests/sqlite/worker.py ``ann``)."""
    return subprocess.Popen(
        [sys.executable, str(WORKER), "ann", path, DRIVER, json.dumps(ops)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1])) if out.strip() else {}


def child(path: str, ops: list[list[Any]], **env: str) -> dict[str, Any]:
    return result(start(path, ops, **env))


def hits(memory: Any, query: str) -> list[list[Any]]:
    return [[h.record.id, h.score] for h in memory.search_sync(query, scope=ANN, k=10)]


def segments(memory: Any) -> list[str]:
    """The paths of this file's segments (not its lock)."""
    prefix = _shm.file_prefix(memory.store._file_key)[1] + "."
    return [os.path.join(_shm.DIR, n) for n in os.listdir(_shm.DIR) if n.startswith(prefix) and n[-5:] != ".lock"]


def shared_bytes(memory: Any) -> bytes:
    data = b""
    for path in segments(memory):
        with open(path, "rb") as f:
            data += f.read()
    return data


def int8_code(text: str) -> bytes:
    embedder = CallableEmbedder(clustered, dim=64, name="clustered-64")
    return fine_of(asyncio.run(embed_unit(embedder, [text])))[0].tobytes()


@pytest.fixture
def published(tmp_path: object) -> Iterator[tuple[Any, str, dict[str, str]]]:
    """An indexed file (600 records, tails of later adds) whose every list this process published."""
    path = os.path.join(str(tmp_path), "shared.db")
    memory = ann_memory(path, DRIVER)
    texts = [f"c{i % 12} note {i}" for i in range(600)]
    ids = memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts])
    assert asyncio.run(memory.store.build_index(ANN)) == 600
    later = [f"c{i % 12} later {i}" for i in range(24)]  # into the lists' tails
    ids += memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in later])
    for query in QUERIES:  # a small index: every list and tail is probed
        hits(memory, query)
    assert memory.store.ann.shared is not None and memory.store.ann.shared.published > 0
    yield memory, path, dict(zip(ids, texts + later, strict=True))
    memory.close()


def test_a_second_process_maps_the_lists_instead_of_decoding_them(published: Any) -> None:
    memory, path, _ = published
    sharing = start(path, [["search", q] for q in QUERIES])
    private = start(path, [["search", q] for q in QUERIES], MEMORYPORT_SHARE_INDEX="off")  # at the same time
    mine = [hits(memory, q) for q in QUERIES]
    theirs = result(sharing)
    assert theirs["shared"] and theirs["attached"] > 0 and theirs["published"] == 0
    assert theirs["results"] == mine  # same ids, same order, same scores
    alone = result(private)
    assert alone["shared"] is False and alone["results"] == mine


def test_writes_of_another_process_are_seen_and_stale_segments_never_used(published: Any) -> None:
    memory, path, texts = published
    gone = next(i for i, t in texts.items() if t == "c3 later 3")
    moved = next(i for i, t in texts.items() if t == "c2 note 2")
    ops = [["add", "c3 fresh"], ["delete", gone], ["update", [moved, "c9 moved"]]]
    theirs = child(path, [*ops, ["search", "c3 fresh"], ["search", "c3 later 3"], ["search", "c9 moved"]])
    fresh = theirs["results"][0]
    assert theirs["results"][3][0][0] == fresh  # its own add, through a new tail version
    assert gone not in [h[0] for h in theirs["results"][4]]
    assert theirs["results"][5][0][0] == moved  # re-embedded: found by its new text
    # This process held the old versions: it re-reads what changed, maps or decodes the new ones.
    assert hits(memory, "c3 fresh")[0][0] == fresh
    assert hits(memory, "c9 moved")[0][0] == moved
    assert theirs["results"][3:] == [hits(memory, "c3 fresh"), hits(memory, "c3 later 3"), hits(memory, "c9 moved")]


def test_erasure_in_another_process_leaves_no_code_in_shared_memory(published: Any) -> None:
    memory, path, texts = published
    victims = [i for i, t in texts.items() if t.startswith("c5 ")][:3]
    codes = [int8_code(texts[i]) for i in victims]
    before = shared_bytes(memory)
    assert all(c in before for c in codes)  # the grep finds them while they live
    child(path, [["delete", rid] for rid in victims])
    after = shared_bytes(memory)
    assert after and not any(c in after for c in codes)
    assert not set(victims) & {h[0] for h in hits(memory, "c5 note 5")}
    # Erasing the user (here) drops the index: none of its segments is left.
    memory.delete_sync(scope=ANN)
    assert segments(memory) == []


def test_a_reembedding_in_another_process_drops_the_shared_lists(published: Any) -> None:
    memory, path, texts = published
    assert segments(memory)
    theirs = child(path, [["reembed", None]])
    assert theirs["results"] == [len(texts)]
    assert segments(memory) == []  # the index they came from is gone
    got = hits(memory, "c7 note 7")  # exact until rebuilt: the record itself first
    assert texts[got[0][0]] == "c7 note 7" and got[0][1] == pytest.approx(1.0)


def test_the_last_process_out_removes_the_segments_and_a_killed_ones_are_cleaned_at_the_next_open(
    published: Any, tmp_path: Any
) -> None:
    memory, path, _ = published
    assert segments(memory)
    prefix = _shm.file_prefix(memory.store._file_key)[1]
    memory.close()
    assert not [n for n in os.listdir(_shm.DIR) if n.startswith(prefix)]
    child(path, [["search", QUERIES[0]], ["die", None]])  # killed: exits without closing
    assert [n for n in os.listdir(_shm.DIR) if n.startswith(prefix + ".")]
    # Opening any file with an index finds that lock free: the dead process's segments go.
    other = ann_memory(os.path.join(str(tmp_path), "other.db"), DRIVER)
    assert not [n for n in os.listdir(_shm.DIR) if n.startswith(prefix)]
    other.close()


def test_a_file_opened_alone_drops_what_dead_processes_left(lists: Any) -> None:
    _, (rids, codes, rows) = lists
    key = (1, os.getpid(), os.urandom(8).hex())
    dead = _shm.SharedLists(key)
    dead.publish("t1", 3, 17, rids, codes, rows)
    os.close(dead._fd)  # type: ignore[arg-type]  # what a kill does: the lock goes, the segment stays
    dead._fd = None
    assert os.path.exists(dead.path("t1", 3, 17))
    alone = _shm.SharedLists(key)
    assert not os.path.exists(dead.path("t1", 3, 17))
    alone.close()
    assert not [n for n in os.listdir(_shm.DIR) if n.startswith(alone.prefix)]


def test_garbage_truncated_and_loose_segments_are_ignored_and_replaced(published: Any) -> None:
    memory, path, _ = published
    mine = [hits(memory, q) for q in QUERIES]
    for i, seg in enumerate(segments(memory)):
        size = os.path.getsize(seg)
        if i % 3 == 0:
            os.truncate(seg, size - 8)
        elif i % 3 == 1:
            with open(seg, "r+b") as f:  # same size, body changed: the CRC says so
                f.seek(size - 1)
                f.write(b"\x7f" if f.read(1) != b"\x7f" else b"\x00")
        else:
            os.chmod(seg, 0o644)
    theirs = child(path, [["search", q] for q in QUERIES])
    assert theirs["attached"] == 0 and theirs["published"] > 0
    assert theirs["results"] == mine


# -- SharedLists alone ------------------------------------------------------------------------------------


@pytest.fixture
def lists() -> Iterator[tuple[_shm.SharedLists, tuple[Any, ...]]]:
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((50, 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rids = np.arange(100, 150, dtype=np.int64)
    codes = np.ascontiguousarray(np.packbits(vectors > 0, axis=1).view(np.uint64).T)
    rows = packed_rows(rids, *fine_of(vectors))
    shared = _shm.SharedLists((1, os.getpid(), os.urandom(8).hex()))
    yield shared, (rids, codes, rows)
    shared.close()


def test_a_segment_is_used_only_at_its_version_with_its_rids(lists: Any) -> None:
    shared, (rids, codes, rows) = lists
    got = shared.publish("t1", 3, 17, rids, codes, rows)
    assert got is not None and all(np.array_equal(a, b) for a, b in zip(got, (rids, codes, rows), strict=True))
    assert os.stat(shared.path("t1", 3, 17)).st_mode & 0o777 == 0o600
    assert "t1" not in shared.path("t1", 3, 17)  # names hash the user
    mapped = shared.attach("t1", 3, 17, rids.tobytes(), 64)
    assert mapped is not None and np.array_equal(mapped[2], rows)
    assert shared.attach("t1", 3, 18, rids.tobytes(), 64) is None  # another version: not this segment
    assert shared.attach("t1", 4, 17, rids.tobytes(), 64) is None
    assert shared.attach("t2", 3, 17, rids.tobytes(), 64) is None
    other = rids.copy()
    other[0] = 99
    assert shared.attach("t1", 3, 17, other.tobytes(), 64) is None  # same size, other rids: distrusted
    shared.publish("t1", 3, 17, rids, codes, rows)
    assert shared.attach("t1", 3, 17, rids[:-1].tobytes(), 64) is None  # not the row's rids: size differs
    assert not os.path.exists(shared.path("t1", 3, 17))  # and removed (ours)


def test_a_segment_with_another_version_in_its_header_is_refused(lists: Any) -> None:
    shared, (rids, codes, rows) = lists
    shared.publish("t1", 3, 17, rids, codes, rows)
    os.rename(shared.path("t1", 3, 17), shared.path("t1", 3, 18))  # right name, header of version 17
    assert shared.attach("t1", 3, 18, rids.tobytes(), 64) is None


def test_another_users_segment_under_this_users_name_is_refused(lists: Any) -> None:
    """A user never maps another user's list, even one moved to its own name: the header names the user."""
    shared, (rids, codes, rows) = lists
    shared.publish("t1", 3, 17, rids, codes, rows)
    assert shared.attach("t2", 3, 17, rids.tobytes(), 64) is None
    os.rename(shared.path("t1", 3, 17), shared.path("t2", 3, 17))
    assert shared.attach("t2", 3, 17, rids.tobytes(), 64) is None
    assert not os.path.exists(shared.path("t2", 3, 17))  # ours but wrong: removed


def test_links_and_foreign_segments_are_never_trusted(lists: Any, tmp_path: Any) -> None:
    shared, (rids, codes, rows) = lists
    shared.publish("t1", 3, 17, rids, codes, rows)
    os.symlink(shared.path("t1", 3, 17), shared.path("t1", 3, 19))
    try:
        assert shared.attach("t1", 3, 19, rids.tobytes(), 64) is None
    finally:
        os.unlink(shared.path("t1", 3, 19))
    if os.getuid() == 0:  # root can make a segment another user's
        os.chown(shared.path("t1", 3, 17), 4321, 4321)
        assert shared.attach("t1", 3, 17, rids.tobytes(), 64) is None
        assert os.path.exists(shared.path("t1", 3, 17))  # not ours: left alone, never used


def test_a_full_tmpfs_keeps_the_private_copy(lists: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shared, (rids, codes, rows) = lists

    def full(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    assert shared.publish("t1", 3, 17, rids, codes, rows) is None
    assert not os.path.exists(shared.path("t1", 3, 17))
    assert not [n for n in os.listdir(_shm.DIR) if n.startswith(shared.prefix + ".") and "tmp" in n]


def test_without_a_usable_tmpfs_each_process_keeps_its_own_copy(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shm, "DIR", str(tmp_path))  # a disk folder: codes never go there
    path = os.path.join(str(tmp_path), "private.db")
    memory = ann_memory(path, DRIVER)
    exact = SQLiteMemory(path, memory.store.embedder, search_mode="vector", driver=DRIVER)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"c{i % 12} note {i}") for i in range(300)])
    asyncio.run(memory.store.build_index(ANN))
    assert memory.store.ann.shared is None
    got = hits(memory, "c1 note 1")
    assert got[0][1] == pytest.approx(1.0) and len(got) == 10
    assert sorted(os.listdir(tmp_path)) == sorted(n for n in os.listdir(tmp_path) if n.startswith("private.db"))
    memory.close()
    exact.close()


def test_the_switch_refuses_bad_values(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.path.join(str(tmp_path), "switch.db")
    with pytest.raises(InvalidInput, match="share_index"):
        ann_memory(path, DRIVER, share_index="yes")
    monkeypatch.setenv(_shm.ENV, "maybe")
    with pytest.raises(InvalidInput, match="MEMORYPORT_SHARE_INDEX"):
        ann_memory(path, DRIVER)
    monkeypatch.setenv(_shm.ENV, "0")
    off = ann_memory(path, DRIVER)
    assert off.store.ann.shared is None
    off.close()
    monkeypatch.delenv(_shm.ENV)
    on, off = ann_memory(path, DRIVER), ann_memory(path, DRIVER, share_index=False)
    assert on.store.ann is off.store.ann and on.store.ann.shared is None  # one store asking off: off for the file
    on.close()
    off.close()


def test_a_forked_child_closing_leaves_its_parents_segments(lists: Any) -> None:
    shared, (rids, codes, rows) = lists
    shared.publish("t1", 3, 17, rids, codes, rows)
    pid = os.fork()
    if pid == 0:  # the child shares the parent's lock (one open file description): closing must not purge
        shared.close()
        os._exit(0)
    os.waitpid(pid, 0)
    assert shared.attach("t1", 3, 17, rids.tobytes(), 64) is not None
