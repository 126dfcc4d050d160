"""MemoryContract: the tests every memoryport backend must pass.

Long on purpose: one class a store owner subclasses, each test's docstring its
manual; split, a reader would chase one contract across files.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from memoryport._errors import InvalidInput, UnsupportedCapability, UsageError
from memoryport._events import MemoryEvent
from memoryport._guard import GuardedMemory
from memoryport._port import Capability, SupportsSettle
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope

from ._graph_tests import GRAPH_BASE_TESTS, GRAPH_TESTS, GraphContract
from ._port_tests import PORT_BASE_TESTS, PORT_TESTS, PortContract

__all__ = ["BASE_TESTS", "CONTRACT_TESTS", "MemoryContract"]

# What each contract test depends on (None: nothing, it runs the same on every
# backend). With the capability declared the test checks that it works; without
# it, that it is refused with UnsupportedCapability (search-only capabilities,
# which nothing can refuse, are skipped instead).
CONTRACT_TESTS: dict[str, Capability | None] = {
    "test_memory_is_guarded": None,
    "test_add_returns_unique_ids_in_order": None,
    "test_empty_query_lists_newest_first": None,
    "test_k_is_respected": None,
    "test_users_are_isolated": None,
    "test_session_scope": Capability.SESSION_SCOPE,
    "test_agent_scope": Capability.AGENT_SCOPE,
    "test_get_round_trips_a_record": Capability.GET,
    "test_other_scopes_ids_answer_none_and_zero": None,
    "test_delete_by_ids": Capability.DELETE,
    "test_erasing_a_user_removes_exactly_that_user": Capability.DELETE,
    "test_export_is_complete_and_oldest_first": Capability.EXPORT,
    "test_metadata_round_trips": Capability.METADATA,
    "test_filters_match_metadata_exactly": Capability.FILTERS,
    "test_expired_records_never_come_back": Capability.EXPIRY,
    "test_purge_removes_expired_records": Capability.PURGE,
    "test_keyword_search_finds_words": Capability.KEYWORD_SEARCH,
    "test_vector_search_ranks_identical_text_first": Capability.VECTOR_SEARCH,
    **PORT_TESTS,
    **GRAPH_TESTS,
    "test_invalid_input_is_refused_and_nothing_stored": None,
    "test_sync_twins_give_what_async_gives": None,
    "test_sync_twin_inside_event_loop_names_await": None,
    "test_events_carry_no_content": None,
    "test_random_operations_match_a_model": None,
    "test_no_silent_opt_outs": None,
}

# Items no backend can waive: overriding them fails test_no_silent_opt_outs,
# even with an xfail. The others may be opted out with a reasoned strict xfail.
BASE_TESTS: frozenset[str] = frozenset(
    {
        "test_memory_is_guarded",
        "test_add_returns_unique_ids_in_order",
        "test_empty_query_lists_newest_first",
        "test_k_is_respected",
        "test_users_are_isolated",
        "test_session_scope",
        "test_agent_scope",
        "test_other_scopes_ids_answer_none_and_zero",
        "test_erasing_a_user_removes_exactly_that_user",
        "test_export_is_complete_and_oldest_first",
        "test_expired_records_never_come_back",
        "test_invalid_input_is_refused_and_nothing_stored",
        "test_sync_twins_give_what_async_gives",
        "test_events_carry_no_content",
        "test_random_operations_match_a_model",
        "test_no_silent_opt_outs",
        *PORT_BASE_TESTS,
        *GRAPH_BASE_TESTS,
    }
)

# Undeclared capabilities that nothing can refuse: search is always callable,
# so a backend without keyword or vector search simply skips those tests.
_NOTHING_TO_REFUSE = frozenset({Capability.KEYWORD_SEARCH, Capability.VECTOR_SEARCH})

_VOCABULARY = (
    "apple", "harbour", "violin", "granite", "meadow", "lantern", "pepper", "glacier",
    "saddle", "orchid", "compass", "thunder", "biscuit", "falcon", "marble", "velvet",
)  # fmt: skip


def _token() -> str:
    return secrets.token_hex(6)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _ids(hits: Sequence[MemoryHit]) -> list[str | None]:
    return [h.record.id for h in hits]


@dataclass
class _Op:
    """One step of the random operation sequence."""

    kind: str  # add | delete | erase | check
    scope: int
    count: int = 1
    pick: int = 0


class MemoryContract(PortContract, GraphContract):
    """Subclass this and override the ``memory`` fixture to certify a store.

    Every test picks fresh random scopes, so the store need not be empty, and
    is chosen by ``memory.capabilities``: a declared capability must work, an
    undeclared one must raise :class:`~memoryport.UnsupportedCapability`.

    Example:
        In a test file of your project::

            import pytest
            from memoryport import GuardedMemory
            from memoryport.contracts import MemoryContract

            class TestMyStore(MemoryContract):
                @pytest.fixture
                async def memory(self):
                    m = GuardedMemory(MyStore())
                    yield m
                    await m.aclose()

        and, in ``conftest.py``, ``pytest_plugins = ["memoryport.contracts"]``
        for the summary table at the end of the run.
    """

    pytestmark = pytest.mark.anyio

    #: How many random operation sequences the property test tries.
    hypothesis_examples: int = 25
    #: How many records the export test writes (well beyond any page size).
    export_records: int = 1_500

    # -- fixtures a store owner may override ---------------------------------

    @pytest.fixture
    def anyio_backend(self) -> str:
        """The suite runs on asyncio, so store owners need no async configuration."""
        return "asyncio"

    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory]:
        """Override this: yield what a host would hold, e.g. ``GuardedMemory(MyStore())``."""
        pytest.fail(
            f"{type(self).__name__} must override the `memory` fixture: "
            "@pytest.fixture async def memory(self): yield GuardedMemory(MyStore())"
        )
        yield  # pragma: no cover

    async def settle(self, memory: GuardedMemory) -> None:
        """Awaited after every write: calls ``memory.store.settle()`` when the store has one.

        An eventually consistent store implements :class:`~memoryport.SupportsSettle`;
        override this only when waiting needs something the store cannot do itself.
        """
        if isinstance(memory.store, SupportsSettle):
            await memory.store.settle()

    @pytest.fixture(autouse=True)
    def _memoryport_leak_check(self, request: pytest.FixtureRequest, anyio_backend: Any, memory: Any) -> Iterator[None]:
        """Fail when the backend itself returned another scope's record during the test."""
        if not isinstance(memory, GuardedMemory):
            pytest.fail(
                f"the memory fixture yielded a {type(memory).__name__}; yield what a host holds: "
                "GuardedMemory(YourStore()) or what a built-in constructor such as SQLiteMemory returns"
            )
        from ._plugin import note_capabilities

        note_capabilities(request.node, memory)
        before = memory.dropped_out_of_scope
        mismatched = memory.dropped_not_matching
        yield
        leaked = memory.dropped_out_of_scope - before
        if leaked:
            pytest.fail(
                f"the backend {memory.backend!r} returned {leaked} record(s) outside the query's scope "
                "during this test. The guard hid them from the host, but the backend leaks: check that "
                "search, get and export filter by every id the query scope sets (user_id equality, "
                "including user_id None, and session_id/agent_id where set)."
            )
        wrong = memory.dropped_not_matching - mismatched
        if wrong:
            pytest.fail(
                f"the backend {memory.backend!r} returned {wrong} record(s) that fail the filters or the "
                "since/until range it was given during this test. The guard hid them from the host, but "
                "the store mis-runs them: check every filter and operator it declares (JSON types kept "
                "apart: 1, '1' and True differ) and since <= created_at < until."
            )

    # -- helpers --------------------------------------------------------------

    def _user(self, **ids: str) -> MemoryScope:
        """A fresh user scope (random ids), optionally with session/agent ids."""
        return MemoryScope(user_id=f"mp-contract-{_token()}", **ids)

    async def _add(self, memory: GuardedMemory, records: Sequence[MemoryRecord]) -> list[str]:
        """Add records and let the store settle."""
        ids = await memory.add(records)
        await self.settle(memory)
        return ids

    async def _listed(self, memory: GuardedMemory, scope: MemoryScope, k: int = 100) -> list[MemoryHit]:
        """Everything the newest-first listing returns for ``scope``."""
        return await memory.search("", scope=scope, k=k)

    @staticmethod
    def _text(*words: str) -> str:
        """A record text: the given words plus a random token."""
        return " ".join((*words, f"tok{_token()}"))

    @staticmethod
    def _has(memory: GuardedMemory, capability: Capability) -> bool:
        return capability in memory.capabilities

    # -- base items -----------------------------------------------------------

    async def test_memory_is_guarded(self, memory: GuardedMemory) -> None:
        """The fixture yields a GuardedMemory with a name and a set of capabilities.

        Troubleshooting: yield ``GuardedMemory(YourStore())`` (or a built-in class); give
        your store a ``name`` string and a ``capabilities`` frozenset of ``Capability``.
        """
        assert isinstance(memory, GuardedMemory)
        assert isinstance(memory.backend, str) and memory.backend
        assert all(isinstance(c, Capability) for c in memory.capabilities)

    async def test_add_returns_unique_ids_in_order(self, memory: GuardedMemory) -> None:
        """``add`` returns one unique id per record, in order, across batches.

        Troubleshooting: return ``[r.id for r in records]`` (the guard assigns ids) or your
        own ids in input order; never reuse an id. If ``get`` is declared, ``get(ids[i])``
        must return ``records[i]``.
        """
        scope = self._user()
        first = [MemoryRecord(scope=scope, text=self._text("first", str(i))) for i in range(5)]
        second = [MemoryRecord(scope=scope, text=self._text("second", str(i))) for i in range(5)]
        ids = await self._add(memory, first)
        ids += await self._add(memory, second)
        assert len(ids) == 10, f"add returned {len(ids)} ids for 10 records"
        assert all(isinstance(i, str) and i for i in ids), "ids must be non-empty strings"
        assert len(set(ids)) == 10, "add returned a repeated id"
        if self._has(memory, Capability.GET):
            for record_id, record in zip(ids, first + second, strict=True):
                got = await memory.get(record_id, scope=scope)
                assert got is not None, "get(id) of an id that add returned gave None"
                assert got.text == record.text, "ids are not in the order of the records"
        listed = {h.record.id for h in await self._listed(memory, scope)}
        assert listed == set(ids), "the newest-first listing does not return the ids add returned"

    async def test_empty_query_lists_newest_first(self, memory: GuardedMemory) -> None:
        """``search("")`` returns the newest records of the scope, newest first.

        Troubleshooting: for an empty query, order by ``created_at`` descending (the record's
        field, not your insertion time) and return the first ``k``; the guard re-sorts only what
        you return, so returning arbitrary records gives the wrong ones.
        """
        scope = self._user()
        base = _now() - timedelta(hours=1)
        records = [
            MemoryRecord(scope=scope, text=self._text("event", str(i)), created_at=base - timedelta(minutes=i))
            for i in range(8)
        ]
        # Neither newest-first nor oldest-first: insertion order (either way) cannot pass by luck.
        shuffled = [records[i] for i in (3, 7, 0, 5, 1, 6, 2, 4)]
        ids = await self._add(memory, shuffled)
        by_text = dict(zip((r.text for r in shuffled), ids, strict=True))
        hits = await memory.search("", scope=scope, k=3)
        assert [h.record.text for h in hits] == [r.text for r in records[:3]], (
            "search('') did not list the 3 newest records newest first"
        )
        assert [h.record.id for h in hits] == [by_text[r.text] for r in records[:3]]
        everything = await memory.search("", scope=scope, k=20)
        assert [h.record.text for h in everything] == [r.text for r in records]

    async def test_k_is_respected(self, memory: GuardedMemory) -> None:
        """Search returns at most ``k`` hits, and exactly ``min(k, n)`` when ``n`` records match.

        Troubleshooting: pass ``k`` through to your store's limit; do not apply a page size of
        your own below ``k`` and do not stop early.
        """
        scope = self._user()
        await self._add(memory, [MemoryRecord(scope=scope, text=self._text("apple", str(i))) for i in range(7)])
        for k in (1, 3, 7, 10):
            hits = await memory.search("", scope=scope, k=k)
            assert len(hits) == min(k, 7), f"search('', k={k}) returned {len(hits)} hits of 7 records"
            hits = await memory.search("apple", scope=scope, k=k)
            assert len(hits) <= k, f"search('apple', k={k}) returned {len(hits)} hits"
            if self._has(memory, Capability.KEYWORD_SEARCH):
                assert len(hits) == min(k, 7), f"search('apple', k={k}) found {len(hits)} of 7 matching records"

    async def test_users_are_isolated(self, memory: GuardedMemory) -> None:
        """A user's searches, gets and exports never touch another user's records.

        Two users hold the same texts; one user id is a prefix of the other.
        Troubleshooting: filter by ``user_id`` *equality* (not prefix or LIKE) in search, get,
        export and delete; the suite also fails when the guard had to drop a record your store
        returned outside the scope (see the guard's ``dropped_out_of_scope``).
        """
        ann = self._user()
        ann_x = MemoryScope(user_id=f"{ann.user_id}-x")
        ben = self._user()
        words = ("violin", "lesson", "thursday")
        texts = [self._text(*words, str(i)) for i in range(3)]
        await self._add(memory, [MemoryRecord(scope=s, text=t) for s in (ann, ann_x, ben) for t in texts])
        before = memory.dropped_out_of_scope
        for scope in (ann, ann_x, ben):
            for query in ("", "violin lesson", texts[0]):
                hits = await memory.search(query, scope=scope, k=20)
                assert all(h.record.scope == scope for h in hits)
            assert len(await self._listed(memory, scope)) == 3
            if self._has(memory, Capability.EXPORT):
                exported = await memory.export(scope)
                assert len(exported) == 3 and all(r.scope == scope for r in exported)
        assert memory.dropped_out_of_scope == before, (
            f"the backend returned {memory.dropped_out_of_scope - before} record(s) of another user; "
            "the guard dropped them, but the store leaks across users"
        )

    async def _check_sub_scope(self, memory: GuardedMemory, capability: Capability, field: str) -> None:
        user = self._user()
        if capability not in memory.capabilities:
            scoped = self._user(**{field: f"x-{_token()}"})
            with pytest.raises(UnsupportedCapability) as info:
                await memory.add([MemoryRecord(scope=scoped, text=self._text("refused"))])
            assert info.value.capability == capability.value
            with pytest.raises(UnsupportedCapability):
                await memory.search("", scope=scoped)
            await self.settle(memory)
            assert await self._listed(memory, MemoryScope(user_id=scoped.user_id)) == [], (
                "a refused add stored something"
            )
            return
        one, two = f"x1-{_token()}", f"x2-{_token()}"
        other = self._user()
        scopes = {
            "user": user,
            "user+1": MemoryScope(user_id=user.user_id, **{field: one}),
            "user+2": MemoryScope(user_id=user.user_id, **{field: two}),
            "other+1": MemoryScope(user_id=other.user_id, **{field: one}),
            "only1": MemoryScope(**{field: one}),
        }
        records = {name: MemoryRecord(scope=s, text=self._text("scoped", name)) for name, s in scopes.items()}
        await self._add(memory, list(records.values()))
        before = memory.dropped_out_of_scope
        expect = {
            "user": {"user", "user+1", "user+2"},
            "user+1": {"user+1"},
            "user+2": {"user+2"},
            "other+1": {"other+1"},
            "only1": {"only1"},
        }
        for name, scope in scopes.items():
            seen = {h.record.text for h in await self._listed(memory, scope)}
            want = {records[n].text for n in expect[name]}
            assert seen == want, f"scope {name!r} ({scope.kind}) saw {len(seen)} records, expected {len(want)}"
            if self._has(memory, Capability.EXPORT):
                assert {r.text for r in await memory.export(scope)} == want
        assert memory.dropped_out_of_scope == before, (
            f"the backend returned records outside a scope that sets {field}; the guard dropped them"
        )

    async def test_session_scope(self, memory: GuardedMemory) -> None:
        """Sessions: a user scope sees all its sessions; a session scope sees only that session.

        A record stored with no user id but a session is seen only by that user-less scope.
        Undeclared ``session_scope``: any scope with a ``session_id`` raises UnsupportedCapability.
        Troubleshooting: match ``user_id`` by equality even when it is None, and ``session_id``
        only where the query sets it; declare ``session_scope`` only if you store session ids.
        """
        await self._check_sub_scope(memory, Capability.SESSION_SCOPE, "session_id")

    async def test_agent_scope(self, memory: GuardedMemory) -> None:
        """Agents: a user scope sees all its agents; an agent scope sees only that agent.

        Undeclared ``agent_scope``: any scope with an ``agent_id`` raises UnsupportedCapability.
        Troubleshooting: match ``user_id`` by equality even when it is None, and ``agent_id``
        only where the query sets it; declare ``agent_scope`` only if you store agent ids.
        """
        await self._check_sub_scope(memory, Capability.AGENT_SCOPE, "agent_id")

    async def test_get_round_trips_a_record(self, memory: GuardedMemory) -> None:
        """``get(id)`` returns the record as stored: text, scope and created_at.

        Undeclared ``get``: ``get`` raises UnsupportedCapability.
        Troubleshooting: keep ``created_at`` from the record (not the time of the write), store
        the text unchanged, and return None for an unknown id rather than raising.
        """
        scope = self._user()
        created = _now() - timedelta(days=3, microseconds=123_456)
        record = MemoryRecord(scope=scope, text=self._text("Ann's café — naïve ☕ line\nnext line"), created_at=created)
        [record_id] = await self._add(memory, [record])
        if not self._has(memory, Capability.GET):
            with pytest.raises(UnsupportedCapability):
                await memory.get(record_id, scope=scope)
            return
        got = await memory.get(record_id, scope=scope)
        assert got is not None, "get returned None for an id add just returned"
        assert got.id == record_id
        assert got.text == record.text, "the text changed on the way through the store"
        assert got.scope == scope
        assert abs(got.created_at - created) <= timedelta(milliseconds=1), "created_at was not kept"
        assert await memory.get(f"missing-{_token()}", scope=scope) is None

    async def test_other_scopes_ids_answer_none_and_zero(self, memory: GuardedMemory) -> None:
        """``get``/``delete`` of another scope's id answer None/0 and change nothing.

        Troubleshooting: look records up by id *and* scope (``scope.covers(record.scope)``);
        never delete by id alone, and never raise for an id that exists elsewhere (that reveals it).
        """
        ann, ben = self._user(), self._user()
        ids = await self._add(memory, [MemoryRecord(scope=ann, text=self._text("private", "ann"))])
        pairs: list[tuple[str, MemoryScope, MemoryScope]] = [(ids[0], ann, ben)]
        if self._has(memory, Capability.SESSION_SCOPE):
            s1 = MemoryScope(user_id=ann.user_id, session_id=f"s1-{_token()}")
            s2 = MemoryScope(user_id=ann.user_id, session_id=f"s2-{_token()}")
            [sid] = await self._add(memory, [MemoryRecord(scope=s1, text=self._text("private", "session"))])
            pairs.append((sid, s1, s2))
        for record_id, owner, stranger in pairs:
            if self._has(memory, Capability.GET):
                assert await memory.get(record_id, scope=stranger) is None, "get revealed another scope's record"
            else:
                with pytest.raises(UnsupportedCapability):
                    await memory.get(record_id, scope=stranger)
            if self._has(memory, Capability.DELETE):
                assert await memory.delete([record_id], scope=stranger) == 0, "delete counted another scope's id"
                await self.settle(memory)
            else:
                with pytest.raises(UnsupportedCapability):
                    await memory.delete([record_id], scope=stranger)
            if self._has(memory, Capability.GET):
                assert await memory.get(record_id, scope=owner) is not None, (
                    "a get/delete from another scope removed the record"
                )
            assert record_id in {h.record.id for h in await self._listed(memory, owner)}

    async def test_delete_by_ids(self, memory: GuardedMemory) -> None:
        """``delete(ids, scope=...)`` removes exactly those ids and returns how many went.

        Undeclared ``delete``: ``delete`` raises UnsupportedCapability.
        Troubleshooting: count only records that existed in scope; an unknown id counts 0.
        """
        scope = self._user()
        ids = await self._add(
            memory, [MemoryRecord(scope=scope, text=self._text("deletable", str(i))) for i in range(3)]
        )
        if not self._has(memory, Capability.DELETE):
            with pytest.raises(UnsupportedCapability):
                await memory.delete([ids[0]], scope=scope)
            return
        assert await memory.delete([ids[0], f"missing-{_token()}"], scope=scope) == 1
        await self.settle(memory)
        assert await memory.delete([], scope=scope) == 0
        assert {h.record.id for h in await self._listed(memory, scope)} == set(ids[1:])
        if self._has(memory, Capability.GET):
            assert await memory.get(ids[0], scope=scope) is None
        assert await memory.delete([ids[0]], scope=scope) == 0, "deleting twice counted twice"

    async def test_erasing_a_user_removes_exactly_that_user(self, memory: GuardedMemory) -> None:
        """``delete(scope=MemoryScope(user_id=u))`` removes every record of ``u`` and nothing else.

        Another user's id starts with the erased one (``ann`` vs ``ann-x``).
        Undeclared ``delete``: erasing raises UnsupportedCapability and nothing goes.
        Troubleshooting: erase by ``user_id`` equality across all of the user's sessions and
        agents; return the number removed; never a prefix match or a whole-store wipe.
        """
        ann = self._user()
        ann_x = MemoryScope(user_id=f"{ann.user_id}-x")
        ben = self._user()
        ann_scopes = [ann]
        if self._has(memory, Capability.SESSION_SCOPE):
            ann_scopes.append(MemoryScope(user_id=ann.user_id, session_id=f"s-{_token()}"))
        if self._has(memory, Capability.AGENT_SCOPE):
            ann_scopes.append(MemoryScope(user_id=ann.user_id, agent_id=f"a-{_token()}"))
        ann_records = [
            MemoryRecord(scope=s, text=self._text("erase", "me", str(i))) for i, s in enumerate(ann_scopes * 2)
        ]
        kept = [MemoryRecord(scope=s, text=self._text("keep", "me", str(i))) for i, s in enumerate((ann_x, ben) * 2)]
        await self._add(memory, ann_records + kept)
        if not self._has(memory, Capability.DELETE):
            with pytest.raises(UnsupportedCapability):
                await memory.delete(scope=ann)
            assert len(await self._listed(memory, ann)) == len(ann_records)
            return
        assert await memory.delete(scope=ann) == len(ann_records), "delete(scope=user) returned a wrong count"
        await self.settle(memory)
        assert await self._listed(memory, ann) == [], "records of the erased user are still listed"
        if self._has(memory, Capability.EXPORT):
            assert await memory.export(ann) == []
        for scope in (ann_x, ben):
            remaining = {h.record.text for h in await self._listed(memory, scope)}
            assert remaining == {r.text for r in kept if r.scope == scope}, (
                f"erasing {ann.user_id!r} also removed records of another user"
            )
        assert await memory.delete(scope=ann) == 0

    async def test_export_is_complete_and_oldest_first(self, memory: GuardedMemory) -> None:
        """``export(scope)`` returns every record of the scope (1,500 here), oldest first.

        Undeclared ``export``: ``export`` raises UnsupportedCapability.
        Troubleshooting: page through your store until it is exhausted (no default page size or
        ``top_k`` may cut it short), and keep ``created_at`` so the guard can order oldest first.
        """
        scope = self._user()
        if not self._has(memory, Capability.EXPORT):
            with pytest.raises(UnsupportedCapability):
                await memory.export(scope)
            return
        n = self.export_records
        base = _now() - timedelta(days=30)
        records = [
            MemoryRecord(scope=scope, text=self._text("export", str(i)), created_at=base + timedelta(seconds=i))
            for i in range(n)
        ]
        order = records[:]
        random.shuffle(order)
        batch = max(1, min(500, memory.limits.max_batch))
        for start in range(0, n, batch):
            await memory.add(order[start : start + batch])
        await self.settle(memory)
        other = self._user()
        await self._add(memory, [MemoryRecord(scope=other, text=self._text("export", "other"))])
        exported = await memory.export(scope)
        assert len(exported) == n, f"export returned {len(exported)} of {n} records"
        assert [r.text for r in exported] == [r.text for r in records], "export is not oldest first"
        assert len({r.id for r in exported}) == n

    async def test_metadata_round_trips(self, memory: GuardedMemory) -> None:
        """Metadata comes back exactly as stored, types included (int stays int, bool stays bool).

        Undeclared ``metadata``: a record with metadata raises UnsupportedCapability and
        nothing of the batch is stored.
        Troubleshooting: store metadata as JSON and decode it as such; keep None values.
        """
        scope = self._user()
        metadata = {"kind": "visit", "count": 3, "ratio": 0.5, "flag": True, "nothing": None, "word": "naïve"}
        record = MemoryRecord(scope=scope, text=self._text("metadata"), metadata=metadata)
        if not self._has(memory, Capability.METADATA):
            plain = MemoryRecord(scope=scope, text=self._text("plain"))
            with pytest.raises(UnsupportedCapability):
                await memory.add([plain, record])
            await self.settle(memory)
            assert await self._listed(memory, scope) == [], "a refused batch stored a record"
            return
        [record_id] = await self._add(memory, [record])
        found: list[MemoryRecord] = [h.record for h in await self._listed(memory, scope)]
        if self._has(memory, Capability.GET):
            got = await memory.get(record_id, scope=scope)
            assert got is not None
            found.append(got)
        if self._has(memory, Capability.EXPORT):
            found.extend(await memory.export(scope))
        for got in found:
            assert got.metadata == metadata, "metadata changed on the way through the store"
            for key, value in metadata.items():
                assert type(got.metadata[key]) is type(value), f"metadata[{key!r}] changed type"

    async def test_filters_match_metadata_exactly(self, memory: GuardedMemory) -> None:
        """``search(filters={...})`` returns only records whose metadata equals every filter.

        Undeclared ``filters``: a search with filters raises UnsupportedCapability.
        Troubleshooting: AND the filters, compare values by type and value (``1`` is not
        ``"1"`` and not ``True``), and apply them before taking the ``k`` best.
        """
        scope = self._user()
        if not self._has(memory, Capability.FILTERS):
            with pytest.raises(UnsupportedCapability):
                await memory.search("", scope=scope, filters={"kind": "visit"})
            return
        other = self._user()
        records = [
            MemoryRecord(scope=scope, text=self._text("dentist", "visit", "one"), metadata={"kind": "visit", "n": 1}),
            MemoryRecord(scope=scope, text=self._text("dentist", "visit", "two"), metadata={"kind": "visit", "n": 2}),
            MemoryRecord(scope=scope, text=self._text("dentist", "note"), metadata={"kind": "note", "n": 1}),
            MemoryRecord(scope=scope, text=self._text("dentist", "string"), metadata={"kind": "visit", "n": "1"}),
            MemoryRecord(scope=other, text=self._text("dentist", "visit"), metadata={"kind": "visit", "n": 1}),
            MemoryRecord(scope=scope, text=self._text("dentist", "flag"), metadata={"kind": "flag", "n": True}),
        ]
        await self._add(memory, records)

        async def texts(query: str, filters: dict[str, Any]) -> set[str]:
            return {h.record.text for h in await memory.search(query, scope=scope, k=20, filters=filters)}

        visits = {records[0].text, records[1].text, records[3].text}
        assert await texts("", {"kind": "visit"}) == visits
        assert await texts("", {"kind": "visit", "n": 1}) == {records[0].text}
        assert await texts("", {"n": "1"}) == {records[3].text}
        assert await texts("", {"n": 1}) == {records[0].text, records[2].text}, "1 matched True or '1'"
        assert await texts("", {"n": True}) == {records[5].text}, "True matched 1"
        assert await texts("", {"kind": "absent"}) == set()
        hits = await texts("dentist", {"kind": "note"})
        assert hits <= {records[2].text}
        if self._has(memory, Capability.KEYWORD_SEARCH):
            assert hits == {records[2].text}

    async def test_expired_records_never_come_back(self, memory: GuardedMemory) -> None:
        """A record whose ``expires_at`` has passed is never returned by search, get or export.

        Undeclared ``expiry``: a record with ``expires_at`` raises UnsupportedCapability.
        Troubleshooting: the guard hides expired records, so this fails only when your store
        loses ``expires_at`` or ``created_at`` (return both as stored) or over-fetching cannot
        reach the live ones.
        """
        scope = self._user()
        now = _now()
        expired = MemoryRecord(
            scope=scope,
            text=self._text("expired", "secret"),
            created_at=now - timedelta(hours=2),
            expires_at=now - timedelta(hours=1),
        )
        if not self._has(memory, Capability.EXPIRY):
            with pytest.raises(UnsupportedCapability):
                await memory.add([MemoryRecord(scope=scope, text=self._text("plain")), expired])
            await self.settle(memory)
            assert await self._listed(memory, scope) == []
            return
        later = MemoryRecord(scope=scope, text=self._text("expires", "tomorrow"), expires_at=now + timedelta(days=1))
        live = [MemoryRecord(scope=scope, text=self._text("live", str(i))) for i in range(3)]
        ids = await self._add(memory, [expired, later, *live])
        wanted = {later.text, *(r.text for r in live)}
        assert {h.record.text for h in await self._listed(memory, scope)} == wanted
        assert {h.record.text for h in await memory.search("", scope=scope, k=4)} == wanted, (
            "an expired record took a place among the k newest"
        )
        assert expired.text not in {h.record.text for h in await memory.search(expired.text, scope=scope, k=10)}
        if self._has(memory, Capability.GET):
            assert await memory.get(ids[0], scope=scope) is None
            got = await memory.get(ids[1], scope=scope)
            assert got is not None and got.expires_at is not None
            assert abs(got.expires_at - later.expires_at) <= timedelta(milliseconds=1), "expires_at was not kept"  # type: ignore[operator]
        if self._has(memory, Capability.EXPORT):
            assert {r.text for r in await memory.export(scope)} == wanted

    async def test_purge_removes_expired_records(self, memory: GuardedMemory) -> None:
        """``purge()`` physically removes expired records from the store and keeps live ones.

        Undeclared ``purge``: ``purge`` raises UnsupportedCapability.
        Troubleshooting: delete rows with ``expires_at <= now`` (and, when given,
        ``created_at < created_before``) and return how many went. Checked on the port itself.
        """
        if not self._has(memory, Capability.PURGE):
            with pytest.raises(UnsupportedCapability):
                await memory.purge()
            return
        scope = self._user()
        if not self._has(memory, Capability.EXPIRY):
            assert await memory.purge() >= 0
            return
        now = _now()
        gone = MemoryRecord(
            scope=scope,
            text=self._text("purge"),
            created_at=now - timedelta(hours=2),
            expires_at=now - timedelta(hours=1),
        )
        kept = MemoryRecord(scope=scope, text=self._text("kept"))
        ids = await self._add(memory, [gone, kept])
        assert await memory.purge() >= 1
        await self.settle(memory)
        port = memory.store
        if self._has(memory, Capability.GET):
            assert await port.get(ids[0], scope=scope) is None, "purge left the expired record in the store"
            assert await port.get(ids[1], scope=scope) is not None, "purge removed a live record"
        if self._has(memory, Capability.EXPORT):
            assert [r.text for r in await port.export(scope)] == [kept.text]
        raw = await port.search("", scope=scope, k=10, filters=None)
        assert [h.record.text for h in raw] == [kept.text], "purge left the expired record in the store"

    async def test_keyword_search_finds_words(self, memory: GuardedMemory) -> None:
        """A query word that appears in exactly one record finds that record first.

        Troubleshooting: tokenise the query and rank by word matches (BM25 or similar); treat
        query text as data (quotes, ``OR``, ``*`` and punctuation must not raise).
        """
        if not self._has(memory, Capability.KEYWORD_SEARCH):
            pytest.skip("keyword_search is not declared")
        scope = self._user()
        texts = [
            "The dentist appointment is on Tuesday",
            "Ann prefers green tea in the morning",
            "The car needs new winter tyres",
            "Book the flights to Lisbon for June",
        ]
        await self._add(memory, [MemoryRecord(scope=scope, text=t) for t in texts])
        for query, want in (("dentist", 0), ("green tea", 1), ("tyres", 2), ("Lisbon flights", 3)):
            hits = await memory.search(query, scope=scope, k=2)
            assert hits and hits[0].record.text == texts[want], f"search({query!r}) did not rank its record first"
        for hostile in ('"unbalanced', "NOT OR AND", "tea*", "a:b (c) - ^ ~"):
            await memory.search(hostile, scope=scope, k=3)

    async def test_vector_search_ranks_identical_text_first(self, memory: GuardedMemory) -> None:
        """Searching with a record's exact text ranks that record first.

        Troubleshooting: embed records on add and queries on search with the same model;
        rank by cosine similarity, higher first.
        """
        if not self._has(memory, Capability.VECTOR_SEARCH):
            pytest.skip("vector_search is not declared")
        scope = self._user()
        texts = [
            "Ann's daughter plays the cello in a youth orchestra",
            "The quarterly tax return is due at the end of April",
            "Grandma's recipe uses cardamom and saffron in the rice",
        ]
        await self._add(memory, [MemoryRecord(scope=scope, text=t) for t in texts])
        for text in texts:
            hits = await memory.search(text, scope=scope, k=3)
            assert hits and hits[0].record.text == text

    async def test_invalid_input_is_refused_and_nothing_stored(self, memory: GuardedMemory) -> None:
        """Bad input raises InvalidInput (or UsageError for a misuse) naming the field; nothing is stored.

        A batch with one bad record stores none of it; messages never echo the text.
        Troubleshooting: this is the guard's job; if it fails, your memory bypasses
        GuardedMemory or your store stored part of a batch before failing.
        """
        scope = self._user()
        limits = memory.limits
        secret = "secret-" + _token()
        good = MemoryRecord(scope=scope, text=self._text("good"))
        too_long = MemoryRecord(scope=scope, text=secret + "x" * limits.max_text_chars)
        future = MemoryRecord(scope=scope, text=secret, created_at=_now() + timedelta(days=1))
        twin = good.model_copy(update={"id": f"dup-{_token()}"})
        bad_batches: list[tuple[list[MemoryRecord], str]] = [
            ([good, too_long], "records[1].text"),
            ([good, future], "records[1].created_at"),
            ([twin, twin], "records[1].id"),
        ]
        for batch, field in bad_batches:
            with pytest.raises(InvalidInput) as info:
                await memory.add(batch)
            assert info.value.field == field
            assert secret not in str(info.value)
        await self.settle(memory)
        assert await self._listed(memory, scope) == [], "a refused batch stored records"
        for k in (0, limits.max_k + 1):
            with pytest.raises(InvalidInput):
                await memory.search("x", scope=scope, k=k)
        with pytest.raises(InvalidInput):
            await memory.search("nul\x00query", scope=scope)
        with pytest.raises(UsageError):
            await memory.search("x")
        with pytest.raises(UsageError):
            await memory.add(good)  # type: ignore[arg-type]
        if self._has(memory, Capability.GET):
            with pytest.raises(InvalidInput):
                await memory.get("", scope=scope)
        if self._has(memory, Capability.DELETE):
            with pytest.raises(InvalidInput):
                await memory.delete(["ok", "x" * (limits.max_id_chars + 1)], scope=scope)

    async def test_sync_twins_give_what_async_gives(self, memory: GuardedMemory) -> None:
        """Every ``*_sync`` twin, called from a worker thread, returns what the async method returns.

        Troubleshooting: the twins run your store on memoryport's background event loop, not the
        caller's; clients bound to one event loop (an ``httpx.AsyncClient`` made in another loop,
        a connection opened at import) fail there. Open loop-bound resources lazily per loop.
        """
        scope = self._user()
        records = [MemoryRecord(scope=scope, text=self._text("twin", str(i))) for i in range(4)]
        ids = await anyio.to_thread.run_sync(lambda: memory.add_sync(records[:2]))
        ids += await memory.add(records[2:])
        await self.settle(memory)
        assert len(set(ids)) == 4

        def both(sync: Callable[[], Any]) -> Any:
            return anyio.to_thread.run_sync(sync)

        sync_hits = await both(lambda: memory.search_sync("", scope=scope, k=10))
        async_hits = await memory.search("", scope=scope, k=10)
        assert _ids(sync_hits) == _ids(async_hits) and len(async_hits) == 4
        sync_hits = await both(lambda: memory.search_sync("twin", scope=scope, k=3))
        async_hits = await memory.search("twin", scope=scope, k=3)
        assert _ids(sync_hits) == _ids(async_hits)
        if self._has(memory, Capability.GET):
            assert await both(lambda: memory.get_sync(ids[0], scope=scope)) == await memory.get(ids[0], scope=scope)
        if self._has(memory, Capability.EXPORT):
            assert await both(lambda: memory.export_sync(scope)) == await memory.export(scope)
        if self._has(memory, Capability.DELETE):
            assert await both(lambda: memory.delete_sync([ids[0]], scope=scope)) == 1
            assert await memory.delete([ids[1]], scope=scope) == 1
            await self.settle(memory)
        if self._has(memory, Capability.PURGE):
            assert isinstance(await both(memory.purge_sync), int)
        with pytest.raises(InvalidInput):
            await both(lambda: memory.search_sync("x", scope=scope, k=0))

    async def test_sync_twin_inside_event_loop_names_await(self, memory: GuardedMemory) -> None:
        """Inside a running event loop a ``*_sync`` twin raises UsageError naming the ``await`` form.

        Troubleshooting: this is the guard's behaviour; if it fails, your class overrides the
        twins. In async code, ``await memory.search(...)`` instead.
        """
        scope = self._user()
        with pytest.raises(UsageError, match=r"await memory\.search"):
            memory.search_sync("", scope=scope)
        with pytest.raises(UsageError, match=r"await memory\.add"):
            memory.add_sync([MemoryRecord(scope=scope, text=self._text("loop"))])
        await self.settle(memory)
        assert await self._listed(memory, scope) == []

    async def test_events_carry_no_content(self, memory: GuardedMemory) -> None:
        """Events sent to ``ctx=`` carry counts and kinds, never texts, ids or scope ids.

        Troubleshooting: the guard builds the events; if a text shows up, your store put it
        in an exception message (which becomes ``error``) or ``mode``. Keep SDK messages out.
        """
        events: list[MemoryEvent] = []
        scope = self._user()
        secret = f"secret{_token()}"
        record = MemoryRecord(scope=scope, text=f"{secret} apple pie")
        [record_id] = await memory.add([record], ctx=events.append)
        await self.settle(memory)
        await memory.search("apple", scope=scope, ctx=events.append)
        await memory.search("", scope=scope, ctx=events.append)
        if self._has(memory, Capability.GET):
            await memory.get(record_id, scope=scope, ctx=events.append)
        if self._has(memory, Capability.EXPORT):
            await memory.export(scope, ctx=events.append)
        if self._has(memory, Capability.DELETE):
            await memory.delete([record_id], scope=scope, ctx=events.append)
        # embedders add embedding.used events of their own; they must be content-free too
        ops = [e for e in events if e.name.startswith("memory.")]
        assert [e.name for e in ops[:3]] == ["memory.added", "memory.searched", "memory.searched"]
        assert ops[0].count == 1 and ops[0].scope_kind == "user" and ops[0].backend == memory.backend
        assert ops[2].mode == "recent" and ops[2].k == 5
        assert ops[1].mode in {"keyword", "vector", "hybrid", "recent", "backend"}
        assert all(e.error is None and e.latency_ms >= 0 for e in ops)
        assert user_text_free(events, (secret, record_id, str(scope.user_id)))

    async def test_random_operations_match_a_model(self, memory: GuardedMemory) -> None:
        """Random sequences of add, delete, erase and reads over several scopes agree with a model.

        Troubleshooting: the failing sequence is printed by hypothesis (shrunk); replay it by
        hand. Typical causes: erase or delete matching too much (prefixes, missing user filter),
        a listing that stops early, or ``delete`` counts that include other scopes.
        """
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        caps = memory.capabilities
        shapes: list[dict[str, str]] = [{}, {}]
        if Capability.SESSION_SCOPE in caps:
            shapes += [{"session_id": "s0"}, {"session_id": "s1"}]
        if Capability.AGENT_SCOPE in caps:
            shapes += [{"agent_id": "a0"}]
        # Record scopes: (user index, extra ids); user 0 and 1 share session/agent names on purpose.
        layout = [(u, shape) for u in (0, 1) for shape in shapes[1:]] + [(0, {})]
        kinds = ["add", "check"]
        if Capability.DELETE in caps:
            kinds += ["delete", "erase"]
        op = st.builds(
            _Op,
            kind=st.sampled_from(kinds),
            scope=st.integers(0, len(layout) - 1),
            count=st.integers(1, 3),
            pick=st.integers(0, 1_000),
        )

        @settings(
            max_examples=self.hypothesis_examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(op, min_size=1, max_size=10))
        def run(ops: list[_Op]) -> None:
            anyio.from_thread.run(self._play, memory, layout, ops)

        await anyio.to_thread.run_sync(run)

    async def _play(self, memory: GuardedMemory, layout: list[tuple[int, dict[str, str]]], ops: list[_Op]) -> None:
        # the second user id extends the first: erasing by prefix instead of equality shows up
        first = f"mp-model-{_token()}"
        users = [first, f"{first}-2"]
        scopes = [MemoryScope(user_id=users[u], **ids) for u, ids in layout]
        queries = list(dict.fromkeys([*scopes, *(MemoryScope(user_id=u) for u in users)]))
        model: dict[str, MemoryRecord] = {}
        every_id: list[str] = []
        owners: dict[str, MemoryScope] = {}
        before = memory.dropped_out_of_scope

        async def check(query: MemoryScope) -> None:
            want = {i for i, r in model.items() if query.covers(r.scope)}
            seen = [h.record.id for h in await memory.search("", scope=query, k=100)]
            assert len(seen) == len(set(seen)), "the listing repeated a record"
            assert set(seen) == want, f"listing of a {query.kind} scope differs from the model"
            if Capability.EXPORT in memory.capabilities:
                assert {r.id for r in await memory.export(query)} == want, "export differs from the model"

        for step in ops:
            scope = scopes[step.scope]
            query = queries[step.scope % len(queries)]
            if step.kind == "add":
                records = [MemoryRecord(scope=scope, text=self._text("model", _token())) for _ in range(step.count)]
                ids = await memory.add(records)
                for record_id, record in zip(ids, records, strict=True):
                    assert record_id not in model, "add returned an id already in use"
                    model[record_id] = record
                    every_id.append(record_id)
                    owners[record_id] = scope
                await self.settle(memory)
            elif step.kind == "delete" and every_id:
                target = every_id[step.pick % len(every_id)]
                expected = 1 if target in model and query.covers(model[target].scope) else 0
                assert await memory.delete([target], scope=query) == expected, "delete count differs from the model"
                if expected:
                    del model[target]
                await self.settle(memory)
            elif step.kind == "erase":
                doomed = [i for i, r in model.items() if query.covers(r.scope)]
                assert await memory.delete(scope=query) == len(doomed), "erase count differs from the model"
                for record_id in doomed:
                    del model[record_id]
                await self.settle(memory)
            elif step.kind == "check":
                await check(query)
        for query in queries:
            await check(query)
        if Capability.GET in memory.capabilities:
            user_scopes = [MemoryScope(user_id=u) for u in users]
            for record_id in every_id:
                # both users plus the record's own scope: enough to see a leak, cheap on slow stores
                for query in dict.fromkeys([*user_scopes, owners[record_id]]):
                    got = await memory.get(record_id, scope=query)
                    visible = record_id in model and query.covers(model[record_id].scope)
                    assert (got is not None) == visible, "get differs from the model"
        assert memory.dropped_out_of_scope == before, "the backend returned records outside the query's scope"

    async def test_no_silent_opt_outs(self, memory: GuardedMemory) -> None:
        """Overriding a contract test needs a strict xfail with a reason; base items cannot be waived.

        Troubleshooting: to opt out of a capability test, override it as
        ``@pytest.mark.xfail(strict=True, reason="why") async def test_x(self, memory): await
        super().test_x(memory)``. Base items (scope isolation, erasure, export, expiry, input
        checks, sync twins, events, the model test) cannot be opted out of: fix the store.
        """
        problems: list[str] = []
        cls = type(self)
        for name in CONTRACT_TESTS:
            mine = getattr(cls, name, None)
            if mine is getattr(MemoryContract, name):
                continue
            if not callable(mine):
                problems.append(f"{name} was removed")
                continue
            if name in BASE_TESTS:
                problems.append(f"{name} is a base item and may not be overridden")
                continue
            marks = [m for m in getattr(mine, "pytestmark", []) if m.name == "xfail"]
            if not any(m.kwargs.get("strict") is True and str(m.kwargs.get("reason", "")).strip() for m in marks):
                problems.append(f"{name} is overridden without @pytest.mark.xfail(strict=True, reason=...)")
        assert not problems, "silent opt-outs: " + "; ".join(problems)


def user_text_free(events: Sequence[MemoryEvent], secrets_: Sequence[str]) -> bool:
    """True when no event carries content, and no secret string appears in any event."""
    for event in events:
        assert event.arguments is None and event.result is None, f"{event.name} carries content"
        rendered = repr(event)
        for secret in secrets_:
            assert secret not in rendered, f"{event.name} carries a text, an id or a scope id"
    return True
