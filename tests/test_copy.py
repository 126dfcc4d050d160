"""copy_memories and ``memoryport copy`` between backends."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryport import (
    BackendError,
    CallableMemory,
    Capability,
    CopyReport,
    GuardedMemory,
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    UnsupportedCapability,
    UsageError,
    copy_memories,
    copy_memories_sync,
)
from memoryport.adapters.callable import CallableStore
from memoryport.cli import main

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def dict_memory(
    rows: dict[str, MemoryRecord] | None = None,
    *,
    capabilities: Iterable[Capability | str] | None = None,
    fail_after: int | None = None,
    name: str = "dict",
) -> GuardedMemory[CallableStore]:
    """A whole-record store in a dict, with the capabilities asked for."""
    store: dict[str, MemoryRecord] = {} if rows is None else rows
    calls = {"add": 0}

    def add(records: list[MemoryRecord]) -> None:
        calls["add"] += 1
        if fail_after is not None and calls["add"] > fail_after:
            raise RuntimeError("store is full")
        store.update({r.id: r for r in records if r.id})

    def search(query: str, scope: MemoryScope, k: int, filters: Any) -> list[MemoryRecord]:
        found = [r for r in store.values() if scope.covers(r.scope) and query in r.text]
        return found[:k]

    def get(id: str, scope: MemoryScope) -> MemoryRecord | None:
        r = store.get(id)
        return r if r is not None and scope.covers(r.scope) else None

    def delete(ids: list[str] | None, scope: MemoryScope) -> int:
        doomed = [i for i, r in store.items() if scope.covers(r.scope) and (ids is None or i in ids)]
        for i in doomed:
            del store[i]
        return len(doomed)

    def export(scope: MemoryScope) -> list[MemoryRecord]:
        return [r for r in store.values() if scope.covers(r.scope)]

    if capabilities is not None:
        capabilities = set(capabilities) | {Capability.GET, Capability.DELETE, Capability.EXPORT}
    return CallableMemory(
        add=add, search=search, get=get, delete=delete, export=export, capabilities=capabilities, name=name
    )


USER_ONLY = {Capability.KEYWORD_SEARCH}
ANN = MemoryScope(user_id="ann")
T0 = datetime(2023, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)


def sample() -> list[MemoryRecord]:
    later = datetime.now(timezone.utc) + timedelta(days=30)
    return [
        MemoryRecord(scope=ANN, text="Ann likes tea", metadata={"kind": "pref", "n": 2}, created_at=T0),
        MemoryRecord(scope=ANN, text="Ann flies Tuesday", created_at=T0 + timedelta(hours=1), expires_at=later),
        MemoryRecord(scope=MemoryScope(user_id="ben"), text="Ben's secret", created_at=T0),
    ]


async def test_copy_keeps_text_metadata_and_times() -> None:
    source, target = dict_memory(), dict_memory()
    originals = sample()
    await source.add(originals)
    report = await copy_memories(source, target, ANN)
    assert (report.exported, report.copied, report.dropped_metadata, report.dropped_expiry) == (2, 2, 0, 0)
    copied = await target.export(ANN)
    want = [(r.text, r.scope, r.metadata, r.created_at, r.expires_at) for r in originals[:2]]
    assert [(r.text, r.scope, r.metadata, r.created_at, r.expires_at) for r in copied] == want
    # fresh ids, mapped in the report
    assert set(report.ids) == {r.id for r in await source.export(ANN)}
    assert set(report.ids.values()) == {r.id for r in copied}
    assert not set(report.ids) & set(report.ids.values())
    assert await target.export(MemoryScope(user_id="ben")) == []


async def test_metadata_into_user_only_is_refused_before_writing() -> None:
    source = dict_memory()
    await source.add(sample())
    target_rows: dict[str, MemoryRecord] = {}
    target = dict_memory(target_rows, capabilities=USER_ONLY, name="useronly")
    assert target.user_only
    with pytest.raises(UnsupportedCapability) as info:
        await copy_memories(source, target, ANN)
    assert info.value.capability == "metadata"
    assert "drop_unsupported=True" in str(info.value)
    assert target_rows == {}


async def test_expiry_without_capability_is_refused() -> None:
    source = dict_memory()
    await source.add(sample())
    target = dict_memory(capabilities={Capability.METADATA}, name="noexpiry")
    with pytest.raises(UnsupportedCapability) as info:
        await copy_memories(source, target, ANN)
    assert info.value.capability == "expiry"
    assert await target.export(ANN) == []


async def test_drop_unsupported_drops_and_reports() -> None:
    source = dict_memory()
    await source.add(sample())
    target = dict_memory(capabilities=USER_ONLY)
    report = await copy_memories(source, target, ANN, drop_unsupported=True)
    assert (report.copied, report.dropped_metadata, report.dropped_expiry) == (2, 1, 1)
    copied = await target.export(ANN)
    assert [(r.text, r.metadata, r.expires_at, r.created_at) for r in copied] == [
        ("Ann likes tea", {}, None, T0),
        ("Ann flies Tuesday", {}, None, T0 + timedelta(hours=1)),
    ]


async def test_session_records_never_widen_into_user_only() -> None:
    source = dict_memory()
    await source.add([MemoryRecord(scope=MemoryScope(user_id="ann", session_id="s1"), text="in a chat")])
    target = dict_memory(capabilities=USER_ONLY)
    for drop in (False, True):
        with pytest.raises(UnsupportedCapability) as info:
            await copy_memories(source, target, ANN, drop_unsupported=drop)
        assert info.value.capability == "session_scope"
    with pytest.raises(UnsupportedCapability):
        await copy_memories(source, target, MemoryScope(user_id="ann", session_id="s1"))
    assert await target.export(ANN) == []


async def test_failure_part_way_removes_what_was_written() -> None:
    source = dict_memory()
    await source.add([MemoryRecord(scope=ANN, text=f"t{i}") for i in range(5)])
    rows: dict[str, MemoryRecord] = {}
    target = dict_memory(rows, fail_after=1)
    target.limits = type(target.limits)(max_batch=2)
    with pytest.raises(BackendError):
        await copy_memories(source, target, ANN)
    assert rows == {}


async def test_target_limits_are_checked_first() -> None:
    source = dict_memory()
    await source.add([MemoryRecord(scope=ANN, text="x" * 50), MemoryRecord(scope=ANN, text="short")])
    rows: dict[str, MemoryRecord] = {}
    target = dict_memory(rows)
    target.limits = type(target.limits)(max_text_chars=10)
    with pytest.raises(InvalidInput):
        await copy_memories(source, target, ANN)
    assert rows == {}


async def test_misuse() -> None:
    memory = dict_memory()
    with pytest.raises(UsageError):
        await copy_memories(memory, memory, ANN)
    with pytest.raises(UsageError):
        await copy_memories(memory, object(), ANN)  # type: ignore[arg-type]


def test_sync_twin() -> None:
    source, target = dict_memory(), dict_memory()
    source.add_sync(sample())
    report = copy_memories_sync(source, target, ANN)
    assert isinstance(report, CopyReport) and report.copied == 2


# -- the command line ------------------------------------------------------

STORES: dict[str, dict[str, MemoryRecord]] = {}


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module ``hostmem`` in the working directory whose factories serve dict stores."""
    module = "hostmem_" + tmp_path.name.replace("-", "_")
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            from tests_copy_support import dict_memory, STORES, USER_ONLY
            def source(): return dict_memory(STORES.setdefault("source", {}))
            def target(): return dict_memory(STORES.setdefault("target", {}))
            def useronly(): return dict_memory(STORES.setdefault("useronly", {}), capabilities=USER_ONLY)
            def broken(): return 42
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "tests_copy_support", sys.modules[__name__])
    STORES.clear()
    STORES["source"] = {}
    dict_memory(STORES["source"]).add_sync(sample())
    yield module
    sys.modules.pop(module, None)


