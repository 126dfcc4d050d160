"""Contract tests of the port's second-round capabilities: update, time ranges, filter operators, count.

Mixed into :class:`~memoryport.contracts.MemoryContract`; registered in its
``CONTRACT_TESTS`` through :data:`PORT_TESTS`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from memoryport._errors import InvalidInput, UnsupportedCapability
from memoryport._events import MemoryEvent
from memoryport._guard import GuardedMemory
from memoryport._port import Capability
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate

__all__ = ["PORT_BASE_TESTS", "PORT_TESTS", "PortContract"]

PORT_TESTS: dict[str, Capability | None] = {
    "test_update_keeps_id_scope_and_created_at": Capability.UPDATE,
    "test_update_of_another_scopes_id_changes_nothing": Capability.UPDATE,
    "test_text_update_is_found_by_new_words_only": Capability.UPDATE,
    "test_time_ranges_at_the_edges": None,
    "test_time_range_run_by_the_store": Capability.TIME_RANGE,
    "test_filter_operators_against_each_json_type": Capability.FILTERS,
    "test_filter_operators_run_by_the_store": Capability.FILTER_OPERATORS,
    "test_count_matches_what_search_sees": Capability.COUNT,
}

# Scope isolation of update and the time-range edges hold on every backend.
PORT_BASE_TESTS: frozenset[str] = frozenset(
    {"test_update_of_another_scopes_id_changes_nothing", "test_time_ranges_at_the_edges"}
)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _texts(hits: Sequence[MemoryHit]) -> set[str]:
    return {h.record.text for h in hits}


class PortContract:
    """The tests of update, time ranges, filter operators and count (see :data:`PORT_TESTS`)."""

    if TYPE_CHECKING:  # provided by MemoryContract

        def _user(self, **ids: str) -> MemoryScope: ...
        async def _add(self, memory: GuardedMemory, records: Sequence[MemoryRecord]) -> list[str]: ...
        async def settle(self, memory: GuardedMemory) -> None: ...
        @staticmethod
        def _text(*words: str) -> str: ...
        @staticmethod
        def _has(memory: GuardedMemory, capability: Capability) -> bool: ...

    async def _one(self, memory: GuardedMemory, scope: MemoryScope, record_id: str) -> MemoryRecord | None:
        """The record as the host sees it: by get, else from the listing."""
        if self._has(memory, Capability.GET):
            return await memory.get(record_id, scope=scope)
        for hit in await memory.search("", scope=scope, k=100):
            if hit.record.id == record_id:
                return hit.record
        return None

    # -- update -------------------------------------------------------------------

    async def test_update_keeps_id_scope_and_created_at(self, memory: GuardedMemory) -> None:
        """``update`` changes text, metadata and expiry in place; id, scope and ``created_at`` stay.

        ``updated_at`` is None until the first update and set after it; fields not given are
        kept; ``metadata`` replaces the whole mapping; ``expires_at=None`` clears the expiry; the
        ids come back in input order, missing ones left out; an event ``memory.updated`` carries
        the count and no text. Undeclared ``update``: UnsupportedCapability, nothing changed.
        Troubleshooting: update the stored row (do not delete and re-add: that changes the id or
        ``created_at``); set ``updated_at`` to now; return only the ids you found in the scope.
        """
        scope = self._user()
        created = _now() - timedelta(days=3)
        meta = {"kind": "fact", "n": 1} if self._has(memory, Capability.METADATA) else {}
        records = [
            MemoryRecord(scope=scope, text=self._text("orchid", str(i)), created_at=created + timedelta(minutes=i),
                         metadata=meta)
            for i in range(3)
        ]  # fmt: skip
        ids = await self._add(memory, records)
        if not self._has(memory, Capability.UPDATE):
            with pytest.raises(UnsupportedCapability):
                await memory.update([MemoryUpdate(id=ids[0], text="changed")], scope=scope)
            await self.settle(memory)
            got = await self._one(memory, scope, ids[0])
            assert got is not None and got.text == records[0].text, "a refused update changed the record"
            return
        before = await self._one(memory, scope, ids[1])
        assert before is not None and before.updated_at is None, "updated_at must be None before any update"
        events: list[MemoryEvent] = []
        new_text = self._text("saddle", "updated")
        done = await memory.update(
            [MemoryUpdate(id=ids[1], text=new_text), MemoryUpdate(id=f"missing-{secrets.token_hex(4)}", text="x"),
             MemoryUpdate(id=ids[0], text=self._text("first", "updated"))],
            scope=scope,
            ctx=events.append,
        )  # fmt: skip
        assert done == [ids[1], ids[0]], f"update returned {done}, expected the found ids in input order"
        await self.settle(memory)
        after = await self._one(memory, scope, ids[1])
        assert after is not None, "the updated record is gone"
        assert after.id == ids[1] and after.text == new_text
        assert after.scope == scope, "update changed the scope"
        assert after.created_at == before.created_at, "update changed created_at"
        assert after.updated_at is not None and after.updated_at >= after.created_at
        assert after.metadata == before.metadata, "metadata changed though the update did not give it"
        assert [(e.name, e.count) for e in events if e.name.startswith("memory.")] == [("memory.updated", 2)]
        assert new_text not in repr(events), "the update event carries the text"
        untouched = await self._one(memory, scope, ids[2])
        assert untouched is not None and untouched.text == records[2].text and untouched.updated_at is None
        if self._has(memory, Capability.METADATA):
            assert await memory.update([MemoryUpdate(id=ids[1], metadata={"kind": "preference"})], scope=scope)
            await self.settle(memory)
            got = await self._one(memory, scope, ids[1])
            assert got is not None and got.metadata == {"kind": "preference"}, "metadata must be replaced whole"
            assert got.text == new_text, "a metadata update changed the text"
        if self._has(memory, Capability.EXPIRY):
            later = _now() + timedelta(days=30)
            assert await memory.update([MemoryUpdate(id=ids[2], expires_at=later)], scope=scope) == [ids[2]]
            await self.settle(memory)
            got = await self._one(memory, scope, ids[2])
            assert got is not None and got.expires_at == later
            assert await memory.update([MemoryUpdate(id=ids[2], expires_at=None)], scope=scope) == [ids[2]]
            await self.settle(memory)
            got = await self._one(memory, scope, ids[2])
            assert got is not None and got.expires_at is None, "expires_at=None must clear the expiry"
            assert got.text == records[2].text
        if self._has(memory, Capability.EXPORT):
            exported = {r.id: r for r in await memory.export(scope)}
            assert set(exported) == set(ids), "update added or lost records"
            assert exported[ids[1]].created_at == before.created_at

    async def test_update_of_another_scopes_id_changes_nothing(self, memory: GuardedMemory) -> None:
        """Updating another user's (or session's) id answers exactly like a missing id and changes nothing.

        A base item: no backend may let one scope change another's record. Undeclared ``update``:
        UnsupportedCapability.
        Troubleshooting: look the id up *within the scope* (user_id equality, and session_id /
        agent_id where the scope sets them) and skip it when not found; never move a record into
        the caller's scope.
        """
        ann, ben = self._user(), self._user()
        [rid] = await self._add(memory, [MemoryRecord(scope=ann, text=self._text("granite", "ann"))])
        if not self._has(memory, Capability.UPDATE):
            with pytest.raises(UnsupportedCapability):
                await memory.update([MemoryUpdate(id=rid, text="ben was here")], scope=ben)
            return
        missing = f"missing-{secrets.token_hex(6)}"
        assert await memory.update([MemoryUpdate(id=rid, text="ben was here")], scope=ben) == []
        assert await memory.update([MemoryUpdate(id=missing, text="ben was here")], scope=ben) == []
        scopes = [ben]
        if self._has(memory, Capability.SESSION_SCOPE):
            in_s1 = MemoryScope(user_id=ann.user_id, session_id=f"s1-{secrets.token_hex(4)}")
            [sid] = await self._add(memory, [MemoryRecord(scope=in_s1, text=self._text("session", "one"))])
            other = MemoryScope(user_id=ann.user_id, session_id=f"s2-{secrets.token_hex(4)}")
            assert await memory.update([MemoryUpdate(id=sid, text="from s2")], scope=other) == []
            scopes.append(other)
        await self.settle(memory)
        got = await self._one(memory, ann, rid)
        assert got is not None and got.text != "ben was here", "another user's update changed the record"
        assert got.scope == ann and got.updated_at is None, "another user's update touched the record"
        for scope in scopes:
            for hit in await memory.search("", scope=scope, k=50):
                assert hit.record.id != rid, "the record moved into the caller's scope"
        for hit in await memory.search("", scope=ann, k=50):
            assert hit.record.text not in ("ben was here", "from s2")

    async def test_text_update_is_found_by_new_words_only(self, memory: GuardedMemory) -> None:
        """After a text update, search finds the record by its new words and no longer by the old.

        Undeclared ``update``: UnsupportedCapability.
        Troubleshooting: re-index the text (FTS rows: delete the old entry, insert the new) and
        re-embed it; a stale index finds the record by words it no longer has.
        """
        scope = self._user()
        old = self._text("thunder", "biscuit", "falcon")
        [rid] = await self._add(memory, [MemoryRecord(scope=scope, text=old)])
        await self._add(memory, [MemoryRecord(scope=scope, text=self._text("marble", str(i))) for i in range(3)])
        if not self._has(memory, Capability.UPDATE):
            with pytest.raises(UnsupportedCapability):
                await memory.update([MemoryUpdate(id=rid, text="velvet")], scope=scope)
            return
        new = self._text("velvet", "compass", "meadow")
        assert await memory.update([MemoryUpdate(id=rid, text=new)], scope=scope) == [rid]
        await self.settle(memory)
        if self._has(memory, Capability.KEYWORD_SEARCH):
            found = await memory.search("velvet compass", scope=scope, k=3)
            assert found and found[0].record.id == rid and found[0].record.text == new, (
                "the new words do not find the updated record"
            )
            stale = await memory.search("thunder biscuit", scope=scope, k=3)
            assert all(h.record.text != old for h in stale), "search returned the old text"
            if not self._has(memory, Capability.VECTOR_SEARCH):  # vectors rank every record, words or not
                assert rid not in {h.record.id for h in stale}, "the old words still find the record (stale index)"
        if self._has(memory, Capability.VECTOR_SEARCH):
            found = await memory.search(new, scope=scope, k=3)
            assert found and found[0].record.id == rid, "the new text does not rank it first (not re-embedded?)"
        for hit in await memory.search("", scope=scope, k=10):
            assert hit.record.text != old, "the listing still shows the old text"

    # -- time ranges --------------------------------------------------------------

    async def test_time_ranges_at_the_edges(self, memory: GuardedMemory) -> None:
        """``since`` is inclusive, ``until`` exclusive, over ``created_at``, in every form it takes.

        A base item: the guard serves ranges on every backend (pushed down where declared).
        Troubleshooting: compare ``created_at`` as stored (return it unchanged); a store declaring
        ``time_range`` must use ``since <= created_at < until``.
        """
        scope = self._user()
        now = _now()
        base = now - timedelta(days=1)
        times = [base + timedelta(hours=h) for h in range(4)]
        records = [MemoryRecord(scope=scope, text=self._text("lantern", f"t{i}"), created_at=t)
                   for i, t in enumerate(times)]  # fmt: skip
        recent = MemoryRecord(scope=scope, text=self._text("lantern", "recent"), created_at=now - timedelta(minutes=30))
        await self._add(memory, [*records, recent])
        t = [r.text for r in records]

        async def listed(k: int = 20, **kw: Any) -> list[str]:
            return [h.record.text for h in await memory.search("", scope=scope, k=k, **kw)]

        assert await listed(since=times[1], until=times[3]) == [t[2], t[1]], "since inclusive, until exclusive"
        assert await listed(since=times[2], until=times[3]) == [t[2]]
        assert await listed(until=times[1]) == [t[0]], "until is exclusive"
        assert await listed(since=times[3], until=now - timedelta(hours=1)) == [t[3]]
        assert await listed(since="90m") == [recent.text], "duration strings count back from now"
        assert await listed(since=timedelta(hours=2)) == [recent.text]
        assert await listed(since=times[1].isoformat(), until=times[2].isoformat().replace("+00:00", "Z")) == [t[1]]
        assert await listed(since=times[2], k=1) == [recent.text]
        if self._has(memory, Capability.KEYWORD_SEARCH):
            hits = await memory.search("lantern", scope=scope, k=10, since=times[1], until=times[3])
            assert _texts(hits) == {t[1], t[2]}
        if self._has(memory, Capability.EXPORT):
            exported = await memory.export(scope, since=times[1], until=times[3])
            assert [r.text for r in exported] == [t[1], t[2]], "export's range or order is wrong"
            assert len(await memory.export(scope, since=times[0])) == 5
        if self._has(memory, Capability.COUNT):
            assert await memory.count(scope, since=times[1], until=times[3]) == 2
            assert await memory.count(scope, until=times[0]) == 0
        for bad in ("yesterday", "7 days", datetime(2026, 1, 1), "2026-05-01T09:00:00"):
            with pytest.raises(InvalidInput):
                await memory.search("", scope=scope, since=bad)
        with pytest.raises(InvalidInput):
            await memory.search("", scope=scope, since=times[2], until=times[1])

    async def test_time_range_run_by_the_store(self, memory: GuardedMemory) -> None:
        """A store declaring ``time_range`` itself returns only records in ``[since, until)``.

        The store is called directly (as the guard does); the guard would hide its mistakes from
        hosts, but not from this test. Undeclared: nothing to refuse (the guard applies ranges).
        Troubleshooting: accept ``since``/``until`` keyword arguments (aware UTC datetimes or
        None) in ``search`` and ``export`` and restrict ``created_at`` in your query.
        """
        if not self._has(memory, Capability.TIME_RANGE):
            pytest.skip("time_range is not declared (the guard applies since/until)")
        scope = self._user()
        base = _now() - timedelta(hours=10)
        records = [MemoryRecord(scope=scope, text=self._text("glacier", str(i)), created_at=base + timedelta(hours=i))
                   for i in range(6)]  # fmt: skip
        await self._add(memory, records)
        since, until = base + timedelta(hours=2), base + timedelta(hours=4)
        port: Any = memory.store
        raw = await port.search("", scope=scope, k=10, filters=None, since=since, until=until)
        assert _texts(raw) == {records[2].text, records[3].text}, "the store's search ignored since/until"
        if self._has(memory, Capability.KEYWORD_SEARCH):
            raw = await port.search("glacier", scope=scope, k=10, filters=None, since=since, until=until)
            assert _texts(raw) <= {records[2].text, records[3].text}
        if self._has(memory, Capability.EXPORT):
            exported = await port.export(scope, since=since, until=until)
            assert {r.text for r in exported} == {records[2].text, records[3].text}

    # -- filter operators ---------------------------------------------------------

    _VALUES: ClassVar[dict[str, Any]] = {
        "int1": 1, "float1": 1.0, "float15": 1.5, "int3": 3, "str1": "1", "strb": "b", "true": True, "null": None,
    }  # fmt: skip
    _CASES: ClassVar[list[tuple[dict[str, Any], set[str]]]] = [
        ({"$eq": 1}, {"int1", "float1"}),
        ({"$ne": 1}, {"float15", "int3", "str1", "strb", "true", "null", "absent"}),
        ({"$gt": 1}, {"float15", "int3"}),
        ({"$gte": 1}, {"int1", "float1", "float15", "int3"}),
        ({"$lt": 1.5}, {"int1", "float1"}),
        ({"$lte": 1.5}, {"int1", "float1", "float15"}),
        ({"$gt": "a"}, {"strb"}),
        ({"$lt": "a"}, {"str1"}),
        ({"$in": [1, "b", None]}, {"int1", "float1", "strb", "null"}),
        ({"$in": [True]}, {"true"}),
        ({"$in": []}, set()),
        ({"$nin": [1, "b"]}, {"float15", "int3", "str1", "true", "null", "absent"}),
        ({"$exists": True}, {"int1", "float1", "float15", "int3", "str1", "strb", "true", "null"}),
        ({"$exists": False}, {"absent"}),
        ({"$gte": 1, "$lt": 3}, {"int1", "float1", "float15"}),
        ({"$eq": None}, {"null"}),
        ({"$eq": True}, {"true"}),
        ({"$eq": "1"}, {"str1"}),
    ]

    async def _operator_records(self, memory: GuardedMemory) -> tuple[MemoryScope, dict[str, str]]:
        scope = self._user()
        names = [*self._VALUES, "absent"]
        records = [
            MemoryRecord(scope=scope, text=self._text("pepper", name),
                         metadata={"v": self._VALUES[name], "tag": name} if name != "absent" else {"tag": name})
            for name in names
        ]  # fmt: skip
        await self._add(memory, [*records, MemoryRecord(scope=self._user(), text="x", metadata={"v": 1})])
        return scope, {r.text: name for r, name in zip(records, names, strict=True)}

    async def test_filter_operators_against_each_json_type(self, memory: GuardedMemory) -> None:
        """``$eq $ne $gt $gte $lt $lte $in $nin $exists`` against ints, floats, strings, bools and null.

        ``1`` and ``1.0`` are equal; ``1``, ``"1"`` and ``True`` differ; numbers compare with
        numbers and strings with strings; ``$ne``/``$nin``/``$exists: False`` match records
        without the key. Undeclared ``filters``: UnsupportedCapability.
        Troubleshooting: keep JSON types apart (a type tag beside the value); without
        ``filter_operators`` the guard applies operators itself, so this fails only when
        metadata does not round-trip.
        """
        if not self._has(memory, Capability.FILTERS):
            with pytest.raises(UnsupportedCapability):
                await memory.search("", scope=self._user(), filters={"v": {"$gte": 1}})
            return
        scope, names = await self._operator_records(memory)
        for condition, expected in self._CASES:
            hits = await memory.search("", scope=scope, k=20, filters={"v": condition})
            got = {names[h.record.text] for h in hits}
            assert got == expected, f"filters={{'v': {condition}}} matched {sorted(got)}, expected {sorted(expected)}"
        both = await memory.search("", scope=scope, k=20, filters={"v": {"$gte": 1}, "tag": {"$ne": "int3"}})
        assert {names[h.record.text] for h in both} == {"int1", "float1", "float15"}, "keys must be ANDed"
        if self._has(memory, Capability.KEYWORD_SEARCH):
            hits = await memory.search("pepper", scope=scope, k=20, filters={"v": {"$in": ["b", True]}})
            assert {names[h.record.text] for h in hits} == {"strb", "true"}
        for bad in ({"v": {"$regex": "x"}}, {"v": {"$gte": 1, "x": 2}}, {"v": {"$in": "ab"}}, {"v": {"$gt": None}}):
            with pytest.raises(InvalidInput) as info:
                await memory.search("", scope=scope, filters=bad)
            assert info.value.field == "filters['v']"

    async def test_filter_operators_run_by_the_store(self, memory: GuardedMemory) -> None:
        """A store declaring ``filter_operators`` itself returns only records matching them.

        The store is called directly with each operator it declares. Undeclared: ``count`` with
        an operator raises UnsupportedCapability (search still works: the guard applies it).
        Troubleshooting: translate each operator to your query language with JSON types kept
        apart; declare a ``filter_operators`` frozenset if you run only some.
        """
        if not self._has(memory, Capability.FILTER_OPERATORS):
            if self._has(memory, Capability.COUNT) and self._has(memory, Capability.FILTERS):
                with pytest.raises(UnsupportedCapability):
                    await memory.count(self._user(), filters={"v": {"$gte": 1}})
                return
            pytest.skip("filter_operators is not declared (the guard applies operators)")
        scope, names = await self._operator_records(memory)
        port: Any = memory.store
        native = memory.filter_operators
        for condition, expected in self._CASES:
            if not set(condition) <= native:
                continue
            raw = await port.search("", scope=scope, k=20, filters={"v": condition})
            got = {names[h.record.text] for h in raw if h.record.text in names}
            assert got == expected, f"the store ran {condition} wrongly: {sorted(got)} != {sorted(expected)}"
            if self._has(memory, Capability.COUNT):
                n = await memory.count(scope, filters={"v": condition})
                assert n == len(expected), f"count(filters={{'v': {condition}}}) = {n}, expected {len(expected)}"

    # -- count --------------------------------------------------------------------

    async def test_count_matches_what_search_sees(self, memory: GuardedMemory) -> None:
        """``count`` counts the live records of the scope, with filters and time ranges.

        Expired records, other users' records and records outside the range are not counted.
        Undeclared ``count``: UnsupportedCapability.
        Troubleshooting: count with the same scope rule as search (user_id equality; session
        and agent where set), skip expired records, and apply filters and since/until.
        """
        scope = self._user()
        if not self._has(memory, Capability.COUNT):
            with pytest.raises(UnsupportedCapability):
                await memory.count(scope)
            return
        assert await memory.count(scope) == 0
        now = _now()
        meta = self._has(memory, Capability.METADATA)
        records = [
            MemoryRecord(scope=scope, text=self._text("apple", str(i)), created_at=now - timedelta(hours=i),
                         metadata={"kind": "fact" if i % 2 else "note"} if meta else {})
            for i in range(1, 7)
        ]  # fmt: skip
        if self._has(memory, Capability.EXPIRY):
            records.append(
                MemoryRecord(scope=scope, text=self._text("gone"), created_at=now - timedelta(hours=1),
                             expires_at=now + timedelta(milliseconds=300))
            )  # fmt: skip
        await self._add(memory, [*records, MemoryRecord(scope=self._user(), text=self._text("other"))])
        if self._has(memory, Capability.EXPIRY):
            import anyio

            await anyio.sleep(0.4)
        assert await memory.count(scope) == 6, "count includes expired or other users' records"
        assert await memory.count(scope, since=timedelta(hours=3, minutes=30)) == 3
        assert await memory.count(scope, until=timedelta(hours=3, minutes=30)) == 3
        if meta and self._has(memory, Capability.FILTERS):
            assert await memory.count(scope, filters={"kind": "fact"}) == 3
            assert await memory.count(scope, filters={"kind": "fact"}, since=timedelta(hours=3, minutes=30)) == 2
        if self._has(memory, Capability.SESSION_SCOPE):
            chat = MemoryScope(user_id=scope.user_id, session_id=f"c-{secrets.token_hex(4)}")
            await self._add(memory, [MemoryRecord(scope=chat, text=self._text("chat"))])
            assert await memory.count(chat) == 1
            assert await memory.count(scope) == 7, "a user's count covers their sessions"
