"""Mem0Memory against the real mem0 SDK (qdrant in memory, a history file in tmp_path)."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mem0")

from memoryport import (
    BackendError,
    GuardedMemory,
    InvalidInput,
    Mem0Memory,
    MemoryRecord,
    MemoryScope,
    UsageError,
)
from memoryport._port import Capability
from memoryport.adapters.mem0 import Mem0Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def memory(mem0_client: Any) -> AsyncIterator[GuardedMemory[Mem0Store]]:
    m = Mem0Memory(mem0_client)
    yield m
    await m.aclose()


def fresh(prefix: str = "u") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def history_texts(client: Any) -> list[str]:
    rows = client.db.connection.execute("SELECT old_memory, new_memory FROM history").fetchall()
    return [t for row in rows for t in row if t]


async def test_round_trip_keeps_text_metadata_and_times(memory: GuardedMemory[Mem0Store]) -> None:
    ann = MemoryScope(user_id=fresh(), session_id=fresh("s"), agent_id=fresh("a"))
    created = datetime(2021, 3, 4, 5, 6, 7, 891011, tzinfo=timezone.utc)
    expires = datetime.now(timezone.utc) + timedelta(days=3)
    meta = {"kind": "visit", "n": 3, "ratio": 1.5, "whole": 2.0, "ok": True, "none": None, "star": "*"}
    record = MemoryRecord(
        scope=ann, text="  Ann visited Oslo\nin May  ", metadata=meta, created_at=created, expires_at=expires
    )
    [rid] = await memory.add([record])
    got = await memory.get(rid, scope=ann)
    assert got is not None
    assert got.text == record.text
    assert got.metadata == meta
    assert {k: type(v) for k, v in got.metadata.items()} == {k: type(v) for k, v in meta.items()}
    assert got.created_at == created
    assert got.expires_at == expires
    assert got.scope == ann
    [exported] = await memory.export(ann)
    assert exported == got


async def test_capabilities(memory: GuardedMemory[Mem0Store]) -> None:
    assert Capability.SESSION_SCOPE in memory.capabilities
    assert Capability.AGENT_SCOPE in memory.capabilities
    assert Capability.EXPIRY in memory.capabilities
    assert Capability.PURGE in memory.capabilities
    assert Capability.KEYWORD_SEARCH not in memory.capabilities


async def test_user_scope_sees_own_sessions_and_agents_only(memory: GuardedMemory[Mem0Store]) -> None:
    ann, ben, agent = fresh(), fresh(), fresh("a")
    await memory.add(
        [
            MemoryRecord(scope=MemoryScope(user_id=ann), text="ann tea plain"),
            MemoryRecord(scope=MemoryScope(user_id=ann, session_id="s1", agent_id=agent), text="ann tea session"),
            MemoryRecord(scope=MemoryScope(user_id=ben, agent_id=agent), text="ben tea agent"),
            MemoryRecord(scope=MemoryScope(agent_id=agent), text="agent tea alone"),
        ]
    )
    texts = lambda hits: sorted(h.record.text for h in hits)  # noqa: E731
    assert texts(await memory.search("tea", scope=MemoryScope(user_id=ann), k=10)) == [
        "ann tea plain",
        "ann tea session",
    ]
    assert texts(await memory.search("tea", scope=MemoryScope(user_id=ann, session_id="s1"), k=10)) == [
        "ann tea session"
    ]
    # An agent-only scope covers only records without a user, although mem0's
    # filter on agent_id alone also returns Ann's and Ben's.
    assert texts(await memory.search("tea", scope=MemoryScope(agent_id=agent), k=10)) == ["agent tea alone"]
    assert [r.text for r in await memory.export(MemoryScope(agent_id=agent))] == ["agent tea alone"]
    assert memory.dropped_out_of_scope == 0


async def test_userless_scope_search_overfetches_to_return_k(memory: GuardedMemory[Mem0Store]) -> None:
    agent = fresh("a")
    crowd = [
        MemoryRecord(scope=MemoryScope(user_id=fresh(), agent_id=agent), text=f"coffee note {i}") for i in range(12)
    ]
    own = [MemoryRecord(scope=MemoryScope(agent_id=agent), text=f"coffee agent {i}") for i in range(3)]
    await memory.add(crowd + own)
    hits = await memory.search("coffee note", scope=MemoryScope(agent_id=agent), k=3)
    assert sorted(h.record.text for h in hits) == ["coffee agent 0", "coffee agent 1", "coffee agent 2"]


async def test_search_ranks_and_honours_k(memory: GuardedMemory[Mem0Store]) -> None:
    ann = MemoryScope(user_id=fresh())
    await memory.add(
        [MemoryRecord(scope=ann, text=t) for t in ("green tea", "black coffee", "green tea leaves", "rain")]
    )
    hits = await memory.search("green tea", scope=ann, k=2)
    assert [h.record.text for h in hits] == ["green tea", "green tea leaves"]
    assert hits[0].score >= hits[1].score > 0
    assert {h.signal for h in hits} == {"vector"}
    # threshold=0.0: unrelated records still fill k.
    assert len(await memory.search("green tea", scope=ann, k=4)) == 4


async def test_empty_query_lists_newest_first(memory: GuardedMemory[Mem0Store]) -> None:
    ann = MemoryScope(user_id=fresh())
    base = datetime(2022, 1, 1, tzinfo=timezone.utc)
    await memory.add([MemoryRecord(scope=ann, text=f"t{i}", created_at=base + timedelta(days=i)) for i in (2, 0, 3, 1)])
    hits = await memory.search("", scope=ann, k=3)
    assert [h.record.text for h in hits] == ["t3", "t2", "t1"]


async def test_filters_match_exactly_by_type(memory: GuardedMemory[Mem0Store]) -> None:
    ann = MemoryScope(user_id=fresh())
    rows = {
        "a": {"v": 1},
        "b": {"v": 1.0},
        "c": {"v": True},
        "d": {"v": "1"},
        "e": {"v": None},
        "f": {"v": 2.5},
        "g": {"v": "*"},
        "h": {},
    }
    await memory.add([MemoryRecord(scope=ann, text=f"note {k}", metadata=m) for k, m in rows.items()])

    async def found(value: Any) -> list[str]:
        hits = await memory.search("note", scope=ann, k=20, filters={"v": value})
        return sorted(h.record.text[-1] for h in hits)

    assert await found(1) == ["a", "b"]
    assert await found(1.0) == ["a", "b"]
    assert await found(True) == ["c"]
    assert await found("1") == ["d"]
    assert await found(None) == ["e"]
    assert await found(2.5) == ["f"]
    assert await found("*") == ["g"]  # not mem0's wildcard
    recent = await memory.search("", scope=ann, k=20, filters={"v": True})
    assert [h.record.text for h in recent] == ["note c"]


async def test_filter_keys_that_look_like_syntax(memory: GuardedMemory[Mem0Store]) -> None:
    ann = MemoryScope(user_id=fresh())
    odd = {"a.b": "dot", "OR": "x", "list[]": "y", "ünï cödé": "z", "$and": "w"}
    await memory.add([MemoryRecord(scope=ann, text="odd keys", metadata=odd), MemoryRecord(scope=ann, text="plain")])
    for key, value in odd.items():
        hits = await memory.search("odd keys", scope=ann, k=5, filters={key: value})
        assert [h.record.text for h in hits] == ["odd keys"], key
        assert hits[0].record.metadata == odd


async def test_get_is_scoped(memory: GuardedMemory[Mem0Store]) -> None:
    ann, ben = MemoryScope(user_id=fresh()), MemoryScope(user_id=fresh())
    [rid] = await memory.add([MemoryRecord(scope=MemoryScope(user_id=ann.user_id, session_id="s1"), text="x")])
    assert (await memory.get(rid, scope=ann)) is not None
    assert (await memory.get(rid, scope=ben)) is None
    assert (await memory.get(rid, scope=MemoryScope(user_id=ann.user_id, session_id="s2"))) is None
    assert (await memory.get("not-a-uuid", scope=ann)) is None
    assert (await memory.get(str(uuid.uuid4()), scope=ann)) is None


async def test_ids_with_whitespace_and_percent_round_trip(memory: GuardedMemory[Mem0Store]) -> None:
    odd = MemoryScope(user_id=f"Ann Smith {uuid.uuid4().hex[:6]}", session_id="chat 1%20")
    plain = MemoryScope(user_id=odd.user_id.replace(" ", "%20") if odd.user_id else None, session_id="chat%201%20")
    await memory.add([MemoryRecord(scope=odd, text="odd ids"), MemoryRecord(scope=plain, text="escaped lookalike")])
    [got] = await memory.export(odd)
    assert got.scope == odd and got.text == "odd ids"
    [other] = await memory.export(plain)
    assert other.text == "escaped lookalike"


async def test_reserved_metadata_is_refused_before_writing(memory: GuardedMemory[Mem0Store]) -> None:
    ann = MemoryScope(user_id=fresh())
    with pytest.raises(InvalidInput) as info:
        await memory.add(
            [MemoryRecord(scope=ann, text="fine"), MemoryRecord(scope=ann, text="x", metadata={"role": "a"})]
        )
    assert info.value.field == "records[1].metadata"
    assert await memory.export(ann) == []


async def test_failed_batch_leaves_nothing(mem0_client: Any) -> None:
    memory = Mem0Memory(mem0_client)
    ann = MemoryScope(user_id=fresh())
    mem0_client.embedding_model.fail_on = "FAILHERE"
    try:
        with pytest.raises(BackendError) as info:
            await memory.add([MemoryRecord(scope=ann, text=t) for t in ("kept one", "kept two", "FAILHERE three")])
    finally:
        mem0_client.embedding_model.fail_on = None
    assert isinstance(info.value.__cause__, RuntimeError)
    assert await memory.export(ann) == []
    assert not {"kept one", "kept two"} & set(history_texts(mem0_client))


async def test_delete_ids_only_within_scope(memory: GuardedMemory[Mem0Store], mem0_client: Any) -> None:
    ann, ben = MemoryScope(user_id=fresh()), MemoryScope(user_id=fresh())
    a1, a2 = await memory.add([MemoryRecord(scope=ann, text="ann one"), MemoryRecord(scope=ann, text="ann two")])
    [b1] = await memory.add([MemoryRecord(scope=ben, text="ben one")])
    assert await memory.delete([a1, b1, "not-a-uuid", str(uuid.uuid4())], scope=ann) == 1
    assert [r.id for r in await memory.export(ann)] == [a2]
    assert [r.id for r in await memory.export(ben)] == [b1]
    assert "ann one" not in history_texts(mem0_client)
    assert await memory.delete([a1], scope=ann) == 0


async def test_erase_user_leaves_no_text_in_history(tmp_path: Path, mem0_factory: Any) -> None:
    for kind in ("sync", "async"):
        path = tmp_path / f"history-{kind}.db"
        client = mem0_factory(kind, path)
        memory = Mem0Memory(client)
        ann, ben = fresh(), fresh()
        secret = [f"ann secret {uuid.uuid4().hex}" for _ in range(5)]
        await memory.add(
            [MemoryRecord(scope=MemoryScope(user_id=ann, session_id=f"s{i}"), text=t) for i, t in enumerate(secret)]
        )
        await memory.add([MemoryRecord(scope=MemoryScope(user_id=ben), text="ben stays")])
        assert set(secret) <= set(history_texts(client))
        assert await memory.delete(scope=MemoryScope(user_id=ann)) == 5
        assert await memory.export(MemoryScope(user_id=ann)) == []
        left = history_texts(client)
        assert not set(secret) & set(left)
        assert "ben stays" in left
        assert [r.text for r in await memory.export(MemoryScope(user_id=ben))] == ["ben stays"]
        # secure_delete: the texts are not in the file's free pages either.
        raw = path.read_bytes()
        assert not any(t.encode() in raw for t in secret)
        # The DELETE rows mem0 appends are gone too: a fresh connection agrees.
        with sqlite3.connect(path) as con:
            rows = con.execute(
                "SELECT count(*) FROM history WHERE old_memory LIKE 'ann secret%' OR new_memory LIKE 'ann secret%'"
            ).fetchone()
        assert rows == (0,)


async def test_export_refuses_to_truncate(mem0_client: Any) -> None:
    memory = Mem0Memory(mem0_client, export_limit=4)
    ann = MemoryScope(user_id=fresh())
    await memory.add([MemoryRecord(scope=ann, text=f"n{i}") for i in range(3)])
    assert len(await memory.export(ann)) == 3
    await memory.add([MemoryRecord(scope=ann, text="n3")])
    with pytest.raises(BackendError, match="export_limit"):
        await memory.export(ann)
    with pytest.raises(BackendError, match="export_limit"):
        await memory.delete(scope=ann)


async def test_expired_records_are_hidden(memory: GuardedMemory[Mem0Store]) -> None:
    ann = MemoryScope(user_id=fresh())
    past = datetime.now(timezone.utc) - timedelta(days=2)
    [rid, live] = await memory.add(
        [
            MemoryRecord(scope=ann, text="gone soon", created_at=past, expires_at=past + timedelta(hours=1)),
            MemoryRecord(scope=ann, text="still here"),
        ]
    )
    assert await memory.get(rid, scope=ann) is None
    assert [r.id for r in await memory.export(ann)] == [live]
    assert [h.record.id for h in await memory.search("gone soon", scope=ann, k=5)] == [live]


async def test_sdk_errors_become_backend_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mem0_factory: Any
) -> None:
    client = mem0_factory("sync", tmp_path / "h.db")
    memory = Mem0Memory(client)
    ann = MemoryScope(user_id=fresh())
    await memory.add([MemoryRecord(scope=ann, text="secret text here")])
    client.vector_store.delete_col()  # the collection is gone: every call fails inside mem0/qdrant
    with caplog.at_level(logging.WARNING, logger="memoryport"), pytest.raises(BackendError) as info:
        await memory.search("secret", scope=ann)
    assert info.value.__cause__ is not None
    assert info.value.operation == "search"
    assert "secret text" not in caplog.text and "secret text" not in str(info.value)
    assert type(info.value.__cause__).__name__ in caplog.text


def test_sync_twins(mem0_client: Any) -> None:
    memory = Mem0Memory(mem0_client)
    ann = MemoryScope(user_id=fresh())
    [rid] = memory.add_sync([MemoryRecord(scope=ann, text="sync tea")])
    assert [h.record.id for h in memory.search_sync("tea", scope=ann)] == [rid]
    assert memory.delete_sync(scope=ann) == 1


def test_rejects_other_clients() -> None:
    with pytest.raises(UsageError, match=r"mem0\.Memory"):
        Mem0Memory(object())
    import mem0

    for platform in (mem0.MemoryClient, mem0.AsyncMemoryClient):
        # __new__: the real constructor calls the hosted API to check the key.
        with pytest.raises(UsageError, match="not supported"):
            Mem0Memory(platform.__new__(platform))
    with pytest.raises(InvalidInput):
        import mem0

        Mem0Memory(mem0.Memory.__new__(mem0.Memory), export_limit=0)


def test_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys; sys.modules['mem0'] = None\n"
        "import memoryport\n"
        "assert 'mem0' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
        "try:\n"
        "    memoryport.Mem0Memory(object())\n"
        "except memoryport.MissingExtra as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ.copy()
    )
    assert out.returncode == 0, out.stderr
    assert 'pip install "memoryport[mem0]"' in out.stdout
    assert "mem0ai" in out.stdout


def test_import_memoryport_does_not_import_mem0() -> None:
    code = "import sys, memoryport; print('mem0' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# -- copying through Mem0 -------------------------------------------------------


def _whole_record_store() -> Any:
    """A host's own store (CallableMemory over a dict) holding whole records."""
    from memoryport import CallableMemory

    rows: dict[str, MemoryRecord] = {}

    def add(records: list[MemoryRecord]) -> None:
        rows.update({r.id: r for r in records if r.id})

    def search(query: str, scope: MemoryScope, k: int, filters: Any) -> list[MemoryRecord]:
        return [r for r in rows.values() if scope.covers(r.scope) and query in r.text][:k]

    def export(scope: MemoryScope) -> list[MemoryRecord]:
        return [r for r in rows.values() if scope.covers(r.scope)]

    def delete(ids: list[str] | None, scope: MemoryScope) -> int:
        doomed = [i for i, r in rows.items() if scope.covers(r.scope) and (ids is None or i in ids)]
        for i in doomed:
            del rows[i]
        return len(doomed)

    return CallableMemory(add=add, search=search, export=export, delete=delete)


