"""SQLiteMemory's own behaviour: storage, search, filters, expiry, files, embedders."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryport import (
    CallableEmbedder,
    Capability,
    EmbedderMismatch,
    EmbeddingError,
    GuardedMemory,
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    SQLiteMemory,
    UsageError,
)
from memoryport._records import utcnow
from memoryport.adapters.sqlite import SCHEMA_VERSION, SQLiteStore, load_driver, reembed_file_sync

from .support import WORKER, bow_embedder, python

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


def texts(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.record.text for h in hits]


def test_round_trip_is_exact(memory: GuardedMemory[SQLiteStore]) -> None:
    rec = MemoryRecord(
        scope=MemoryScope(user_id="ann", session_id="s1", agent_id="a1"),
        text="Ann drinks green tea ☕ every morning",
        metadata={"kind": "pref", "n": 3, "x": 1.5, "ok": True, "none": None, "big": 2**70, "neg": -0.0},
        created_at=utcnow() - timedelta(days=1, microseconds=7),
        expires_at=utcnow() + timedelta(days=3),
    )
    [rid] = memory.add_sync([rec])
    got = memory.get_sync(rid, scope=ANN)
    assert got == rec.model_copy(update={"id": rid})
    assert memory.export_sync(ANN) == [got]


def test_keyword_search_stems_and_ranks(memory: GuardedMemory[SQLiteStore]) -> None:
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text="Ann drinks green tea"),
            MemoryRecord(scope=ANN, text="Ann went running in the park"),
            MemoryRecord(scope=ANN, text="The weather was cold"),
        ]
    )
    assert texts(memory.search_sync("runs", scope=ANN, k=1)) == ["Ann went running in the park"]
    assert texts(memory.search_sync("What does Ann drink? tea", scope=ANN, k=1)) == ["Ann drinks green tea"]


def test_scopes_are_isolated_and_covered(memory: GuardedMemory[SQLiteStore]) -> None:
    s1 = MemoryScope(user_id="ann", session_id="s1")
    s2 = MemoryScope(user_id="ann", session_id="s2")
    a1 = MemoryScope(user_id="ann", agent_id="bot")
    memory.add_sync(
        [
            MemoryRecord(scope=s1, text="tea in session one"),
            MemoryRecord(scope=s2, text="tea in session two"),
            MemoryRecord(scope=a1, text="tea for the bot"),
            MemoryRecord(scope=BEN, text="tea for ben"),
            MemoryRecord(scope=MemoryScope(session_id="s1"), text="tea anonymous"),
        ]
    )
    assert sorted(texts(memory.search_sync("tea", scope=ANN, k=10))) == [
        "tea for the bot",
        "tea in session one",
        "tea in session two",
    ]
    assert texts(memory.search_sync("tea", scope=s1, k=10)) == ["tea in session one"]
    assert texts(memory.search_sync("tea", scope=a1, k=10)) == ["tea for the bot"]
    assert texts(memory.search_sync("tea", scope=BEN, k=10)) == ["tea for ben"]
    assert texts(memory.search_sync("tea", scope=MemoryScope(session_id="s1"), k=10)) == ["tea anonymous"]
    assert memory.dropped_out_of_scope == 0
    ben_id = memory.export_sync(BEN)[0].id
    assert ben_id is not None
    assert memory.get_sync(ben_id, scope=ANN) is None
    assert memory.delete_sync([ben_id], scope=ANN) == 0
    assert memory.delete_sync(scope=s2) == 1
    assert len(memory.export_sync(ANN)) == 2


def test_empty_query_lists_newest(memory: GuardedMemory[SQLiteStore]) -> None:
    now = utcnow()
    memory.add_sync(
        [MemoryRecord(scope=ANN, text=f"note {i}", created_at=now - timedelta(minutes=10 - i)) for i in range(5)]
    )
    hits = memory.search_sync("", scope=ANN, k=3)
    assert texts(hits) == ["note 4", "note 3", "note 2"]
    assert getattr(hits, "mode", None) == "recent"


def test_filters_match_exactly_and_keep_json_types_apart(memory: GuardedMemory[SQLiteStore]) -> None:
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text="tea one", metadata={"kind": "visit", "n": 1}),
            MemoryRecord(scope=ANN, text="tea two", metadata={"kind": "visit", "n": True}),
            MemoryRecord(scope=ANN, text="tea three", metadata={"kind": "pref", "n": 1.0}),
            MemoryRecord(scope=ANN, text="tea four", metadata={"kind": "x'); DROP TABLE records; --"}),
        ]
    )
    assert sorted(texts(memory.search_sync("tea", scope=ANN, k=10, filters={"kind": "visit"}))) == [
        "tea one",
        "tea two",
    ]
    assert sorted(texts(memory.search_sync("tea", scope=ANN, k=10, filters={"n": 1}))) == ["tea one", "tea three"]
    assert texts(memory.search_sync("tea", scope=ANN, k=10, filters={"n": True})) == ["tea two"]
    assert texts(memory.search_sync("", scope=ANN, k=10, filters={"kind": "visit", "n": True})) == ["tea two"]
    assert texts(memory.search_sync("tea", scope=ANN, k=10, filters={"kind": "x'); DROP TABLE records; --"})) == [
        "tea four"
    ]
    assert memory.search_sync("tea", scope=ANN, k=10, filters={"missing": None}) == []
    assert len(memory.export_sync(ANN)) == 4


def test_expired_records_are_hidden_then_deleted_on_write(memory: GuardedMemory[SQLiteStore]) -> None:
    past = utcnow() - timedelta(hours=2)
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text="old tea", created_at=past, expires_at=past + timedelta(hours=1)),
            MemoryRecord(scope=ANN, text="new tea"),
        ]
    )
    assert texts(memory.search_sync("tea", scope=ANN, k=10)) == ["new tea"]
    assert [r.text for r in memory.export_sync(ANN)] == ["new tea"]
    assert memory.store.stats()["records"] == 2
    memory.add_sync([MemoryRecord(scope=BEN, text="another write")])
    assert memory.store.stats()["records"] == 2  # the expired one went with the next write


def test_retention_hides_and_purge_deletes(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, retention_days=30, driver=driver)
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text="ancient tea", created_at=utcnow() - timedelta(days=40)),
            MemoryRecord(scope=ANN, text="fresh tea"),
            MemoryRecord(scope=BEN, text="ancient ben", created_at=utcnow() - timedelta(days=40)),
        ]
    )
    assert texts(memory.search_sync("tea", scope=ANN, k=10)) == ["fresh tea"]
    assert memory.purge_sync() == 2
    assert memory.store.stats()["records"] == 1
    memory.close()


def test_capabilities_are_declared_truthfully(db_path: str, driver: str) -> None:
    plain = SQLiteMemory(db_path, driver=driver)
    base = {
        Capability.SESSION_SCOPE,
        Capability.AGENT_SCOPE,
        Capability.METADATA,
        Capability.FILTERS,
        Capability.EXPIRY,
        Capability.KEYWORD_SEARCH,
        Capability.GET,
        Capability.DELETE,
        Capability.EXPORT,
        Capability.PURGE,
        Capability.UPDATE,
        Capability.COUNT,
        Capability.TIME_RANGE,
        Capability.FILTER_OPERATORS,
        Capability.GRAPH,
    }
    assert plain.capabilities == base
    plain.close()
    with_vectors = SQLiteMemory(db_path + "2", embedder=bow_embedder(), driver=driver)
    assert with_vectors.capabilities == base | {Capability.VECTOR_SEARCH}
    with_vectors.close()


def test_duplicate_id_refuses_the_whole_batch(memory: GuardedMemory[SQLiteStore]) -> None:
    memory.add_sync([MemoryRecord(id="one", scope=ANN, text="first")])
    with pytest.raises(InvalidInput) as err:
        memory.add_sync(
            [MemoryRecord(id="two", scope=ANN, text="second"), MemoryRecord(id="one", scope=ANN, text="again")]
        )
    assert err.value.field == "records[1].id"
    assert [r.text for r in memory.export_sync(ANN)] == ["first"]


def test_files_are_owner_only(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="secret")])
    for suffix in ("", "-wal", "-shm"):
        assert os.path.exists(db_path + suffix), suffix
        assert stat.S_IMODE(os.stat(db_path + suffix).st_mode) == 0o600, suffix
    memory.close()


def test_existing_open_file_is_tightened(tmp_path: Path, driver: str) -> None:
    path = tmp_path / "loose.db"
    path.touch(mode=0o644)
    os.chmod(path, 0o644)
    memory = SQLiteMemory(path, driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="secret")])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(str(path) + "-wal").st_mode) == 0o600
    memory.close()


def test_wal_mode_and_schema_version_are_recorded(memory: GuardedMemory[SQLiteStore]) -> None:
    memory.add_sync([MemoryRecord(scope=ANN, text="x")])
    # never two SQLite libraries on one open file
    conn = load_driver(memory.store.driver_name)[1].connect(memory.store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) == SCHEMA_VERSION
    conn.close()


def test_newer_schema_is_refused(db_path: str, driver: str) -> None:
    SQLiteMemory(db_path, driver=driver).close()
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE meta SET value = 999 WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(UsageError, match="upgrade memoryport"):
        SQLiteMemory(db_path, driver=driver)


def test_foreign_sqlite_file_is_refused(db_path: str, driver: str) -> None:
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE something(x)")
    conn.close()
    with pytest.raises(UsageError, match="not a memoryport store"):
        SQLiteMemory(db_path, driver=driver)


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="folder does not exist"):
        SQLiteMemory(tmp_path / "nope" / "m.db")


def test_like_fallback_warns_at_creation_and_searches(
    db_path: str, driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        memory = SQLiteMemory(db_path, driver=driver, use_fts5=False)
    assert memory.store.keyword_index == "like"
    assert any("LIKE" in r.getMessage() for r in caplog.records)
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text="Ann drinks green tea"),
            MemoryRecord(scope=ANN, text="Ann likes 100% cotton"),
            MemoryRecord(scope=BEN, text="Ben drinks tea"),
        ]
    )
    assert texts(memory.search_sync("TEA please", scope=ANN, k=5)) == ["Ann drinks green tea"]
    assert texts(memory.search_sync("100%", scope=ANN, k=5)) == ["Ann likes 100% cotton"]
    assert memory.search_sync("_", scope=ANN, k=5) == []
    memory.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        reopened = SQLiteMemory(db_path, driver=driver)
    assert reopened.store.keyword_index == "like"  # the file keeps its index kind
    assert not caplog.records  # warned once, when the file was created
    reopened.close()


def test_hybrid_search_finds_by_vector_too(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text=t)
            for t in ("green tea in the morning", "a walk in the park", "coffee after lunch")
        ]
    )
    hits = memory.search_sync("green tea", scope=ANN, k=2)
    assert getattr(hits, "mode", None) == "hybrid"
    assert hits[0].record.text == "green tea in the morning"
    assert {h.signal for h in hits} == {"hybrid"}
    memory.close()


class Flaky:
    """An embedder whose failure can be switched on."""

    name = "flaky-64"
    dim = 64

    def __init__(self) -> None:
        self.fail = False
        self.inner = bow_embedder(64, "flaky-64")

    async def embed(self, texts: list[str]) -> np.ndarray:  # type: ignore[type-arg]
        if self.fail:
            raise RuntimeError("model server down")
        return await self.inner.embed(texts)


def test_embedder_failing_on_add_stores_nothing(db_path: str, driver: str) -> None:
    embedder = Flaky()
    memory = SQLiteMemory(db_path, embedder=embedder, driver=driver)
    embedder.fail = True
    with pytest.raises(EmbeddingError):
        memory.add_sync([MemoryRecord(scope=ANN, text="tea")])
    assert memory.export_sync(ANN) == []
    assert memory.store.stats()["records"] == 0
    memory.close()


def test_embedder_failing_on_search_falls_back_to_keywords(
    db_path: str, driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = Flaky()
    memory = SQLiteMemory(db_path, embedder=embedder, driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="green tea"), MemoryRecord(scope=ANN, text="coffee")])
    embedder.fail = True
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        hits = memory.search_sync("tea", scope=ANN, k=5)
    assert texts(hits) == ["green tea"]
    assert getattr(hits, "mode", None) == "keyword"
    assert {h.signal for h in hits} == {"keyword"}
    assert any("embedder failed" in r.getMessage() for r in caplog.records)
    assert all("tea" not in r.getMessage() for r in caplog.records)
    memory.close()


def test_wrong_embedder_on_open_names_the_way_out(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(64, "bow-64"), driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"tea number {i}") for i in range(10)])
    memory.close()
    with pytest.raises(EmbedderMismatch, match="reembed") as err:
        SQLiteMemory(db_path, embedder=bow_embedder(32, "bow-32"), driver=driver)
    assert "bow-64" in str(err.value) and "bow-32" in str(err.value)
    with pytest.raises(EmbedderMismatch):
        SQLiteMemory(db_path, embedder=bow_embedder(64, "other-64"), driver=driver)

    seen: list[tuple[int, int]] = []
    n = reembed_file_sync(
        db_path,
        bow_embedder(32, "bow-32"),
        batch_size=3,
        progress=lambda done, total: seen.append((done, total)),
        driver=driver,
    )
    assert n == 10
    assert seen[0] == (0, 10) and seen[-1] == (10, 10) and len(seen) == 5
    reopened = SQLiteMemory(db_path, embedder=bow_embedder(32, "bow-32"), driver=driver)
    assert reopened.store.stats()["vectors"] == 10 and reopened.store.stats()["dim"] == 32
    assert texts(reopened.search_sync("tea number 3", scope=ANN, k=1)) == ["tea number 3"]
    reopened.close()


def test_keyword_file_needs_reembed_before_an_embedder(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="tea")])
    memory.close()
    with pytest.raises(EmbedderMismatch, match="without vectors"):
        SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    assert reembed_file_sync(db_path, bow_embedder(), driver=driver) == 1
    SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver).close()


def test_reembed_failure_leaves_the_file_as_it_was(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"tea {i}") for i in range(5)])
    memory.close()
    calls = {"n": 0}

    def failing(batch: list[str]) -> np.ndarray:  # type: ignore[type-arg]
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("boom")
        return np.ones((len(batch), 16))

    with pytest.raises(EmbeddingError):
        reembed_file_sync(db_path, CallableEmbedder(failing, dim=16, name="new"), batch_size=2, driver=driver)
    SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver).close()  # still the old embedder


def test_vector_file_opened_without_embedder_reads_but_refuses_adds(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="tea")])
    memory.close()
    plain = SQLiteMemory(db_path, driver=driver)
    assert texts(plain.search_sync("tea", scope=ANN)) == ["tea"]
    with pytest.raises(EmbedderMismatch, match="bow-64"):
        plain.add_sync([MemoryRecord(scope=ANN, text="more")])
    plain.close()


def test_another_process_write_is_seen_by_the_next_vector_search(db_path: str, driver: str) -> None:
    from .worker import constant_embedder

    memory = SQLiteMemory(db_path, embedder=constant_embedder(), driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"local {i}") for i in range(3)])
    # A query without shared words: every hit comes from the (cached) vectors.
    assert len(memory.search_sync("zzz", scope=ANN, k=10)) == 3
    subprocess.run([python(), str(WORKER), "add", db_path, driver, "ann", "from another process", "1"], check=True)
    assert "from another process" in texts(memory.search_sync("zzz", scope=ANN, k=10))
    subprocess.run([python(), str(WORKER), "delete_user", db_path, driver, "ann", "1"], check=True)
    assert memory.search_sync("zzz", scope=ANN, k=10) == []
    memory.close()


def test_own_writes_extend_the_cached_vectors(db_path: str, driver: str) -> None:
    from .worker import constant_embedder

    memory = SQLiteMemory(db_path, embedder=constant_embedder(), driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="first")])
    assert len(memory.search_sync("zzz", scope=ANN, k=10)) == 1
    memory.add_sync([MemoryRecord(scope=ANN, text="second"), MemoryRecord(scope=BEN, text="ben")])
    assert sorted(texts(memory.search_sync("zzz", scope=ANN, k=10))) == ["first", "second"]
    memory.delete_sync([memory.export_sync(ANN)[0].id or ""], scope=ANN)
    assert texts(memory.search_sync("zzz", scope=ANN, k=10)) == ["second"]
    memory.close()


def test_closed_memory_refuses_calls(db_path: str) -> None:
    memory = SQLiteMemory(db_path)
    memory.close()
    with pytest.raises(UsageError, match="closed"):
        memory.search_sync("tea", scope=ANN)


def test_memory_path_is_refused() -> None:
    with pytest.raises(UsageError, match="file path"):
        SQLiteMemory(":memory:")


@pytest.mark.anyio
async def test_async_api_on_any_loop(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    await memory.add([MemoryRecord(scope=ANN, text="async tea")])
    assert texts(await memory.search("tea", scope=ANN)) == ["async tea"]
    await memory.aclose()


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_search_mode_is_chosen_and_reported(db_path: str, driver: str, mode: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver, search_mode=mode)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in ("green tea", "black coffee", "tea and coffee")])
    hits = memory.search_sync("green tea", scope=ANN, k=3)
    assert getattr(hits, "mode", None) == mode
    assert {h.signal for h in hits} == {mode}
    assert hits[0].record.text == "green tea"
    if mode == "vector":
        assert len(hits) == 3 and hits[0].score == pytest.approx(1.0, abs=1e-5)  # cosine of identical texts
    if mode == "keyword":
        assert len(hits) == 2
    memory.close()


def test_unknown_search_mode_is_refused(db_path: str) -> None:
    with pytest.raises(InvalidInput):
        SQLiteMemory(db_path, search_mode="fuzzy")


def test_keyword_search_widens_past_rows_that_fail_scope_or_filters(memory: GuardedMemory[SQLiteStore]) -> None:
    s1 = MemoryScope(user_id="ann", session_id="s1")
    # Many better-ranked rows (short texts) that the filter or the session rules out.
    memory.add_sync([MemoryRecord(scope=ANN, text="tea", metadata={"kind": "a"}) for _ in range(300)])
    memory.add_sync([MemoryRecord(scope=s1, text="tea " + "filler " * 40, metadata={"kind": "b"})])
    hits = memory.search_sync("tea", scope=ANN, k=1, filters={"kind": "b"})
    assert [h.record.metadata["kind"] for h in hits] == ["b"]
    assert len(memory.search_sync("tea", scope=s1, k=5)) == 1


def test_a_minority_user_gets_bm25_over_its_own_records(
    db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryport.adapters.sqlite import _keyword

    # BM25 alone: contextual keys would also credit "walks" lent by a neighbour (docs/retrieval.md).
    memory = SQLiteMemory(db_path, driver=driver, context_key_weight=0)
    # Ben fills most of the file, so Ann's searches take the per-user BM25 path.
    memory.add_sync([MemoryRecord(scope=BEN, text=f"ben walks the dog {i} in the rain") for i in range(60)])
    s1 = MemoryScope(user_id="ann", session_id="s1")
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text="Ann walks in the park every morning with friends and family"),
            MemoryRecord(scope=ANN, text="Ann walks"),
            MemoryRecord(scope=ANN, text="Ann walked to the dentist", metadata={"kind": "visit"}),
            MemoryRecord(scope=s1, text="dentist appointment moved"),
            MemoryRecord(scope=ANN, text="Ann likes the rain"),
        ]
    )
    # The path under test: count its calls, so the test fails if searches stop taking it.
    local_calls: list[int] = []
    per_user_bm25 = _keyword.bm25_per_user

    def counted(*args: object, **kwargs: object) -> list[tuple[int, float]]:
        local_calls.append(1)
        return per_user_bm25(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_keyword, "bm25_per_user", counted)
    # "dentist" is rarer among Ann's records than "walks": the record with both ranks first.
    assert texts(memory.search_sync("dentist walks", scope=ANN, k=1)) == ["Ann walked to the dentist"]
    # Same word (porter: walked = walks): shorter records rank first (length normalisation).
    assert texts(memory.search_sync("walks", scope=ANN, k=3)) == [
        "Ann walks",
        "Ann walked to the dentist",
        "Ann walks in the park every morning with friends and family",
    ]
    assert texts(memory.search_sync("dentist", scope=s1, k=5)) == ["dentist appointment moved"]
    assert texts(memory.search_sync("dentist", scope=ANN, k=5, filters={"kind": "visit"})) == [
        "Ann walked to the dentist"
    ]
    assert all("ben" not in t for t in texts(memory.search_sync("rain dog", scope=ANN, k=10)))
    assert len(local_calls) >= 5
    memory.close()


def test_doc_sizes_come_from_the_fts5_docsize_table(db_path: str, driver: str) -> None:
    from memoryport.adapters.sqlite._keyword import doc_sizes as _doc_sizes
    from memoryport.adapters.sqlite._keyword import varint as _varint

    assert _varint(bytes([5, 0])) == 5 and _varint(bytes([0x81, 0x00])) == 128 and _varint(bytes([0x82, 0x2C])) == 300
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    words = " ".join(f"w{i}" for i in range(300))
    memory.add_sync([MemoryRecord(scope=ANN, text="one two three"), MemoryRecord(scope=ANN, text=words)])
    conn = load_driver(driver)[1].connect(db_path)
    # ANN is the file's first user: slot 1 (FTS5 rowid = slot above rid, see _rows.fts_rowid).
    assert _doc_sizes(conn, [1, 2], base=1 << 40) == {1: 3, 2: 300}
    conn.close()
    memory.close()


def test_the_first_example_of_docs_sqlite_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "sqlite.md").read_text()
    block = re.findall(r"```python\n(.*?)```", page, flags=re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/sqlite.md[block 0]", "exec"), {"__name__": "sqlite_md"})
    assert (tmp_path / "memory.db").exists()


def test_a_folder_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder"):
        SQLiteMemory(tmp_path)


def test_reembed_command_line(
    db_path: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import memoryport
    from memoryport.cli import main

    memory = SQLiteMemory(db_path)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"tea number {i}") for i in range(5)])
    memory.close()
    # The command uses the local model; a deterministic stand-in keeps this test fast.
    monkeypatch.setattr(memoryport, "LocalEmbedder", lambda: bow_embedder(), raising=False)
    assert main(["reembed", "--db", db_path, "--batch-size", "2"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "re-embedded 5 memories with bow-64 (dim 64)"
    assert err.splitlines() == ["re-embedded 0/5", "re-embedded 2/5", "re-embedded 4/5", "re-embedded 5/5"]
    SQLiteMemory(db_path, embedder=bow_embedder()).close()  # the file now belongs to that embedder
    assert main(["reembed", "--db", db_path + ".missing"]) == 2
    assert "no memory file" in capsys.readouterr().err


@pytest.mark.parametrize(("durability", "level"), [("normal", 1), ("full", 2)])
def test_durability_sets_synchronous_on_every_connection(
    db_path: str, driver: str, durability: str, level: int
) -> None:
    memory = SQLiteMemory(db_path, driver=driver, durability=durability)
    memory.add_sync([MemoryRecord(scope=ANN, text="tea")])
    store = memory.store
    writer = store._writer.submit(lambda: store.db.conn().execute("PRAGMA synchronous").fetchone()[0]).result()
    reader = store._pool.submit(lambda: store.db.conn().execute("PRAGMA synchronous").fetchone()[0]).result()
    assert (writer, reader) == (level, level)
    with store.db.write_lock:  # the connection every write uses, from whichever thread
        assert store.db.writer().execute("PRAGMA synchronous").fetchone()[0] == level
    assert store.db.conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    memory.close()


@pytest.mark.parametrize("bad", ["off", "FULL", "", None, 2])
def test_durability_must_be_normal_or_full(db_path: str, driver: str, bad: object) -> None:
    with pytest.raises(InvalidInput) as err:
        SQLiteMemory(db_path, driver=driver, durability=bad)  # type: ignore[arg-type]
    assert err.value.field == "durability"


def test_single_adds_after_deletes_get_fresh_row_keys(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    ids = memory.add_sync([MemoryRecord(scope=ANN, text=f"tea number {i}") for i in range(4)])
    memory.delete_sync([ids[-1]], scope=ANN)  # the highest row key is free again
    memory.add_sync([MemoryRecord(scope=ANN, text="coffee one")])
    memory.add_sync([MemoryRecord(scope=ANN, text="coffee two"), MemoryRecord(scope=ANN, text="coffee three")])
    got = sorted(r.text for r in memory.export_sync(ANN))
    assert got == ["coffee one", "coffee three", "coffee two", "tea number 0", "tea number 1", "tea number 2"]
    hits = memory.search_sync("coffee", scope=ANN, k=3)
    assert sorted(h.record.text for h in hits) == ["coffee one", "coffee three", "coffee two"]
    memory.close()


def _fixed_embedder() -> Any:
    from memoryport import CallableEmbedder

    table = {
        "coffee": [1.0, 0.0, 0.0],
        "Ann is vegetarian": [0.1, 0.995, 0.0],  # cosine 0.1 to the query: unrelated
        "Ann sips espresso every morning": [0.8, 0.6, 0.0],  # cosine 0.8, no query word
        "Ann likes coffee with oat milk": [0.0, 0.0, 1.0],  # the query word, cosine 0
    }
    return CallableEmbedder(lambda texts: np.array([table[t] for t in texts], dtype=np.float32), dim=3, name="fixed")


@pytest.mark.parametrize(
    ("floor", "expected"),
    [
        (0.0, {"Ann is vegetarian", "Ann sips espresso every morning", "Ann likes coffee with oat milk"}),
        (0.2, {"Ann sips espresso every morning", "Ann likes coffee with oat milk"}),
        (0.9, {"Ann likes coffee with oat milk"}),
    ],
)
def test_min_similarity_drops_only_weak_vector_only_hits(db_path: str, floor: float, expected: set[str]) -> None:
    """A record no query word matches needs an absolute cosine >= min_similarity; keyword matches always stay."""
    memory = SQLiteMemory(db_path, embedder=_fixed_embedder(), min_similarity=floor, context_weight=0.0)
    memory.add_sync(
        [
            MemoryRecord(scope=ANN, text=t)
            for t in ["Ann is vegetarian", "Ann sips espresso every morning", "Ann likes coffee with oat milk"]
        ]
    )
    assert set(texts(memory.search_sync("coffee", scope=ANN, k=5))) == expected
    memory.close()


@pytest.mark.parametrize("bad", [-1.5, 1.5, True, "0.2"])
def test_min_similarity_is_checked(db_path: str, bad: Any) -> None:
    with pytest.raises(InvalidInput, match="min_similarity"):
        SQLiteMemory(db_path, min_similarity=bad)
