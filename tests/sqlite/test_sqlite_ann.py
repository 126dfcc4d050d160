"""The vector index of large scopes (``_ann.py``), forced on at small sizes with a low ``ann_threshold``.

What it must keep: results close to the exact scan with exact scores, every
write reflected (adds found, deletes and updates gone from the lists), erased
records' codes gone from the file's bytes, the index dropped with its user,
narrower scopes and filters still exact, old files migrated, caches shared by
stores of one file.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import time
from typing import Any

import numpy as np
import pytest

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport.adapters.sqlite import SCHEMA_VERSION
from memoryport.adapters.sqlite._ann import codes_of, fine_of, hamming, hamming_columns, kmeans, nearest
from memoryport.adapters.sqlite._rows import tenant_token
from memoryport.storekit import embed_unit

from .support import raw_bytes

DIM = 64
CENTRES = np.random.default_rng(5).standard_normal((12, DIM)).astype(np.float32)


def clustered(texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """'c<k> ...' lies near centre k; the rest of the text seeds its own noise (unique vectors)."""
    out = np.empty((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        centre = int(text.split()[0][1:]) % len(CENTRES) if text.startswith("c") else seed % len(CENTRES)
        out[i] = CENTRES[centre] + 0.9 * np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return out


def embedder() -> CallableEmbedder:
    return CallableEmbedder(clustered, dim=DIM, name="clustered-64")


def code(text: str) -> bytes:
    v = clustered([text])
    return codes_of(v / np.linalg.norm(v, axis=1, keepdims=True)).tobytes()


def fine(text: str) -> tuple[bytes, bytes]:
    """The halves of the int8 code of ``text``'s unit vector: a code straddling two pages keeps one whole."""
    whole = fine_of(asyncio.run(embed_unit(embedder(), [text])))[0].tobytes()
    return whole[:32], whole[32:]


def has_fine(text: str, data: bytes) -> bool:
    return any(half in data for half in fine(text))


def build(memory: Any, scope: MemoryScope) -> int:
    return int(asyncio.run(memory.store.build_index(scope)))


ANN = MemoryScope(user_id="ann")


@pytest.fixture
def indexed(tmp_path: object, driver: str) -> Any:
    path = os.path.join(str(tmp_path), "ann.db")
    memory = SQLiteMemory(path, embedder(), search_mode="vector", ann_threshold=100, driver=driver, write_behind=False)
    exact = SQLiteMemory(path, embedder(), search_mode="vector", ann_threshold=None, driver=driver, write_behind=False)
    texts = [f"c{i % 12} note {i}" for i in range(1500)]
    ids = memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts])
    assert build(memory, ANN) == 1500
    yield memory, exact, dict(zip(ids, texts, strict=True)), path
    memory.close()
    exact.close()


def test_codes_and_hamming_distances() -> None:
    v = np.array([[1.0, -1.0, 0.5] + [-1.0] * 61, [-1.0] * 64], dtype=np.float32)
    codes = codes_of(v)
    assert codes.shape == (2, 1) and codes.dtype == np.uint64
    assert hamming(codes, codes[0]).tolist() == [0, 2]
    odd = codes_of(np.ones((1, 70), dtype=np.float32))  # padded to whole 64-bit words
    assert odd.shape == (1, 2) and hamming(odd, odd[0]).tolist() == [0]


def test_hamming_by_columns_and_the_nearest_by_histogram() -> None:
    rng = np.random.default_rng(3)
    codes = codes_of(rng.standard_normal((500, 200)).astype(np.float32))
    want = np.array([sum(bin(int(a) ^ int(b)).count("1") for a, b in zip(row, codes[7], strict=True)) for row in codes])
    assert hamming(codes, codes[7]).tolist() == want.tolist()
    assert hamming_columns(np.ascontiguousarray(codes.T), codes[7]).tolist() == want.tolist()
    assert hamming_columns(np.ascontiguousarray(codes.T), codes[7], overwrite=True).tolist() == want.tolist()
    for m in (1, 17, 250, 499, 500, 600):
        picked = nearest(want.astype(np.uint16), m)
        # exactly min(m, n) positions in position order, the nearest by distance, ties broken by position
        assert picked.tolist() == sorted(np.argsort(want, kind="stable")[:m].tolist())


def test_kmeans_gives_unit_centroids_near_every_point() -> None:
    rng = np.random.default_rng(0)
    points = np.concatenate([c + 0.05 * rng.standard_normal((50, DIM)) for c in CENTRES[:4]]).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    centroids = kmeans(points, 4)
    assert np.allclose(np.linalg.norm(centroids, axis=1), 1.0, atol=1e-5)
    # Random seeds may split one cluster and merge two (a local optimum): still near every point.
    assert float((points @ centroids.T).max(axis=1).min()) > 0.5


