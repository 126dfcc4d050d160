"""GuardedMemory: refusals before the backend, out-of-scope drops, expiry, over-fetch, errors, logs."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from memoryport import (
    BackendError,
    Capability,
    GuardedMemory,
    InvalidInput,
    Limits,
    MemoryHit,
    MemoryRecord,
    MemoryScope,
    MetadataValue,
    SearchResults,
    UnsupportedCapability,
    UsageError,
)
from memoryport._records import utcnow

from .dictstore import ALL, DictStore

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")
SECRET = "the-secret-text"


class Spy(DictStore):
    """A correct store that records every call the guard makes."""

    name = "spy"

    def __init__(self, capabilities: frozenset[Capability] = ALL) -> None:
        super().__init__(capabilities)
        self.calls: list[tuple[str, Any]] = []

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        self.calls.append(("add", list(records)))
        return await super().add(records)

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        self.calls.append(("search", (query, k, filters)))
        return await super().search(query, scope=scope, k=k, filters=filters)

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        self.calls.append(("get", id))
        return await super().get(id, scope=scope)

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        self.calls.append(("delete", ids))
        return await super().delete(ids, scope=scope)

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        self.calls.append(("export", scope))
        return await super().export(scope)

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        self.calls.append(("purge", created_before))
        return await super().purge(now=now, created_before=created_before)


def rec(scope: MemoryScope = ANN, text: str = "hello", **kw: Any) -> MemoryRecord:
    return MemoryRecord(scope=scope, text=text, **kw)


# -- refusals before the backend is called --------------------------------------

REFUSALS = [
    (Capability.SESSION_SCOPE, lambda m: m.add([rec(MemoryScope(user_id="a", session_id="s"))])),
    (Capability.SESSION_SCOPE, lambda m: m.search("", scope=MemoryScope(user_id="a", session_id="s"))),
    (Capability.AGENT_SCOPE, lambda m: m.add([rec(MemoryScope(user_id="a", agent_id="x"))])),
    (Capability.AGENT_SCOPE, lambda m: m.delete(scope=MemoryScope(user_id="a", agent_id="x"))),
    (Capability.METADATA, lambda m: m.add([rec(), rec(metadata={"k": 1})])),
    (Capability.EXPIRY, lambda m: m.add([rec(expires_at=utcnow() + timedelta(days=1))])),
    (Capability.FILTERS, lambda m: m.search("x", scope=ANN, filters={"k": 1})),
    (Capability.GET, lambda m: m.get("id", scope=ANN)),
    (Capability.DELETE, lambda m: m.delete(["id"], scope=ANN)),
    (Capability.DELETE, lambda m: m.delete(scope=ANN)),
    (Capability.EXPORT, lambda m: m.export(ANN)),
    (Capability.PURGE, lambda m: m.purge()),
]


@pytest.mark.parametrize(("capability", "call"), REFUSALS)
async def test_missing_capability_refused_before_backend(capability: Capability, call: Any) -> None:
    # A graph must be erasable: a store without delete cannot declare one.
    spy = Spy(ALL - {capability} - ({Capability.GRAPH} if capability is Capability.DELETE else set()))
    memory = GuardedMemory(spy)
    with pytest.raises(UnsupportedCapability) as info:
        await call(memory)
    assert info.value.capability == capability.value and info.value.backend == "spy"
    assert capability.value in str(info.value)
    assert spy.calls == [], "the backend was called although the capability is missing"


async def test_empty_filters_need_no_capability() -> None:
    spy = Spy(ALL - {Capability.FILTERS})
    await GuardedMemory(spy).search("x", scope=ANN, filters={})
    assert spy.calls == [("search", ("x", 5, None))]


def test_user_only() -> None:
    assert GuardedMemory(Spy(frozenset({Capability.GET}))).user_only
    assert not GuardedMemory(Spy()).user_only
    spy = Spy()
    assert repr(GuardedMemory(spy)) == f"GuardedMemory({spy!r})"


# -- the way out: scope, expiry, retention -----------------------------------------


class Leaky(Spy):
    """Returns Ben's record to everyone (a backend bug the guard must contain)."""

    def __init__(self) -> None:
        super().__init__()
        self.ben = rec(BEN, SECRET, id="ben-1")

    async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
        hits = await super().search(query, scope=scope, k=k, filters=filters)
        return [MemoryHit(record=self.ben, score=9.0), *hits]

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        return self.ben

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return [self.ben, *(await super().export(scope))]


