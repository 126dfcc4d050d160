"""Contextual keyword keys in SQLiteMemory: words lent by a record's neighbours, never across scope or filters."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memoryport import CallableEmbedder, InvalidInput, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.ranking import CONTEXT_KEY_WEIGHT, CONTEXT_KEY_WINDOW

ANN = MemoryScope(user_id="ann")
ONLY_KEYS = {
    "context_weight": 0.0,
    "session_weight": 0.0,
    "speaker_weight": 0.0,
    "time_weight": 0.0,
    "length_weight": 0.0,
}


def scenario(case: str) -> tuple[list[MemoryRecord], dict[str, Any]]:
    """Records and search options in which X ranks above Y only if the lender (just before X) lends it "beta".

    X ("alpha note here") and Y ("alpha note") hold "alpha"; Y is shorter, so it
    leads on BM25 alone. ``case`` says where the lender stands: ``"lends"`` (the
    control: same exact scope, alive, matching), or somewhere it must not count.
    """
    base = utcnow() - timedelta(hours=3)
    at = [base + timedelta(minutes=m) for m in range(7)]
    lender: dict[str, Any] = {"scope": ANN, "text": "beta", "metadata": {"kind": "note"}, "created_at": at[1]}
    search: dict[str, Any] = {"filters": {"kind": "note"}}
    if case == "other user":
        lender["scope"] = MemoryScope(user_id="bob")
    elif case == "other session scope":
        lender["scope"] = MemoryScope(user_id="ann", session_id="s2")
    elif case == "expired":
        lender["expires_at"] = utcnow() - timedelta(minutes=1)
    elif case == "filtered out":
        lender["metadata"] = {"kind": "other"}
    elif case == "outside the time range":
        search["since"] = at[1] + timedelta(seconds=30)
    elif case == "another session (a pause)":
        lender["created_at"] = at[1] - timedelta(hours=2)
    else:
        assert case == "lends"
    note = {"kind": "note"}
    records = [
        MemoryRecord(**lender),
        MemoryRecord(scope=ANN, text="alpha note here", metadata={**note, "tag": "X"}, created_at=at[2]),
        *(MemoryRecord(scope=ANN, text=f"filler {w}", metadata=note, created_at=at[3 + i])
          for i, w in enumerate(["one", "two", "three"])),
        MemoryRecord(scope=ANN, text="alpha note", metadata={**note, "tag": "Y"}, created_at=at[6]),
    ]  # fmt: skip
    return records, search


CASES = ["other user", "other session scope", "expired", "filtered out", "outside the time range",
         "another session (a pause)"]  # fmt: skip


def tags(hits: Any) -> list[str]:
    return [h.record.metadata["tag"] for h in hits if "tag" in h.record.metadata]


@pytest.mark.parametrize("case", ["lends", *CASES])
@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_only_a_visible_neighbour_of_the_same_scope_and_session_lends_words(
    tmp_path: Path, case: str, mode: str
) -> None:
    flat = CallableEmbedder(lambda texts: [[1.0, 0.0] for _ in texts], dim=2, name="flat")  # the vector side ties
    memory = SQLiteMemory(tmp_path / "c.db", embedder=flat, search_mode=mode, **ONLY_KEYS)  # type: ignore[arg-type]
    records, search = scenario(case)
    memory.add_sync(records)
    hits = memory.search_sync("alpha beta", scope=ANN, k=10, **search)
    assert tags(hits) == (["X", "Y"] if case == "lends" else ["Y", "X"]), (case, hits)
    off = SQLiteMemory(tmp_path / "c.db", embedder=flat, search_mode=mode, context_key_weight=0, **ONLY_KEYS)  # type: ignore[arg-type]
    assert tags(off.search_sync("alpha beta", scope=ANN, k=10, **search)) == ["Y", "X"]
    memory.close()
    off.close()


def test_hybrid_lets_a_turn_that_matches_no_word_in_by_its_neighbours(tmp_path: Path) -> None:
    flat = CallableEmbedder(lambda texts: [[1.0, 0.0] for _ in texts], dim=2, name="flat")
    start = utcnow() - timedelta(days=3)
    talk = [("Bo: What do you paint these days?", "q", 0), ("Ann: Sunsets over the lake.", "answer", 1),
            ("Ann: Sunsets over the sea.", "elsewhere", 60 * 24)]  # fmt: skip
    records = [
        MemoryRecord(scope=ANN, text=t, metadata={"tag": tag}, created_at=start + timedelta(minutes=m))
        for t, tag, m in talk
    ]
    on = SQLiteMemory(tmp_path / "h.db", embedder=flat, **ONLY_KEYS)  # type: ignore[arg-type]
    on.add_sync(records)
    assert tags(on.search_sync("paint", scope=ANN, k=3)) == ["q", "answer", "elsewhere"]
    off = SQLiteMemory(tmp_path / "h.db", embedder=flat, context_key_weight=0, **ONLY_KEYS)  # type: ignore[arg-type]
    ranked = off.search_sync("paint", scope=ANN, k=3)
    assert tags(ranked)[0] == "q" and ranked[1].score == ranked[2].score  # no keyword side for either
    # keyword search returns only records holding a query word, contextual keys or not
    kw = SQLiteMemory(tmp_path / "h.db", embedder=flat, search_mode="keyword", **ONLY_KEYS)  # type: ignore[arg-type]
    assert tags(kw.search_sync("paint", scope=ANN, k=3)) == ["q"]
    for memory in (on, off, kw):
        memory.close()


def test_defaults_and_checks(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "d.db")
    assert (memory.store.context_key_weight, memory.store.context_key_window) == (CONTEXT_KEY_WEIGHT, 2)
    assert CONTEXT_KEY_WINDOW == 2
    memory.close()
    for option, bad in [("context_key_weight", -0.1), ("context_key_weight", 1.5), ("context_key_weight", True),
                        ("context_key_weight", "0.6"), ("context_key_window", -1), ("context_key_window", 1.5),
                        ("context_key_window", "2")]:  # fmt: skip
        with pytest.raises(InvalidInput, match=option):
            SQLiteMemory(tmp_path / "x.db", **{option: bad})  # type: ignore[arg-type]


def test_the_like_fallback_ranks_as_without_keys(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "l.db", use_fts5=False, **ONLY_KEYS)  # type: ignore[arg-type]
    records, search = scenario("lends")
    memory.add_sync(records)
    off = SQLiteMemory(tmp_path / "l.db", use_fts5=False, context_key_weight=0, **ONLY_KEYS)  # type: ignore[arg-type]
    a = memory.search_sync("alpha beta", scope=ANN, k=10, **search)
    b = off.search_sync("alpha beta", scope=ANN, k=10, **search)
    assert [(h.record.id, h.score) for h in a] == [(h.record.id, h.score) for h in b]
    memory.close()
    off.close()


@pytest.mark.parametrize("total", [0, 1, 9, 10])
def test_file_idf_stops_counting_where_the_idf_is_clamped(tmp_path: Path, total: int) -> None:
    """Each word's records are counted up to N // 2 + 1 only; the IDFs are those of the full counts."""
    from memoryport.adapters.sqlite._keyword import file_idf
    from memoryport.adapters.sqlite._keyword_large import fts5_idf

    memory = SQLiteMemory(tmp_path / "i.db")
    # word wK is held by K records (K from 0 to 10); "all" by every record
    n = max(total, 10)
    texts = [" ".join(["all", *(f"w{k}" for k in range(11) if i < k)]) for i in range(n)]
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts])
    conn = memory.store.db.conn()
    words = ["all", *(f"w{k}" for k in range(11)), "missing", 'q"uote']
    full = {}
    for word in words:
        count = conn.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", ['body : "' + word.replace('"', '""') + '"']
        ).fetchone()[0]
        if count:
            full[word] = fts5_idf(int(count), total)
    assert file_idf(conn, words, total) == full
    assert set(full) == {"all", *(f"w{k}" for k in range(1, 11))}
    memory.close()
