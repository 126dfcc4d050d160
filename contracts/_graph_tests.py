"""Contract tests of the entity graph (``Capability.GRAPH``): validity, as-of, depth, cycles, paths, isolation, erasure.

Mixed into :class:`~memoryport.contracts.MemoryContract`; registered in its
``CONTRACT_TESTS`` through :data:`GRAPH_TESTS`. Where the store declares the
capability each test checks that the graph works; where it does not, that
``KnowledgeGraph(memory)`` raises :class:`~memoryport.UnsupportedCapability`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pytest

from memoryport._errors import InvalidInput, UnsupportedCapability
from memoryport._graph import KnowledgeGraph, NewFact
from memoryport._guard import GuardedMemory
from memoryport._port import Capability
from memoryport._records import MemoryRecord, MemoryScope

__all__ = ["GRAPH_BASE_TESTS", "GRAPH_TESTS", "GraphContract"]

GRAPH_TESTS: dict[str, Capability | None] = {
    "test_graph_contradiction_closes_validity": Capability.GRAPH,
    "test_graph_as_of_reads_the_past": Capability.GRAPH,
    "test_graph_depth_is_bounded_and_cycles_end": Capability.GRAPH,
    "test_graph_paths_are_simple_and_shortest_first": Capability.GRAPH,
    "test_graph_aliases_and_refused_input_write_nothing": Capability.GRAPH,
    "test_graph_users_are_isolated": Capability.GRAPH,
    "test_graph_erasing_a_user_erases_their_graph": Capability.GRAPH,
}

# No backend may let one user's graph reach another's, or keep it after erasure.
GRAPH_BASE_TESTS: frozenset[str] = frozenset(
    {"test_graph_users_are_isolated", "test_graph_erasing_a_user_erases_their_graph"}
)

T0 = datetime(2021, 3, 1, 12, 0, tzinfo=timezone.utc)


def _day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def _pairs(facts: Iterable[object]) -> set[tuple[str, str]]:
    return {(f.relation, f.object) for f in facts}  # type: ignore[attr-defined]


class GraphContract:
    """The tests of the entity graph (see :data:`GRAPH_TESTS`)."""

    if TYPE_CHECKING:  # provided by MemoryContract

        def _user(self, **ids: str) -> MemoryScope: ...
        async def settle(self, memory: GuardedMemory) -> None: ...
        @staticmethod
        def _has(memory: GuardedMemory, capability: Capability) -> bool: ...

    def _graph(self, memory: GuardedMemory, single_valued: Iterable[str] = ()) -> KnowledgeGraph | None:
        """The memory's graph; ``None`` after checking the refusal when the capability is not declared."""
        if not self._has(memory, Capability.GRAPH):
            with pytest.raises(UnsupportedCapability) as refused:
                KnowledgeGraph(memory, single_valued=single_valued)
            assert refused.value.capability == "graph", "the refusal must name the 'graph' capability"
            return None
        return KnowledgeGraph(memory, single_valued=single_valued)

    @staticmethod
    def _clean(graph: KnowledgeGraph) -> None:
        assert graph.dropped == 0, (
            f"the store returned {graph.dropped} fact(s) or path(s) the query ruled out (not true at the time asked, "
            "beyond the depth asked); KnowledgeGraph hid them, but the store mis-runs validity or depth"
        )

    async def test_graph_contradiction_closes_validity(self, memory: GuardedMemory) -> None:
        """A contradicting fact of a single-valued relation closes the current one; nothing is deleted.

        ``(ann, lives_in, Lisbon)`` then ``(ann, lives_in, Porto)`` later: Lisbon's ``valid_to``
        becomes Porto's ``valid_from`` and stays in the history with its ``memory_id``; adding the
        current fact again returns it (no duplicate); multi-valued relations never close each
        other; a fact dated before the current one is stored as history ending where the current
        one begins. Undeclared ``graph``: ``KnowledgeGraph(memory)`` raises UnsupportedCapability.
        Troubleshooting: in ``add_facts`` look up the subject's current facts of the relation
        (``valid_to`` NULL) when the relation is in ``single_valued`` and set their ``valid_to``
        instead of deleting them; match names by :func:`~memoryport.normalise_name` (aliases).
        """
        graph = self._graph(memory, single_valued={"lives_in"})
        if graph is None:
            return
        ann = self._user()
        [said] = await memory.add([MemoryRecord(scope=ann, text="Ann moved to Lisbon")])
        lisbon = NewFact(subject="Ann", relation="lives_in", object="Lisbon", valid_from=_day(0), memory_id=said)
        await graph.add_facts([lisbon], scope=ann)
        await graph.add_facts([NewFact(subject="Ann", relation="likes", object="Tea", valid_from=_day(1))], scope=ann)
        await graph.add_facts(
            [NewFact(subject="ANN", relation="lives_in", object="Porto", valid_from=_day(10))], scope=ann
        )
        await graph.add_facts([NewFact(subject="Ann", relation="likes", object="Jazz", valid_from=_day(11))], scope=ann)
        now = await graph.facts_about("ann", scope=ann)
        assert _pairs(now) == {("lives_in", "Porto"), ("likes", "Tea"), ("likes", "Jazz")}, (
            "current facts: the contradicted one must be closed, multi-valued ones kept"
        )
        history = await graph.facts_about("Ann", scope=ann, history=True)
        closed = [f for f in history if f.object == "Lisbon"]
        assert len(closed) == 1, "the contradicted fact must stay in the history (closed, not deleted)"
        assert closed[0].valid_from == _day(0) and closed[0].valid_to == _day(10), "closed at the new fact's start"
        assert closed[0].memory_id == said and closed[0].subject == "Ann", "memory_id and canonical name kept"
        again = await graph.add_facts([NewFact(subject="ann", relation="lives_in", object="porto")], scope=ann)
        assert len(again) == 1 and again[0].valid_from == _day(10), "re-adding the current fact returns it"
        assert len(await graph.facts_about("Ann", scope=ann, history=True)) == 4, "no duplicate was stored"
        [older] = await graph.add_facts(
            [NewFact(subject="Ann", relation="lives_in", object="Faro", valid_from=_day(5))], scope=ann
        )
        assert older.valid_to == _day(10), "a fact older than the current one is history, ending where it begins"
        assert _pairs(await graph.facts_about("Ann", scope=ann, as_of=_day(7))) >= {("lives_in", "Faro")}
        assert ("lives_in", "Porto") in _pairs(await graph.facts_about("Ann", scope=ann)), "Porto is still current"
        self._clean(graph)

    async def test_graph_as_of_reads_the_past(self, memory: GuardedMemory) -> None:
        """``as_of=t`` sees the facts with ``valid_from <= t < valid_to``, in facts_about, related and paths.

        Troubleshooting: compare ``valid_from`` inclusively and ``valid_to`` exclusively (NULL is
        open); without ``as_of`` use only current facts (``valid_to`` NULL); apply the same
        condition at every step of a traversal, not only the first.
        """
        graph = self._graph(memory, single_valued={"works_at"})
        if graph is None:
            return
        ann = self._user()
        await graph.add_facts(
            [
                NewFact(subject="Ann", relation="works_at", object="Acme", valid_from=_day(0)),
                NewFact(subject="Acme", relation="based_in", object="Paris", valid_from=_day(0)),
            ],
            scope=ann,
        )
        await graph.add_facts(
            [NewFact(subject="Ann", relation="works_at", object="Initech", valid_from=_day(20))], scope=ann
        )
        assert await graph.facts_about("Ann", scope=ann, as_of=_day(-1)) == [], "nothing was true before"
        assert _pairs(await graph.facts_about("Ann", scope=ann, as_of=_day(0))) == {("works_at", "Acme")}, (
            "valid_from is inclusive"
        )
        assert _pairs(await graph.facts_about("Ann", scope=ann, as_of=_day(20))) == {("works_at", "Initech")}, (
            "valid_to is exclusive"
        )
        then = {(r.entity, r.depth) for r in await graph.related("Ann", scope=ann, depth=2, as_of=_day(10))}
        assert then == {("Acme", 1), ("Paris", 2)}, "related(as_of=) walks the facts true then"
        now = {(r.entity, r.depth) for r in await graph.related("Ann", scope=ann, depth=2)}
        assert now == {("Initech", 1)}, "related() walks current facts only"
        assert len(await graph.paths("Ann", "Paris", scope=ann, as_of=_day(10))) == 1
        assert await graph.paths("Ann", "Paris", scope=ann) == [], "the path closed with the job"
        self._clean(graph)

    async def test_graph_depth_is_bounded_and_cycles_end(self, memory: GuardedMemory) -> None:
        """``related`` returns each entity once at its shortest depth, never the start, never beyond ``depth``.

        A chain e0 -> e1 -> ... -> e6 and a cycle c0 -> c1 -> c2 -> c0; facts are followed in both
        directions; ``depth`` outside 1..4 is refused with InvalidInput.
        Troubleshooting: bound the recursion by depth (a recursive CTE's ``depth < ?``), keep the
        minimum depth per entity, drop the start entity, and let the bound end cycles.
        """
        graph = self._graph(memory)
        if graph is None:
            return
        ann = self._user()
        chain = [NewFact(subject=f"e{i}", relation="next", object=f"e{i + 1}", valid_from=_day(0)) for i in range(6)]
        ring = [
            NewFact(subject=f"c{i}", relation="next", object=f"c{(i + 1) % 3}", valid_from=_day(0)) for i in range(3)
        ]
        await graph.add_facts(chain + ring, scope=ann)
        for depth in (1, 2, 3, 4):
            found = await graph.related("e0", scope=ann, depth=depth)
            assert [(r.entity, r.depth) for r in found] == [(f"e{i}", i) for i in range(1, depth + 1)], (
                f"depth {depth}: each entity once, at its shortest depth, nearest first"
            )
        middle = {(r.entity, r.depth) for r in await graph.related("e3", scope=ann, depth=2)}
        assert middle == {("e2", 1), ("e4", 1), ("e1", 2), ("e5", 2)}, "facts are followed both ways"
        around = await graph.related("c0", scope=ann, depth=4)
        assert sorted((r.entity, r.depth) for r in around) == [("c1", 1), ("c2", 1)], "a cycle ends; no start"
        for r in around:
            assert r.fact.relation == "next" and r.entity in (r.fact.subject, r.fact.object), "the last hop's fact"
        for bad in (0, 5, -1):
            with pytest.raises(InvalidInput):
                await graph.related("e0", scope=ann, depth=bad)
        assert len(await graph.related("e0", scope=ann, depth=4, limit=2)) == 2, "limit is honoured"
        assert await graph.related("nobody", scope=ann) == [], "an unknown entity has no neighbours"
        self._clean(graph)

    async def test_graph_paths_are_simple_and_shortest_first(self, memory: GuardedMemory) -> None:
        """``paths(a, b, max_depth)`` gives simple paths (no entity twice), shortest first, within the bound.

        Troubleshooting: stop extending a path at the target, never revisit an entity of the
        path, order by length, and return each path's facts in order from ``a`` to ``b``.
        """
        graph = self._graph(memory)
        if graph is None:
            return
        ann = self._user()
        await graph.add_facts(
            [
                NewFact(subject="Ann", relation="knows", object="Ben", valid_from=_day(0)),
                NewFact(subject="Ben", relation="knows", object="Cy", valid_from=_day(0)),
                NewFact(subject="Cy", relation="knows", object="Ann", valid_from=_day(0)),
                NewFact(subject="Cy", relation="lives_in", object="Oslo", valid_from=_day(0)),
                NewFact(subject="Dee", relation="lives_in", object="Rome", valid_from=_day(0)),
            ],
            scope=ann,
        )
        paths = await graph.paths("Ann", "Oslo", scope=ann, max_depth=3)
        assert [len(p) for p in paths] == [2, 3], "both simple paths, shortest first"
        for path in paths:
            names = ["ann"]
            for fact in path:
                here = names[-1]
                assert here in (fact.subject.lower(), fact.object.lower()), "each fact continues the path"
                names.append(fact.object.lower() if fact.subject.lower() == here else fact.subject.lower())
            assert names[-1] == "oslo" and len(set(names)) == len(names), "a simple path from source to target"
        assert [len(p) for p in await graph.paths("Ann", "Oslo", scope=ann, max_depth=2)] == [2]
        assert await graph.paths("Ann", "Oslo", scope=ann, max_depth=1) == []
        assert await graph.paths("Ann", "Rome", scope=ann, max_depth=4) == [], "no path between components"
        assert await graph.paths("Ann", "ann", scope=ann) == [], "no path from an entity to itself"
        self._clean(graph)

    async def test_graph_aliases_and_refused_input_write_nothing(self, memory: GuardedMemory) -> None:
        """Aliases name one entity; refused input (alias conflict, future time, wrong scope) writes nothing.

        Troubleshooting: keep aliases per user, keyed by the normalised name; check an alias
        against other entities before writing anything (one transaction for the entity and all
        its aliases).
        """
        graph = self._graph(memory)
        if graph is None:
            return
        ann = self._user()
        assert await graph.add_entity("Ann Lee", aliases=["Ann", "A. Lee"], scope=ann) == "Ann Lee"
        await graph.add_facts(
            [NewFact(subject="a. lee", relation="likes", object="Tea", valid_from=_day(0))], scope=ann
        )
        [fact] = await graph.facts_about("ANN", scope=ann)
        assert fact.subject == "Ann Lee", "an alias names the entity; facts carry its canonical name"
        with pytest.raises(InvalidInput):
            await graph.add_entity("Newcomer", aliases=["Zed", "Ann"], scope=ann)
        assert await graph.add_entity("Zed Other", aliases=["Zed", "Newcomer"], scope=ann) == "Zed Other", (
            "a refused add_entity must leave neither the entity nor its other aliases behind"
        )
        with pytest.raises(InvalidInput):
            await graph.add_facts(
                [
                    NewFact(subject="Ann", relation="likes", object="Coffee", valid_from=_day(1)),
                    NewFact(
                        subject="Ann",
                        relation="likes",
                        object="Cake",
                        valid_from=datetime.now(timezone.utc) + timedelta(days=9),
                    ),
                ],
                scope=ann,
            )
        assert _pairs(await graph.facts_about("Ann", scope=ann, history=True)) == {("likes", "Tea")}, (
            "a refused batch must write nothing"
        )
        if self._has(memory, Capability.SESSION_SCOPE):
            with pytest.raises(InvalidInput):
                await graph.facts_about("Ann", scope=MemoryScope(user_id=ann.user_id, session_id="s1"))
        self._clean(graph)

    async def test_graph_users_are_isolated(self, memory: GuardedMemory) -> None:
        """One user's entities, aliases and facts are never seen from, nor reachable by, another user.

        A base item. The two users share entity names; one user id is a prefix of the other.
        Troubleshooting: key entities, aliases and facts by user id *equality* at every step of a
        traversal (recursive CTEs join on the user too); never resolve a name in another graph.
        """
        graph = self._graph(memory, single_valued={"lives_in"})
        if graph is None:
            return
        ann = self._user()
        ann_x = MemoryScope(user_id=f"{ann.user_id}-x")
        await graph.add_entity("Ann", aliases=["Boss"], scope=ann)
        await graph.add_entity("Xena", aliases=["Boss"], scope=ann_x)  # the same alias, another user: allowed
        await graph.add_facts(
            [
                NewFact(subject="Ann", relation="lives_in", object="Lisbon", valid_from=_day(0)),
                NewFact(subject="Lisbon", relation="in", object="Portugal", valid_from=_day(0)),
            ],
            scope=ann,
        )
        await graph.add_facts(
            [
                NewFact(subject="Ann", relation="lives_in", object="Tokyo", valid_from=_day(1)),
                NewFact(subject="Tokyo", relation="in", object="Japan", valid_from=_day(1)),
            ],
            scope=ann_x,
        )
        assert _pairs(await graph.facts_about("Ann", scope=ann, history=True)) == {("lives_in", "Lisbon")}, (
            "a single-valued fact of another user must not close this user's"
        )
        assert _pairs(await graph.facts_about("Ann", scope=ann_x, history=True)) == {("lives_in", "Tokyo")}
        assert {r.entity for r in await graph.related("Boss", scope=ann, depth=4)} == {"Lisbon", "Portugal"}
        assert await graph.related("Boss", scope=ann_x) == [], "Xena has no facts in the other graph"
        assert await graph.paths("Ann", "Japan", scope=ann, max_depth=4) == []
        assert await graph.facts_about("Japan", scope=ann) == []
        assert await graph.facts_about("Portugal", scope=self._user()) == [], "a fresh user sees nothing"
        self._clean(graph)

    async def test_graph_erasing_a_user_erases_their_graph(self, memory: GuardedMemory) -> None:
        """``memory.delete(scope=MemoryScope(user_id=u))`` erases ``u``'s entities, aliases and facts, no one else's.

        A base item. Erasing one session of the user (where sessions exist) leaves the graph.
        Troubleshooting: in ``delete(None, scope=...)`` with a user-only scope, delete the user's
        graph rows in the same transaction as the records (by user id equality).
        """
        graph = self._graph(memory)
        if graph is None:
            return
        ann, ben = self._user(), self._user()
        ann_x = MemoryScope(user_id=f"{ann.user_id}-x")
        for who in (ann, ann_x, ben):
            await graph.add_entity("Ann", aliases=["Annie"], scope=who)
            await graph.add_facts(
                [NewFact(subject="Ann", relation="likes", object="Tea", valid_from=_day(0))], scope=who
            )
        await memory.add([MemoryRecord(scope=ann, text="Ann likes tea")])
        if self._has(memory, Capability.SESSION_SCOPE):
            await memory.delete(scope=MemoryScope(user_id=ann.user_id, session_id="s-unrelated"))
            assert len(await graph.facts_about("Ann", scope=ann)) == 1, "erasing a session must leave the graph"
        await memory.delete(scope=ann)
        await self.settle(memory)
        assert await graph.facts_about("Ann", scope=ann, history=True) == [], "the erased user's facts remain"
        assert await graph.related("Tea", scope=ann) == []
        # The alias is gone with its entity: it can name a new one now.
        assert await graph.add_entity("Someone Else", aliases=["Annie"], scope=ann) == "Someone Else", (
            "the erased user's aliases remain"
        )
        for other in (ann_x, ben):
            assert len(await graph.facts_about("Annie", scope=other)) == 1, "another user's graph was erased"
        self._clean(graph)
