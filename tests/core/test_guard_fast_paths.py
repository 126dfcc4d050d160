"""The guard's shortcuts equal its general paths: one plain record's add, a search with nothing to re-check.

The one-record add skips the record-by-record checks when a glance shows none
of them could refuse the record (``GuardedMemory._plain_batch``); these tests
run every kind of record through both paths (the second forced record by
record) and compare what is stored, returned, emitted and raised, and check
that the shortcut is taken exactly for the records it may handle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from memoryport import (
    BackendError,
    Capability,
    GuardedMemory,
    InvalidInput,
    Limits,
    MemoryEvent,
    MemoryHit,
    MemoryRecord,
    MemoryScope,
)
from memoryport._events import current_sink
from memoryport._records import utcnow

from .dictstore import ALL, DictStore, IgnoresSince

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
NOW = utcnow()


class Subrecord(MemoryRecord):
    """A MemoryRecord subclass: the shortcut must leave it to the record-by-record checks."""


@dataclass(frozen=True)
class StrictLimits(Limits):
    """A Limits subclass (it may refuse more): never the shortcut."""


# (name, the record, the guard's limits, the store's capabilities, whether the shortcut may take it)
CASES: list[tuple[str, Callable[[], MemoryRecord], Limits, frozenset[Capability], bool]] = [
    ("plain", lambda: MemoryRecord(scope=ANN, text="Ann likes tea"), Limits(), ALL, True),
    ("empty metadata", lambda: MemoryRecord(scope=ANN, text="t", metadata={}), Limits(), ALL, True),
    ("text at the limit", lambda: MemoryRecord(scope=ANN, text="x" * 10), Limits(max_text_chars=10), ALL, True),
    (
        "created long ago",
        lambda: MemoryRecord(scope=ANN, text="t", created_at=NOW - timedelta(days=400)),
        Limits(),
        ALL,
        True,
    ),
    (
        "created within the tolerance",
        lambda: MemoryRecord(scope=ANN, text="t", created_at=utcnow() + timedelta(seconds=1)),
        Limits(),
        ALL,
        True,
    ),
    (
        "session scope",
        lambda: MemoryRecord(scope=MemoryScope(user_id="ann", session_id="s1"), text="t"),
        Limits(),
        ALL,
        True,
    ),
    ("given id", lambda: MemoryRecord(scope=ANN, text="t", id="given-1"), Limits(), ALL, False),
    ("id too long", lambda: MemoryRecord(scope=ANN, text="t", id="x" * 20), Limits(max_id_chars=10), ALL, False),
    ("metadata", lambda: MemoryRecord(scope=ANN, text="t", metadata={"kind": "fact"}), Limits(), ALL, False),
    (
        "metadata over the key limit",
        lambda: MemoryRecord(scope=ANN, text="t", metadata={"a": 1, "b": 2}),
        Limits(max_metadata_keys=1),
        ALL,
        False,
    ),
    (
        "metadata without the capability",
        lambda: MemoryRecord(scope=ANN, text="t", metadata={"kind": "fact"}),
        Limits(),
        ALL - {Capability.METADATA},
        False,
    ),
    (
        "expiry",
        lambda: MemoryRecord(scope=ANN, text="t", expires_at=NOW + timedelta(days=1)),
        Limits(),
        ALL,
        False,
    ),
    (
        "expiry without the capability",
        lambda: MemoryRecord(scope=ANN, text="t", expires_at=NOW + timedelta(days=1)),
        Limits(),
        ALL - {Capability.EXPIRY},
        False,
    ),
    ("text over the limit", lambda: MemoryRecord(scope=ANN, text="x" * 11), Limits(max_text_chars=10), ALL, False),
    (
        "created in the future",
        lambda: MemoryRecord(scope=ANN, text="t", created_at=utcnow() + timedelta(hours=1)),
        Limits(),
        ALL,
        False,
    ),
    ("a subclass", lambda: Subrecord(scope=ANN, text="t"), Limits(), ALL, False),
    ("a Limits subclass", lambda: MemoryRecord(scope=ANN, text="t"), StrictLimits(), ALL, False),
    ("unvalidated, no text", lambda: MemoryRecord.model_construct(scope=ANN), Limits(), ALL, False),
    # The scope is checked on both paths: the shortcut may take these, and must refuse them as the other does.
    (
        "scope id too long",
        lambda: MemoryRecord(scope=MemoryScope(user_id="x" * 20), text="t"),
        Limits(max_id_chars=10),
        ALL,
        True,
    ),
    (
        "session scope without the capability",
        lambda: MemoryRecord(scope=MemoryScope(user_id="ann", session_id="s1"), text="t"),
        Limits(),
        ALL - {Capability.SESSION_SCOPE},
        True,
    ),
]
IDS = [case[0] for case in CASES]


class RecordByRecord(GuardedMemory[Any]):
    """The guard with its shortcut turned off: every batch goes record by record."""

    def _plain_batch(self, batch: list[MemoryRecord], now: Any) -> bool:
        return False


async def outcome(guard_type: type[GuardedMemory[Any]], record: MemoryRecord, limits: Limits, caps: Any) -> Any:
    """What an add of ``[record]`` stored, returned, emitted and raised, ids reduced to their shape."""
    store = DictStore(caps)
    events: list[MemoryEvent] = []
    guard = guard_type(store, limits=limits, sink=events.append)
    try:
        ids = await guard.add([record])
    except Exception as exc:  # whatever it is, both paths must raise the same
        result: Any = ("raised", type(exc).__name__, str(exc), getattr(exc, "field", None))
    else:
        stored = await store.export(record.scope)
        result = (
            "stored",
            [(len(i), i == record.id) for i in ids],
            [
                (r.id == i, r.text, r.scope, r.metadata, r.created_at, r.expires_at)
                for r, i in zip(stored, ids, strict=True)
            ],
        )
    return result, [(e.name, e.count, e.scope_kind, e.error) for e in events]


@pytest.mark.parametrize(("name", "make", "limits", "caps", "shortcut"), CASES, ids=IDS)
async def test_one_record_add_is_the_same_through_the_shortcut_and_record_by_record(
    name: str, make: Callable[[], MemoryRecord], limits: Limits, caps: Any, shortcut: bool
) -> None:
    record = make()
    assert await outcome(GuardedMemory, record, limits, caps) == await outcome(RecordByRecord, record, limits, caps)


@pytest.mark.parametrize(("name", "make", "limits", "caps", "shortcut"), CASES, ids=IDS)
def test_the_shortcut_takes_exactly_the_records_no_per_record_check_could_refuse(
    name: str, make: Callable[[], MemoryRecord], limits: Limits, caps: Any, shortcut: bool
) -> None:
    guard = GuardedMemory(DictStore(caps), limits=limits)
    assert guard._plain_batch([make()], utcnow()) is shortcut


async def test_a_plain_record_skips_the_record_by_record_checks() -> None:
    checked: list[int] = []

    class Watched(GuardedMemory[Any]):
        def _check_records(self, batch: list[MemoryRecord], now: Any) -> tuple[list[str], bool]:
            checked.append(len(batch))
            return super()._check_records(batch, now)

    guard = Watched(DictStore())
    await guard.add([MemoryRecord(scope=ANN, text="plain")])
    await guard.add([MemoryRecord(scope=ANN, text="a"), MemoryRecord(scope=ANN, text="b")])
    assert checked == []
    await guard.add([MemoryRecord(scope=ANN, text="with an id", id="x1")])
    assert checked == [1]


@pytest.mark.parametrize("size", [1, 2, 5])
async def test_plain_batches_get_fresh_distinct_ids(size: int) -> None:
    store = DictStore()
    ids = await GuardedMemory(store).add([MemoryRecord(scope=ANN, text=f"t{i}") for i in range(size)])
    assert len(set(ids)) == size and all(len(i) == 32 and i[12] == "7" for i in ids)
    assert sorted(r.id for r in await store.export(ANN)) == sorted(ids)


# -- search: the hits are re-checked against filters and ranges only when there are some --------------


async def test_a_search_without_filters_still_drops_what_the_scope_or_expiry_hides() -> None:
    store = DictStore()
    guard = GuardedMemory(store)
    ben = MemoryScope(user_id="ben")
    await store.add([MemoryRecord(scope=ben, text="tea for ben", id="b1")])
    await store.add([MemoryRecord(scope=ANN, text="tea for ann", id="a1")])
    gone = MemoryRecord(scope=ANN, text="tea gone", id="a2", created_at=NOW - timedelta(days=2))
    await store.add([gone.model_copy(update={"expires_at": NOW - timedelta(days=1)})])

    class Leaky(DictStore):
        async def search(self, query: str, **kwargs: Any) -> Sequence[Any]:
            kwargs["scope"] = MemoryScope(user_id="ben")
            leaked = await store.search(query, **kwargs)
            kwargs["scope"] = ANN
            return [*leaked, *await store.search(query, **kwargs)]

    leaky = GuardedMemory(Leaky())
    hits = await leaky.search("tea", scope=ANN, k=5)
    assert [h.record.id for h in hits] == ["a1"]
    assert leaky.dropped_out_of_scope == 1 and leaky.dropped_not_matching == 0
    assert [h.record.id for h in await guard.search("tea", scope=ANN, k=5)] == ["a1"]


async def test_a_search_with_a_range_a_store_ignores_is_still_rechecked() -> None:
    memory = GuardedMemory(IgnoresSince())
    hour = timedelta(hours=1)
    await memory.add(
        [MemoryRecord(scope=ANN, text=f"note {i}", created_at=NOW - timedelta(minutes=1) - i * hour) for i in range(10)]
    )
    hits = await memory.search("", scope=ANN, k=10, since="150m")
    assert len(hits) == 3
    assert memory.dropped_not_matching >= 7


@pytest.mark.parametrize("bad", ["\ud800", "tea \udbff\udc00 time", "\udfff"])
async def test_lone_surrogates_in_a_query_or_a_metadata_value_are_refused(bad: str) -> None:
    guard = GuardedMemory(DictStore())
    with pytest.raises(InvalidInput) as info:
        await guard.search(bad, scope=ANN)
    assert str(info.value) == "query contains a lone surrogate (not encodable as UTF-8)"
    assert info.value.field == "query"
    with pytest.raises(InvalidInput, match="lone surrogate"):
        await guard.add([MemoryRecord(scope=ANN, text="t", metadata={"k": bad})])
    assert await guard.search("tea \U0001f375 time", scope=ANN) == []  # a pair is a character, not a surrogate


async def test_the_operation_in_progress_has_its_own_sink_and_the_previous_one_comes_back() -> None:
    seen: list[object] = []

    class Looking(DictStore):
        async def search(self, query: str, **kwargs: Any) -> Sequence[Any]:
            seen.append(current_sink.get())
            return await super().search(query, **kwargs)

    outer: list[MemoryEvent] = []
    mine: list[MemoryEvent] = []
    quiet = GuardedMemory(Looking())
    listening = GuardedMemory(Looking(), sink=mine.append)
    for previous in (None, outer.append, mine.append):
        token = current_sink.set(previous)
        try:
            await quiet.search("tea", scope=ANN)
            await quiet.search("tea", scope=ANN, ctx=outer.append)
            await listening.search("tea", scope=ANN)
            assert current_sink.get() is previous
        finally:
            current_sink.reset(token)
    assert seen == [None, outer.append, mine.append] * 3
    assert current_sink.get() is None


# -- search: a plain record's visibility checked in the hits' loop (no _visible call) ----------------------


class SubScope(MemoryScope):
    """A MemoryScope subclass: its objects are never remembered as covered."""


class NeverVisible(MemoryRecord):
    """A MemoryRecord subclass that says it has expired: only _visible (which asks it) hides it."""

    def is_expired(self, now: Any) -> bool:
        return True


class FixedHits(DictStore):
    """A store whose search returns the same hits every time, whatever it is asked (a leaking backend)."""

    name = "fixed"

    def __init__(self, hits: list[MemoryHit]) -> None:
        super().__init__()
        self.hits = hits

    async def search(self, query: str, **kwargs: Any) -> list[MemoryHit]:
        return list(self.hits)


def _hit(record: MemoryRecord, score: float) -> MemoryHit:
    return MemoryHit(record=record, score=score, signal="vector")


def mixed_hits() -> list[MemoryHit]:
    """Hits of every kind the loop tells apart, scopes shared between them as SQLite shares them."""
    mine = MemoryScope(user_id="ann")  # one object for several records, not the query's own
    other = MemoryScope(user_id="ben")  # out of the query's scope, shared too
    session = MemoryScope(user_id="ann", session_id="s9")  # covered by a user query, not by a session query
    sub_out = SubScope(user_id="ben")
    day = timedelta(days=1)
    old = NOW - timedelta(days=40)
    made = [
        MemoryRecord(scope=mine, text="a", id="in-1"),
        MemoryRecord(scope=other, text="b", id="out-1"),
        MemoryRecord(scope=mine, text="c", id="in-2"),
        MemoryRecord(scope=other, text="d", id="out-2"),
        MemoryRecord(scope=session, text="e", id="session-1"),
        MemoryRecord(scope=mine, text="f", id="expired", created_at=NOW - 2 * day, expires_at=NOW - day),
        MemoryRecord(scope=mine, text="g", id="expires-later", expires_at=NOW + day),
        MemoryRecord(scope=mine, text="h", id="old", created_at=old),
        MemoryRecord(scope=sub_out, text="i", id="sub-scope-out"),
        MemoryRecord(scope=SubScope(user_id="ann"), text="j", id="sub-scope-in"),
        NeverVisible(scope=mine, text="k", id="subclass"),
        MemoryRecord(scope=mine, text="l", id="in-3"),
        MemoryRecord(scope=sub_out, text="m", id="sub-scope-out-2"),
    ]
    return [_hit(r, 1.0 - i / 100) for i, r in enumerate(made)]


@pytest.mark.parametrize("retention", [None, 30])
@pytest.mark.parametrize(
    "query_scope",
    [ANN, MemoryScope(user_id="ann", session_id="s9"), SubScope(user_id="ann"), MemoryScope(user_id="ben")],
    ids=["user", "session", "subclass", "another user"],
)
async def test_an_unfiltered_search_keeps_exactly_what_visible_keeps(
    query_scope: MemoryScope, retention: int | None
) -> None:
    hits = mixed_hits()
    guard = GuardedMemory(FixedHits(hits), retention_days=retention)
    drops = [0, 0]
    now = utcnow()
    want = [h.record.id for h in hits if guard._visible(h.record, query_scope, now, drops)]
    assert guard.dropped_out_of_scope == drops[0] > 0  # the reference counted its own drops
    got = await guard.search("tea", scope=query_scope, k=len(hits) + 1)  # one call: fewer hits than k
    assert [h.record.id for h in got] == want
    assert guard.dropped_out_of_scope == 2 * drops[0]  # and the search counted the same ones again
    kept_old = ["old"] if retention is None else []
    user = ["in-1", "in-2", "session-1", "expires-later", *kept_old, "sub-scope-in", "in-3"]
    expected = {
        "ann": user,
        "ann/s9": ["session-1"],
        "ben": ["out-1", "out-2", "sub-scope-out", "sub-scope-out-2"],
    }
    assert want == expected[query_scope.user_id + (f"/{query_scope.session_id}" if query_scope.session_id else "")]


@pytest.mark.parametrize("first", [False, True], ids=["after a covered scope", "first hit"])
async def test_a_record_without_a_scope_is_refused_not_shown_to_anyone(first: bool) -> None:
    """A backend that builds records without validation (as SQLite does) and loses a scope.

    _visible raises on it (``None`` has no user id); the loop must not take ``None`` for the
    scope it remembered as covered (it starts with none remembered) and show the record to any user.
    """
    lost = MemoryHit.model_construct(
        record=MemoryRecord.model_construct(id="lost", scope=None, text="Ben's secret"), score=0.5, signal="vector"
    )
    fine = _hit(MemoryRecord(scope=ANN, text="mine", id="mine"), 0.9)
    guard = GuardedMemory(FixedHits([lost, fine] if first else [fine, lost]))
    with pytest.raises(BackendError):
        await guard.search("secret", scope=ANN)
    with pytest.raises(BackendError):
        await guard.search("secret", scope=MemoryScope(user_id="ben"))


@pytest.mark.parametrize("retention", [None, 30])
async def test_the_loop_and_visible_agree_at_the_exact_expiry_and_retention_instants(
    monkeypatch: pytest.MonkeyPatch, retention: int | None
) -> None:
    import memoryport._guard as guard_module

    at = utcnow()
    monkeypatch.setattr(guard_module, "utcnow", lambda: at)  # the guard's clock, the same for both
    tick = timedelta(microseconds=1)
    cut = at - timedelta(days=30)
    made = [
        MemoryRecord(scope=ANN, text="a", id="expires-now", created_at=at - tick, expires_at=at),
        MemoryRecord(scope=ANN, text="b", id="expires-next", created_at=at - tick, expires_at=at + tick),
        MemoryRecord(scope=ANN, text="c", id="at-the-cut", created_at=cut),
        MemoryRecord(scope=ANN, text="d", id="before-the-cut", created_at=cut - tick),
    ]
    hits = [_hit(r, 1.0 - i / 10) for i, r in enumerate(made)]
    guard = GuardedMemory(FixedHits(hits), retention_days=retention)
    want = [h.record.id for h in hits if guard._visible(h.record, ANN, at, [0, 0])]
    got = await guard.search("tea", scope=ANN, k=len(hits) + 1)
    assert [h.record.id for h in got] == want
    assert want == ["expires-next", "at-the-cut", *(["before-the-cut"] if retention is None else [])]
