"""The in-memory reference store: a correct :class:`~memoryport.MemoryPort` over a dict.

Use it to test code that holds a memory (no file, no service), as the model of
what a store must do when writing your own, and as the store the contract
suite certifies about itself. It keeps everything in a process-local dict and
declares every capability but vector search, the entity graph included
(:class:`InMemoryGraph`, the reference :class:`~memoryport.GraphPort`).

Example:
    >>> from memoryport import GuardedMemory, MemoryRecord, MemoryScope
    >>> from memoryport.testing import InMemoryStore
    >>> memory = GuardedMemory(InMemoryStore())
    >>> ann = MemoryScope(user_id="ann")
    >>> _ = memory.add_sync([MemoryRecord(scope=ann, text="Ann drinks green tea")])
    >>> [h.record.text for h in memory.search_sync("tea", scope=ann)]
    ['Ann drinks green tea']
"""

from __future__ import annotations

import copy
import itertools
import re
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._errors import InvalidInput
from ._filters import matches
from ._graph import Fact, NewFact, Related, normalise_name
from ._port import Capability
from ._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, utcnow
from .storekit import ids_of

__all__ = ["InMemoryGraph", "InMemoryStore"]

_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _in_range(record: MemoryRecord, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or record.created_at >= since) and (until is None or record.created_at < until)


class InMemoryStore:
    """A :class:`~memoryport.MemoryPort` over a dict, for tests, docs and demos.

    Search ranks by the share of the query's words a record contains (signal
    ``"keyword"``); an empty query lists the newest records (signal
    ``"recent"``). Filters (with operators), time ranges, update and count are
    served by the store itself. Nothing is checked here: hold it through
    :class:`~memoryport.GuardedMemory`, as every store.

    Args:
        capabilities: what it declares; by default every capability but
            ``vector_search``. Declare fewer to stand in for a smaller
            backend (e.g. a user-only one, like Zep).
        name: its name in events and errors.

    Attributes:
        rows: record id -> record, everything stored (expired records too,
            until ``purge``), for a test to inspect.

    Example:
        >>> from memoryport import Capability, GuardedMemory
        >>> user_only = InMemoryStore(capabilities={Capability.KEYWORD_SEARCH, Capability.DELETE}, name="zep-like")
        >>> GuardedMemory(user_only).user_only
        True
    """

    def __init__(
        self, *, capabilities: Iterable[Capability] | None = None, name: str = "in-memory"
    ) -> None:
        self.rows: dict[str, MemoryRecord] = {}
        self.graph = InMemoryGraph()
        self.capabilities: frozenset[Capability] = (
            frozenset(Capability) - {Capability.VECTOR_SEARCH}
            if capabilities is None
            else frozenset(capabilities)
        )
        self.name = name

    def __repr__(self) -> str:
        return f"InMemoryStore(name={self.name!r}, records={len(self.rows)})"

    # -- helpers a subclass may override --------------------------------------------------

    def in_scope(self, scope: MemoryScope) -> list[MemoryRecord]:
        """Every stored record ``scope`` covers, in insertion order."""
        return [r for r in self.rows.values() if scope.covers(r.scope)]

    def rank(self, query: str, candidates: Sequence[MemoryRecord], k: int) -> list[MemoryHit]:
        """The ``k`` best of ``candidates`` for ``query``: word overlap, newest first on ties; newest for ``""``."""
        if not query.strip():
            newest = sorted(candidates, key=lambda r: r.created_at, reverse=True)[:k]
            return [MemoryHit(record=r, score=1.0 / (1 + i), signal="recent") for i, r in enumerate(newest)]
        wanted = _words(query)
        scored = [(len(wanted & _words(r.text)) / max(1, len(wanted)), r) for r in candidates]
        scored = [(s, r) for s, r in scored if s > 0]
        scored.sort(key=lambda p: (p[0], p[1].created_at), reverse=True)
        return [MemoryHit(record=r, score=s, signal="keyword") for s, r in scored[:k]]

    def doomed(self, ids: Sequence[str] | None, scope: MemoryScope) -> list[str]:
        """The ids ``delete(ids, scope=scope)`` removes."""
        if ids is None:
            return [r.id for r in self.in_scope(scope) if r.id is not None]
        return [i for i in ids if i in self.rows and scope.covers(self.rows[i].scope)]

    def updated(self, change: MemoryUpdate, record: MemoryRecord, now: datetime) -> MemoryRecord:
        """``record`` with ``change`` applied at ``now``."""
        return change.apply(record, now)

    # -- the port -------------------------------------------------------------------------

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        """Store the batch (the guard has given every record an id)."""
        ids = ids_of(records)
        self.rows.update(zip(ids, records, strict=True))
        return ids

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, Any] | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        """The ``k`` best records in scope, filtered and in range (see :meth:`rank`)."""
        return self.rank(
            query, [r for r in self.in_scope(scope) if matches(r.metadata, filters) and _in_range(r, since, until)], k
        )

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        """The record if ``scope`` covers it."""
        record = self.rows.get(id)
        return record if record is not None and scope.covers(record.scope) else None

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        """Remove the ids in scope (all of the scope for ``None``; a whole user's graph too); how many went."""
        doomed = self.doomed(ids, scope)
        for record_id in doomed:
            del self.rows[record_id]
        if ids is None and scope.user_id is not None and scope.session_id is None and scope.agent_id is None:
            await self.graph.erase(user_id=scope.user_id)
        return len(doomed)

    def graph_port(self) -> InMemoryGraph:
        """The reference entity graph (declared as ``Capability.GRAPH``)."""
        return self.graph

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        """Every record in scope and range (the guard hides the expired and sorts)."""
        return [r for r in self.in_scope(scope) if _in_range(r, since, until)]

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        """Apply the changes to live records in scope; the ids updated, in order."""
        now = utcnow()
        done: list[str] = []
        for change in changes:
            record = self.rows.get(change.id)
            if record is None or not scope.covers(record.scope) or record.is_expired(now):
                continue
            self.rows[change.id] = self.updated(change, record, now)
            done.append(change.id)
        return done

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Mapping[str, Any] | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        """How many live records in scope match."""
        now = utcnow()
        return sum(
            1
            for r in self.in_scope(scope)
            if not r.is_expired(now) and matches(r.metadata, filters) and _in_range(r, since, until)
        )

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        """Remove what expired at ``now`` or was created before the cutoff."""
        doomed = [
            i
            for i, r in self.rows.items()
            if r.is_expired(now) or (created_before is not None and r.created_at < created_before)
        ]
        for record_id in doomed:
            del self.rows[record_id]
        return len(doomed)


