"""The entity graph: entities with aliases, and facts that know when they were true.

A capability beside the record port (:attr:`~memoryport.Capability.GRAPH`): a
store declaring it implements :class:`SupportsGraph` (``graph_port()`` returns its
:class:`GraphPort`: plain storage, no checks) and hosts hold a
:class:`KnowledgeGraph` (``KnowledgeGraph(memory)``), which checks input, bounds the
traversals, owns the scope rule and re-checks validity on the way out. A memory
without the capability is refused with :class:`~memoryport.UnsupportedCapability`.
The graph belongs to a **user**: every call takes ``MemoryScope(user_id=...)`` with
no session or agent (a narrower scope would be silently widened, so it is
refused). Erasing the user (``memory.delete(scope=MemoryScope(user_id=...))``)
erases their graph in the same transaction on stores that keep both (SQLite,
PostgreSQL, the in-memory reference).

**Contradiction rule.** A relation declared single-valued (``single_valued=`` on the
:class:`KnowledgeGraph`, passed to the port with every ``add_facts``) holds at most
one object per subject at any time. Adding ``(s, r, o)`` when a
current fact ``(s, r, o')`` with ``o' != o`` exists closes the old fact: its
``valid_to`` becomes the new fact's ``valid_from``; nothing is deleted (a fact closed at
the instant it began, e.g. by a later fact of the same batch, is kept with an empty
validity). A new fact *older* than the current one becomes history: it is stored
with ``valid_to`` set to the current fact's ``valid_from``. Adding a fact
that is already current (same subject, relation and object) returns the current one.
Multi-valued relations (the default) never close each other.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, field_validator

from ._errors import InvalidInput, UnsupportedCapability, UsageError
from ._records import MemoryScope, utcnow
from ._sync import run_sync

if TYPE_CHECKING:
    from ._graph_extract import FactExtraction
    from ._guard import GuardedMemory
    from .models import ModelPort

__all__ = [
    "MAX_DEPTH",
    "Fact",
    "GraphPort",
    "KnowledgeGraph",
    "NewFact",
    "Related",
    "SupportsGraph",
    "normalise_name",
]

logger = logging.getLogger("memoryport")

MAX_DEPTH = 4
"""The deepest traversal :meth:`KnowledgeGraph.related` and :meth:`KnowledgeGraph.paths` accept."""
_MAX_NAME = 200
_MAX_RESULTS = 1_000


def normalise_name(name: str) -> str:
    """The key a name is matched by: case-folded, whitespace collapsed.

    Example:
        >>> normalise_name("  Ann   LEE ")
        'ann lee'
    """
    return re.sub(r"\s+", " ", name).strip().casefold()


def _check_name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    if len(value) > _MAX_NAME or any(ord(c) < 32 for c in value):
        raise InvalidInput(f"{field} must be at most {_MAX_NAME} characters without control characters", field=field)
    return re.sub(r"\s+", " ", value).strip()


class NewFact(BaseModel):
    """A fact to add: ``(subject, relation, object)``, true from ``valid_from`` (default: now).

    Example:
        >>> NewFact(subject="Ann", relation="lives_in", object="Lisbon").relation
        'lives_in'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: str
    relation: str
    object: str
    valid_from: datetime | None = None
    memory_id: str | None = None

    @field_validator("subject", "relation", "object")
    @classmethod
    def _names(cls, v: str) -> str:
        return _check_name(v, "name")

    @field_validator("valid_from")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("valid_from must be timezone-aware")
        return v


