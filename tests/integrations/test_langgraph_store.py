"""MemoryportStore: LangGraph's documented store behaviour, and the isolation no LangGraph store has."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from memoryport import Capability, GuardedMemory, InvalidInput, MemoryScope, UnsupportedCapability, UsageError
from memoryport.integrations.langgraph import MemoryportStore, NamespaceRefused, NamespaceTemplate

USER_NS = ("memories", "{user_id}")
THREAD_NS = ("users", "{user_id}", "threads", "{session_id}")


def store_for(memory: GuardedMemory, namespace: tuple[str, ...] = USER_NS, **kw: object) -> MemoryportStore:
    return MemoryportStore(memory, namespace=namespace, **kw)  # type: ignore[arg-type]


# -- documented behaviour: put / get / delete ------------------------------------


def test_put_get_delete_round_trip(memory: GuardedMemory) -> None:
    store = store_for(memory)
    value = {"text": "Ann likes green tea", "tags": ["drink", "tea"], "nested": {"n": 1.5, "ok": True}}
    store.put(("memories", "ann"), "tea", value)
    item = store.get(("memories", "ann"), "tea")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("memories", "ann"), "tea", value)
    assert item.created_at.tzinfo is not None and item.updated_at >= item.created_at
    store.delete(("memories", "ann"), "tea")
    assert store.get(("memories", "ann"), "tea") is None
    store.delete(("memories", "ann"), "tea")  # deleting what is gone is fine
    assert store.get(("memories", "ann"), "never") is None


def test_put_replaces_by_key_and_keeps_created_at(memory: GuardedMemory) -> None:
    store = store_for(memory)
    store.put(("memories", "ann"), "tea", {"text": "green tea"})
    first = store.get(("memories", "ann"), "tea")
    time.sleep(0.01)
    store.put(("memories", "ann"), "tea", {"text": "oolong"})
    second = store.get(("memories", "ann"), "tea")
    assert first is not None and second is not None
    assert second.value == {"text": "oolong"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    # one item, not two
    assert [i.value for i in store.search(("memories", "ann"))] == [{"text": "oolong"}]
    assert len(memory.export_sync(MemoryScope(user_id="ann"))) == 1


def test_put_none_value_deletes_in_a_batch(memory: GuardedMemory) -> None:
    store = store_for(memory)
    ns = ("memories", "ann")
    results = store.batch(
        [
            PutOp(ns, "a", {"text": "alpha"}),
            PutOp(ns, "b", {"text": "beta"}),
            GetOp(ns, "a"),
            PutOp(ns, "a", None),
            GetOp(ns, "a"),
            SearchOp(ns),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ns),)),
        ]
    )
    assert results[0] is None and results[1] is None
    assert results[2] is not None and results[2].value == {"text": "alpha"}  # type: ignore[union-attr]
    assert results[4] is None
    assert [i.key for i in results[5]] == ["b"]  # type: ignore[union-attr]
    assert results[6] == [ns]


# -- search -----------------------------------------------------------------------


def _seed(store: MemoryportStore) -> None:
    ns = ("memories", "ann")
    store.put(ns, "tea", {"text": "Ann drinks green tea every morning", "kind": "habit", "score": 3})
    store.put(ns, "job", {"text": "Ann works as a nurse in Leeds", "kind": "fact", "score": 5})
    store.put(ns, "cat", {"text": "Ann has a cat called Miso", "kind": "fact", "score": 4, "meta": {"pet": True}})
    store.put(ns, "run", {"text": "Ann runs on Sundays", "kind": "habit", "score": 1})


def test_search_with_a_query_ranks_matching_items(memory: GuardedMemory) -> None:
    store = store_for(memory, index={"fields": ["text"]})
    _seed(store)
    hits = store.search(("memories", "ann"), query="green tea")
    assert hits and hits[0].key == "tea" and hits[0].score is not None
    assert "job" not in [h.key for h in hits]


def test_search_without_query_lists_newest_first_with_no_score(memory: GuardedMemory) -> None:
    store = store_for(memory)
    _seed(store)
    hits = store.search(("memories", "ann"), limit=10)
    assert [h.key for h in hits] == ["run", "cat", "job", "tea"]
    assert all(h.score is None for h in hits)


def test_search_limit_and_offset_page_through(memory: GuardedMemory) -> None:
    store = store_for(memory)
    _seed(store)
    pages = [[h.key for h in store.search(("memories", "ann"), limit=2, offset=o)] for o in (0, 2, 4)]
    assert pages == [["run", "cat"], ["job", "tea"], []]
    assert store.search(("memories", "ann"), limit=0) == []


@pytest.mark.parametrize(
    ("flt", "keys"),
    [
        ({"kind": "fact"}, {"job", "cat"}),
        ({"kind": "fact", "score": 5}, {"job"}),
        ({"score": {"$gt": 3}}, {"job", "cat"}),
        ({"score": {"$gte": 3, "$lt": 5}}, {"tea", "cat"}),
        ({"score": {"$lte": 1}}, {"run"}),
        ({"kind": {"$ne": "fact"}}, {"tea", "run"}),
        ({"kind": {"$eq": "habit"}}, {"tea", "run"}),
        ({"meta": {"pet": True}}, {"cat"}),
        ({"missing": "x"}, set()),
    ],
)
def test_search_filters_follow_langgraph(memory: GuardedMemory, flt: dict[str, object], keys: set[str]) -> None:
    store = store_for(memory)
    _seed(store)
    assert {h.key for h in store.search(("memories", "ann"), filter=flt)} == keys


def test_filter_with_query_and_paging(memory: GuardedMemory) -> None:
    store = store_for(memory, index={"fields": ["text"]})
    _seed(store)
    hits = store.search(("memories", "ann"), query="Ann", filter={"kind": "habit"}, limit=1)
    assert len(hits) == 1 and hits[0].value["kind"] == "habit"


def test_unknown_filter_operator_is_refused(memory: GuardedMemory) -> None:
    store = store_for(memory)
    _seed(store)
    with pytest.raises(InvalidInput) as err:
        store.search(("memories", "ann"), filter={"score": {"$regex": "x"}})
    assert err.value.field == "filter"


def test_index_fields_decide_what_a_query_finds(memory: GuardedMemory) -> None:
    store = store_for(memory, index={"fields": ["title"]})
    ns = ("memories", "ann")
    store.put(ns, "a", {"title": "kayak trip", "body": "mountain lake"})
    store.put(ns, "b", {"title": "mountain hut", "body": "kayak rental"})
    assert [h.key for h in store.search(ns, query="kayak")] == ["a"]
    # a per-item index overrides the store's fields
    store.put(ns, "c", {"title": "x", "body": "glacier walk"}, index=["body"])
    assert [h.key for h in store.search(ns, query="glacier")] == ["c"]


def test_index_false_keeps_the_item_out_of_query_search_only(memory: GuardedMemory) -> None:
    store = store_for(memory)
    ns = ("memories", "ann")
    store.put(ns, "secret", {"text": "quiet walnut"}, index=False)
    store.put(ns, "open", {"text": "loud walnut"})
    assert [h.key for h in store.search(ns, query="walnut")] == ["open"]
    assert {h.key for h in store.search(ns)} == {"secret", "open"}
    assert store.get(ns, "secret") is not None


def test_whole_value_is_indexed_by_default(memory: GuardedMemory) -> None:
    store = store_for(memory)
    ns = ("memories", "ann")
    store.put(ns, "k", {"food": "pistachio", "n": 1})
    assert [h.key for h in store.search(ns, query="pistachio")] == ["k"]


# -- namespaces and the template -----------------------------------------------------


def test_list_namespaces_within_one_user(memory: GuardedMemory) -> None:
    store = store_for(memory, namespace=("users", "{user_id}", "{kind}"))
    for kind in ("prefs", "facts", "plans"):
        store.put(("users", "ann", kind), "k", {"text": kind})
    store.put(("users", "ben", "secrets"), "k", {"text": "ben"})
    assert store.list_namespaces(prefix=("users", "ann")) == [
        ("users", "ann", "facts"),
        ("users", "ann", "plans"),
        ("users", "ann", "prefs"),
    ]
    assert store.list_namespaces(prefix=("users", "ann"), suffix=("plans",)) == [("users", "ann", "plans")]
    assert store.list_namespaces(prefix=("users", "ann", "*")) == store.list_namespaces(prefix=("users", "ann"))
    assert store.list_namespaces(prefix=("users", "ann"), max_depth=2) == [("users", "ann")]
    assert store.list_namespaces(prefix=("users", "ann"), limit=1, offset=1) == [("users", "ann", "plans")]


def test_free_labels_split_a_users_items(memory: GuardedMemory) -> None:
    store = store_for(memory, namespace=("users", "{user_id}", "{kind}"))
    store.put(("users", "ann", "prefs"), "k", {"text": "tea"})
    store.put(("users", "ann", "facts"), "k", {"text": "nurse"})
    assert [i.value for i in store.search(("users", "ann", "prefs"))] == [{"text": "tea"}]
    assert {i.value["text"] for i in store.search(("users", "ann"))} == {"tea", "nurse"}
    assert store.get(("users", "ann", "facts"), "k").value == {"text": "nurse"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "template",
    [
        (),
        "memories",
        ("memories",),  # no scope placeholder
        ("memories", "{user_id}", "{user_id}"),
        ("memories", "x{user_id}"),
        ("a.b", "{user_id}"),
        ("langgraph", "{user_id}"),
        ("memories", ""),
    ],
)
def test_bad_templates_are_refused(sqlite_memory: GuardedMemory, template: tuple[str, ...]) -> None:
    with pytest.raises(UsageError):
        MemoryportStore(sqlite_memory, namespace=template)


def test_store_refuses_backends_that_lack_what_it_needs() -> None:
    from integrations_support import PlainStore

    class NoMetadata(PlainStore):
        capabilities = PlainStore.capabilities - {Capability.METADATA}

    class NoSessions(PlainStore):
        capabilities = PlainStore.capabilities - {Capability.SESSION_SCOPE}

    with pytest.raises(UsageError, match="metadata"):
        MemoryportStore(GuardedMemory(NoMetadata()), namespace=USER_NS)
    with pytest.raises(UsageError, match="session_scope"):
        MemoryportStore(GuardedMemory(NoSessions()), namespace=THREAD_NS)
    MemoryportStore(GuardedMemory(NoSessions()), namespace=USER_NS)  # fine without sessions


def test_index_embed_is_refused_not_ignored(sqlite_memory: GuardedMemory) -> None:
    with pytest.raises(UsageError, match="embed"):
        MemoryportStore(sqlite_memory, namespace=USER_NS, index={"dims": 3, "embed": lambda t: [[0.0] * 3]})


def test_template_maps_namespaces_to_scopes() -> None:
    t = NamespaceTemplate.parse(("agents", "{agent_id}", "users", "{user_id}", "threads", "{session_id}"))
    assert t.scope_of(("agents", "a1", "users", "ann", "threads", "t1")) == MemoryScope(
        user_id="ann", session_id="t1", agent_id="a1"
    )
    assert t.scope_of_prefix(("agents", "a1", "users", "ann")) == MemoryScope(user_id="ann", agent_id="a1")
    with pytest.raises(NamespaceRefused):
        t.scope_of_prefix(("agents", "a1"))  # names no user: would reach every user of a1


# -- isolation: the part no LangGraph store has -------------------------------------


@pytest.mark.parametrize(
    "namespace",
    [
        ("memories",),  # a prefix above the user
        ("memories", "ann", "extra"),  # longer than the template
        ("notes", "ann"),  # another literal
        ("memories", "*"),  # a wildcard user
    ],
)
def test_namespaces_that_do_not_fit_are_refused_everywhere(memory: GuardedMemory, namespace: tuple[str, ...]) -> None:
    store = store_for(memory)
    store.put(("memories", "ann"), "k", {"text": "Ann's secret"})
    calls = [
        lambda: store.search(namespace),
        lambda: store.list_namespaces(prefix=namespace),
    ]
    if len(namespace) == 2:
        calls += [lambda: store.get(namespace, "k"), lambda: store.put(namespace, "k2", {"text": "x"})]
    for call in calls:
        with pytest.raises(NamespaceRefused) as err:
            call()
        assert isinstance(err.value, InvalidInput) and isinstance(err.value, InvalidNamespaceError)
        assert err.value.field == "namespace"
    assert len(memory.export_sync(MemoryScope(user_id="ann"))) == 1


def test_list_namespaces_never_lists_across_users(memory: GuardedMemory) -> None:
    store = store_for(memory)
    store.put(("memories", "ann"), "k", {"text": "a"})
    for call in (
        lambda: store.list_namespaces(),
        lambda: store.list_namespaces(suffix=("ann",)),
        lambda: store.list_namespaces(prefix=("memories",)),
        lambda: store.list_namespaces(prefix=("memories", "*")),
    ):
        with pytest.raises(NamespaceRefused):
            call()


@pytest.mark.parametrize("other", ["ann2", "ann-corp", "an", "Ann", "ann "])
def test_one_users_prefix_never_matches_anothers(memory: GuardedMemory, other: str) -> None:
    """The LangGraph namespace-prefix leak: ('tenant', 'acme') must not reach ('tenant', 'acme-corp')."""
    store = store_for(memory, index={"fields": ["text"]})
    store.put(("memories", other), "secret", {"text": "the other user's secret plan"})
    store.put(("memories", "ann"), "mine", {"text": "Ann's own plan"})
    for query in (None, "secret plan", "plan"):
        assert {h.key for h in store.search(("memories", "ann"), query=query)} == {"mine"}
    assert store.get(("memories", "ann"), "secret") is None
    assert store.list_namespaces(prefix=("memories", "ann")) == [("memories", "ann")]
    store.delete(("memories", "ann"), "secret")
    assert store.get(("memories", other), "secret") is not None


def test_same_key_for_two_users_are_two_items(memory: GuardedMemory) -> None:
    store = store_for(memory)
    store.put(("memories", "ann"), "profile", {"name": "Ann"})
    store.put(("memories", "ben"), "profile", {"name": "Ben"})
    store.put(("memories", "ann"), "profile", {"name": "Ann B."})
    assert store.get(("memories", "ben"), "profile").value == {"name": "Ben"}  # type: ignore[union-attr]
    assert store.get(("memories", "ann"), "profile").value == {"name": "Ann B."}  # type: ignore[union-attr]


def test_a_user_prefix_covers_that_users_threads_only(memory: GuardedMemory) -> None:
    store = store_for(memory, namespace=THREAD_NS)
    store.put(("users", "ann", "threads", "t1"), "a", {"text": "first"})
    store.put(("users", "ann", "threads", "t2"), "b", {"text": "second"})
    store.put(("users", "ben", "threads", "t1"), "c", {"text": "bens"})
    assert {h.key for h in store.search(("users", "ann"))} == {"a", "b"}
    assert {h.key for h in store.search(("users", "ann", "threads", "t1"))} == {"a"}
    assert store.list_namespaces(prefix=("users", "ann")) == [
        ("users", "ann", "threads", "t1"),
        ("users", "ann", "threads", "t2"),
    ]
    with pytest.raises(NamespaceRefused):
        store.search(("users",))


def test_other_writers_in_the_same_scope_are_not_items(memory: GuardedMemory) -> None:
    """Records the memory tools wrote for Ann share her scope but are never shown as LangGraph items."""
    from memoryport import MemoryRecord

    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="a plain memory about tea")])
    store = store_for(memory)
    store.put(("memories", "ann"), "k", {"text": "tea item"})
    assert [h.key for h in store.search(("memories", "ann"), query="tea")] == ["k"]
    assert [h.key for h in store.search(("memories", "ann"))] == ["k"]


# -- TTL ---------------------------------------------------------------------------


def test_ttl_sets_expiry_and_expired_items_vanish_at_once(memory: GuardedMemory) -> None:
    store = store_for(memory)
    ns = ("memories", "ann")
    store.put(ns, "brief", {"text": "short lived"}, ttl=0.001)  # 60 ms
    store.put(ns, "long", {"text": "long lived"}, ttl=60)
    record = memory.get_sync(_id(store, ns, "long"), scope=MemoryScope(user_id="ann"))
    assert record is not None and record.expires_at is not None
    assert timedelta(minutes=59) < record.expires_at - record.created_at <= timedelta(minutes=60, seconds=1)
    time.sleep(0.15)
    assert store.get(ns, "brief") is None
    assert [h.key for h in store.search(ns)] == ["long"]


def test_reads_refresh_the_ttl_unless_told_not_to(memory: GuardedMemory) -> None:
    store = store_for(memory)
    ns = ("memories", "ann")
    scope = MemoryScope(user_id="ann")
    store.put(ns, "k", {"text": "x"}, ttl=10)
    before = memory.get_sync(_id(store, ns, "k"), scope=scope).expires_at  # type: ignore[union-attr]
    time.sleep(0.01)
    store.get(ns, "k", refresh_ttl=False)
    assert memory.get_sync(_id(store, ns, "k"), scope=scope).expires_at == before  # type: ignore[union-attr]
    store.get(ns, "k")
    after = memory.get_sync(_id(store, ns, "k"), scope=scope).expires_at  # type: ignore[union-attr]
    assert after is not None and before is not None and after > before
    store.search(ns)
    again = memory.get_sync(_id(store, ns, "k"), scope=scope).expires_at  # type: ignore[union-attr]
    assert again is not None and again > after


def test_default_ttl_from_config(memory: GuardedMemory) -> None:
    store = store_for(memory, ttl={"default_ttl": 5, "refresh_on_read": False})
    store.put(("memories", "ann"), "k", {"text": "x"})
    store.put(("memories", "ann"), "forever", {"text": "y"}, ttl=None)
    scope = MemoryScope(user_id="ann")
    assert memory.get_sync(_id(store, ("memories", "ann"), "k"), scope=scope).expires_at is not None  # type: ignore[union-attr]
    assert memory.get_sync(_id(store, ("memories", "ann"), "forever"), scope=scope).expires_at is None  # type: ignore[union-attr]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), "5"])
def test_bad_ttl_is_refused(memory: GuardedMemory, ttl: object) -> None:
    store = store_for(memory)
    with pytest.raises(InvalidInput):
        store.put(("memories", "ann"), "k", {"text": "x"}, ttl=ttl)  # type: ignore[arg-type]
    assert store.get(("memories", "ann"), "k") is None


def test_ttl_on_a_backend_without_expiry_is_refused() -> None:
    from integrations_support import PlainStore

    class NoExpiry(PlainStore):
        capabilities = PlainStore.capabilities - {Capability.EXPIRY}

    store = MemoryportStore(GuardedMemory(NoExpiry()), namespace=USER_NS)
    with pytest.raises(UnsupportedCapability):
        store.put(("memories", "ann"), "k", {"text": "x"}, ttl=5)
    with pytest.raises(UsageError):
        MemoryportStore(GuardedMemory(NoExpiry()), namespace=USER_NS, ttl={"default_ttl": 5})


def _id(store: MemoryportStore, ns: tuple[str, ...], key: str) -> str:
    from memoryport.integrations.langgraph import _record_id

    return _record_id(ns, key)


# -- bad input: refused, nothing lost --------------------------------------------------


def test_a_value_too_large_is_refused_and_the_old_value_stays(memory: GuardedMemory) -> None:
    store = store_for(memory)
    ns = ("memories", "ann")
    store.put(ns, "k", {"text": "small"})
    with pytest.raises(InvalidInput) as err:
        store.put(ns, "k", {"text": "x" * 20_000})
    assert "metadata" in err.value.field
    assert store.get(ns, "k").value == {"text": "small"}  # type: ignore[union-attr]


def test_values_that_are_not_json_are_refused(memory: GuardedMemory) -> None:
    store = store_for(memory)
    with pytest.raises(InvalidInput):
        store.put(("memories", "ann"), "k", {"when": object()})
    with pytest.raises(InvalidInput):
        store.put(("memories", "ann"), "k", {"x": float("inf")})
    assert store.search(("memories", "ann")) == []


def test_a_page_beyond_what_the_backend_returns_is_refused(memory: GuardedMemory) -> None:
    store = store_for(memory)
    with pytest.raises(InvalidInput, match="max_k"):
        store.search(("memories", "ann"), limit=10, offset=memory.limits.max_k)


# -- async and sync -------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_methods(memory: GuardedMemory) -> None:
    store = store_for(memory, index={"fields": ["text"]})
    ns = ("memories", "ann")
    await store.aput(ns, "k", {"text": "async tea"})
    assert (await store.aget(ns, "k")).value == {"text": "async tea"}  # type: ignore[union-attr]
    assert [i.key for i in await store.asearch(ns, query="tea")] == ["k"]
    assert await store.alist_namespaces(prefix=ns) == [ns]
    await store.adelete(ns, "k")
    assert await store.aget(ns, "k") is None
    with pytest.raises(UsageError, match="abatch"):
        store.get(ns, "k")  # the blocking form inside a running loop names the async one


def test_sync_batch_from_threads(memory: GuardedMemory) -> None:
    store = store_for(memory)

    async def many() -> None:
        await asyncio.gather(
            *(asyncio.to_thread(store.put, ("memories", f"u{i}"), "k", {"text": f"v{i}"}) for i in range(8))
        )

    asyncio.run(many())
    assert [store.get(("memories", f"u{i}"), "k").value for i in range(8)] == [  # type: ignore[union-attr]
        {"text": f"v{i}"} for i in range(8)
    ]


def test_two_stores_on_one_memory_keep_their_items_apart(memory: GuardedMemory) -> None:
    notes = store_for(memory, namespace=("notes", "{user_id}"))
    profile = store_for(memory, namespace=("profile", "{user_id}"))
    notes.put(("notes", "ann"), "k", {"text": "a note about tea"})
    profile.put(("profile", "ann"), "k", {"text": "a profile about tea"})
    assert [i.value["text"] for i in notes.search(("notes", "ann"), query="tea")] == ["a note about tea"]
    assert [i.value["text"] for i in profile.search(("profile", "ann"))] == ["a profile about tea"]
    assert notes.list_namespaces(prefix=("notes", "ann")) == [("notes", "ann")]


def test_filters_keep_json_types_apart(memory: GuardedMemory) -> None:
    """LangGraph's own stores let {"n": 1} match True and 1.0; here 1 matches 1 and 1.0 only."""
    store = store_for(memory)
    ns = ("memories", "ann")
    for key, n in (("int", 1), ("float", 1.0), ("bool", True), ("str", "1"), ("none", None)):
        store.put(ns, key, {"n": n, "tags": [n]})
    assert {h.key for h in store.search(ns, filter={"n": 1})} == {"int", "float"}
    assert {h.key for h in store.search(ns, filter={"n": True})} == {"bool"}
    assert {h.key for h in store.search(ns, filter={"n": "1"})} == {"str"}
    assert {h.key for h in store.search(ns, filter={"n": None})} == {"none"}
    assert {h.key for h in store.search(ns, filter={"n": {"$eq": 1}})} == {"int", "float"}
    assert {h.key for h in store.search(ns, filter={"n": {"$ne": 1}})} == {"bool", "str", "none"}
    assert {h.key for h in store.search(ns, filter={"tags": [True]})} == {"bool"}
    assert {h.key for h in store.search(ns, filter={"n": {"$gte": 1}})} == {"int", "float"}  # a bool is no number


