"""Records and hits built from rows without validation (``_rows.built``) equal the validated models.

Rows read back from the file were validated on the way in, so a search builds
their records and hits directly (``record_from_row``, ``_search._hits``); these
tests build the same values through pydantic's validation and compare
everything a caller can see: equality, the dump, the fields set, the private
slots, copies and pickles.
"""

from __future__ import annotations

import copy
import json
import pickle
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from memoryport import MemoryHit, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite._rows import built, dt, record_from_row, us
from memoryport.adapters.sqlite._search import _hits

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
NOW = 1_764_000_000_123_456  # µs since the epoch, December 2025

# (rid, id, user, session, agent, text, metadata JSON, created, expires, updated): rows as COLUMNS selects them
ROWS: list[tuple[Any, ...]] = [
    (1, "a" * 32, "ann", None, None, "Ann likes tea", None, NOW, None, None),
    (2, "b" * 32, "ann", "s1", None, "Ann's session note", '{"k": 1, "tag": "x"}', NOW - 5, NOW + 10**9, None),
    (3, "c" * 32, "ann", "s1", "bot", "agent note \U0001f375 é", '{"f": 0.5, "b": true, "n": null}', 0, None, NOW),
    (4, "d" * 32, None, None, "bot", "no user", None, -1_000_000, None, None),
    (5, "e" * 32, "ben", None, None, "b", None, 1, 253_402_300_799_999_999, 2),
    (6, "f" * 32, "ann", None, None, "Ann again", None, NOW + 1, None, None),
]


def validated(row: tuple[Any, ...]) -> MemoryRecord:
    _, rid, user, session, agent, text, metadata, created, expires, updated = row
    return MemoryRecord(
        id=rid,
        scope=MemoryScope(user_id=user, session_id=session, agent_id=agent),
        text=text,
        metadata=json.loads(metadata) if metadata else {},
        created_at=EPOCH + timedelta(microseconds=created),
        expires_at=None if expires is None else EPOCH + timedelta(microseconds=expires),
        updated_at=None if updated is None else EPOCH + timedelta(microseconds=updated),
    )


def same_model(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    assert got == want
    assert got.model_dump() == want.model_dump()
    assert got.model_dump_json() == want.model_dump_json()
    assert got.__pydantic_extra__ == want.__pydantic_extra__
    assert got.__pydantic_private__ == want.__pydantic_private__
    assert got.model_copy() == want
    assert pickle.loads(pickle.dumps(got)) == want


@pytest.mark.parametrize("value", [0, 1, -1, NOW, -NOW, 10**6 - 1, 253_402_300_799_999_999, -62_135_596_800_000_000])
def test_a_stored_time_reads_back_as_the_same_datetime(value: int) -> None:
    assert dt(value) == EPOCH + timedelta(microseconds=value)
    assert dt(value).tzinfo is timezone.utc
    assert us(dt(value)) == value


@pytest.mark.parametrize("row", ROWS, ids=[str(r[0]) for r in ROWS])
def test_a_record_built_from_its_row_equals_the_validated_one(row: tuple[Any, ...]) -> None:
    want = validated(row)
    for scopes in (None, {}):
        got = record_from_row(row, scopes)
        same_model(got, want)
        same_model(got.scope, want.scope)
        # every field was given: the fields set is the full one, as validation from every value gives
        assert got.model_fields_set == set(MemoryRecord.model_fields)
        assert got.scope.model_fields_set == set(MemoryScope.model_fields)


def test_the_hits_of_a_ranking_equal_validated_hits_in_order() -> None:
    rows = {row[0]: row for row in ROWS}
    # rid 99: no row (deleted meanwhile)
    ranked = [(3, 0.9), (99, 0.8), (1, 0.5), (5, -0.25), (2, 0.0), (6, 0.0), (4, -1.0)]
    got = _hits(ranked, rows, "vector")
    want = [MemoryHit(record=validated(rows[rid]), score=s, signal="vector") for rid, s in ranked if rid in rows]
    assert [h.record.id for h in got] == [h.record.id for h in want] and len(got) == 6
    for g, w in zip(got, want, strict=True):
        same_model(g, w)
    # records of one scope share one scope object (built once per search)
    assert got[1].record.scope is got[4].record.scope


def test_a_non_finite_score_still_goes_through_validation() -> None:
    with pytest.raises(Exception, match="finite"):
        _hits([(1, float("nan"))], {1: ROWS[0]}, "vector")


def test_built_sets_exactly_the_four_slots_pydantic_does() -> None:
    values = {"user_id": "ann", "session_id": None, "agent_id": None}
    got = built(MemoryScope, dict(values))
    want = MemoryScope(**values)
    same_model(got, want)
    assert got.__dict__ == want.__dict__
    with pytest.raises(ValidationError):  # frozen, as validated models are
        got.user_id = "ben"  # type: ignore[misc]


def test_a_hits_metadata_is_its_own_dict_mutating_it_changes_no_other_search(db_path: str, driver: str) -> None:
    """Hits are built without validation, which copies a mapping: each record must still get a fresh dict.

    A caller may change a hit's metadata (the model is frozen, its dict is not); that must not reach the
    next search's records, another record's, nor another user's (a shared ``{}`` for "no metadata" would).
    """
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    for scope in (ann, ben):
        memory.add_sync([MemoryRecord(scope=scope, text=f"tea note {i}", metadata={"k": i}) for i in range(3)])
        memory.add_sync([MemoryRecord(scope=scope, text=f"tea plain {i}") for i in range(3)])

    def metadata(scope: MemoryScope) -> dict[str | None, dict[str, Any]]:
        return {h.record.id: h.record.metadata for h in memory.search_sync("tea", scope=scope, k=10)}

    want = {scope.user_id: copy.deepcopy(metadata(scope)) for scope in (ann, ben)}
    for _ in range(4):  # through the worker, then on the caller's thread once the user's words are kept
        hits = memory.search_sync("tea", scope=ann, k=10)
        assert len({id(h.record.metadata) for h in hits}) == len(hits) == 6
        for h in hits:
            h.record.metadata["leaked"] = "yes"
        for scope in (ann, ben):
            assert metadata(scope) == want[scope.user_id]
    memory.close()