class Fact(BaseModel):
    """A stored fact. ``valid_to`` is None while it is current.

    ``subject`` and ``object`` are the entities' canonical names; ``memory_id`` the
    record it came from, if any.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    subject: str
    relation: str
    object: str
    valid_from: datetime
    valid_to: datetime | None = None
    memory_id: str | None = None

    def holds_at(self, when: datetime) -> bool:
        """Whether the fact was true at ``when`` (``valid_from`` inclusive, ``valid_to`` exclusive)."""
        return self.valid_from <= when and (self.valid_to is None or when < self.valid_to)


class Related(BaseModel):
    """An entity reached from another, at ``depth`` hops, through ``fact`` (the last hop)."""

    model_config = ConfigDict(frozen=True)

    entity: str
    depth: int
    fact: Fact


@runtime_checkable
class GraphPort(Protocol):
    """What a store implements for the graph capability: plain storage, no checks.

    Names arrive cleaned (:func:`normalise_name` is the match key), scopes are
    user-only, depths and limits bounded by :class:`KnowledgeGraph`.
    """

    async def add_entity(self, name: str, aliases: Sequence[str], *, user_id: str) -> str: ...

    async def add_facts(
        self, facts: Sequence[NewFact], *, user_id: str, now: datetime, single_valued: frozenset[str]
    ) -> list[Fact]: ...

    async def facts_about(
        self, entity: str, *, user_id: str, as_of: datetime | None, history: bool, limit: int
    ) -> list[Fact]: ...

    async def related(
        self, entity: str, *, user_id: str, depth: int, as_of: datetime | None, limit: int
    ) -> list[Related]: ...

    async def paths(
        self, source: str, target: str, *, user_id: str, max_depth: int, as_of: datetime | None, limit: int
    ) -> list[list[Fact]]: ...

    async def erase(self, *, user_id: str) -> int: ...


@runtime_checkable
class SupportsGraph(Protocol):
    """A store declaring :attr:`~memoryport.Capability.GRAPH`: it hands out its :class:`GraphPort`.

    The store's ``delete(None, scope=MemoryScope(user_id=u))`` (erasing the user)
    must erase ``u``'s graph too; the contract suite checks it.

    Example:
        >>> from memoryport import SupportsGraph
        >>> from memoryport.testing import InMemoryStore
        >>> isinstance(InMemoryStore(), SupportsGraph)
        True
    """

    def graph_port(self) -> GraphPort:
        """The store's graph (the same object on every call, or a cheap view over the store)."""
        ...


