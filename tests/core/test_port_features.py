"""Update, time ranges, filter operators and count in the core: grammar, validation, the guard's re-checks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memoryport import (
    Capability,
    GuardedMemory,
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    MemoryUpdate,
    UnsupportedCapability,
    UsageError,
)
from memoryport._filters import check_filters, matches, split_filters
from memoryport._timerange import parse_time, time_range

from .dictstore import ALL, DictStore, IgnoresGte, IgnoresSince

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 5, 8, 12, 0, tzinfo=timezone.utc)
ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


# -- the time grammar ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("90s", NOW - timedelta(seconds=90)),
        ("90m", NOW - timedelta(minutes=90)),
        ("24h", NOW - timedelta(hours=24)),
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(weeks=2)),
        (" 3d ", NOW - timedelta(days=3)),
        (timedelta(hours=5), NOW - timedelta(hours=5)),
        ("2026-05-01", datetime(2026, 5, 1, tzinfo=timezone.utc)),
        ("2026-05-01T09:30:00Z", datetime(2026, 5, 1, 9, 30, tzinfo=timezone.utc)),
        ("2026-05-01T09:30:00+02:00", datetime(2026, 5, 1, 7, 30, tzinfo=timezone.utc)),
        (datetime(2026, 5, 1, 9, tzinfo=timezone(timedelta(hours=-4))), datetime(2026, 5, 1, 13, tzinfo=timezone.utc)),
    ],
)
def test_time_grammar(value: Any, expected: datetime) -> None:
    got = parse_time(value, field="since", now=NOW)
    assert got == expected and got.tzinfo == timezone.utc


@pytest.mark.parametrize(
    "value",
    [
        "", "7", "7x", "-7d", "7 days", "1h30m", "yesterday", "2026-13-01", "2026-05-01T09:30:00",
        datetime(2026, 5, 1), timedelta(hours=-1), 7, 7.5, None.__class__, "9" * 70,
    ],
)  # fmt: skip
def test_time_grammar_refuses_with_the_field_named(value: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_time(value, field="until", now=NOW)
    assert info.value.field == "until"


def test_since_must_come_before_until() -> None:
    assert time_range("7d", "1d", now=NOW) == (NOW - timedelta(days=7), NOW - timedelta(days=1))
    with pytest.raises(InvalidInput, match="since"):
        time_range("1d", "7d", now=NOW)
    with pytest.raises(InvalidInput):
        time_range(NOW, NOW, now=NOW)


# -- filters -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "key"),
    [
        ({"n": {"$gte": 1, "$bad": 2}}, "n"),
        ({"n": {"$gte": 1, "plain": 2}}, "n"),
        ({"n": {}}, "n"),
        ({"n": {"$gt": True}}, "n"),
        ({"n": {"$gt": None}}, "n"),
        ({"n": {"$gt": float("nan")}}, "n"),
        ({"n": {"$gt": 2**70}}, "n"),
        ({"n": {"$in": "abc"}}, "n"),
        ({"n": {"$in": [1, [2]]}}, "n"),
        ({"n": {"$exists": 1}}, "n"),
        ({"n": [1, 2]}, "n"),
        ({"$or": [{"a": 1}]}, "$or"),
        ({"$and": {"a": 1}}, "$and"),
    ],
)
def test_invalid_filters_name_the_key(filters: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_filters(filters)
    assert info.value.field == f"filters[{key!r}]"


def test_a_top_level_dollar_key_is_a_metadata_key() -> None:
    assert matches({"$and": "w"}, check_filters({"$and": "w"}))
    assert not matches({"$and": "x"}, check_filters({"$and": "w"}))


def test_too_many_in_values_are_refused() -> None:
    with pytest.raises(InvalidInput, match="max_filter_values"):
        check_filters({"n": {"$in": list(range(11))}}, max_values=10)


@pytest.mark.parametrize(
    ("condition", "value", "expected"),
    [
        (1, 1, True), (1, 1.0, True), (1, True, False), (1, "1", False), (True, 1, False), ("1", 1, False),
        (None, None, True), ({"$eq": 2}, 2.0, True), ({"$ne": 2}, 3, True), ({"$ne": 2}, 2, False),
        ({"$ne": 1}, True, True), ({"$gt": 1}, 2, True), ({"$gt": 1}, 1, False), ({"$gte": 1}, 1.0, True),
        ({"$lt": 1}, 0.5, True), ({"$lte": 1}, 1, True), ({"$gt": 0}, True, False), ({"$gt": 0}, "5", False),
        ({"$gt": "b"}, "c", True), ({"$gt": "b"}, 3, False), ({"$gte": 0, "$lt": 10}, 5, True),
        ({"$gte": 0, "$lt": 10}, 10, False), ({"$in": [1, "a"]}, 1.0, True), ({"$in": [1, "a"]}, True, False),
        ({"$in": []}, 1, False), ({"$nin": [1]}, 2, True), ({"$nin": [1]}, 1, False),
        ({"$exists": True}, None, True), ({"$gt": 2**62}, 2**63 + 5, True),
    ],
)  # fmt: skip
def test_operators_keep_json_types_apart(condition: Any, value: Any, expected: bool) -> None:
    filters = check_filters({"k": condition})
    assert matches({"k": value}, filters) is expected


def test_absent_keys() -> None:
    for condition, expected in [
        ({"$exists": False}, True), ({"$exists": True}, False), ({"$ne": 1}, True), ({"$nin": [1]}, True),
        ({"$eq": None}, False), (None, False), ({"$gt": 0}, False), ({"$in": [None]}, False),
    ]:  # fmt: skip
        assert matches({}, check_filters({"k": condition})) is expected, condition


def test_split_keeps_native_operators_with_the_store() -> None:
    filters = check_filters({"kind": "fact", "n": {"$gte": 1, "$lt": 5}, "m": {"$eq": 2}})
    assert split_filters(filters, frozenset({"$eq"}), plain_only=True) == (
        {"kind": "fact", "m": 2},
        {"n": {"$gte": 1, "$lt": 5}},
    )
    assert split_filters(filters, frozenset({"$eq", "$gte"}), plain_only=False) == (
        {"kind": "fact", "n": {"$gte": 1}, "m": {"$eq": 2}},
        {"n": {"$lt": 5}},
    )


# -- the guard ----------------------------------------------------------------

BASIC = frozenset(ALL - {Capability.TIME_RANGE, Capability.FILTER_OPERATORS, Capability.COUNT})


class Spy(DictStore):
    """Records what the guard sends, to show what is pushed down and what is not."""

    def __init__(self, capabilities: frozenset[Capability] = ALL) -> None:
        super().__init__(capabilities)
        self.calls: list[dict[str, Any]] = []

    async def search(self, query: str, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return await super().search(query, **kwargs)

    async def export(self, scope: MemoryScope, **kwargs: Any) -> list[MemoryRecord]:
        self.calls.append(kwargs)
        return await super().export(scope, **kwargs)


def _aged(scope: MemoryScope, n: int, *, step: timedelta = timedelta(hours=1), **meta: Any) -> list[MemoryRecord]:
    base = datetime.now(timezone.utc) - timedelta(minutes=1)
    return [
        MemoryRecord(scope=scope, text=f"note {i}", created_at=base - i * step, metadata={"i": i, **meta})
        for i in range(n)
    ]


async def test_since_without_time_range_is_served_by_the_guard_with_over_fetching() -> None:
    store = Spy(BASIC)
    memory = GuardedMemory(store)
    await memory.add(_aged(ANN, 40))
    # The 5 newest are the only ones within 4h30m; k=3 among many older records.
    hits = await memory.search("", scope=ANN, k=3, since="270m")
    assert [h.record.metadata["i"] for h in hits] == [0, 1, 2]
    assert all("since" not in call for call in store.calls), "since went to a store that did not declare it"
    old = await memory.search("", scope=ANN, k=3, until=timedelta(hours=30))
    assert [h.record.metadata["i"] for h in old] == [30, 31, 32], "over-fetching did not reach older records"
    assert [r.metadata["i"] for r in await memory.export(ANN, since="150m")] == [2, 1, 0]
    assert memory.dropped_not_matching == 0


async def test_since_is_pushed_to_a_store_declaring_time_range() -> None:
    store = Spy(ALL)
    memory = GuardedMemory(store)
    await memory.add(_aged(ANN, 5))
    await memory.search("", scope=ANN, since="2h")
    await memory.export(ANN, until="2h")
    assert isinstance(store.calls[0]["since"], datetime) and store.calls[0]["until"] is None
    assert store.calls[1]["until"] is not None
    await memory.search("", scope=ANN)
    assert "since" not in store.calls[2], "a range nobody asked for was sent"


async def test_operators_without_native_support_are_applied_by_the_guard() -> None:
    store = Spy(BASIC)
    memory = GuardedMemory(store)
    await memory.add(_aged(ANN, 30, kind="fact"))
    hits = await memory.search("", scope=ANN, k=4, filters={"kind": {"$eq": "fact"}, "i": {"$gte": 20}})
    assert [h.record.metadata["i"] for h in hits] == [20, 21, 22, 23]
    assert store.calls[0]["filters"] == {"kind": "fact"}, "only equality may reach a store without operators"
    assert memory.filter_operators == frozenset({"$eq"})
    with pytest.raises(UnsupportedCapability):
        await memory.count(ANN)


async def test_a_store_that_ignores_what_it_declares_is_caught_and_hidden() -> None:
    memory = GuardedMemory(IgnoresGte())
    await memory.add(_aged(ANN, 10))
    hits = await memory.search("", scope=ANN, k=10, filters={"i": {"$gte": 7}})
    assert sorted(h.record.metadata["i"] for h in hits) == [7, 8, 9]
    assert memory.dropped_not_matching >= 7  # counted on every fetch that returned them
    memory = GuardedMemory(IgnoresSince())
    await memory.add(_aged(ANN, 10))
    assert len(await memory.export(ANN, since="150m")) == 3
    assert memory.dropped_not_matching == 7


async def test_filters_refused_without_the_filters_capability() -> None:
    memory = GuardedMemory(DictStore(frozenset({Capability.EXPORT, Capability.GET, Capability.DELETE})))
    with pytest.raises(UnsupportedCapability):
        await memory.search("", scope=ANN, filters={"i": {"$gte": 1}})
    with pytest.raises(InvalidInput) as info:
        await GuardedMemory(DictStore()).search("", scope=ANN, filters={"i": {"$regex": "x"}})
    assert info.value.field == "filters['i']"


async def test_narrowed_native_operators() -> None:
    class Narrow(Spy):
        filter_operators = frozenset({"$gte"})

    store = Narrow()
    memory = GuardedMemory(store)
    await memory.add(_aged(ANN, 10))
    hits = await memory.search("", scope=ANN, k=10, filters={"i": {"$gte": 2, "$lt": 5}})
    assert sorted(h.record.metadata["i"] for h in hits) == [2, 3, 4]
    assert store.calls[0]["filters"] == {"i": {"$gte": 2}}
    with pytest.raises(UnsupportedCapability) as info:
        await memory.count(ANN, filters={"i": {"$lt": 5}})
    assert "$lt" in str(info.value)
    assert await memory.count(ANN, filters={"i": {"$gte": 5}}) == 5

    class Unknown(DictStore):
        filter_operators = frozenset({"$regex"})

    with pytest.raises(UsageError):
        GuardedMemory(Unknown())


async def test_update_keeps_identity_and_refuses_bad_changes() -> None:
    memory = GuardedMemory(DictStore())
    [rid] = await memory.add([MemoryRecord(scope=ANN, text="old", metadata={"a": 1})])
    before = await memory.get(rid, scope=ANN)
    assert before is not None and before.updated_at is None
    assert await memory.update([MemoryUpdate(id=rid, text="new")], scope=ANN) == [rid]
    after = await memory.get(rid, scope=ANN)
    assert after is not None and after.text == "new" and after.metadata == {"a": 1}
    assert after.created_at == before.created_at and after.updated_at is not None
    assert await memory.update([MemoryUpdate(id=rid, text="ben's")], scope=BEN) == []
    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert await memory.update(
        [MemoryUpdate(id="missing", text="x"), MemoryUpdate(id=rid, expires_at=later)], scope=ANN
    ) == [rid]
    got = await memory.get(rid, scope=ANN)
    assert got is not None and got.expires_at == later
    await memory.update([MemoryUpdate(id=rid, expires_at=None)], scope=ANN)
    got = await memory.get(rid, scope=ANN)
    assert got is not None and got.expires_at is None and got.text == "new"
    for bad, field in [
        ([MemoryUpdate(id=rid)], "changes[0]"),
        ([MemoryUpdate(id=rid, text="a"), MemoryUpdate(id=rid, text="b")], "changes[1].id"),
        ([MemoryUpdate(id=rid, expires_at=datetime.now(timezone.utc) - timedelta(1))], "changes[0].expires_at"),
        ([MemoryUpdate(id=rid, text="x" * 40_000)], "changes[0].text"),
    ]:
        with pytest.raises(InvalidInput) as info:
            await memory.update(bad, scope=ANN)
        assert info.value.field == field
    with pytest.raises(UsageError):
        await memory.update(MemoryUpdate(id=rid, text="x"), scope=ANN)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await memory.update([MemoryUpdate(id=rid, text="x")])


async def test_update_and_count_need_their_capabilities() -> None:
    memory = GuardedMemory(DictStore(BASIC - {Capability.UPDATE}))
    with pytest.raises(UnsupportedCapability):
        await memory.update([MemoryUpdate(id="x", text="y")], scope=ANN)
    with pytest.raises(UnsupportedCapability):
        await memory.count(ANN)
    no_meta = GuardedMemory(DictStore(frozenset({Capability.UPDATE})))
    with pytest.raises(UnsupportedCapability):
        await no_meta.update([MemoryUpdate(id="x", metadata={"a": 1})], scope=ANN)
    with pytest.raises(UnsupportedCapability):
        await no_meta.update([MemoryUpdate(id="x", expires_at=None)], scope=ANN)

    class NoMethods:
        name = "none"
        capabilities = frozenset({Capability.UPDATE})

        async def add(self, records: Sequence[MemoryRecord]) -> list[str]: ...
        async def search(self, query: str, **kwargs: Any) -> Any: ...
        async def get(self, id: str, **kwargs: Any) -> Any: ...
        async def delete(self, ids: Any, **kwargs: Any) -> Any: ...
        async def export(self, scope: MemoryScope) -> Any: ...
        async def purge(self, **kwargs: Any) -> Any: ...

    with pytest.raises(UsageError, match="update"):
        GuardedMemory(NoMethods())  # type: ignore[arg-type]


async def test_update_results_are_checked() -> None:
    class Liar(DictStore):
        async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
            return ["someone-else"]

    with pytest.raises(Exception, match="not asked for"):
        await GuardedMemory(Liar()).update([MemoryUpdate(id="x", text="y")], scope=ANN)


async def test_count_folds_retention_and_hides_expired() -> None:
    memory = GuardedMemory(DictStore(), retention_days=1)
    now = datetime.now(timezone.utc)
    await memory.add(
        [
            MemoryRecord(scope=ANN, text="fresh", metadata={"kind": "a"}),
            MemoryRecord(scope=ANN, text="old", created_at=now - timedelta(days=2), metadata={"kind": "a"}),
            # Expired already (an expiry 1 ms ahead raced the record's own created_at under load).
            MemoryRecord(
                scope=ANN, text="gone", created_at=now - timedelta(hours=2), expires_at=now - timedelta(hours=1)
            ),
            MemoryRecord(scope=BEN, text="ben"),
        ]
    )
    assert await memory.count(ANN) == 1
    assert await memory.count(ANN, filters={"kind": "a"}) == 1
    assert await memory.count(ANN, until="1d") == 0
    assert memory.count_sync.__name__ == "count_sync"


def test_sync_twins_take_the_new_arguments() -> None:
    memory = GuardedMemory(DictStore())
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="tea", metadata={"n": 3})])
    assert memory.update_sync([MemoryUpdate(id=rid, metadata={"n": 4})], scope=ANN) == [rid]
    assert memory.count_sync(ANN, filters={"n": {"$gt": 3}}, since="1h") == 1
    assert len(memory.search_sync("", scope=ANN, since="1h", filters={"n": {"$in": [4]}})) == 1
    assert len(memory.export_sync(ANN, until="1h")) == 0
