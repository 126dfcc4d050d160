"""Every curated-memory policy, on SQLite and on CallableMemory over the reference store, boundaries included."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from memoryport import (
    BackendError,
    CallableMemory,
    Capability,
    GuardedMemory,
    InvalidInput,
    Limits,
    MemoryRecord,
    MemoryScope,
    UnsupportedCapability,
    UsageError,
)
from memoryport._records import utcnow
from memoryport.curated import AgentMemory, CurationPolicy, NewMemory, Salience

from .support import ANN, BEN, Clock, reference_functions, table_embedder

pytestmark = pytest.mark.anyio


def agent(memory: GuardedMemory, **policy: object) -> AgentMemory:
    return AgentMemory(memory, policy=CurationPolicy(**policy))  # type: ignore[arg-type]


# -- construction ---------------------------------------------------------------------


async def test_refuses_a_backend_without_update_early() -> None:
    fns = reference_functions()
    del fns["update"], fns["capabilities"]
    bare = CallableMemory(**fns)
    assert Capability.UPDATE not in bare.capabilities
    with pytest.raises(UnsupportedCapability, match="'update'") as info:
        AgentMemory(bare)
    assert info.value.capability == "update"


async def test_refuses_what_is_not_a_guard(memory: GuardedMemory) -> None:
    with pytest.raises(UsageError, match="GuardedMemory"):
        AgentMemory(memory.store)  # type: ignore[arg-type]


async def test_stats_without_count_refuses_naming_it() -> None:
    fns = reference_functions()
    del fns["count"], fns["capabilities"]
    m = AgentMemory(CallableMemory(**fns))
    with pytest.raises(UnsupportedCapability, match="'count'"):
        await m.stats(scope=ANN)


# -- typed memories -----------------------------------------------------------------


async def test_importance_defaults_by_source_and_is_configurable(memory: GuardedMemory) -> None:
    m = agent(memory, dedup=False)
    got = {}
    for source in ("user", "tool", "extraction", "calendar"):
        r = await m.remember(f"a memory from {source}", scope=ANN, source=source)
        got[source] = (await m.get(r.id, scope=ANN)).importance  # type: ignore[union-attr]
    assert got == {"user": 0.8, "tool": 0.5, "extraction": 0.4, "calendar": 0.5}
    plain = (await m.get((await m.remember("no source given", scope=ANN)).id, scope=ANN))
    assert plain is not None and plain.source == "user" and plain.importance == 0.8 and plain.kind == "fact"
    custom = AgentMemory(memory, policy=CurationPolicy(importance_by_source={"user": 0.6}, default_importance=0.3))
    r = await custom.remember("custom table user", scope=BEN)
    r2 = await custom.remember("custom table tool", scope=BEN, source="tool")
    assert (await custom.get(r.id, scope=BEN)).importance == 0.6  # type: ignore[union-attr]
    assert (await custom.get(r2.id, scope=BEN)).importance == 0.3  # type: ignore[union-attr]


async def test_importance_outside_zero_one_is_refused_and_nothing_stored(memory: GuardedMemory) -> None:
    m = agent(memory)
    for bad in (1.0000001, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(InvalidInput) as info:
            await m.remember("Ann likes tea", scope=ANN, importance=bad)  # type: ignore[arg-type]
        assert info.value.field == "memories[0].importance"
    for edge in (0.0, 1.0):
        r = await m.remember(f"edge {edge}", scope=ANN, importance=edge)
        assert (await m.get(r.id, scope=ANN)).importance == edge  # type: ignore[union-attr]
    assert len(await memory.export(ANN)) == 2


async def test_kinds_are_validated_and_host_kinds_allowed(memory: GuardedMemory) -> None:
    m = agent(memory, kinds=("fact", "preference", "visit"))
    with pytest.raises(InvalidInput, match="kind") as info:
        await m.remember("Went to Lyon", scope=ANN, kind="skill")
    assert info.value.field == "memories[0].kind"
    r = await m.remember("Went to Lyon", scope=ANN, kind="visit")
    assert (await m.get(r.id, scope=ANN)).kind == "visit"  # type: ignore[union-attr]
    with pytest.raises(InvalidInput):
        CurationPolicy(kinds=("Fact",))
    with pytest.raises(InvalidInput):
        CurationPolicy(kinds=("fact",), default_kind="note")


async def test_stored_as_ordinary_records_with_well_known_keys(memory: GuardedMemory) -> None:
    m = agent(memory)
    due = utcnow() + timedelta(days=2)
    r = await m.remember("Dentist with Dr Lee", scope=ANN, kind="reminder", entities=["Dr  Lee", "dentist"],
                         pinned=True, due_at=due, ttl="30d", metadata={"origin": "chat"})
    [record] = await memory.export(ANN)
    assert record.id == r.id
    md = record.metadata
    assert md["mp:kind"] == "reminder" and md["mp:importance"] == 0.8 and md["mp:source"] == "user"
    assert md["mp:pinned"] is True and md["mp:due_at"] == int(due.timestamp())
    assert md["mp:entity:dr lee"] is True and md["mp:entity:dentist"] is True
    assert md["origin"] == "chat"
    assert record.expires_at is not None
    assert timedelta(days=29, hours=23) < record.expires_at - record.created_at <= timedelta(days=30, seconds=5)
    item = await m.get(r.id, scope=ANN)
    assert item is not None and item.entities == ("dentist", "dr lee") and item.metadata == {"origin": "chat"}


async def test_reserved_prefix_and_bad_fields_are_refused(memory: GuardedMemory) -> None:
    m = agent(memory)
    with pytest.raises(InvalidInput, match="reserved"):
        await m.remember("x y", scope=ANN, metadata={"mp:kind": "fact"})
    with pytest.raises(InvalidInput, match="timezone-aware"):
        await m.remember("x y", scope=ANN, due_at=utcnow().replace(tzinfo=None))
    with pytest.raises(InvalidInput, match="ttl"):
        await m.remember("x y", scope=ANN, ttl="soon")
    with pytest.raises(InvalidInput, match="entities"):
        await m.remember("x y", scope=ANN, entities=["  "])
    with pytest.raises(InvalidInput, match="max_entities"):
        await m.remember("x y", scope=ANN, entities=[f"e{i}" for i in range(9)])
    assert await memory.export(ANN) == []


async def test_batch_is_checked_whole_before_anything_is_written(memory: GuardedMemory) -> None:
    m = agent(memory)
    with pytest.raises(InvalidInput) as info:
        await m.remember_many([NewMemory("Likes jazz"), NewMemory("Bad", importance=2.0)], scope=ANN)
    assert info.value.field == "memories[1].importance"
    assert await memory.export(ANN) == []
    results = await m.remember_many(
        [NewMemory("Likes jazz", kind="preference"), NewMemory("Plays the cello", kind="skill", source="tool")],
        scope=ANN,
    )
    assert [r.action for r in results] == ["added", "added"]
    assert len(await memory.export(ANN)) == 2


# -- dedup --------------------------------------------------------------------------


async def test_word_overlap_exactly_at_the_line_is_a_duplicate(memory: GuardedMemory) -> None:
    m = agent(memory)
    first = await m.remember("Ann likes green tea", scope=ANN)
    # {ann, likes, green, tea} vs {ann, really, likes, green, tea}: 4/5 = 0.8, the default line.
    second = await m.remember("Ann really likes green tea", scope=ANN)
    assert second.action == "updated" and second.id == first.id == second.duplicate_of
    assert second.similarity == 0.8 and second.measure == "overlap"
    [record] = await memory.export(ANN)
    assert record.text == "Ann really likes green tea"
    assert record.metadata["mp:uses"] == 1
    # 4/6 = 0.67 < 0.8: a new memory.
    third = await m.remember("Ann really likes green tea a lot", scope=ANN, kind="preference")
    assert third.action == "added" and third.id != first.id
    # Just above the line when the line moves: 0.8 < 0.81 is not a duplicate.
    strict = agent(memory, dedup_overlap=0.81)
    fourth = await strict.remember("Ben likes green tea", scope=BEN)
    fifth = await strict.remember("Ben really likes green tea", scope=BEN)
    assert fourth.action == fifth.action == "added"


async def test_duplicate_reinforces_when_asked_and_keeps_larger_importance(memory: GuardedMemory) -> None:
    m = agent(memory, on_duplicate="reinforce")
    first = await m.remember("Ann likes green tea", scope=ANN, source="extraction")
    again = await m.remember("ann likes GREEN tea!", scope=ANN, source="user")
    assert again.action == "reinforced" and again.id == first.id and again.similarity == 1.0
    item = await m.get(first.id, scope=ANN)
    assert item is not None and item.text == "Ann likes green tea"
    assert item.importance == pytest.approx(0.82) and item.uses == 1 and item.last_used is not None


async def test_dedup_stays_inside_the_owner_and_sees_other_sessions(memory: GuardedMemory) -> None:
    m = agent(memory)
    a = await m.remember("Ann likes green tea", scope=MemoryScope(user_id="ann", session_id="s1"))
    b = await m.remember("Ann likes green tea", scope=MemoryScope(user_id="ann", session_id="s2"))
    assert b.action == "reinforced" and b.id == a.id  # the same text: nothing to update
    c = await m.remember("Ann likes green tea", scope=BEN)
    assert c.action == "added" and c.id != a.id
    assert len(await memory.export(BEN)) == 1 and len(await memory.export(ANN)) == 1


async def test_duplicates_inside_one_batch_become_one_memory(memory: GuardedMemory) -> None:
    m = agent(memory)
    results = await m.remember_many([NewMemory("Ann likes green tea"), NewMemory("Ann likes green tea.")],
                                    scope=ANN)
    assert results[0].action == "added" and results[1].action == "updated"
    assert results[1].id == results[0].id
    assert len(await memory.export(ANN)) == 1


async def test_dedup_off_adds_every_time(memory: GuardedMemory) -> None:
    m = agent(memory, dedup=False)
    await m.remember("Ann likes green tea", scope=ANN)
    assert (await m.remember("Ann likes green tea", scope=ANN)).action == "added"
    assert len(await memory.export(ANN)) == 2


async def test_cosine_exactly_at_the_line_is_a_duplicate(memory: GuardedMemory) -> None:
    table = {
        "Ann likes green tea": [1.0, 0.0, 0.0, 0.0],
        "Ann enjoys matcha": [0.5, 0.5, 0.5, 0.5],  # cosine 0.5 with the first, exactly
        "Ann drinks sencha": [0.0, 1.0, 0.0, 0.0],  # cosine 0.5 with the second, 0 with the first
    }
    m = AgentMemory(memory, policy=CurationPolicy(dedup_cosine=0.5), embedder=table_embedder(table))
    first = await m.remember("Ann likes green tea", scope=ANN)
    second = await m.remember("Ann enjoys matcha", scope=ANN)
    assert second.action == "updated" and second.id == first.id
    assert second.measure == "cosine" and second.similarity == 0.5
    m2 = AgentMemory(memory, policy=CurationPolicy(dedup_cosine=0.5000001), embedder=table_embedder(table))
    third = await m2.remember("Ann drinks sencha", scope=BEN)
    fourth = await m2.remember("Ann enjoys matcha", scope=BEN)
    assert third.action == fourth.action == "added"


# -- supersession -----------------------------------------------------------------------


async def test_superseded_hidden_then_visible_then_erased_with_the_user(memory: GuardedMemory) -> None:
    m = agent(memory, recall_boost=0.0)
    old = await m.remember("Ann lives in Paris", scope=ANN, entities=["Ann"])
    new = await m.update(old.id, text="Ann lives in Lyon", keep_history=True, scope=ANN)
    assert new is not None and new.supersedes == old.id and new.entities == ("ann",)
    before = await m.get(old.id, scope=ANN)
    assert before is not None and before.superseded_by == new.id
    assert [i.text for i in await m.recall("Ann lives", scope=ANN)] == ["Ann lives in Lyon"]
    shown = {i.text for i in await m.recall("Ann lives", scope=ANN, include_superseded=True)}
    assert shown == {"Ann lives in Lyon", "Ann lives in Paris"}
    assert [i.text for i in await m.list_memories(scope=ANN)] == ["Ann lives in Lyon"]
    assert [i.text for i in await m.history(new.id, scope=ANN)] == ["Ann lives in Lyon", "Ann lives in Paris"]
    with pytest.raises(InvalidInput, match="superseded"):
        await m.update(old.id, text="Ann lives in Nice", scope=ANN)
    await m.remember("Ben lives in Rome", scope=BEN)
    assert await memory.delete(scope=ANN) == 2
    assert await m.get(old.id, scope=ANN) is None and await m.get(new.id, scope=ANN) is None
    assert await memory.export(ANN) == []
    assert len(await memory.export(BEN)) == 1


async def test_update_in_place_and_delete_takes_older_versions(memory: GuardedMemory) -> None:
    m = agent(memory)
    r = await m.remember("Ann works at Acme", scope=ANN, kind="fact")
    item = await m.update(r.id, text="Ann works at Initech", kind="note", importance=0.3, scope=ANN)
    assert item is not None and item.id == r.id and item.kind == "note" and item.importance == 0.3
    assert await m.update("no-such-id", text="x", scope=ANN) is None
    assert await m.update(r.id, text="Ben's now", scope=BEN) is None
    v2 = await m.update(r.id, text="Ann works at Globex", keep_history=True, scope=ANN)
    assert v2 is not None
    assert await m.delete([v2.id], scope=ANN) == 2
    assert await memory.export(ANN) == []


# -- reinforcement and decay ------------------------------------------------------------------


async def test_recall_reinforces_hits_and_clamps_at_one(memory: GuardedMemory) -> None:
    m = agent(memory)
    r = await m.remember("Ann likes green tea", scope=ANN, importance=0.99)
    other = await m.remember("Ben likes coffee", scope=BEN)
    [hit] = await m.recall("green tea", scope=ANN)
    assert hit.id == r.id
    after = await m.get(r.id, scope=ANN)
    assert after is not None and after.importance == 1.0 and after.uses == 1 and after.last_used is not None
    await m.recall("green tea", scope=ANN)
    assert (await m.get(r.id, scope=ANN)).importance == 1.0  # type: ignore[union-attr]
    assert (await m.get(other.id, scope=BEN)).uses == 0  # type: ignore[union-attr]
    await m.recall("green tea", scope=ANN, reinforce=False)
    assert (await m.get(r.id, scope=ANN)).uses == 2  # type: ignore[union-attr]
    step = agent(memory, dedup=False)
    s = await step.remember("Ben drinks water", scope=BEN, importance=0.5)
    await step.recall("water", scope=BEN)
    assert (await step.get(s.id, scope=BEN)).importance == pytest.approx(0.52)  # type: ignore[union-attr]


async def test_reinforce_feedback_is_bounded(memory: GuardedMemory) -> None:
    m = agent(memory)
    r = await m.remember("Ann likes green tea", scope=ANN, importance=0.05)
    [item] = await m.reinforce([r.id], "negative", scope=ANN)
    assert item.importance == 0.0
    [item] = await m.reinforce([r.id], "positive", scope=ANN)
    assert item.importance == pytest.approx(0.1)
    [item] = await m.reinforce([r.id], 1.0, scope=ANN)
    assert item.importance == 1.0 and item.uses == 3
    for bad in ("great", 1.5, float("nan"), True):
        with pytest.raises(InvalidInput):
            await m.reinforce([r.id], bad, scope=ANN)  # type: ignore[arg-type]
    assert await m.reinforce([r.id], "positive", scope=BEN) == []


async def test_decay_lowers_unused_never_pinned_and_dry_run_changes_nothing(memory: GuardedMemory) -> None:
    clock = Clock()
    m = AgentMemory(memory, policy=CurationPolicy(recall_boost=0.0), clock=clock)
    plain = await m.remember("Ann likes green tea", scope=ANN, importance=0.8)
    pinned = await m.remember("Ann is allergic to nuts", scope=ANN, importance=0.8, pinned=True)
    low = await m.remember("Ann once mentioned a blue car", scope=ANN, importance=0.1)
    clock.advance(days=29)
    report = await m.decay(scope=ANN, dry_run=False)
    assert report.changed == () and report.pruned.items == ()
    clock.advance(days=31)  # 60 days unused: 0.9 ** 2
    preview = await m.decay(scope=ANN, prune_below=0.1)
    assert preview.dry_run and preview.pruned.removed == 0
    assert {c.id: round(c.after, 6) for c in preview.changed} == {plain.id: 0.648, low.id: 0.081}
    assert preview.pruned.ids == [low.id] and preview.pruned.items[0].reason == "below threshold"
    exported = {r.id: r.metadata for r in await memory.export(ANN)}
    assert exported[plain.id]["mp:importance"] == 0.8 and "mp:decayed_at" not in exported[plain.id]
    done = await m.decay(scope=ANN, prune_below=0.1, dry_run=False)
    assert done.pruned.removed == 1 and not done.dry_run
    assert (await m.get(plain.id, scope=ANN)).importance == pytest.approx(0.648)  # type: ignore[union-attr]
    assert (await m.get(pinned.id, scope=ANN)).importance == 0.8  # type: ignore[union-attr]
    assert await m.get(low.id, scope=ANN) is None
    # Decaying again at once changes nothing; 30 more days is one more factor (calls do not compound).
    assert (await m.decay(scope=ANN, dry_run=False)).changed == ()
    clock.advance(days=30)
    await m.decay(scope=ANN, dry_run=False)
    assert (await m.get(plain.id, scope=ANN)).importance == pytest.approx(0.8 * 0.9**3)  # type: ignore[union-attr]


async def test_recall_counts_as_use_for_decay(memory: GuardedMemory) -> None:
    clock = Clock()
    m = AgentMemory(memory, clock=clock)
    r = await m.remember("Ann likes green tea", scope=ANN, importance=0.5)
    clock.advance(days=40)
    await m.recall("green tea", scope=ANN)  # used now (at +40 days): 0.52
    clock.advance(days=20)
    assert (await m.decay(scope=ANN, dry_run=False)).changed == ()
    assert (await m.get(r.id, scope=ANN)).importance == pytest.approx(0.52)  # type: ignore[union-attr]


# -- salience ---------------------------------------------------------------------------------


async def test_importance_and_recency_reorder_equal_matches(memory: GuardedMemory) -> None:
    clock = Clock()
    m = AgentMemory(memory, policy=CurationPolicy(dedup=False, recall_boost=0.0), clock=clock)
    low = await m.remember("project deadline moved", scope=ANN, importance=0.2)
    high = await m.remember("project deadline agreed", scope=ANN, importance=0.9)
    order = [i.id for i in await m.recall("project deadline", scope=ANN, k=2)]
    assert order == [high.id, low.id]
    items = await m.recall("project deadline", scope=ANN, k=2)
    assert items[0].salience is not None and items[0].salience > items[1].salience  # type: ignore[operator]
    # Recency: equal importance, one used recently, the other not for 90 days.
    old = await m.remember("garden party notes", scope=BEN, importance=0.5)
    clock.advance(days=90)
    fresh = await m.remember("garden party plans", scope=BEN, importance=0.5)
    assert [i.id for i in await m.recall("garden party", scope=BEN, k=2)] == [fresh.id, old.id]
    # No weights but relevance: the backend's own order is kept.
    flat = AgentMemory(memory, policy=CurationPolicy(salience=Salience(importance=0, recency=0), recall_boost=0.0))
    plain = [i.id for i in await flat.recall("project deadline", scope=ANN, k=2, ranking="relevance")]
    assert [h.record.id for h in await memory.search("project deadline", scope=ANN, k=2)] == plain


async def test_importance_never_beats_a_clearly_better_match(memory: GuardedMemory) -> None:
    m = agent(memory, dedup=False, recall_boost=0.0)
    match = await m.remember("Ann booked flights to Tokyo for the conference", scope=ANN, importance=0.1)
    await m.remember("conference", scope=ANN, importance=1.0)
    [first, *_] = await m.recall("flights to Tokyo booked", scope=ANN, k=2)
    assert first.id == match.id


# -- capacity cap ------------------------------------------------------------------------------


async def test_cap_evicts_least_salient_unpinned_and_never_pinned(memory: GuardedMemory) -> None:
    m = agent(memory, max_memories=3, dedup=False)
    pinned = await m.remember("pinned but unimportant", scope=ANN, importance=0.0, pinned=True)
    low = await m.remember("not important at all", scope=ANN, importance=0.05)
    mid = await m.remember("somewhat important", scope=ANN, importance=0.5)
    assert (await m.evict(scope=ANN)).items == ()
    new = await m.remember("very important news", scope=MemoryScope(user_id="ann", session_id="s9"), importance=0.9)
    assert new.action == "added" and new.evicted == (low.id,)
    assert {r.id for r in await memory.export(ANN)} == {pinned.id, mid.id, new.id}
    # Only pinned left besides new ones: pinned never go even if the cap cannot be met.
    await m.pin([mid.id, new.id], scope=ANN)
    extra = await m.remember("one more", scope=ANN, importance=0.1)
    assert extra.evicted == ()
    assert len(await memory.export(ANN)) == 4
    await m.pin([mid.id], scope=ANN, pinned=False)
    preview = await m.evict(scope=ANN)
    assert preview.dry_run and preview.ids == [extra.id] and len(await memory.export(ANN)) == 4
    done = await m.evict(scope=ANN, dry_run=False)
    assert done.removed == 1 and {r.id for r in await memory.export(ANN)} == {pinned.id, mid.id, new.id}
    assert await m.remember("Ben's own", scope=BEN) is not None and len(await memory.export(ANN)) == 3


# -- reminders ---------------------------------------------------------------------------------


async def test_upcoming_overdue_done_and_reminded(memory: GuardedMemory) -> None:
    m = agent(memory, dedup=False)
    now = utcnow()
    soon = await m.remember("Dentist on Friday", scope=ANN, kind="reminder", due_at=now + timedelta(days=3))
    later = await m.remember("Renew passport", scope=ANN, kind="reminder", due_at=now + timedelta(days=20))
    overdue = await m.remember("Pay the rent", scope=ANN, kind="reminder", due_at=now - timedelta(days=1))
    await m.remember("Ann likes tea", scope=ANN)
    await m.remember("Ben's dentist", scope=BEN, due_at=now + timedelta(days=1))
    assert [i.id for i in await m.upcoming(scope=ANN)] == [overdue.id, soon.id]
    assert [i.id for i in await m.upcoming(scope=ANN, include_overdue=False)] == [soon.id]
    assert [i.id for i in await m.upcoming(scope=ANN, within="21d")] == [overdue.id, soon.id, later.id]
    assert [i.id for i in await m.upcoming(scope=ANN, within=timedelta(days=21), include_overdue=False)] == [
        soon.id, later.id]
    assert await m.mark_reminded([soon.id], scope=ANN) == [soon.id]
    reminded = [i for i in await m.upcoming(scope=ANN) if i.id == soon.id]
    assert reminded and reminded[0].reminded_at is not None
    assert await m.mark_done([overdue.id], scope=ANN) == [overdue.id]
    assert [i.id for i in await m.upcoming(scope=ANN)] == [soon.id]
    assert await m.mark_done([soon.id], scope=BEN) == []
    with pytest.raises(InvalidInput, match="within"):
        await m.upcoming(scope=ANN, within="-3d")
    assert soon.id and (await m.get(soon.id, scope=ANN)).due_at.tzinfo == timezone.utc  # type: ignore[union-attr]


# -- forgetting by query -----------------------------------------------------------------------


async def test_forget_dry_run_changes_nothing_then_deletes(memory: GuardedMemory) -> None:
    m = agent(memory, dedup=False)
    coffee = await m.remember("Ann drinks black coffee", scope=ANN)
    latte = await m.remember("Ann orders coffee with oat milk", scope=ANN)
    tea = await m.remember("Ann likes green tea", scope=ANN)
    kept = await m.remember("Ann's coffee machine is pinned", scope=ANN, pinned=True)
    bens = await m.remember("Ben drinks black coffee", scope=BEN)
    before = sorted((r.id, r.text, tuple(sorted(r.metadata.items()))) for r in await memory.export(ANN))
    preview = await m.forget("black coffee", scope=ANN, threshold=0.5)
    assert preview.dry_run and preview.removed == 0 and preview.measure == "words" and preview.threshold == 0.5
    assert [(i.id, i.text, i.score) for i in preview.items] == [
        (coffee.id, "Ann drinks black coffee", 1.0), (latte.id, "Ann orders coffee with oat milk", 0.5)]
    assert preview.kept_pinned == (kept.id,)
    after = sorted((r.id, r.text, tuple(sorted(r.metadata.items()))) for r in await memory.export(ANN))
    assert after == before
    strict = await m.forget("black coffee", scope=ANN, threshold=0.51)
    assert strict.ids == [coffee.id]
    done = await m.forget("black coffee", scope=ANN, threshold=0.5, dry_run=False)
    assert done.removed == 2 and not done.dry_run
    assert {r.id for r in await memory.export(ANN)} == {tea.id, kept.id}
    assert [r.id for r in await memory.export(BEN)] == [bens.id]
    with pytest.raises(InvalidInput):
        await m.forget("  ", scope=ANN)
    with pytest.raises(InvalidInput):
        await m.forget("coffee", scope=ANN, threshold=1.5)


async def test_forget_takes_older_versions_too(memory: GuardedMemory) -> None:
    m = agent(memory)
    old = await m.remember("Ann lives in Paris", scope=ANN)
    new = await m.update(old.id, text="Ann lives in Lyon now", keep_history=True, scope=ANN)
    assert new is not None
    plan = await m.forget("lives in Lyon now", scope=ANN, threshold=1.0)
    assert plan.ids == [new.id, old.id] and plan.items[1].reason == "older version"
    await m.forget("lives in Lyon now", scope=ANN, threshold=1.0, dry_run=False)
    assert await memory.export(ANN) == []


async def test_forget_by_cosine_with_an_embedder(memory: GuardedMemory) -> None:
    table = {
        "Ann drinks black coffee": [1.0, 0.0, 0.0, 0.0],
        "Ann likes espresso": [0.5, 0.5, 0.5, 0.5],
        "Ann likes green tea": [0.0, 0.0, 0.0, 1.0],
        "coffee": [1.0, 0.0, 0.0, 0.0],
    }
    m = AgentMemory(memory, policy=CurationPolicy(dedup=False), embedder=table_embedder(table))
    a = await m.remember("Ann drinks black coffee", scope=ANN)
    b = await m.remember("Ann likes espresso", scope=ANN)
    await m.remember("Ann likes green tea", scope=ANN)
    plan = await m.forget("coffee", scope=ANN, threshold=0.5)
    assert plan.measure == "cosine"
    # Keyword search finds only texts sharing a word; the embedder scores those it found.
    assert a.id in plan.ids and all(i.score >= 0.5 for i in plan.items)
    assert b.id not in plan.ids or [i.score for i in plan.items if i.id == b.id] == [0.5]


# -- listing and stats -------------------------------------------------------------------------


async def test_list_by_kind_entity_importance_and_time(memory: GuardedMemory) -> None:
    m = agent(memory, dedup=False)
    jazz = await m.remember("Likes jazz", scope=ANN, kind="preference", entities=["music"], importance=0.9)
    cello = await m.remember("Plays the cello", scope=ANN, kind="skill", entities=["Music", "cello"],
                             importance=0.4)
    err = await m.remember("The API key expired", scope=ANN, kind="error", importance=0.6)
    assert [i.id for i in await m.list_memories(scope=ANN, kind="preference")] == [jazz.id]
    assert {i.id for i in await m.list_memories(scope=ANN, kind=["preference", "skill"])} == {jazz.id, cello.id}
    assert {i.id for i in await m.list_memories(scope=ANN, entity="MUSIC")} == {jazz.id, cello.id}
    assert {i.id for i in await m.list_memories(scope=ANN, min_importance=0.5)} == {jazz.id, err.id}
    middle = await m.list_memories(scope=ANN, min_importance=0.4, max_importance=0.6)
    assert {i.id for i in middle} == {cello.id, err.id}
    assert {i.id for i in await m.list_memories(scope=ANN, since="1h")} == {jazz.id, cello.id, err.id}
    assert await m.list_memories(scope=ANN, until=utcnow() - timedelta(hours=1)) == []
    assert [i.id for i in await m.recall("jazz", scope=ANN, kind="preference", since="1d")] == [jazz.id]
    with pytest.raises(InvalidInput):
        await m.list_memories(scope=ANN, min_importance=2)
    assert await m.list_memories(scope=BEN) == []


async def test_stats_by_kind_entity_and_month(memory: GuardedMemory) -> None:
    m = agent(memory, dedup=False)
    await m.remember("Likes jazz", scope=ANN, kind="preference", entities=["music"])
    await m.remember("Likes tea", scope=ANN, kind="preference", pinned=True)
    old = await m.remember("Plays cello", scope=ANN, kind="skill", entities=["music", "cello"])
    await m.remember("Call mum", scope=ANN, kind="reminder", due_at=utcnow() + timedelta(days=1))
    await m.update(old.id, text="Plays cello and piano", keep_history=True, scope=ANN)
    await m.remember("Ben's", scope=BEN)
    stats = await m.stats(scope=ANN, months=2)
    assert stats.total == 5 and stats.current == 4
    assert stats.by_kind == {"fact": 0, "preference": 2, "error": 0, "skill": 2, "note": 0, "reminder": 1}
    assert stats.by_entity == {"music": 3, "cello": 2}
    month = f"{utcnow():%Y-%m}"
    assert list(stats.by_month)[-1] == month and stats.by_month[month] == 5 and sum(stats.by_month.values()) == 5
    assert stats.pinned == 1 and stats.due == 1


async def test_plain_records_read_with_defaults(memory: GuardedMemory) -> None:
    await memory.add([MemoryRecord(scope=ANN, text="A plain record about tea", metadata={"topic": "drinks"})])
    m = agent(memory)
    [item] = await m.recall("tea", scope=ANN, reinforce=False)
    assert item.kind is None and item.importance == 0.5 and item.metadata == {"topic": "drinks"}


async def test_bounds_are_checked_before_anything_is_written(memory: GuardedMemory) -> None:
    m = agent(memory)
    with pytest.raises(InvalidInput) as info:
        await m.remember_many([NewMemory("fine"), NewMemory("x" * 40_000)], scope=ANN)
    assert info.value.field == "memories[1].text" and info.value.limit == "max_text_chars"
    with pytest.raises(InvalidInput) as info:
        await m.remember("many keys", scope=ANN, metadata={f"k{i}": i for i in range(30)})
    assert info.value.field == "memories[0].metadata" and info.value.limit == "max_metadata_keys"
    first = await m.remember("Ann likes green tea", scope=ANN, metadata={f"k{i}": i for i in range(20)})
    # Its duplicate would carry 20 + 10 host keys plus the layer's: over the limit, so nothing changes.
    with pytest.raises(InvalidInput, match="max_metadata_keys"):
        await m.remember_many([NewMemory("Ben's first"), NewMemory("Ann likes green tea!",
                               metadata={f"j{i}": i for i in range(10)})], scope=ANN)
    [record] = await memory.export(ANN)
    assert record.id == first.id and record.text == "Ann likes green tea"


async def test_a_failing_embedder_stores_nothing(memory: GuardedMemory) -> None:
    from memoryport import CallableEmbedder, EmbeddingError

    def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model server down")

    m = AgentMemory(memory, embedder=CallableEmbedder(broken, dim=4, name="broken"))
    await memory.add([MemoryRecord(scope=ANN, text="Ann likes green tea")])
    with pytest.raises(EmbeddingError):
        await m.remember("Ann likes green tea a lot", scope=ANN)
    assert len(await memory.export(ANN)) == 1


def test_blocking_twins_work_outside_a_loop(tmp_path: object) -> None:
    from pathlib import Path

    from memoryport import SQLiteMemory

    m = AgentMemory(SQLiteMemory(Path(str(tmp_path)) / "sync.db"))
    try:
        r = m.remember_sync("Ann likes green tea", scope=ANN, kind="preference")
        [again] = m.remember_many_sync([NewMemory("Ann likes green tea!")], scope=ANN)
        assert again.id == r.id and again.action == "updated"
        assert [i.id for i in m.recall_sync("green tea", scope=ANN)] == [r.id]
        assert m.get_sync(r.id, scope=ANN) is not None
        new = m.update_sync(r.id, text="Ann likes jasmine tea", keep_history=True, scope=ANN)
        assert new is not None and [i.id for i in m.list_memories_sync(scope=ANN)] == [new.id]
        assert m.reinforce_sync([new.id], "negative", scope=ANN)[0].importance < 0.8
        assert m.stats_sync(scope=ANN, months=1).total == 2
        assert m.evict_sync(scope=ANN).items == () and m.decay_sync(scope=ANN).changed == ()
        due = m.remember_sync("Call mum", scope=ANN, due_at=utcnow() + timedelta(hours=1))
        assert [i.id for i in m.upcoming_sync(scope=ANN)] == [due.id]
        assert m.mark_done_sync([due.id], scope=ANN) == [due.id] and m.upcoming_sync(scope=ANN) == []
        assert m.forget_sync("jasmine tea", scope=ANN).ids == [new.id, r.id]
        assert m.delete_sync([new.id], scope=ANN) == 2
    finally:
        m.close()


async def test_copy_to_another_backend_keeps_kinds_and_lineage(memory: GuardedMemory, tmp_path: object) -> None:
    from pathlib import Path

    from memoryport import SQLiteMemory, copy_memories

    m = agent(memory)
    old = await m.remember("Ann lives in Paris", scope=ANN, kind="fact", entities=["Ann"], importance=0.7)
    new = await m.update(old.id, text="Ann lives in Lyon", keep_history=True, scope=ANN)
    assert new is not None
    target = SQLiteMemory(Path(str(tmp_path)) / "copy.db")
    try:
        report = await copy_memories(memory, target, ANN)
        copied = AgentMemory(target)
        assert set(await copied.relink(report.ids, scope=ANN)) == {report.ids[old.id], report.ids[new.id]}
        [current] = await copied.recall("Ann lives", scope=ANN, reinforce=False)
        assert current.id == report.ids[new.id] and current.kind == "fact" and current.entities == ("ann",)
        assert current.supersedes == report.ids[old.id]
        assert [v.text for v in await copied.history(current.id, scope=ANN)] == [
            "Ann lives in Lyon", "Ann lives in Paris"]
        assert await copied.delete([current.id], scope=ANN) == 2
        assert await target.export(ANN) == []
    finally:
        await target.aclose()


async def test_upcoming_returns_the_soonest_due_when_more_are_due_than_one_listing_holds() -> None:
    """The listing is newest first: the soonest-due reminders written long ago must not be missed."""
    fns = reference_functions()
    fns.pop("capabilities")
    memory = CallableMemory(**fns, name="reference", limits=Limits(max_k=20))
    m = agent(memory, dedup=False)
    now = utcnow()
    # Written first, due last... and written last, due first: both orders, more than max_k in all.
    due_days = [*range(30, 0, -1), *range(31, 61)]
    for day in due_days:
        await m.remember(f"Errand number {day}", scope=ANN, kind="reminder", due_at=now + timedelta(days=day, hours=1))
    soonest = await m.upcoming(scope=ANN, within="90d", limit=5)
    assert [i.text for i in soonest] == [f"Errand number {d}" for d in range(1, 6)]
    with pytest.raises(InvalidInput, match="limit"):
        await m.upcoming(scope=ANN, limit=21)
    await memory.aclose()


async def test_a_batch_whose_updates_fail_leaves_nothing_added() -> None:
    """New memories and duplicates go in two calls; a failing update takes the adds back."""
    fns = reference_functions()
    fns.pop("capabilities")
    good_update = fns["update"]
    failing = {"on": False}

    async def update(**kwargs: object) -> object:
        if failing["on"]:
            raise ConnectionError("the store went away")
        return await good_update(**kwargs)

    fns["update"] = update
    memory = CallableMemory(**fns, name="reference")
    m = agent(memory)
    await m.remember("Ann drinks green tea every morning", scope=ANN)
    failing["on"] = True
    batch = [NewMemory(text="Ann drinks green tea every morning"), NewMemory(text="Ann has a cat called Miso")]
    with pytest.raises(BackendError):
        await m.remember_many(batch, scope=ANN)
    assert [r.text for r in await memory.export(ANN)] == ["Ann drinks green tea every morning"]
    await memory.aclose()