def _copy_sample(user: str) -> list[MemoryRecord]:
    t0 = datetime(2020, 2, 3, 4, 5, 6, 789012, tzinfo=timezone.utc)
    return [
        MemoryRecord(
            scope=MemoryScope(user_id=user), text="Ann likes green tea", metadata={"kind": "pref"}, created_at=t0
        ),
        MemoryRecord(
            scope=MemoryScope(user_id=user, session_id="chat 7", agent_id="planner"),
            text="Ann flies to Oslo on Tuesday",
            metadata={"kind": "plan", "n": 2, "w": 0.5, "ok": True, "none": None},
            created_at=t0 + timedelta(days=1),
            expires_at=datetime.now(timezone.utc) + timedelta(days=9),
        ),
        MemoryRecord(scope=MemoryScope(user_id=user, agent_id="planner"), text="Ann's seat: 12A", created_at=t0),
    ]


def _shape(records: list[MemoryRecord]) -> list[tuple[Any, ...]]:
    return sorted((r.text, r.scope, r.metadata, r.created_at, r.expires_at) for r in records)


async def _round_trip(first: Any, last: Any, memory: GuardedMemory[Mem0Store]) -> None:
    from memoryport import copy_memories

    user = fresh()
    scope = MemoryScope(user_id=user)
    originals = _copy_sample(user)
    await first.add(originals)
    there = await copy_memories(first, memory, scope)
    assert (there.exported, there.copied) == (3, 3)
    assert _shape(await memory.export(scope)) == _shape(originals)
    back = await copy_memories(memory, last, scope)
    assert (back.exported, back.copied, back.dropped_metadata, back.dropped_expiry) == (3, 3, 0, 0)
    assert _shape(await last.export(scope)) == _shape(originals)