async def test_out_of_scope_records_are_dropped_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    memory = GuardedMemory(Leaky())
    await memory.add([rec(text="ann's own")])
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        hits = await memory.search("", scope=ANN)
        got = await memory.get("ben-1", scope=ANN)
        exported = await memory.export(ANN)
    assert [h.record.text for h in hits] == ["ann's own"]
    assert got is None
    assert [r.text for r in exported] == ["ann's own"]
    assert memory.dropped_out_of_scope == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3 and all("outside the query's scope" in r.getMessage() for r in warnings)
    assert SECRET not in caplog.text and "ben" not in caplog.text


class Flooding(Spy):
    """Returns 500 of Ben's records on every search and export: the guard logs one line per call."""

    def __init__(self) -> None:
        super().__init__()
        self.bens = [rec(BEN, f"{SECRET} {i}", id=f"ben-{i}") for i in range(500)]

    async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
        hits = await super().search(query, scope=scope, k=k, filters=filters)
        return [*(MemoryHit(record=r, score=9.0) for r in self.bens), *hits]

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return [*self.bens, *(await super().export(scope))]


async def test_a_leaking_store_logs_one_warning_per_call_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    memory = GuardedMemory(Flooding())
    await memory.add([rec(text="ann's own")])
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        hits = await memory.search("", scope=ANN, k=3)
        exported = await memory.export(ANN)
    assert [h.record.text for h in hits] == ["ann's own"]
    assert [r.text for r in exported] == ["ann's own"]
    # search fetched more than once (its results were short), so it dropped 500 per fetch
    assert memory.dropped_out_of_scope > 1000
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    search_drops = memory.dropped_out_of_scope - 500
    assert warnings == [
        f"backend 'spy' returned {search_drops} record(s) outside the query's scope in search; "
        "dropped them (a backend bug)",
        "backend 'spy' returned 500 record(s) outside the query's scope in export; dropped them (a backend bug)",
    ]
    assert SECRET not in caplog.text


async def test_expired_records_are_hidden() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    now = utcnow()
    ids = await memory.add(
        [
            rec(text="gone", created_at=now - timedelta(hours=2), expires_at=now - timedelta(hours=1)),
            rec(text="live", expires_at=now + timedelta(hours=1)),
        ]
    )
    assert [h.record.text for h in await memory.search("", scope=ANN)] == ["live"]
    assert await memory.get(ids[0], scope=ANN) is None
    assert [r.text for r in await memory.export(ANN)] == ["live"]
    assert len(spy.rows) == 2  # hidden, not deleted: purge removes
    assert await memory.purge() == 1
    assert len(spy.rows) == 1


async def test_retention_hides_old_records_and_purge_gets_the_cutoff() -> None:
    spy = Spy()
    memory = GuardedMemory(spy, retention_days=1)
    assert memory.retention_days == 1
    now = utcnow()
    ids = await memory.add([rec(text="old", created_at=now - timedelta(days=2)), rec(text="new")])
    assert [h.record.text for h in await memory.search("", scope=ANN)] == ["new"]
    assert await memory.get(ids[0], scope=ANN) is None
    assert [r.text for r in await memory.export(ANN)] == ["new"]
    assert await memory.purge() == 1
    cutoff = spy.calls[-1][1]
    assert cutoff is not None and abs((utcnow() - cutoff) - timedelta(days=1)) < timedelta(seconds=5)


@pytest.mark.parametrize("days", [0, -1])
def test_retention_must_be_positive(days: float) -> None:
    with pytest.raises(InvalidInput):
        GuardedMemory(Spy(), retention_days=days)


