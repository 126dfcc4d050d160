"""GraphitiMemory on real Graphiti over in-memory Kuzu, with offline model clients."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("graphiti_core")
pytest.importorskip("kuzu")

import itertools

from benchmarks.graphiti_kuzu import FailingEmbedder, RaisingLLM, ScriptedLLM, kuzu_graphiti
from memoryport import (
    BackendError,
    GuardedMemory,
    MemoryRecord,
    MemoryScope,
    NewFact,
    UnsupportedCapability,
    UsageError,
)
from memoryport.adapters.graphiti import GraphitiMemory, GraphitiStore, group_id_for

pytestmark = pytest.mark.anyio

# -- tests --


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def graphiti_llm() -> RaisingLLM:
    return RaisingLLM()


@pytest.fixture
async def graphiti_memory(graphiti_llm: RaisingLLM) -> AsyncIterator[GuardedMemory[GraphitiStore]]:
    memory = GraphitiMemory(await kuzu_graphiti(graphiti_llm))
    yield memory
    await memory.aclose()
    assert graphiti_llm.calls == [], "the default (verbatim) path must never call the LLM"


def rec(user: str, text: str, **kw: object) -> MemoryRecord:
    return MemoryRecord(scope=MemoryScope(user_id=user), text=text, **kw)  # type: ignore[arg-type]


async def raw_group_count(memory: GuardedMemory[GraphitiStore], group: str) -> int:
    records, _, _ = await memory.store.client.driver.execute_query(
        "MATCH (n) WHERE n.group_id = $g RETURN count(n) AS c", g=group
    )
    return int(records[0]["c"])


def test_group_id_is_a_hash_graphiti_accepts() -> None:
    from graphiti_core.helpers import validate_group_id

    gid = group_id_for("ann@example.com")
    assert gid.startswith("mp-") and "ann" not in gid and len(gid) == 3 + 64
    assert validate_group_id(gid)
    assert group_id_for("ann@example.com") == gid != group_id_for("ben@example.com")
    keyed = group_id_for("ann@example.com", hash_key="secret")
    assert keyed != gid and validate_group_id(keyed)


async def test_round_trip_keeps_id_text_and_utc_time(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    ann = MemoryScope(user_id="ann")
    when = datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)
    [rid] = await graphiti_memory.add([rec("ann", "Ann likes green tea", id="r-1", created_at=when)])
    assert rid == "r-1"
    got = await graphiti_memory.get("r-1", scope=ann)
    assert got is not None
    assert (got.id, got.text, got.created_at, got.scope) == ("r-1", "Ann likes green tea", when, ann)
    assert got.created_at.tzinfo is not None  # Kuzu hands back naive datetimes; the adapter restores UTC
    [exported] = await graphiti_memory.export(ann)
    assert exported == got


async def test_search_scores_and_isolation(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    await graphiti_memory.add(
        [rec("ann", "Ann likes green tea"), rec("ann", "Ann lives in Lisbon"), rec("ben", "Ben likes green tea too")]
    )
    hits = await graphiti_memory.search("green tea", scope=ann, k=5)
    assert [h.record.text for h in hits][:1] == ["Ann likes green tea"]
    assert all(h.record.scope == ann for h in hits)
    assert hits[0].score > 0 and hits[0].signal == "hybrid"
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))
    assert "Ben likes green tea too" not in [h.record.text for h in hits]
    assert [h.record.text for h in await graphiti_memory.search("green tea", scope=ben)] == ["Ben likes green tea too"]
    assert graphiti_memory.dropped_out_of_scope == 0


async def test_empty_query_lists_newest_first(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    ann = MemoryScope(user_id="ann")
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    await graphiti_memory.add([rec("ann", f"note {i}", created_at=base + timedelta(days=i)) for i in range(4)])
    hits = await graphiti_memory.search("", scope=ann, k=2)
    assert [h.record.text for h in hits] == ["note 3", "note 2"]


async def test_delete_by_id_and_erase_user(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    ids = await graphiti_memory.add([rec("ann", "Ann likes green tea"), rec("ann", "Ann lives in Lisbon")])
    await graphiti_memory.add([rec("ben", "Ben likes coffee")])
    assert await graphiti_memory.delete([ids[0], "no-such-id"], scope=ann) == 1
    assert await graphiti_memory.get(ids[0], scope=ann) is None
    assert await graphiti_memory.search("green tea", scope=ann) == []
    assert await graphiti_memory.delete([ids[1]], scope=ben) == 0  # another user's id is not theirs to delete
    assert await graphiti_memory.delete(scope=ann) == 1
    assert await graphiti_memory.export(ann) == []
    assert await raw_group_count(graphiti_memory, graphiti_memory.store.group_id(ann)) == 0
    assert [r.text for r in await graphiti_memory.export(ben)] == ["Ben likes coffee"]
    assert await graphiti_memory.delete(scope=ann) == 0  # an empty group is not an error


async def test_deleting_the_last_text_leaves_nothing_of_the_user(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    ann = MemoryScope(user_id="ann")
    [rid] = await graphiti_memory.add([rec("ann", "Ann likes green tea")])
    assert await graphiti_memory.delete([rid], scope=ann) == 1
    assert await raw_group_count(graphiti_memory, graphiti_memory.store.group_id(ann)) == 0


async def test_export_pages_through_large_groups(
    graphiti_memory: GuardedMemory[GraphitiStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    import memoryport.adapters.graphiti as mod

    monkeypatch.setattr(mod, "_PAGE", 3)
    ann = MemoryScope(user_id="ann")
    ids = await graphiti_memory.add([rec("ann", f"fact number {i}") for i in range(8)])
    assert sorted(r.id for r in await graphiti_memory.export(ann)) == sorted(ids)  # type: ignore[type-var]


async def test_user_only_capabilities_are_refused(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    with pytest.raises(UnsupportedCapability):
        await graphiti_memory.add([MemoryRecord(scope=MemoryScope(user_id="ann", session_id="s"), text="x")])
    with pytest.raises(UnsupportedCapability):
        await graphiti_memory.add([rec("ann", "x", metadata={"k": 1})])
    with pytest.raises(UnsupportedCapability):
        await graphiti_memory.search("x", scope=MemoryScope(user_id="ann"), filters={"k": 1})
    with pytest.raises(UnsupportedCapability):
        await graphiti_memory.purge()
    assert graphiti_memory.user_only


async def test_failing_embedder_stores_nothing() -> None:
    llm = RaisingLLM()
    memory = GraphitiMemory(await kuzu_graphiti(llm, FailingEmbedder()))
    with pytest.raises(BackendError) as info:
        await memory.add([rec("ann", "Ann likes green tea")])
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "green tea" not in str(info.value)
    assert await raw_group_count(memory, memory.store.group_id(MemoryScope(user_id="ann"))) == 0


async def test_a_stored_id_is_refused_and_nothing_is_written(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    from memoryport import InvalidInput

    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    await graphiti_memory.add([rec("ann", "Ann likes green tea", id="r-1")])
    with pytest.raises(InvalidInput) as info:
        await graphiti_memory.add([rec("ann", "new", id="r-2"), rec("ann", "Ann likes coffee", id="r-1")])
    assert info.value.field == "records[1].id"
    assert [r.text for r in await graphiti_memory.export(ann)] == ["Ann likes green tea"]
    await graphiti_memory.add([rec("ben", "Ben's own r-1", id="r-1")])  # ids are unique per user
    got = await graphiti_memory.get("r-1", scope=ben)
    assert got is not None and got.text == "Ben's own r-1"
    got = await graphiti_memory.get("r-1", scope=ann)
    assert got is not None and got.text == "Ann likes green tea"


async def test_a_write_failing_midway_leaves_nothing(
    graphiti_memory: GuardedMemory[GraphitiStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    import memoryport.adapters.graphiti as mod

    sdk = mod._import_sdk()
    real = sdk.add_nodes_and_edges_bulk

    async def half_then_fail(driver: Any, episodes: Any, mentions: Any, nodes: Any, facts: Any, embedder: Any) -> None:
        # Kuzu writes row by row: the first records reach the graph before the failure.
        await real(driver, episodes[:2], mentions[:2], nodes, facts[:2], embedder)
        raise RuntimeError("disk full")

    ann = MemoryScope(user_id="ann")
    [kept] = await graphiti_memory.add([rec("ann", "Ann likes green tea")])
    monkeypatch.setattr(sdk, "add_nodes_and_edges_bulk", half_then_fail)
    with pytest.raises(BackendError):
        await graphiti_memory.add([rec("ann", f"new fact {i}") for i in range(4)])
    assert [r.id for r in await graphiti_memory.export(ann)] == [kept]
    assert [h.record.id for h in await graphiti_memory.search("new fact", scope=ann)] == []


def test_needs_a_graphiti_instance() -> None:
    from memoryport import UsageError

    with pytest.raises(UsageError, match="Graphiti"):
        GraphitiMemory(object())


async def test_bad_id_prefix_is_refused() -> None:
    from memoryport import UsageError

    graphiti = await kuzu_graphiti(RaisingLLM())
    for bad in ("", "mp:", "ü"):
        with pytest.raises(UsageError, match="id_prefix"):
            GraphitiMemory(graphiti, id_prefix=bad)


async def test_extract_true_runs_add_episode_with_the_llm() -> None:
    llm = ScriptedLLM({"Lisbon": [("Ann", "Lisbon", "LIVES_IN", "Ann lives in Lisbon since 2023")]})
    memory = GraphitiMemory(await kuzu_graphiti(llm), extract=True)
    ann = MemoryScope(user_id="ann")
    [rid] = await memory.add([rec("ann", "Ann moved to Lisbon last year.", id="r-9")])
    assert "ExtractedEntities" in llm.calls
    hits = await memory.search("Lisbon", scope=ann)
    assert hits and hits[0].record.text == "Ann lives in Lisbon since 2023"  # the extracted fact
    assert hits[0].record.id == rid  # ... carrying the id of the text it came from
    got = await memory.get(rid, scope=ann)
    assert got is not None and got.text == "Ann moved to Lisbon last year."
    assert await memory.search("Lisbon", scope=MemoryScope(user_id="ben")) == []
    assert await memory.delete([rid], scope=ann) == 1
    assert await memory.get(rid, scope=ann) is None
    assert await memory.search("Lisbon", scope=ann) == []


async def test_extract_context_holds_earlier_texts_once_and_not_the_new_one() -> None:
    llm = ScriptedLLM(
        {
            "Miso": [("Ann", "Miso", "HAS_PET", "Ann has a cat named Miso")],
            "bicycle": [("Ann", "red bicycle", "OWNS", "Ann owns a red bicycle")],
        }
    )
    memory = GraphitiMemory(await kuzu_graphiti(llm), extract=True)
    earlier = datetime(2024, 1, 1, tzinfo=timezone.utc)
    await memory.add([rec("ann", "Ann adopted a cat named Miso.", created_at=earlier)])
    llm.prompts.clear()
    await memory.add([rec("ann", "Ann bought a red bicycle.", created_at=earlier + timedelta(days=1))])
    [(_, prompt)] = [p for p in llm.prompts if p[0] == "ExtractedEdges"]  # this prompt carries previous messages
    assert prompt.count("Ann bought a red bicycle.") == 1  # as the current message only
    assert prompt.count("Ann adopted a cat named Miso.") == 1  # the earlier text, as context


def test_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys; sys.modules['graphiti_core'] = None\n"
        "import memoryport\n"
        "from memoryport import MissingExtra\n"
        "try:\n"
        "    memoryport.GraphitiMemory(object())\n"
        "except MissingExtra as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 'pip install "memoryport[graphiti]"' in out


# -- the contract suite --------------------------------------------------------

from memoryport.contracts import MemoryContract  # noqa: E402


class TestGraphitiContract(MemoryContract):
    """The whole contract suite on real Graphiti + in-memory Kuzu, verbatim (zero-LLM) path."""

    # Kuzu writes row by row (~4.5 ms a query): 1,500 records take 20 s. 600 is still
    # beyond the adapter's export page of 500, which is what the export test is after.
    export_records = 600

    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory[GraphitiStore]]:
        llm = RaisingLLM()
        memory = GuardedMemory(GraphitiStore(await kuzu_graphiti(llm)))
        yield memory
        await memory.aclose()
        assert llm.calls == [], "the default (verbatim) path must never call the LLM"


async def test_graphitis_own_facts_read_as_an_entity_graph() -> None:
    """GraphitiGraph: Graphiti's extracted edges as facts (valid_at/invalid_at), read-only, per user, erased."""
    from memoryport import KnowledgeGraph
    from memoryport.adapters.graphiti import GraphitiGraph

    llm = ScriptedLLM(
        {
            "Lisbon": [("Ann", "Lisbon", "LIVES_IN", "Ann lives in Lisbon")],
            "Oslo": [("Ben", "Oslo", "LIVES_IN", "Ben lives in Oslo")],
        }
    )
    memory = GraphitiMemory(await kuzu_graphiti(llm), extract=True)
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    [rid] = await memory.add([rec("ann", "Ann moved to Lisbon.", id="r-1")])
    await memory.add([rec("ben", "Ben moved to Oslo.", id="r-2")])
    graph = GraphitiGraph(memory)
    [fact] = await graph.facts_about("ann", scope=ann)
    assert (fact.subject, fact.relation, fact.object, fact.memory_id) == ("Ann", "lives_in", "Lisbon", rid)
    assert [(r.entity, r.depth) for r in await graph.related("Lisbon", scope=ann)] == [("Ann", 1)]
    assert await graph.facts_about("Ann", scope=ben) == [] and await graph.facts_about("Oslo", scope=ann) == []
    assert [len(p) for p in await graph.paths("Ann", "Lisbon", scope=ann)] == [1]

    # Graphiti's invalid_at closes the fact: current reads drop it, as-of reads still see it.
    store = memory.store
    group = store.group_id(ann)
    [edge] = [e for e in await store._sdk.edges.EntityEdge.get_by_group_ids(store.client.driver, [group])]
    began = fact.valid_from
    edge.invalid_at = began + timedelta(days=30)
    await edge.save(store.client.driver)
    assert await graph.facts_about("Ann", scope=ann) == []
    [then] = await graph.facts_about("Ann", scope=ann, as_of=began + timedelta(days=1))
    assert then.valid_to == began + timedelta(days=30)

    with pytest.raises(UnsupportedCapability, match="Graphiti writes"):
        await graph.add_facts([NewFact(subject="Ann", relation="likes", object="Tea")], scope=ann)
    with pytest.raises(UnsupportedCapability):
        await graph.add_entity("Ann", scope=ann)
    with pytest.raises(UnsupportedCapability):
        KnowledgeGraph(memory)  # the memory does not declare the graph capability
    await memory.delete(scope=ann)
    assert await graph.facts_about("Ann", scope=ann, history=True) == []
    assert len(await graph.facts_about("Ben", scope=ben)) == 1
    await memory.aclose()


async def test_verbatim_texts_are_not_entity_facts(graphiti_memory: GuardedMemory[GraphitiStore]) -> None:
    from memoryport.adapters.graphiti import GraphitiGraph

    await graphiti_memory.add([rec("ann", "Ann likes green tea")])
    assert await GraphitiGraph(graphiti_memory).related("ann", scope=MemoryScope(user_id="ann")) == []
    with pytest.raises(UsageError):
        GraphitiGraph(object())  # type: ignore[arg-type]
