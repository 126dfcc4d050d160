"""Consolidation of constructed sessions and reconciliation of constructed pairs, with scripted models."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryport import InvalidInput, MemoryScope, SQLiteMemory, UsageError
from memoryport.curated import AgentMemory, CurationPolicy
from memoryport.extraction import ExtractionPolicy, MemoryExtractor, Session, Turn, session_key

from .conftest import EMBEDDER, Script, pairs_shown

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")
NOW = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)


def session(sid: str, days_ago: float, turns: int) -> Session:
    start = NOW - timedelta(days=days_ago) - timedelta(minutes=turns - 1)  # the last turn is days_ago old
    said = [("user", "I am planning a trip to Japan in October with my sister Mia"),
            ("assistant", "Lovely! Tokyo or Kyoto?"), ("user", "Kyoto first, then Osaka; I hate long flights"),
            ("assistant", "Noted: a short route."), ("user", "We booked the ryokan for the 12th of October"),
            ("assistant", "Great."), ("user", "Thanks!")]
    return Session(sid, [Turn(r, t, start + timedelta(minutes=i)) for i, (r, t) in enumerate(said[:turns])])


def notes(messages: list[dict[str, str]]) -> dict[str, Any]:
    body = messages[-1]["content"]
    out = []
    if "Japan" in body:
        out.append({"text": "Ann plans a trip to Japan in October 2026 with her sister Mia",
                    "entities": ["Japan", "Mia"]})
    if "ryokan" in body:
        out.append({"text": "Ann booked a ryokan in Kyoto for 12 October 2026", "entities": ["Kyoto"]})
    return {"notes": out}


async def test_consolidation_of_old_sessions(memory: AgentMemory) -> None:
    script = Script(notes)
    extractor = MemoryExtractor(memory, script.model, clock=lambda: NOW)
    sessions = [session("old", 20, 7), session("recent", 3, 7), session("short", 30, 4), session("edge", 14, 5)]
    result = await extractor.consolidate(sessions, scope=MemoryScope(user_id="ann", session_id="today"))
    assert result.skipped == {"recent": "too recent", "short": "too short"}
    assert set(result.consolidated) == {"old", "edge"}
    assert len(script.calls) == 2 and "<session id=\"old\">" in script.calls[0][-1]["content"]
    items = await memory.list_memories(scope=ANN)
    assert {(m.kind, m.source) for m in items} == {("note", "consolidation")}
    old = [m for m in items if m.metadata.get(session_key("old")) is True]
    assert sorted(m.text for m in old) == ["Ann booked a ryokan in Kyoto for 12 October 2026",
                                           "Ann plans a trip to Japan in October 2026 with her sister Mia"]
    assert {m.scope for m in items} == {ANN}
    # a second run changes nothing: each session is consolidated once
    again = await extractor.consolidate(sessions, scope=ANN)
    assert again.consolidated == {}
    assert again.skipped == {"old": "already consolidated", "edge": "already consolidated", "recent": "too recent",
                             "short": "too short"}
    assert len(script.calls) == 2
    assert extractor.stats["sessions_consolidated"] == 2


async def test_consolidation_failures_leave_the_session_for_next_time(memory: AgentMemory) -> None:
    extractor = MemoryExtractor(memory, Script(lambda m: "I summarised it for you").model, clock=lambda: NOW)
    result = await extractor.consolidate([session("old", 20, 7)], scope=ANN)
    assert result.skipped == {"old": "malformed"} and result.consolidated == {}
    assert await memory.list_memories(scope=ANN) == []
    fixed = MemoryExtractor(memory, Script(notes).model, clock=lambda: NOW)
    assert list((await fixed.consolidate([session("old", 20, 7)], scope=ANN)).consolidated) == ["old"]


async def test_long_sessions_go_in_parts(memory: AgentMemory) -> None:
    script = Script(lambda m: {"notes": []})
    policy = ExtractionPolicy(max_session_chars=1_000)
    extractor = MemoryExtractor(memory, script.model, policy=policy, clock=lambda: NOW)
    long = Session("long", [Turn("user", f"turn {i} " + "words " * 40, NOW - timedelta(days=30, minutes=-i))
                            for i in range(20)])
    await extractor.consolidate([long], scope=ANN)
    assert len(script.calls) > 1
    seen = "".join(c[-1]["content"] for c in script.calls)
    assert all(f"turn {i} " in seen for i in range(20))  # nothing left out
    assert all(len(c[-1]["content"]) <= 1_500 for c in script.calls)


async def test_consolidation_refuses_bad_sessions(memory: AgentMemory) -> None:
    extractor = MemoryExtractor(memory, Script(notes).model, clock=lambda: NOW)
    with pytest.raises(UsageError):
        await extractor.consolidate(session("x", 20, 7), scope=ANN)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await extractor.consolidate([Session("", [])], scope=ANN)
    with pytest.raises(InvalidInput):
        await extractor.consolidate([Session("s", [Turn("user", "hi", datetime(2026, 1, 1))])], scope=ANN)


# -- reconciliation ------------------------------------------------------------

FLAT = "Ann lives in a flat in Paris with two cats and a dog near the river"
MOVED = "Ann lives in a flat in Lyon with two cats and a dog near the river"
TEA = "Ann drinks green tea every single morning before work at the office"
TEA2 = "Ann drinks green tea every single morning before work at the office desk"
RUN = "Ann runs five kilometres in the park every Sunday morning with Ben"
RUN2 = "Ann runs five kilometres in the park every Sunday morning with Ben maybe"
OTHER = "Ann once climbed Mont Blanc during a long summer holiday in France"


def relations(table: dict[str, str]) -> Script:
    def answer(messages: list[dict[str, str]]) -> dict[str, Any]:
        return {"pairs": [{"pair": h, "relation": table.get(a, "UNRELATED")}
                          for h, (a, _) in pairs_shown(messages).items()]}

    return Script(answer)


@pytest.fixture
async def stocked(tmp_path: Path) -> Any:
    # dedup off: the near-duplicates are constructed on purpose, reconciliation is what sorts them out
    memory = AgentMemory(SQLiteMemory(tmp_path / "r.db"), embedder=EMBEDDER, policy=CurationPolicy(dedup=False))
    ids = {}
    for text in (FLAT, TEA, RUN, OTHER, MOVED, TEA2, RUN2):  # older first
        ids[text] = (await memory.remember(text, scope=ANN, kind="fact")).id
    ids["ben"] = (await memory.remember(MOVED, scope=BEN)).id
    yield memory, ids
    await memory.aclose()


async def importance(memory: AgentMemory, id: str) -> float:
    item = await memory.get(id, scope=ANN)
    assert item is not None
    return item.importance


async def test_reconcile_reinforce_contradict_weaken(stocked: Any) -> None:
    memory, ids = stocked
    script = relations({FLAT: "CONTRADICT", TEA: "REINFORCE", RUN: "weaken"})
    extractor = MemoryExtractor(memory, script.model)
    before = {t: await importance(memory, ids[t]) for t in (TEA, RUN)}
    result = await extractor.reconcile(scope=ANN)
    assert result.measure == "cosine" and result.scanned == 7
    got = {(p.older, p.newer): (p.relation, p.applied) for p in result.pairs}
    assert got == {(ids[FLAT], ids[MOVED]): ("CONTRADICT", True), (ids[TEA], ids[TEA2]): ("REINFORCE", True),
                   (ids[RUN], ids[RUN2]): ("WEAKEN", True)}
    assert all(p.similarity > 0.85 for p in result.pairs)
    assert await importance(memory, ids[TEA]) == pytest.approx(before[TEA] + 0.05)
    assert await importance(memory, ids[RUN]) == pytest.approx(before[RUN] - 0.1)
    # the contradicted memory is superseded: hidden from recall, kept in the newer one's history
    texts = [m.text for m in await memory.recall("where does Ann live", scope=ANN, k=10, reinforce=False)]
    assert FLAT not in texts and MOVED in texts
    assert [m.id for m in await memory.history(ids[MOVED], scope=ANN)] == [ids[MOVED], ids[FLAT]]
    # Ben's identical memory was never compared with Ann's
    assert all(ids["ben"] not in (p.older, p.newer) for p in result.pairs)
    assert "Ben" not in " ".join(c[-1]["content"] for c in script.calls).replace("with Ben", "")
    # a second run sees no contradicted pair again
    again = await extractor.reconcile(scope=ANN)
    assert ids[FLAT] not in {p.older for p in again.pairs}


async def test_reconcile_dry_run_and_pinned(stocked: Any) -> None:
    memory, ids = stocked
    await memory.pin([ids[FLAT]], scope=ANN)
    script = relations({FLAT: "CONTRADICT", TEA: "REINFORCE", RUN: "WEAKEN"})
    extractor = MemoryExtractor(memory, script.model)
    before = await memory.memory.export(ANN)
    preview = await extractor.reconcile(scope=ANN, dry_run=True)
    assert preview.dry_run and {p.reason for p in preview.pairs} == {"dry run", "pinned"}
    assert await memory.memory.export(ANN) == before
    real = await extractor.reconcile(scope=ANN)
    assert {p.relation: p.applied for p in real.pairs} == {"CONTRADICT": False, "REINFORCE": True, "WEAKEN": True}
    assert (await memory.get(ids[FLAT], scope=ANN)).superseded_by is None  # type: ignore[union-attr]


async def test_reconcile_failures_and_foreign_handles_change_nothing(stocked: Any) -> None:
    memory, ids = stocked
    before = await memory.memory.export(ANN)
    for answer in ("no", {"pairs": [{"pair": "p1", "relation": "MERGE"}]},
                   {"pairs": [{"pair": ids["ben"], "relation": "CONTRADICT"}, {"pair": "p9", "relation": "WEAKEN"}]}):
        extractor = MemoryExtractor(memory, Script(lambda m, a=answer: a).model)
        result = await extractor.reconcile(scope=ANN)
        assert [p for p in result.pairs if p.applied] == []
    assert await memory.memory.export(ANN) == before


async def test_reconcile_without_an_embedder_uses_word_overlap(tmp_path: Path) -> None:
    memory = AgentMemory(SQLiteMemory(tmp_path / "w.db"), policy=CurationPolicy(dedup=False))
    await memory.remember(FLAT, scope=ANN)
    await memory.remember(MOVED, scope=ANN)
    await memory.remember(OTHER, scope=ANN)
    result = await MemoryExtractor(memory, relations({FLAT: "CONTRADICT"}).model).reconcile(scope=ANN)
    assert result.measure == "overlap" and [(p.relation, p.applied) for p in result.pairs] == [("CONTRADICT", True)]
    await memory.aclose()


async def test_supersede_keeps_chains(stocked: Any) -> None:
    memory, ids = stocked
    newer = await memory.update(ids[MOVED], scope=ANN, text="Ann lives in a house in Lyon", keep_history=True)
    assert newer is not None
    assert await memory.supersede(ids[FLAT], by=newer.id, scope=ANN)
    assert [m.id for m in await memory.history(newer.id, scope=ANN)] == [newer.id, ids[MOVED], ids[FLAT]]
    assert not await memory.supersede(ids[FLAT], by=newer.id, scope=ANN)  # already superseded
    assert not await memory.supersede(ids[TEA], by=ids["ben"], scope=ANN)  # not in scope
    assert not await memory.supersede(ids[TEA], by=ids[TEA], scope=ANN)
    assert await memory.delete([newer.id], scope=ANN) == 3  # the whole lineage goes


async def test_consolidate_from_the_conversation_log(tmp_path: Path) -> None:
    from memoryport.loop import ConversationLog, NewTurn

    memory = AgentMemory(SQLiteMemory(tmp_path / "log.db"))
    clock = {"now": NOW - timedelta(days=30)}
    log = ConversationLog(memory.memory, clock=lambda: clock["now"])
    old = session("old", 30, 7)
    await log.store_turns([NewTurn(t.role, t.text, at=t.at) for t in old.turns],
                          scope=MemoryScope(user_id="ann", session_id="old"))
    going = session("going", 20, 6)  # started 20 days ago, still going on today
    await log.store_turns([NewTurn(t.role, t.text, at=t.at) for t in going.turns] +
                          [NewTurn("user", "back again", at=NOW - timedelta(hours=1))],
                          scope=MemoryScope(user_id="ann", session_id="going"))
    await log.store_turns([NewTurn(t.role, t.text, at=t.at) for t in old.turns],
                          scope=MemoryScope(user_id="ben", session_id="old"))
    script = Script(notes)
    extractor = MemoryExtractor(memory, script.model, clock=lambda: NOW)
    result = await extractor.consolidate_log(log, scope=MemoryScope(user_id="ann", session_id="today"))
    assert list(result.consolidated) == ["old"] and result.skipped == {"going": "too recent"}
    assert len(script.calls) == 1 and all(t.text in script.calls[0][-1]["content"] for t in old.turns)
    assert {m.source for m in await memory.list_memories(scope=ANN)} == {"consolidation"}
    assert await memory.list_memories(scope=BEN) == []  # Ben's sessions are not Ann's
    again = await extractor.consolidate_log(log, scope=ANN)
    assert again.skipped == {"old": "already consolidated", "going": "too recent"}
    # reconciliation compares memories only, never the logged turns
    recon = await MemoryExtractor(memory, relations({}).model).reconcile(scope=ANN)
    assert recon.scanned == len(await memory.list_memories(scope=ANN))
    await memory.aclose()