async def test_over_fetch_still_returns_k() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    now = utcnow()
    expired = [
        rec(text=f"expired {i}", created_at=now - timedelta(minutes=i + 1), expires_at=now - timedelta(seconds=1))
        for i in range(5)
    ]
    live = [rec(text=f"live {i}", created_at=now - timedelta(hours=i + 1)) for i in range(3)]
    await memory.add(expired + live)
    spy.calls.clear()
    hits = await memory.search("", scope=ANN, k=2)
    assert [h.record.text for h in hits] == ["live 0", "live 1"]
    assert [c[1][1] for c in spy.calls] == [2, 8]


async def test_over_fetch_stops_when_the_backend_runs_out() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    now = utcnow()
    await memory.add([rec(text="x", created_at=now - timedelta(hours=1), expires_at=now - timedelta(seconds=1))])
    spy.calls.clear()
    assert await memory.search("", scope=ANN, k=3) == []
    assert len(spy.calls) == 1


# -- search ------------------------------------------------------------------------


async def test_blank_query_lists_newest_and_reaches_the_backend_as_empty() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    now = utcnow()
    await memory.add([rec(text=f"r{i}", created_at=now - timedelta(minutes=i)) for i in range(4)])
    events: list[Any] = []
    hits = await memory.search("   ", scope=ANN, k=3, ctx=events.append)
    assert [h.record.text for h in hits] == ["r0", "r1", "r2"]
    assert spy.calls[-1] == ("search", ("", 3, None))
    assert isinstance(hits, SearchResults) and hits.mode == "recent" and events[-1].mode == "recent"


async def test_hits_are_sorted_best_first_and_mode_reported() -> None:
    class Unsorted(Spy):
        async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
            return SearchResults(
                [MemoryHit(record=rec(text=t), score=s, signal="vector") for t, s in (("b", 0.2), ("a", 0.9))],
                mode="vector",
            )

    hits = await GuardedMemory(Unsorted()).search("q", scope=ANN)
    assert [h.record.text for h in hits] == ["a", "b"] and hits.mode == "vector"  # type: ignore[attr-defined]


