"""ZepMemory through the real zep-cloud SDK, over an in-process fake of the v4 REST endpoints
(``benchmarks/zep_fake.py``).

The fake (httpx.MockTransport, no socket) keeps users, user graphs, episodes and
tasks in memory, models Zep's asynchronous processing (an episode is searchable
only once its task has finished; deletions take effect when their task does),
and checks every request it receives: method and path, JSON body shape, the
``Authorization: Api-Key`` header and the ``Idempotency-Key`` on POST/DELETE.
What it cannot prove: Zep's real ranking, extraction and timing.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("zep_cloud")
import httpx
from zep_cloud import AsyncZep
from zep_cloud.core.api_error import ApiError

from benchmarks.zep_fake import BASE, FakeZep, async_client, sync_client
from memoryport import (
    BackendError,
    GuardedMemory,
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    MemoryUpdate,
    UnsupportedCapability,
    UsageError,
)
from memoryport.adapters.zep import ZepMemory, ZepStore, zep_user_id_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"



@pytest.fixture
def zep_fake() -> FakeZep:
    return FakeZep()


@pytest.fixture(params=["async", "sync"])
async def zep_memory(request: pytest.FixtureRequest, zep_fake: FakeZep) -> AsyncIterator[GuardedMemory[ZepStore]]:
    client = async_client(zep_fake) if request.param == "async" else sync_client(zep_fake)
    memory = ZepMemory(client, poll_interval=0)
    yield memory
    await memory.aclose()
    assert zep_fake.violations == []


def rec(user: str, text: str, **kw: Any) -> MemoryRecord:
    return MemoryRecord(scope=MemoryScope(user_id=user), text=text, **kw)


ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


# -- tests ------------------------------------------------------------------------


def test_zep_user_id_is_a_hash() -> None:
    ext = zep_user_id_for("ann@example.com")
    assert ext.startswith("mp-") and len(ext) == 3 + 64 and "ann" not in ext
    assert zep_user_id_for("ann@example.com", hash_key=b"k") not in (
        ext,
        zep_user_id_for("ann@example.com", hash_key=b"j"),
    )


async def test_first_write_creates_the_user_and_round_trips(
    zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep,
) -> None:
    when = datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)
    [rid] = await zep_memory.add([rec("ann", "Ann likes green tea", id="r-1", created_at=when)])
    assert rid == "r-1"
    ext = zep_user_id_for("ann")
    assert [r[3] for r in zep_fake.calls("POST", "users/lookup")] == [{"user_id": ext}]
    [(_, _, _, created)] = zep_fake.calls("POST", "users")
    assert created["user_id"] == ext and "ann" not in json.dumps(created)
    [(_, path, _, body)] = zep_fake.calls("POST", r"graphs/[^/]+/episodes")
    user_uuid = next(iter(zep_fake.users))
    assert path == f"/api/v4/graphs/{user_uuid}/episodes"
    assert body == {
        "data": "Ann likes green tea",
        "type": "text",
        "metadata": {"memoryport_id": "r-1", "memoryport_created_at": "2024-05-01T10:00:00Z"},
        "reference_time": "2024-05-01T10:00:00Z",
        "source_description": "memoryport",
    }
    assert len(zep_fake.calls("GET", r"tasks/[^/]+")) == zep_fake.steps  # polled until processed
    got = await zep_memory.get("r-1", scope=ANN)
    assert got is not None and (got.id, got.text, got.created_at, got.scope) == (
        "r-1",
        "Ann likes green tea",
        when,
        ANN,
    )
    assert await zep_memory.export(ANN) == [got]
    # The second write reuses the cached user: no more lookups or creates.
    await zep_memory.add([rec("ann", "Ann lives in Lisbon")])
    assert len(zep_fake.calls("POST", "users/lookup")) == 1 and len(zep_fake.calls("POST", "users")) == 1


async def test_search_after_add_sees_the_text_and_keeps_users_apart(
    zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep,
) -> None:
    await zep_memory.add([rec("ann", "Ann likes green tea"), rec("ann", "Ann lives in Lisbon")])
    await zep_memory.add([rec("ben", "Ben likes green tea too")])
    hits = await zep_memory.search("green tea", scope=ANN, k=3)
    assert [h.record.text for h in hits] == ["Ann likes green tea"]
    assert hits[0].score == 1.0 and hits[0].signal == "backend" and hits[0].record.scope == ANN
    [(_, _, query, body)] = zep_fake.calls("POST", r"graphs/[^/]+/search/episodes")
    assert query == {"page_size": "3"} and body == {"query": "green tea"}
    assert [h.record.text for h in await zep_memory.search("tea", scope=BEN)] == ["Ben likes green tea too"]
    assert await zep_memory.search("tea", scope=MemoryScope(user_id="cat")) == []
    assert zep_memory.dropped_out_of_scope == 0
    assert len(zep_fake.users) == 2  # reading for an unknown user creates nobody


async def test_empty_query_lists_newest_by_our_creation_time(zep_memory: GuardedMemory[ZepStore]) -> None:
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    # Added out of order: Zep's own created_at would put them in insertion order.
    await zep_memory.add([rec("ann", f"note {i}", created_at=base + timedelta(days=i)) for i in (2, 0, 3, 1)])
    assert [h.record.text for h in await zep_memory.search("", scope=ANN, k=2)] == ["note 3", "note 2"]


async def test_wait_false_defers_to_settle(zep_fake: FakeZep) -> None:
    memory = ZepMemory(async_client(zep_fake), wait=False, poll_interval=0)
    await memory.add([rec("ann", "Ann likes green tea")])
    assert zep_fake.calls("GET", r"tasks/[^/]+") == []
    assert await memory.search("tea", scope=ANN) == []  # accepted, not yet indexed
    assert [r.text for r in await memory.export(ANN)] == ["Ann likes green tea"]  # the episode itself is readable
    await memory.store.settle()
    assert [h.record.text for h in await memory.search("tea", scope=ANN)] == ["Ann likes green tea"]
    await memory.store.settle()  # nothing pending: no more polls
    assert len(zep_fake.calls("GET", r"tasks/[^/]+")) == zep_fake.steps
    assert zep_fake.violations == []


async def test_listing_follows_every_page(zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep) -> None:
    zep_fake.max_page = 2
    ids = await zep_memory.add([rec("ann", f"green tea number {i}") for i in range(5)])
    before = len(zep_fake.calls("POST", r"graphs/[^/]+/episodes/list"))
    assert sorted(r.id for r in await zep_memory.export(ANN)) == sorted(ids)
    cursors = [q.get("cursor") for _, _, q, _ in zep_fake.calls("POST", r"graphs/[^/]+/episodes/list")[before:]]
    assert cursors == [None, "2", "4"]
    hits = await zep_memory.search("green tea", scope=ANN, k=5)  # 3 pages of search results
    assert len(hits) == 5
    assert len(zep_fake.calls("POST", r"graphs/[^/]+/search/episodes")) == 3


async def test_large_k_reads_further_search_pages(zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep) -> None:
    zep_fake.search_cap = 100
    await zep_memory.add([rec("ann", f"green tea number {i}") for i in range(60)])
    assert len(await zep_memory.search("green tea", scope=ANN, k=60)) == 60
    pages = [q for _, _, q, _ in zep_fake.calls("POST", r"graphs/[^/]+/search/episodes")]
    assert pages == [{"page_size": "50"}, {"page_size": "50", "cursor": "50"}]


async def test_get_absent_and_foreign_ids_is_none(zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep) -> None:
    assert await zep_memory.get("nope", scope=ANN) is None  # no Zep user yet
    [rid] = await zep_memory.add([rec("ann", "Ann likes green tea")])
    assert await zep_memory.get("nope", scope=ANN) is None
    assert await zep_memory.get(str(uuid.uuid4()), scope=ANN) is None  # 404 from the episode endpoint
    fetched = len(zep_fake.calls("GET", r"graphs/[^/]+/episodes/[^/]+"))
    assert await zep_memory.get(uuid.uuid4().hex, scope=ANN) is None  # memoryport's own id form
    assert len(zep_fake.calls("GET", r"graphs/[^/]+/episodes/[^/]+")) == fetched  # never sent as a Zep uuid
    await zep_memory.add([rec("ben", "Ben likes coffee")])
    assert await zep_memory.get(rid, scope=BEN) is None
    # An episode written into the user's graph by another tool is addressed by its uuid.
    user_uuid = next(u for u, x in zep_fake.users.items() if x["user_id"] == zep_user_id_for("ann"))
    foreign = zep_memory.store.client.graph.episode.add(user_uuid, data="from elsewhere")
    if hasattr(foreign, "__await__"):
        foreign = await foreign
    got = await zep_memory.get(foreign.episode.uuid_, scope=ANN)
    assert got is not None and got.text == "from elsewhere" and got.id == foreign.episode.uuid_


async def test_delete_ids_and_erase_user(zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep) -> None:
    ids = await zep_memory.add([rec("ann", "Ann likes green tea"), rec("ann", "Ann lives in Lisbon")])
    await zep_memory.add([rec("ben", "Ben likes coffee")])
    assert await zep_memory.delete([ids[0], "no-such-id"], scope=ANN) == 1
    assert await zep_memory.get(ids[0], scope=ANN) is None  # the delete task was waited for
    assert await zep_memory.delete([ids[1]], scope=BEN) == 0
    ann_uuid = next(u for u, x in zep_fake.users.items() if x["user_id"] == zep_user_id_for("ann"))
    assert await zep_memory.delete(scope=ANN) == 1
    assert zep_fake.calls("DELETE", f"users/{ann_uuid}")
    assert ann_uuid not in zep_fake.users
    assert await zep_memory.export(ANN) == []
    assert await zep_memory.delete(scope=ANN) == 0
    assert [r.text for r in await zep_memory.export(BEN)] == ["Ben likes coffee"]
    # Writing again after the erase makes a fresh Zep user.
    await zep_memory.add([rec("ann", "Ann is back")])
    assert [r.text for r in await zep_memory.export(ANN)] == ["Ann is back"]


async def test_a_stored_id_is_refused_and_nothing_is_written(
    zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep,
) -> None:
    await zep_memory.add([rec("ann", "Ann likes green tea", id="r-1")])
    posts = len(zep_fake.calls("POST", r"graphs/[^/]+/episodes"))
    with pytest.raises(InvalidInput) as info:
        await zep_memory.add([rec("ann", "new", id="r-2"), rec("ann", "Ann likes coffee", id="r-1")])
    assert info.value.field == "records[1].id"
    assert len(zep_fake.calls("POST", r"graphs/[^/]+/episodes")) == posts
    assert [r.text for r in await zep_memory.export(ANN)] == ["Ann likes green tea"]
    await zep_memory.add([rec("ben", "Ben's own r-1", id="r-1")])  # ids are unique per user
    got = await zep_memory.get("r-1", scope=BEN)
    assert got is not None and got.text == "Ben's own r-1"


async def test_concurrent_create_is_resolved_through_the_conflict(
    zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep,
) -> None:
    zep_fake.create_conflicts = 1
    await zep_memory.add([rec("ann", "Ann likes green tea")])
    assert len(zep_fake.users) == 1
    assert len(zep_fake.calls("POST", "users/lookup")) == 2
    assert [r.text for r in await zep_memory.export(ANN)] == ["Ann likes green tea"]


async def test_user_deleted_elsewhere_is_recreated(zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep) -> None:
    await zep_memory.add([rec("ann", "first")])
    zep_fake.users.clear()
    zep_fake.episodes.clear()
    await zep_memory.add([rec("ann", "second")])
    assert [r.text for r in await zep_memory.export(ANN)] == ["second"]


async def test_sdk_errors_become_backend_errors_and_batches_roll_back(
    zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep, caplog: pytest.LogCaptureFixture
) -> None:
    zep_fake.fail_adds_after = 1
    with caplog.at_level(logging.WARNING, logger="memoryport"), pytest.raises(BackendError) as info:
        await zep_memory.add([rec("ann", "secret one"), rec("ann", "secret two")])
    assert isinstance(info.value.__cause__, ApiError) and info.value.operation == "add"
    assert "secret" not in str(info.value) and "secret" not in caplog.text
    assert "InternalServerError" in caplog.text or "ApiError" in caplog.text
    zep_fake.run_all_tasks()
    assert await zep_memory.export(ANN) == []  # the first episode of the batch was deleted again


async def test_failed_task_fails_the_add_and_rolls_back(zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep) -> None:
    zep_fake.fail_next_task = True
    with pytest.raises(BackendError, match="failed add task"):
        await zep_memory.add([rec("ann", "Ann likes green tea")])
    zep_fake.run_all_tasks()
    assert await zep_memory.export(ANN) == []


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_batches_keep_at_most_concurrency_requests_in_flight(zep_fake: FakeZep, concurrency: int) -> None:
    memory = ZepMemory(async_client(zep_fake), poll_interval=0, concurrency=concurrency)
    await memory.add([rec("ann", "warm-up")])  # the user exists now
    zep_fake.max_in_flight = 0
    ids = await memory.add([rec("ann", f"note {i}") for i in range(9)])
    assert zep_fake.max_in_flight == concurrency
    assert await memory.delete(ids, scope=ANN) == 9
    assert zep_fake.max_in_flight == concurrency
    assert [r.text for r in await memory.export(ANN)] == ["warm-up"]
    assert zep_fake.violations == []


async def test_wait_timeout_is_a_clear_error(zep_fake: FakeZep) -> None:
    zep_fake.steps = 10**9
    memory = ZepMemory(async_client(zep_fake), poll_interval=0, wait_timeout=1e-9)
    with pytest.raises(BackendError, match="wait_timeout"):
        await memory.add([rec("ann", "Ann likes green tea")])


async def test_bad_key_is_a_backend_error(zep_fake: FakeZep) -> None:
    client = AsyncZep(
        api_key="wrong",
        base_url=BASE,
        max_retries=0,
        httpx_client=httpx.AsyncClient(transport=httpx.MockTransport(zep_fake.ahandle)),
    )
    with pytest.raises(BackendError) as info:
        await ZepMemory(client).search("tea", scope=ANN)
    assert info.value.__cause__ is not None and "401" in str(info.value)


async def test_user_only_capabilities_are_refused(zep_memory: GuardedMemory[ZepStore], zep_fake: FakeZep) -> None:
    with pytest.raises(UnsupportedCapability):
        await zep_memory.add([MemoryRecord(scope=MemoryScope(user_id="ann", session_id="s"), text="x")])
    with pytest.raises(UnsupportedCapability):
        await zep_memory.add([rec("ann", "x", metadata={"k": 1})])
    with pytest.raises(UnsupportedCapability):
        await zep_memory.add([rec("ann", "x", expires_at=datetime.now(timezone.utc) + timedelta(days=1))])
    with pytest.raises(UnsupportedCapability):
        await zep_memory.search("x", scope=ANN, filters={"k": 1})
    with pytest.raises(UnsupportedCapability):
        await zep_memory.purge()
    with pytest.raises(UnsupportedCapability):
        await zep_memory.update([MemoryUpdate(id="x", text="y")], scope=ANN)
    with pytest.raises(UnsupportedCapability):
        await zep_memory.count(ANN)
    with pytest.raises(UnsupportedCapability):
        await zep_memory.search("x", scope=ANN, filters={"k": {"$gte": 1}})
    assert zep_fake.requests == []  # refused before the backend was called


def test_needs_a_zep_client() -> None:
    with pytest.raises(UsageError, match=r"zep_cloud\.Zep"):
        ZepMemory(object())
    fake = FakeZep()
    for bad in ({"id_prefix": ""}, {"id_prefix": "x" * 401}, {"concurrency": 0}, {"wait_timeout": 0}):
        with pytest.raises(UsageError):
            ZepMemory(async_client(fake), **bad)


def test_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys; sys.modules['zep_cloud'] = None\n"
        "import memoryport\n"
        "from memoryport import MissingExtra\n"
        "try:\n"
        "    memoryport.ZepMemory(object())\n"
        "except MissingExtra as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 'pip install "memoryport[zep]"' in out


def test_import_memoryport_imports_no_sdk() -> None:
    code = (
        "import sys, memoryport; print(sorted(m for m in ('zep_cloud', 'graphiti_core', 'kuzu') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.skipif(not os.environ.get("ZEP_API_KEY"), reason="live Zep test: set ZEP_API_KEY to run it")
async def test_live_zep_round_trip() -> None:  # pragma: no cover - needs the real service
    memory = ZepMemory(AsyncZep(api_key=os.environ["ZEP_API_KEY"]), poll_interval=1.0, wait_timeout=300)
    scope = MemoryScope(user_id=f"memoryport-live-{uuid.uuid4().hex}")
    try:
        [rid] = await memory.add([MemoryRecord(scope=scope, text="The live test user likes green tea")])
        got = await memory.get(rid, scope=scope)
        assert got is not None and got.text == "The live test user likes green tea"
        hits = await memory.search("green tea", scope=scope)
        assert [h.record.id for h in hits][:1] == [rid]
    finally:
        await memory.delete(scope=scope)
    assert await memory.export(scope) == []


async def test_wait_false_erase_then_write_does_not_lose_the_write(zep_fake: FakeZep) -> None:
    memory = ZepMemory(async_client(zep_fake), wait=False, poll_interval=0)
    await memory.add([rec("ann", "old text")])
    await memory.delete(scope=ANN)
    await memory.add([rec("ann", "new text")])  # waits for the pending erase first
    await memory.store.settle()
    zep_fake.run_all_tasks()
    assert [r.text for r in await memory.export(ANN)] == ["new text"]
    assert zep_fake.violations == []


# -- the contract suite --------------------------------------------------------

from memoryport.contracts import MemoryContract  # noqa: E402


class TestZepContract(MemoryContract):
    """The whole contract suite through the real async SDK over the fake, writes not waited for.

    ``wait=False`` makes the suite's ``settle`` hook do the waiting, so a missing settle
    shows up as a search that misses a fresh record, as it would on the real service.
    """

    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory[ZepStore]]:
        fake = FakeZep()
        memory = GuardedMemory(ZepStore(async_client(fake), wait=False, poll_interval=0))
        yield memory
        await memory.aclose()
        assert fake.violations == []


class TestZepBlockingClientContract(MemoryContract):
    """The suite again with the blocking ``Zep`` client and the default ``wait=True``: no settle needed."""

    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory[ZepStore]]:
        fake = FakeZep()
        memory = GuardedMemory(ZepStore(sync_client(fake), poll_interval=0))
        yield memory
        await memory.aclose()
        assert fake.violations == []