def test_index_results_match_the_exact_scan(indexed: Any) -> None:
    memory, exact, _, _ = indexed
    overlap = []
    for i in range(20):
        query = f"c{i % 12} query {i}"
        got = memory.search_sync(query, scope=ANN, k=10)
        want = exact.search_sync(query, scope=ANN, k=10)
        overlap.append(len({h.record.id for h in got} & {h.record.id for h in want}) / 10)
        by_id = {h.record.id: h.score for h in want}
        for hit in got:  # scores are exact cosines, not code distances
            if hit.record.id in by_id:
                assert hit.score == pytest.approx(by_id[hit.record.id], abs=1e-5)
        assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    assert np.mean(overlap) >= 0.9


def test_a_cached_index_is_searched_on_the_callers_thread(indexed: Any) -> None:
    memory, exact, _, _ = indexed
    store = memory.store
    memory.search_sync("c1 query", scope=ANN, k=5)  # reads the centroids and the lists on a worker
    hops: list[Any] = []
    run = store._run

    async def counted(fn: Any, **kw: Any) -> Any:
        hops.append(fn)
        return await run(fn, **kw)

    store._run = counted
    got = memory.search_sync("c2 query", scope=ANN, k=5)
    want = exact.search_sync("c2 query", scope=ANN, k=5)
    assert hops == [] and len({h.record.id for h in got} & {h.record.id for h in want}) >= 4
    # A write (here by another store on the file) makes the cached lists stale: the next search
    # re-validates them on a worker.
    exact.add_sync([MemoryRecord(scope=ANN, text="c2 written elsewhere")])
    memory.search_sync("c2 query", scope=ANN, k=5)
    assert len(hops) == 1
    hops.clear()
    memory.search_sync("c3 query", scope=ANN, k=5)
    assert hops == []  # current again


def test_hybrid_search_uses_the_index_too(tmp_path: object) -> None:
    memory = SQLiteMemory(os.path.join(str(tmp_path), "h.db"), embedder(), ann_threshold=100)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"c{i % 12} note {i}") for i in range(300)])
    build(memory, ANN)
    hits = memory.search_sync("c3 note 3", scope=ANN, k=5)
    assert hits.mode == "hybrid" and hits[0].record.text == "c3 note 3"
    memory.close()