async def test_copy_round_trip_callable_mem0_callable(memory: GuardedMemory[Mem0Store]) -> None:
    await _round_trip(_whole_record_store(), _whole_record_store(), memory)


async def test_copy_round_trip_sqlite_mem0_sqlite(memory: GuardedMemory[Mem0Store], tmp_path: Path) -> None:
    """SQLite -> Mem0 -> SQLite keeps texts, scopes, metadata and times."""
    from memoryport import SQLiteMemory as sqlite_memory

    first, last = sqlite_memory(tmp_path / "first.db"), sqlite_memory(tmp_path / "last.db")
    try:
        await _round_trip(first, last, memory)
    finally:
        await first.aclose()
        await last.aclose()


async def test_copy_refuses_reserved_metadata_before_writing(memory: GuardedMemory[Mem0Store]) -> None:
    from memoryport import copy_memories

    source = _whole_record_store()
    user = fresh()
    await source.add(
        [
            MemoryRecord(scope=MemoryScope(user_id=user), text="ok"),
            MemoryRecord(scope=MemoryScope(user_id=user), text="clash", metadata={"created_at": "x"}),
        ]
    )
    with pytest.raises(InvalidInput):
        await copy_memories(source, memory, MemoryScope(user_id=user))
    assert await memory.export(MemoryScope(user_id=user)) == []