class KnowledgeGraph:
    """What hosts hold: checks, bounds and the scope rule over a store's :class:`GraphPort`.

    Args:
        source: a memory whose backend declares :attr:`~memoryport.Capability.GRAPH`
            (``SQLiteMemory``, ``PostgresMemory``, ``GuardedMemory(InMemoryStore())``)
            or a :class:`GraphPort` of your own. A memory without the capability
            raises :class:`~memoryport.UnsupportedCapability`.
        single_valued: relations that hold one object per subject at a time
            (``"lives_in"``, ``"works_at"``): a new fact closes the current one.
        backend: a name for errors and logs (default: the memory's backend).

    Example:
        >>> from memoryport import GuardedMemory, KnowledgeGraph, MemoryScope, NewFact
        >>> from memoryport.testing import InMemoryStore
        >>> graph = KnowledgeGraph(GuardedMemory(InMemoryStore()), single_valued={"lives_in"})
        >>> ann = MemoryScope(user_id="ann")
        >>> fact = NewFact(subject="Ann", relation="lives_in", object="Lisbon")
        >>> _ = graph.add_facts_sync([fact], scope=ann)
        >>> [f.object for f in graph.facts_about_sync("ann", scope=ann)]
        ['Lisbon']
    """

    def __init__(self, source: object, *, single_valued: Iterable[str] = (), backend: str | None = None) -> None:
        from ._guard import GuardedMemory
        from ._port import Capability

        if isinstance(single_valued, str):
            raise UsageError("single_valued takes a set of relation names, e.g. {'lives_in'}")
        relations = frozenset(_check_name(r, "single_valued") for r in single_valued)
        self._memory: GuardedMemory | None = source if isinstance(source, GuardedMemory) else None
        if isinstance(source, GuardedMemory):
            if Capability.GRAPH not in source.capabilities:
                raise UnsupportedCapability(
                    f"an entity graph needs the 'graph' capability, which the {source.backend!r} backend does not "
                    "have (SQLite, PostgreSQL and the in-memory reference store have it)",
                    capability=Capability.GRAPH.value,
                    backend=source.backend,
                )
            store = source.store
            if not isinstance(store, SupportsGraph):
                raise UsageError(f"{type(store).__name__} declares 'graph' but has no graph_port() method")
            port = store.graph_port()
            name = source.backend if backend is None else backend
        elif isinstance(source, GraphPort):
            port, name = source, "custom" if backend is None else backend
        else:
            raise UsageError(
                f"KnowledgeGraph() takes a memory (e.g. SQLiteMemory(path)) or a GraphPort, not {type(source).__name__}"
            )
        if not isinstance(port, GraphPort):
            raise UsageError(f"{type(port).__name__} does not implement GraphPort")
        self._port = port
        self.backend = name
        self.single_valued = relations
        self.dropped = 0
        """How many facts the store returned that the query ruled out (not true at the time asked)."""

    @property
    def port(self) -> GraphPort:
        """The store underneath."""
        return self._port

    def __repr__(self) -> str:
        return f"KnowledgeGraph(backend={self.backend!r}, single_valued={sorted(self.single_valued)})"

    def _holds(self, fact: object, as_of: datetime | None, history: bool) -> bool:
        """The way-out check: a fact of the wrong type or time is dropped, with a WARNING."""
        ok = isinstance(fact, Fact) and (
            history or (fact.valid_to is None if as_of is None else fact.holds_at(as_of))
        )
        if not ok:
            self.dropped += 1
            logger.warning(
                "graph backend %r returned a fact not true at the time asked; it was dropped", self.backend
            )
        return ok

    @staticmethod
    def _user(scope: object) -> str:
        if not isinstance(scope, MemoryScope):
            raise UsageError("the graph needs scope=MemoryScope(user_id=...) from the host")
        if scope.user_id is None or scope.session_id is not None or scope.agent_id is not None:
            raise InvalidInput(
                "the graph belongs to a user: pass MemoryScope(user_id=...) without session or agent", field="scope"
            )
        return scope.user_id

    @staticmethod
    def _when(value: datetime | None, field: str) -> datetime | None:
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise InvalidInput(f"{field} must be a timezone-aware datetime", field=field)
        return value

    @staticmethod
    def _bound(value: object, field: str, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise InvalidInput(f"{field} must be an int from 1 to {high}", field=field)
        return value

    async def add_entity(self, name: str, *, scope: MemoryScope, aliases: Sequence[str] = ()) -> str:
        """Create an entity (or add aliases to an existing one); returns its canonical name.

        An alias already naming another entity is refused (:class:`~memoryport.InvalidInput`).

        Example:
            >>> await graph.add_entity("Ann Lee", aliases=["Ann", "A. Lee"], scope=ann)  # doctest: +SKIP
            'Ann Lee'
        """
        user = self._user(scope)
        clean = _check_name(name, "name")
        if isinstance(aliases, str):
            raise UsageError("aliases takes a list of names")
        names = [_check_name(a, f"aliases[{i}]") for i, a in enumerate(aliases)]
        return await self._port.add_entity(clean, names, user_id=user)

    async def add_facts(self, facts: Sequence[NewFact], *, scope: MemoryScope) -> list[Fact]:
        """Add facts in one transaction; a single-valued relation's contradicted fact is closed, not deleted.

        Example:
            >>> fact = NewFact(subject="Ann", relation="works_at", object="Acme")
            >>> await graph.add_facts([fact], scope=ann)  # doctest: +SKIP
        """
        user = self._user(scope)
        if isinstance(facts, NewFact) or not isinstance(facts, Sequence):
            raise UsageError("add_facts() takes a list of NewFact")
        if len(facts) > 10_000:
            raise InvalidInput("facts has more than 10,000 items; split the batch", field="facts")
        now = utcnow()
        for i, fact in enumerate(facts):
            if not isinstance(fact, NewFact):
                raise UsageError(f"facts[{i}] is a {type(fact).__name__}, not a NewFact")
            if fact.valid_from is not None and fact.valid_from > now:
                raise InvalidInput(f"facts[{i}].valid_from is in the future", field=f"facts[{i}].valid_from")
        if not facts:
            return []
        return await self._port.add_facts(list(facts), user_id=user, now=now, single_valued=self.single_valued)

    async def facts_about(
        self, entity: str, *, scope: MemoryScope, as_of: datetime | None = None, history: bool = False, limit: int = 100
    ) -> list[Fact]:
        """Facts with ``entity`` as subject or object: current ones, those true at ``as_of``, or all (``history``).

        Example:
            >>> when = datetime(2024, 1, 1, tzinfo=timezone.utc)
            >>> await graph.facts_about("Ann", scope=ann, as_of=when)  # doctest: +SKIP
        """
        user = self._user(scope)
        if history and as_of is not None:
            raise UsageError("facts_about() takes as_of or history=True, not both")
        when = self._when(as_of, "as_of")
        n = self._bound(limit, "limit", _MAX_RESULTS)
        found = await self._port.facts_about(
            _check_name(entity, "entity"), user_id=user, as_of=when, history=bool(history), limit=n
        )
        return [f for f in found if self._holds(f, when, bool(history))][:n]

    async def related(
        self, entity: str, *, scope: MemoryScope, depth: int = 2, as_of: datetime | None = None, limit: int = 100
    ) -> list[Related]:
        """Entities within ``depth`` hops (either direction) over current facts (or facts true at ``as_of``).

        Each entity appears once, at its shortest depth; the start is not included;
        cycles end where an entity was already reached. ``depth`` is 1 to :data:`MAX_DEPTH`.

        Example:
            >>> [r.entity for r in await graph.related("Ann", scope=ann, depth=2)]  # doctest: +SKIP
        """
        user = self._user(scope)
        hops = self._bound(depth, "depth", MAX_DEPTH)
        when = self._when(as_of, "as_of")
        n = self._bound(limit, "limit", _MAX_RESULTS)
        found = await self._port.related(_check_name(entity, "entity"), user_id=user, depth=hops, as_of=when, limit=n)
        kept: list[Related] = []
        for r in found:
            if not isinstance(r, Related) or not 1 <= r.depth <= hops:
                self.dropped += 1
                logger.warning("graph backend %r returned an entity beyond the depth asked; dropped", self.backend)
            elif self._holds(r.fact, when, False):
                kept.append(r)
        return kept[:n]

    async def paths(
        self,
        source: str,
        target: str,
        *,
        scope: MemoryScope,
        max_depth: int = 3,
        as_of: datetime | None = None,
        limit: int = 10,
    ) -> list[list[Fact]]:
        """Shortest-first simple paths (no entity twice) of up to ``max_depth`` facts between two entities.

        Example:
            >>> [[f.relation for f in p] for p in await graph.paths("Ann", "Acme", scope=ann)]  # doctest: +SKIP
        """
        user = self._user(scope)
        hops = self._bound(max_depth, "max_depth", MAX_DEPTH)
        when = self._when(as_of, "as_of")
        n = self._bound(limit, "limit", 100)
        found = await self._port.paths(
            _check_name(source, "source"), _check_name(target, "target"), user_id=user, max_depth=hops, as_of=when,
            limit=n,
        )
        kept: list[list[Fact]] = []
        for path in found:
            if not 1 <= len(path) <= hops:
                self.dropped += 1
                logger.warning("graph backend %r returned a path longer than asked; dropped", self.backend)
            elif all(self._holds(f, when, False) for f in path):
                kept.append(list(path))
        return kept[:n]

    # -- facts from a model ----------------------------------------------------

    async def add_facts_from_text(
        self,
        model: ModelPort,
        text: str,
        *,
        scope: MemoryScope,
        memory_id: str | None = None,
        valid_from: datetime | None = None,
        timeout: float = 30.0,
    ) -> FactExtraction:
        """Ask ``model`` for the ``(subject, relation, object)`` facts ``text`` states and add them.

        The answer is validated (pydantic) before anything is written; a malformed
        answer, a timeout or a model failure raises :class:`~memoryport.ModelError`
        and writes nothing; a triple the graph refuses is reported in ``skipped``.
        Relations are normalised to ``snake_case``. With ``memory_id`` (the record
        the text came from) each fact carries it; on a graph built from a memory
        with ``get``, the id must name a memory of this user, and the facts are true
        from its ``created_at`` unless ``valid_from`` says otherwise (else from now).

        Example:
            >>> from memoryport.models import CallableModel
            >>> model = CallableModel(lambda messages: {"facts": [
            ...     {"subject": "Ann", "relation": "lives in", "object": "Porto"}]})
            >>> done = await graph.add_facts_from_text(model, "Ann moved to Porto", scope=ann)  # doctest: +SKIP
            >>> [(f.relation, f.object) for f in done.facts]  # doctest: +SKIP
            [('lives_in', 'Porto')]
        """
        from ._graph_extract import FactExtraction, ask_for_facts
        from ._port import Capability

        self._user(scope)
        when = self._when(valid_from, "valid_from")
        if memory_id is not None:
            if not isinstance(memory_id, str) or not memory_id.strip() or len(memory_id) > _MAX_NAME:
                raise InvalidInput("memory_id must be a memory's id (a non-empty string)", field="memory_id")
            if self._memory is not None and Capability.GET in self._memory.capabilities:
                record = await self._memory.get(memory_id, scope=scope)
                if record is None:
                    raise InvalidInput("memory_id names no memory of this user", field="memory_id")
                when = when or record.created_at
        kept, skipped = await ask_for_facts(model, text, relations=self.single_valued, timeout=timeout)
        facts = [
            NewFact(subject=t.subject, relation=t.relation, object=t.object, valid_from=when, memory_id=memory_id)
            for _, t in kept
        ]
        stored = await self.add_facts(facts, scope=scope) if facts else []
        return FactExtraction(facts=stored, skipped=skipped, model=model.name)

    async def add_facts_from_memory(
        self, model: ModelPort, memory_id: str, *, scope: MemoryScope, timeout: float = 30.0
    ) -> FactExtraction:
        """:meth:`add_facts_from_text` on a stored memory's text: facts carry its id and start at its ``created_at``.

        Needs a graph built from a memory with ``get`` (``KnowledgeGraph(memory)``).

        Example:
            >>> [said] = await memory.add([MemoryRecord(scope=ann, text="Ann works at Acme")])  # doctest: +SKIP
            >>> await graph.add_facts_from_memory(model, said, scope=ann)  # doctest: +SKIP
        """
        from ._port import Capability

        self._user(scope)
        if self._memory is None or Capability.GET not in self._memory.capabilities:
            raise UsageError("add_facts_from_memory() needs KnowledgeGraph(memory) over a memory with get")
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInput("memory_id must be a memory's id (a non-empty string)", field="memory_id")
        record = await self._memory.get(memory_id, scope=scope)
        if record is None:
            raise InvalidInput("memory_id names no memory of this user", field="memory_id")
        return await self.add_facts_from_text(
            model, record.text, scope=scope, memory_id=memory_id, valid_from=record.created_at, timeout=timeout
        )

    # -- blocking twins, for synchronous hosts ---------------------------------

    def add_entity_sync(self, name: str, *, scope: MemoryScope, aliases: Sequence[str] = ()) -> str:
        """Blocking twin of :meth:`add_entity`."""
        return run_sync(self.add_entity(name, scope=scope, aliases=aliases), method="add_entity", owner="graph")

    def add_facts_sync(self, facts: Sequence[NewFact], *, scope: MemoryScope) -> list[Fact]:
        """Blocking twin of :meth:`add_facts`."""
        return run_sync(self.add_facts(facts, scope=scope), method="add_facts", owner="graph")

    def facts_about_sync(
        self, entity: str, *, scope: MemoryScope, as_of: datetime | None = None, history: bool = False, limit: int = 100
    ) -> list[Fact]:
        """Blocking twin of :meth:`facts_about`."""
        return run_sync(
            self.facts_about(entity, scope=scope, as_of=as_of, history=history, limit=limit),
            method="facts_about",
            owner="graph",
        )

    def related_sync(
        self, entity: str, *, scope: MemoryScope, depth: int = 2, as_of: datetime | None = None, limit: int = 100
    ) -> list[Related]:
        """Blocking twin of :meth:`related`."""
        return run_sync(
            self.related(entity, scope=scope, depth=depth, as_of=as_of, limit=limit), method="related", owner="graph"
        )

    def paths_sync(
        self,
        source: str,
        target: str,
        *,
        scope: MemoryScope,
        max_depth: int = 3,
        as_of: datetime | None = None,
        limit: int = 10,
    ) -> list[list[Fact]]:
        """Blocking twin of :meth:`paths`."""
        return run_sync(
            self.paths(source, target, scope=scope, max_depth=max_depth, as_of=as_of, limit=limit),
            method="paths",
            owner="graph",
        )