def test_adds_updates_and_deletes_after_the_build_are_reflected(indexed: Any) -> None:
    memory, _, _, path = indexed
    [new] = memory.add_sync([MemoryRecord(scope=ANN, text="c4 brand new")])
    assert memory.search_sync("c4 brand new", scope=ANN, k=1)[0].record.id == new
    memory.update_sync([MemoryUpdate(id=new, text="c7 rewritten")], scope=ANN)
    assert memory.search_sync("c7 rewritten", scope=ANN, k=1)[0].record.id == new
    assert memory.delete_sync([new], scope=ANN) == 1
    assert all(h.record.id != new for h in memory.search_sync("c7 rewritten", scope=ANN, k=20))
    conn = memory.store.driver.connect(path)
    listed = sum(len(r[0]) // 8 for r in conn.execute("SELECT rids FROM ann_lists"))
    assert listed == conn.execute("SELECT count(*) FROM ann_assign").fetchone()[0] == 1500
    conn.close()


def test_an_add_to_an_indexed_user_takes_a_generation_past_the_index_stamp(indexed: Any) -> None:
    # The add's vectors go to the index, which advances the file's generation for its lists' version
    # (schema 7: the generations row ''); the add's own generation must come after it, never equal it.
    memory, _, _, path = indexed
    conn = memory.store.driver.connect(path)
    before = conn.execute("SELECT gen FROM generations WHERE tenant = ''").fetchone()[0]
    memory.add_sync([MemoryRecord(scope=ANN, text="c5 one more")])
    stamps = {int(r[0]) for r in conn.execute("SELECT v FROM ann_lists")}
    sql = "SELECT gen FROM generations WHERE tenant = ?"
    file_gen, user_gen = (conn.execute(sql, (t,)).fetchone()[0] for t in ("", tenant_token("ann")))
    assert file_gen == user_gen == before + 2 and before + 1 in stamps and user_gen not in stamps
    conn.close()


def test_adds_go_to_small_tails_merged_into_their_lists(indexed: Any, monkeypatch: Any) -> None:
    from memoryport.adapters.sqlite import _ann

    memory, exact, _, path = indexed
    monkeypatch.setattr(_ann, "TAIL_MAX", 5)
    texts = [f"c3 tail {i}" for i in range(40)]
    ids = []
    for text in texts:  # one at a time: each add rewrites a tail, every sixth merges one
        ids += memory.add_sync([MemoryRecord(scope=ANN, text=text)])
    conn = memory.store.driver.connect(path)
    rows = conn.execute("SELECT list, length(rids) / 8 FROM ann_lists").fetchall()
    assert all(n <= 5 for no, n in rows if no < 0) and any(no < 0 and n for no, n in rows)
    listed = np.concatenate([np.frombuffer(r[0], dtype=np.int64) for r in conn.execute("SELECT rids FROM ann_lists")])
    assigned = dict(conn.execute("SELECT rid, list FROM ann_assign").fetchall())
    assert len(listed) == len(set(listed.tolist())) == len(assigned) == 1540
    for no, blob in conn.execute("SELECT list, rids FROM ann_lists"):  # each rid is assigned to the row holding it
        assert all(assigned[rid] == no for rid in np.frombuffer(blob, dtype=np.int64).tolist())
    conn.close()
    for text, wanted in zip(texts, ids, strict=True):
        assert memory.search_sync(text, scope=ANN, k=1)[0].record.id == wanted
    got = memory.search_sync("c3 tail 7", scope=ANN, k=10)
    want = exact.search_sync("c3 tail 7", scope=ANN, k=10)
    assert len({h.record.id for h in got} & {h.record.id for h in want}) >= 9
    assert memory.delete_sync(ids[::2], scope=ANN) == 20
    data = raw_bytes(path)
    assert [t for t in texts[::2] if code(t) in data or has_fine(t, data)] == []
    assert all(code(t) in data and has_fine(t, data) for t in texts[1::2])
    assert all(h.record.id not in ids[::2] for h in memory.search_sync("c3 tail 4", scope=ANN, k=40))


def test_erased_codes_leave_the_file(indexed: Any) -> None:
    memory, _, texts, path = indexed
    victims = list(texts)[:30]
    updated = list(texts)[30:40]
    live = list(texts)[40:60]
    data = raw_bytes(path)
    assert all(code(texts[i]) in data and has_fine(texts[i], data) for i in victims + live)  # the check sees them
    memory.delete_sync(victims, scope=ANN)
    memory.update_sync([MemoryUpdate(id=i, text=f"c1 replaced {n}") for n, i in enumerate(updated)], scope=ANN)
    data = raw_bytes(path)
    assert [i for i in victims + updated if code(texts[i]) in data or has_fine(texts[i], data)] == []
    assert all(code(texts[i]) in data and has_fine(texts[i], data) for i in live)
    assert memory.delete_sync(scope=ANN) == 1470  # the whole user: the index goes with it
    conn = memory.store.driver.connect(path)
    assert [
        conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("ann_index", "ann_lists", "ann_assign")
    ] == [
        0,
        0,
        0,
    ]
    conn.close()
    data = raw_bytes(path)
    assert [i for i in live if code(texts[i]) in data or has_fine(texts[i], data)] == []


def test_narrower_scopes_and_filters_stay_exact(tmp_path: object) -> None:
    memory = SQLiteMemory(os.path.join(str(tmp_path), "n.db"), embedder(), search_mode="vector", ann_threshold=50)
    records = [
        MemoryRecord(
            scope=MemoryScope(user_id="ann", session_id=f"s{i % 3}"), text=f"c{i % 12} n {i}", metadata={"i": i % 5}
        )
        for i in range(600)
    ]
    memory.add_sync(records)
    build(memory, ANN)
    session = MemoryScope(user_id="ann", session_id="s1")
    hits = memory.search_sync("c2 n 2", scope=session, k=10)
    assert len(hits) == 10 and all(h.record.scope.session_id == "s1" for h in hits)
    rare = memory.search_sync("c2 n 2", scope=ANN, k=10, filters={"i": 3})
    assert len(rare) == 10 and all(h.record.metadata["i"] == 3 for h in rare)
    memory.close()


def test_a_search_builds_the_index_in_the_background(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "b.db")
    memory = SQLiteMemory(path, embedder(), search_mode="vector", ann_threshold=200)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"c{i % 12} note {i}") for i in range(300)])
    bob = MemoryScope(user_id="bob")
    memory.add_sync([MemoryRecord(scope=bob, text=f"c{i % 12} bob {i}") for i in range(20)])
    assert memory.search_sync("c1 note 1", scope=ANN, k=1)[0].record.text == "c1 note 1"  # exact meanwhile
    memory.search_sync("c1 bob 1", scope=bob, k=1)  # below the threshold: no index
    conn = memory.store.driver.connect(path)
    deadline = time.monotonic() + 60
    while conn.execute("SELECT count(*) FROM ann_index").fetchone()[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert conn.execute("SELECT count(*) FROM ann_index").fetchone()[0] == 1
    conn.close()
    assert memory.search_sync("c1 note 1", scope=ANN, k=1)[0].record.text == "c1 note 1"
    memory.close()


def test_stores_of_one_file_share_their_caches(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "s.db")
    first = SQLiteMemory(path, embedder())
    second = SQLiteMemory(path, embedder(), search_mode="vector")
    other = SQLiteMemory(os.path.join(str(tmp_path), "o.db"), embedder())
    assert first.store.vectors is second.store.vectors and first.store.ann is second.store.ann
    assert other.store.vectors is not first.store.vectors
    first.add_sync([MemoryRecord(scope=ANN, text="c1 shared")])
    assert second.search_sync("c1 shared", scope=ANN, k=1)[0].record.text == "c1 shared"
    first.close()
    assert second.search_sync("c1 shared", scope=ANN, k=1)[0].record.text == "c1 shared"  # still usable
    second.close()
    other.close()


def test_a_file_without_an_index_is_migrated(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "old.db")
    memory = SQLiteMemory(path, embedder(), search_mode="vector")
    memory.add_sync([MemoryRecord(scope=ANN, text=f"c{i % 12} old {i}") for i in range(50)])
    memory.close()
    conn = sqlite3.connect(path)  # back to version 4: no index tables, no file id
    for table in ("ann_index", "ann_lists", "ann_assign"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM meta WHERE key = 'file_id'")
    conn.execute("UPDATE meta SET value = 4 WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    reopened = SQLiteMemory(path, embedder(), search_mode="vector", ann_threshold=10)
    assert reopened.store.stats()["schema_version"] == SCHEMA_VERSION
    assert build(reopened, ANN) == 50
    assert reopened.search_sync("c3 old 3", scope=ANN, k=1)[0].record.text == "c3 old 3"
    reopened.close()


def test_an_index_without_int8_codes_is_dropped_and_rebuilt(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "v5.db")
    memory = SQLiteMemory(path, embedder(), search_mode="vector", ann_threshold=100)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"c{i % 12} old {i}") for i in range(300)])
    assert build(memory, ANN) == 300
    memory.close()
    conn = sqlite3.connect(path)  # back to version 5: lists of sign codes only
    conn.execute("ALTER TABLE ann_lists DROP COLUMN fine")
    conn.execute("UPDATE meta SET value = 5 WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    reopened = SQLiteMemory(path, embedder(), search_mode="vector", ann_threshold=100)
    assert reopened.store.stats()["schema_version"] == SCHEMA_VERSION
    conn = reopened.store.driver.connect(path)  # the store's own SQLite library (docs/sqlite.md)
    assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("ann_index", "ann_lists")] == [0, 0]
    conn.close()
    assert reopened.search_sync("c3 old 3", scope=ANN, k=1)[0].record.text == "c3 old 3"  # exact meanwhile
    assert build(reopened, ANN) == 300
    assert reopened.search_sync("c4 old 4", scope=ANN, k=1)[0].record.text == "c4 old 4"
    reopened.close()