HOST_MEMORIES: dict[str, Any] = {}


def host_mem0() -> GuardedMemory[Mem0Store]:
    """What a host's ``module:factory`` looks like: builds its Mem0Memory from its own configuration."""
    return Mem0Memory(HOST_MEMORIES["mem0"])


def host_source() -> Any:
    return HOST_MEMORIES["source"]


def test_cli_copies_into_mem0_via_factory(
    mem0_client: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memoryport.cli import main

    user = fresh()
    source = _whole_record_store()
    originals = _copy_sample(user)
    source.add_sync(originals)
    monkeypatch.setitem(HOST_MEMORIES, "mem0", mem0_client)
    monkeypatch.setitem(HOST_MEMORIES, "source", source)
    monkeypatch.setitem(sys.modules, "mem0_host_config", sys.modules[__name__])
    code = main(["copy", "mem0_host_config:host_source", "mem0_host_config:host_mem0", "--user", user])
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "copied 3 of 3 memories"
    assert _shape(Mem0Memory(mem0_client).export_sync(MemoryScope(user_id=user))) == _shape(originals)


async def test_purge_removes_expired_and_retained_out(tmp_path: Path, mem0_factory: Any) -> None:
    client = mem0_factory("async", tmp_path / "h.db")
    memory = Mem0Memory(client)
    ann = MemoryScope(user_id=fresh())
    now = datetime.now(timezone.utc)
    old = now - timedelta(days=10)
    await memory.add(
        [
            MemoryRecord(scope=ann, text="expired text", created_at=old, expires_at=old + timedelta(days=1)),
            MemoryRecord(scope=ann, text="old text", created_at=old),
            MemoryRecord(scope=ann, text="fresh text"),
        ]
    )
    assert await memory.purge() == 1
    assert "expired text" not in history_texts(client)
    assert sorted(r.text for r in await memory.export(ann)) == ["fresh text", "old text"]
    kept = Mem0Memory(client, retention_days=5)
    assert [r.text for r in await kept.export(ann)] == ["fresh text"]
    assert await kept.purge() == 1
    assert "old text" not in history_texts(client)
    assert [r.text for r in await memory.export(ann)] == ["fresh text"]


async def test_extract_true_with_a_scripted_llm_and_erase_clears_messages(tmp_path: Path, mem0_factory: Any) -> None:
    """extract=True: mem0's LLM (scripted here) decides what is stored; erasure also clears its message log."""
    import json

    from mem0.llms.base import LLMBase

    class ScriptedLLM(LLMBase):  # type: ignore[misc]
        def generate_response(self, messages: Any, **kwargs: Any) -> str:
            said = messages[-1]["content"]
            facts = [{"text": "Ann likes green tea"}] if "tea" in said else []
            return json.dumps({"memory": facts})

    client = mem0_factory("sync", tmp_path / "h.db")
    client.llm = ScriptedLLM()
    memory = Mem0Memory(client, extract=True)
    ann = MemoryScope(user_id=fresh(), session_id="s1")
    ids = await memory.add(
        [MemoryRecord(scope=ann, text="I really do like my green tea"), MemoryRecord(scope=ann, text="hello there")]
    )
    [stored] = await memory.export(ann)
    assert stored.text == "Ann likes green tea"
    assert ids[0] == stored.id
    assert await memory.get(ids[1], scope=ann) is None  # nothing extracted: the id memoryport assigned
    messages = client.db.connection.execute("SELECT content FROM messages").fetchall()
    assert ("hello there",) in messages
    assert await memory.delete(scope=MemoryScope(user_id=ann.user_id)) == 1
    assert client.db.connection.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    assert not {"Ann likes green tea", "hello there"} & set(history_texts(client))


async def test_delete_race_counts_only_what_this_call_removed(
    memory: GuardedMemory[Mem0Store], mem0_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A record deleted by someone else between our read and our delete is not counted, and no error."""
    ann = MemoryScope(user_id=fresh())
    a, b = await memory.add([MemoryRecord(scope=ann, text="one"), MemoryRecord(scope=ann, text="two")])
    store = memory.store
    original = store.get  # type: ignore[attr-defined]

    async def get_then_vanish(id: str, *, scope: MemoryScope) -> Any:
        record = await original(id, scope=scope)
        if id == a:  # another process deletes it right after we read it
            await Mem0Memory(mem0_client).delete([a], scope=ann)
        return record

    store.get = get_then_vanish  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="memoryport"):
        assert await memory.delete([a, b], scope=ann) == 1
    assert "failed" not in caplog.text
    assert await memory.export(ann) == []


async def test_reads_memories_other_code_wrote_natively(memory: GuardedMemory[Mem0Store], mem0_client: Any) -> None:
    """Records added through mem0's own API (same store) come back as faithful MemoryRecords."""
    user = fresh()

    async def native(*args: Any, **kwargs: Any) -> Any:
        if memory.store._async:  # type: ignore[attr-defined]
            return await mem0_client.add(*args, **kwargs)
        return mem0_client.add(*args, **kwargs)

    before = datetime.now(timezone.utc)
    await native("native plain", user_id=user, infer=False)
    await native("native nested", user_id=user, agent_id="bot", infer=False, metadata={"tags": ["a", "b"], "n": 1})
    await native("native expired", user_id=user, infer=False, expiration_date="2001-01-01")
    got = {r.text: r for r in await memory.export(MemoryScope(user_id=user))}
    assert set(got) == {"native plain", "native nested"}  # the expired one is hidden by the guard
    assert got["native plain"].created_at >= before - timedelta(seconds=1)
    assert got["native nested"].scope == MemoryScope(user_id=user, agent_id="bot")
    assert got["native nested"].metadata == {"tags": '["a", "b"]', "n": 1}


async def test_erase_with_a_closed_history_database_is_an_error(tmp_path: Path, mem0_factory: Any) -> None:
    client = mem0_factory("sync", tmp_path / "h.db")
    memory = Mem0Memory(client)
    ann = MemoryScope(user_id=fresh())
    await memory.add([MemoryRecord(scope=ann, text="x")])
    db = client.db
    client.db = None  # what Memory.close() leaves behind
    try:
        with pytest.raises(BackendError, match="history database"):
            await memory.delete(scope=ann)
        with pytest.raises(BackendError, match="history database"):
            await memory.add([MemoryRecord(scope=ann, text="y")])
    finally:
        client.db = db
    assert [r.text for r in await memory.export(ann)] == ["x"]  # nothing was deleted