def test_with_update_a_put_replaces_in_place() -> None:
    from integrations_support import UpdatingStore

    port = UpdatingStore()
    store = MemoryportStore(GuardedMemory(port), namespace=USER_NS)
    ns = ("memories", "ann")
    store.put(ns, "k", {"text": "one"}, ttl=10)
    store.put(ns, "k", {"text": "two"})
    store.get(ns, "k")
    assert port.deletes == 0  # updated, never deleted and re-added
    [record] = port.rows.values()
    assert record.text == '{"text": "two"}' and record.expires_at is None and record.updated_at is not None
    store.put(ns, "k", {"text": "three"}, ttl=10)
    store.get(ns, "k")  # refreshes the TTL in place
    assert port.deletes == 0 and store.get(ns, "k").value == {"text": "three"}  # type: ignore[union-attr]


def test_a_key_can_be_put_again_after_its_item_expired() -> None:
    """The expired record keeps its id until purged; a new put under that key must still work."""
    from integrations_support import StrictIdStore

    port = StrictIdStore()
    store = MemoryportStore(GuardedMemory(port), namespace=USER_NS)
    ns = ("memories", "ann")
    store.put(ns, "k", {"text": "old"}, ttl=0.001)
    time.sleep(0.1)
    assert store.get(ns, "k") is None
    store.put(ns, "k", {"text": "new"})
    assert store.get(ns, "k").value == {"text": "new"}  # type: ignore[union-attr]
    assert len(port.rows) == 1


def test_on_a_vector_backend_the_indexed_fields_are_what_gets_embedded(tmp_path: Path) -> None:
    """With an embedder the backend embeds the record text, i.e. only the fields of index={"fields": [...]}."""
    import hashlib

    import numpy as np

    from memoryport import CallableEmbedder, SQLiteMemory

    embedded: list[str] = []

    def bag_of_words(texts: list[str]) -> np.ndarray:
        embedded.extend(texts)
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, int(hashlib.sha256(word.encode()).hexdigest(), 16) % 63] += 1.0
            out[i, 63] = 0.01
        return out

    memory = SQLiteMemory(tmp_path / "v.db", embedder=CallableEmbedder(bag_of_words, dim=64, name="bow"))
    try:
        store = MemoryportStore(memory, namespace=USER_NS, index={"fields": ["title"]})
        ns = ("memories", "ann")
        store.put(ns, "a", {"title": "alpine lake swim", "body": "secret body words"})
        store.put(ns, "b", {"title": "city museum visit", "body": "alpine"})
        assert "alpine lake swim" in embedded and not any("secret" in t for t in embedded)
        hits = store.search(ns, query="alpine lake")
        assert hits[0].key == "a" and hits[0].score is not None
    finally:
        memory.close()