def test_writes_during_a_build_are_caught_up(tmp_path: object) -> None:
    from memoryport.adapters.sqlite import _ann

    path = os.path.join(str(tmp_path), "c.db")
    memory = SQLiteMemory(path, embedder(), search_mode="vector", ann_threshold=None)
    ids = memory.add_sync([MemoryRecord(scope=ANN, text=f"c{i % 12} note {i}") for i in range(400)])
    store = memory.store
    late: list[str] = []

    def write_after_changes(fn: Any) -> Any:
        # Between the build's snapshot and its write: an add, an update and a delete.
        late.extend(memory.add_sync([MemoryRecord(scope=ANN, text="c5 arrived late")]))
        memory.update_sync([MemoryUpdate(id=ids[0], text="c9 changed meanwhile")], scope=ANN)
        memory.delete_sync(ids[1:3], scope=ANN)
        return store.db.write(fn)

    assert _ann.build_index(store.db.read, write_after_changes, "ann", DIM) == 399
    conn = memory.store.driver.connect(path)
    listed = np.concatenate([np.frombuffer(r[0], dtype=np.int64) for r in conn.execute("SELECT rids FROM ann_lists")])
    rid_of = dict(conn.execute("SELECT id, rid FROM records"))
    assert sorted(listed.tolist()) == sorted(rid_of.values())
    data = raw_bytes(path)
    conn.close()
    assert code("c0 note 0") not in data and code("c9 changed meanwhile") in data
    assert code("c1 note 1") not in data and code("c5 arrived late") in data
    assert not has_fine("c0 note 0", data) and has_fine("c9 changed meanwhile", data)
    assert not has_fine("c1 note 1", data) and has_fine("c5 arrived late", data)
    for text, wanted in (("c5 arrived late", late[0]), ("c9 changed meanwhile", ids[0])):
        assert memory.search_sync(text, scope=ANN, k=1)[0].record.id == wanted
    memory.close()