@dataclass
class _UserGraph:
    names: dict[int, str] = field(default_factory=dict)  # entity id -> canonical name
    aliases: dict[str, int] = field(default_factory=dict)  # normalised name -> entity id
    facts: dict[int, Fact] = field(default_factory=dict)  # fact number (insertion order) -> fact
    ends: dict[int, tuple[int, int]] = field(default_factory=dict)  # fact number -> (subject id, object id)


class InMemoryGraph:
    """The reference :class:`~memoryport.GraphPort`: one user's graph per dict, walked breadth first.

    The model of what a graph store must do (see :mod:`memoryport._graph` for the
    rules): a batch is all or nothing, a single-valued relation's current fact is
    closed by a contradicting one, traversals follow facts both ways and give each
    entity once at its shortest depth. Hold it through
    :class:`~memoryport.KnowledgeGraph`, which checks input and bounds.

    Example:
        >>> from memoryport import KnowledgeGraph, MemoryScope, NewFact
        >>> graph = KnowledgeGraph(InMemoryGraph())
        >>> ann = MemoryScope(user_id="ann")
        >>> _ = graph.add_facts_sync([NewFact(subject="Ann", relation="knows", object="Ben")], scope=ann)
        >>> [r.entity for r in graph.related_sync("Ben", scope=ann)]
        ['Ann']
    """

    def __init__(self) -> None:
        self.users: dict[str, _UserGraph] = {}
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"InMemoryGraph(users={len(self.users)})"

    def load(self, user_id: str, entities: Mapping[str, str], facts: Iterable[tuple[str, str, Fact]]) -> None:
        """Replace ``user_id``'s graph with one read elsewhere (an adapter walking another store's graph).

        ``entities`` maps each entity's key in that store to its name; entities whose
        names match (:func:`~memoryport.normalise_name`) become one. ``facts`` are
        ``(subject key, object key, fact)``; a fact naming an unknown key is skipped.
        """
        g = _UserGraph()
        by_key: dict[str, int] = {}
        for key, name in entities.items():
            by_key[key] = self._ensure(g, name)
        for subject, obj, fact in facts:
            if subject in by_key and obj in by_key:
                n = next(self._ids)
                names = {"subject": g.names[by_key[subject]], "object": g.names[by_key[obj]]}
                g.facts[n] = fact.model_copy(update=names)
                g.ends[n] = (by_key[subject], by_key[obj])
        self.users[user_id] = g

    def _ensure(self, g: _UserGraph, name: str) -> int:
        eid = g.aliases.get(normalise_name(name))
        if eid is None:
            eid = next(self._ids)
            g.names[eid] = name
            g.aliases[normalise_name(name)] = eid
        return eid

    @staticmethod
    def _valid(fact: Fact, as_of: datetime | None) -> bool:
        return fact.valid_to is None if as_of is None else fact.holds_at(as_of)

    async def add_entity(self, name: str, aliases: Sequence[str], *, user_id: str) -> str:
        g = copy.deepcopy(self.users.get(user_id, _UserGraph()))  # all or nothing: work on a copy
        eid = self._ensure(g, name)
        for i, alias in enumerate(aliases):
            other = g.aliases.get(normalise_name(alias))
            if other is not None and other != eid:
                raise InvalidInput(f"aliases[{i}] already names another entity", field=f"aliases[{i}]")
            g.aliases[normalise_name(alias)] = eid
        self.users[user_id] = g
        return g.names[eid]

    async def add_facts(
        self, facts: Sequence[NewFact], *, user_id: str, now: datetime, single_valued: frozenset[str]
    ) -> list[Fact]:
        g = copy.deepcopy(self.users.get(user_id, _UserGraph()))
        made: list[int] = []
        for new in facts:
            s, o = self._ensure(g, new.subject), self._ensure(g, new.object)
            start = new.valid_from or now
            current = [
                n
                for n, f in g.facts.items()
                if g.ends[n][0] == s and f.relation == new.relation and f.valid_to is None
            ]
            same = next((n for n in current if g.ends[n][1] == o), None)
            if same is not None:
                made.append(same)
                continue
            valid_to: datetime | None = None
            if new.relation in single_valued:
                for n in current:
                    began = g.facts[n].valid_from
                    if began <= start:
                        g.facts[n] = g.facts[n].model_copy(update={"valid_to": start})
                    else:  # the current fact began later: the new one is history, true until then
                        valid_to = began if valid_to is None else min(valid_to, began)
            if valid_to is not None and valid_to <= start:
                raise InvalidInput(
                    f"a {new.relation!r} fact of {new.subject!r} already starts at that time", field="valid_from"
                )
            n = next(self._ids)
            g.facts[n] = Fact(
                id=uuid.uuid4().hex,
                subject=g.names[s],
                relation=new.relation,
                object=g.names[o],
                valid_from=start,
                valid_to=valid_to,
                memory_id=new.memory_id,
            )
            g.ends[n] = (s, o)
            made.append(n)
        self.users[user_id] = g
        return [g.facts[n] for n in made]

    async def facts_about(
        self, entity: str, *, user_id: str, as_of: datetime | None, history: bool, limit: int
    ) -> list[Fact]:
        g = self.users.get(user_id)
        eid = None if g is None else g.aliases.get(normalise_name(entity))
        if g is None or eid is None:
            return []
        found = [
            (f.valid_from, n, f)
            for n, f in g.facts.items()
            if eid in g.ends[n] and (history or self._valid(f, as_of))
        ]
        return [f for _, _, f in sorted(found, key=lambda t: (t[0], t[1]))][:limit]

    def _edges(self, g: _UserGraph, as_of: datetime | None) -> dict[int, list[tuple[int, int]]]:
        """entity id -> [(fact number, the entity at the other end)], both directions."""
        edges: dict[int, list[tuple[int, int]]] = {}
        for n, f in sorted(g.facts.items()):
            if self._valid(f, as_of):
                s, o = g.ends[n]
                edges.setdefault(s, []).append((n, o))
                edges.setdefault(o, []).append((n, s))
        return edges

    async def related(
        self, entity: str, *, user_id: str, depth: int, as_of: datetime | None, limit: int
    ) -> list[Related]:
        g = self.users.get(user_id)
        start = None if g is None else g.aliases.get(normalise_name(entity))
        if g is None or start is None:
            return []
        edges = self._edges(g, as_of)
        seen: dict[int, tuple[int, int]] = {start: (0, 0)}
        queue = deque([start])
        while queue:
            eid = queue.popleft()
            d = seen[eid][0]
            if d == depth:
                continue
            for n, other in edges.get(eid, []):
                if other not in seen:
                    seen[other] = (d + 1, n)
                    queue.append(other)
        found = sorted((d, eid, n) for eid, (d, n) in seen.items() if eid != start)
        return [Related(entity=g.names[eid], depth=d, fact=g.facts[n]) for d, eid, n in found[:limit]]

    async def paths(
        self, source: str, target: str, *, user_id: str, max_depth: int, as_of: datetime | None, limit: int
    ) -> list[list[Fact]]:
        g = self.users.get(user_id)
        if g is None:
            return []
        a, b = g.aliases.get(normalise_name(source)), g.aliases.get(normalise_name(target))
        if a is None or b is None or a == b:
            return []
        edges = self._edges(g, as_of)
        out: list[list[int]] = []

        def walk(eid: int, nodes: list[int], chain: list[int]) -> None:
            if eid == b:
                out.append(chain)
                return
            if len(chain) == max_depth:
                return
            for n, other in edges.get(eid, []):
                if other not in nodes:
                    walk(other, [*nodes, other], [*chain, n])

        walk(a, [a], [])
        out.sort(key=lambda c: (len(c), c))
        return [[g.facts[n] for n in chain] for chain in out[:limit]]

    async def erase(self, *, user_id: str) -> int:
        g = self.users.pop(user_id, None)
        return 0 if g is None else len(g.facts) + len(g.names)