async def test_search_input_checks() -> None:
    spy = Spy()
    memory = GuardedMemory(spy, limits=Limits(max_query_chars=10, max_k=20))
    for kwargs in ({"k": 0}, {"k": 21}, {"k": True}, {"k": 2.0}):
        with pytest.raises(InvalidInput) as info:
            await memory.search("q", scope=ANN, **kwargs)
        assert info.value.field == "k"
    with pytest.raises(InvalidInput) as info:
        await memory.search(SECRET, scope=ANN)
    assert info.value.limit == "max_query_chars" and SECRET not in str(info.value)
    with pytest.raises(InvalidInput):
        await memory.search("a\x00", scope=ANN)
    with pytest.raises(UsageError):
        await memory.search(5, scope=ANN)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="scope is required"):
        await memory.search("q")
    with pytest.raises(UsageError, match="MemoryScope"):
        await memory.search("q", scope={"user_id": "ann"})  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await memory.search("q", scope=ANN, filters=[("k", 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await memory.search("q", scope=ANN, filters={"k": [1]})  # type: ignore[dict-item]
    with pytest.raises(InvalidInput):
        await memory.search("q", scope=ANN, filters={"": 1})
    assert spy.calls == []


# -- add, get, delete ---------------------------------------------------------------


async def test_add_assigns_missing_ids_and_keeps_given_ones() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    ids = await memory.add([rec(id="mine"), rec()])
    assert ids[0] == "mine" and len(ids[1]) == 32
    assert [r.id for r in spy.calls[0][1]] == ids


async def test_add_refusals_store_nothing() -> None:
    spy = Spy()
    memory = GuardedMemory(spy, limits=Limits(max_batch=3, max_text_chars=10))
    assert await memory.add([]) == []
    with pytest.raises(InvalidInput) as info:
        await memory.add([rec()] * 4)
    assert info.value.limit == "max_batch"
    with pytest.raises(InvalidInput) as info:
        await memory.add([rec(), rec(text=SECRET)])
    assert info.value.field == "records[1].text" and SECRET not in str(info.value)
    with pytest.raises(InvalidInput, match="repeats"):
        await memory.add([rec(id="x"), rec(id="x")])
    with pytest.raises(UsageError):
        await memory.add(rec())  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await memory.add(["text"])  # type: ignore[list-item]
    assert spy.calls == [] and spy.rows == {}


async def test_get_and_delete_input() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    with pytest.raises(InvalidInput):
        await memory.get("", scope=ANN)
    with pytest.raises(UsageError):
        await memory.delete("id", scope=ANN)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await memory.delete(["ok", 5], scope=ANN)  # type: ignore[list-item]
    with pytest.raises(InvalidInput) as info:
        await GuardedMemory(spy, limits=Limits(max_ids=2)).delete(["a", "b", "c"], scope=ANN)
    assert info.value.limit == "max_ids"
    assert spy.calls == []


async def test_delete_empty_list_deletes_nothing_and_skips_the_backend() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    await memory.add([rec(), rec()])
    spy.calls.clear()
    assert await memory.delete([], scope=ANN) == 0
    assert spy.calls == [] and len(spy.rows) == 2


async def test_delete_deduplicates_ids() -> None:
    spy = Spy()
    memory = GuardedMemory(spy)
    [rid] = await memory.add([rec()])
    assert await memory.delete([rid, rid], scope=ANN) == 1
    assert spy.calls[-1] == ("delete", [rid])


# -- backend failures ------------------------------------------------------------------


class Failing(Spy):
    async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
        raise RuntimeError(f"connection to db failed while searching {query}")


async def test_backend_errors_are_chained_and_logs_carry_only_the_type(caplog: pytest.LogCaptureFixture) -> None:
    memory = GuardedMemory(Failing())
    with caplog.at_level(logging.DEBUG, logger="memoryport"), pytest.raises(BackendError) as info:
        await memory.search(SECRET, scope=ANN)
    err = info.value
    assert isinstance(err.__cause__, RuntimeError)
    assert (err.backend, err.operation) == ("spy", "search")
    assert "RuntimeError" in str(err) and SECRET not in str(err)
    assert "RuntimeError" in caplog.text
    assert SECRET not in caplog.text and "connection to db" not in caplog.text


async def test_memoryport_errors_pass_through_unwrapped() -> None:
    class Refusing(Spy):
        async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
            raise UnsupportedCapability("no", capability="export", backend="spy")

    with pytest.raises(UnsupportedCapability):
        await GuardedMemory(Refusing()).export(ANN)


class Wrong(Spy):
    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        return {"count": ["a"], "repeat": ["a", "a"], "none": [None, None]}[self.what]  # type: ignore[list-item]

    async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
        return ["not a hit"]  # type: ignore[list-item]

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        return True

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return [{"text": "dict"}]  # type: ignore[list-item]


@pytest.mark.parametrize("what", ["count", "repeat", "none"])
async def test_bad_ids_from_the_backend_are_backend_errors(what: str) -> None:
    with pytest.raises(BackendError) as info:
        await GuardedMemory(Wrong(what)).add([rec(), rec()])
    assert info.value.operation == "add"


async def test_bad_shapes_from_the_backend_are_backend_errors() -> None:
    memory = GuardedMemory(Wrong("count"))
    with pytest.raises(BackendError, match="MemoryHit"):
        await memory.search("q", scope=ANN)
    with pytest.raises(BackendError, match="count"):
        await memory.delete(scope=ANN)
    with pytest.raises(BackendError, match="MemoryRecord"):
        await memory.export(ANN)


# -- construction ---------------------------------------------------------------------


def test_construction_errors() -> None:
    with pytest.raises(UsageError, match="GuardedMemory"):
        GuardedMemory(GuardedMemory(Spy()))  # type: ignore[arg-type]

    class Half:
        name = "half"
        capabilities = frozenset()

        async def add(self, records: Any) -> list[str]:
            return []

    with pytest.raises(UsageError, match="search"):
        GuardedMemory(Half())  # type: ignore[arg-type]

    with pytest.raises(UsageError, match="unknown capability"):
        GuardedMemory(Spy(frozenset({"teleport"})))  # type: ignore[arg-type]


async def test_aclose_and_context_manager() -> None:
    class Closing(Spy):
        closed = 0

        async def aclose(self) -> None:
            self.closed += 1

    port = Closing()
    async with GuardedMemory(port) as memory:
        await memory.add([rec()])
    assert port.closed == 1
    await GuardedMemory(Spy()).aclose()  # a port without aclose is fine