def test_cli_copies_between_factories(factories: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["copy", f"{factories}:source", f"{factories}:target", "--user", "ann"]) == 0
    assert capsys.readouterr().out.strip() == "copied 2 of 2 memories"
    assert sorted(r.text for r in STORES["target"].values()) == ["Ann flies Tuesday", "Ann likes tea"]
    assert main(["copy", f"{factories}:source", f"{factories}:useronly", "--user", "ann", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "metadata" in err and "Traceback" not in err
    assert STORES.get("useronly", {}) == {}
    assert (
        main(["copy", f"{factories}:source", f"{factories}:useronly", "--user", "ann", "--drop-unsupported", "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert (report["copied"], report["dropped_metadata"], report["dropped_expiry"]) == (2, 1, 1)


def test_cli_user_mistakes(factories: str, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        ["copy", f"{factories}:source", f"{factories}:target"],  # no scope
        ["copy", "missing.db", f"{factories}:target", "--user", "ann"],
        ["copy", f"{factories}:nothere", f"{factories}:target", "--user", "ann"],
        ["copy", f"{factories}:broken", f"{factories}:target", "--user", "ann"],
        ["copy", "nosuchmodule_xyz:make", f"{factories}:target", "--user", "ann"],
        ["copy", f"{factories}:source", f"{factories}:source", "--user", "ann"],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("memoryport copy: error:") and err.count("\n") == 1, err


def test_cli_copies_between_sqlite_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``memoryport copy a.db b.db`` keeps texts, scopes, metadata and times."""
    from memoryport import SQLiteMemory as sqlite_memory

    first, second = tmp_path / "a.db", tmp_path / "b.db"
    originals = sample()
    source = sqlite_memory(first)
    source.add_sync(originals)
    source.close()
    assert main(["copy", str(first), str(second), "--user", "ann"]) == 0
    assert capsys.readouterr().out.strip() == "copied 2 of 2 memories"
    target = sqlite_memory(second)
    try:
        got = target.export_sync(ANN)
    finally:
        target.close()
    assert [(r.text, r.scope, r.metadata, r.created_at, r.expires_at) for r in got] == [
        (r.text, r.scope, r.metadata, r.created_at, r.expires_at) for r in originals[:2]
    ]
    assert main(["copy", str(tmp_path / "missing.db"), str(second), "--user", "ann"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The Python block of docs/adapters/copy.md runs as shown."""
    import re

    page = Path(__file__).resolve().parents[1] / "docs" / "adapters" / "copy.md"
    [block] = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)[:1]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "copy.md", "exec"), {"__name__": "copy_md"})
    assert capsys.readouterr().out.startswith("1 {")


async def test_copy_between_sqlite_files_keeps_every_field_and_scope(tmp_path: Path) -> None:
    """Records of several scopes (sessions, an agent), plain and with metadata/expiry, copied by the cheap plan
    (each record without its id: ``with_id(record, None)``) read back field for field, under fresh ids."""
    from memoryport import SQLiteMemory as sqlite_memory
    from memoryport._records import with_id

    scopes = [ANN, MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ann", agent_id="bot")]
    later = datetime.now(timezone.utc) + timedelta(days=30)
    originals = [
        MemoryRecord(
            scope=scopes[i % 3],
            text=f"Ann note {i}",
            metadata={"n": i} if i % 4 == 0 else {},
            created_at=T0 + timedelta(minutes=i),
            expires_at=later if i % 5 == 0 else None,
        )
        for i in range(40)
    ]
    source, target = sqlite_memory(tmp_path / "a.db"), sqlite_memory(tmp_path / "b.db")
    try:
        await source.add(originals)
        exported = await source.export(ANN)
        for record in exported[:5]:  # the cheap copy is pydantic's copy, field for field
            cheap, generic = with_id(record, None), record.model_copy(update={"id": None})
            assert cheap == generic and cheap.__pydantic_fields_set__ == generic.__pydantic_fields_set__
        report = await copy_memories(source, target, ANN)
        assert report.copied == 40
        copied = await target.export(ANN)
        fields = [(r.text, r.scope, r.metadata, r.created_at, r.expires_at) for r in copied]
        assert fields == [(r.text, r.scope, r.metadata, r.created_at, r.expires_at) for r in originals]
        assert not {r.id for r in copied} & {r.id for r in exported}
        assert set(report.ids) == {r.id for r in exported}
    finally:
        await source.aclose()
        await target.aclose()
