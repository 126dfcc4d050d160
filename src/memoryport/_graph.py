"""The entity graph: entities with aliases, and facts that know when they were true.

A capability beside the record port: a store implements :class:`GraphPort` (plain
storage, no checks) and hosts hold a :class:`KnowledgeGraph`, which checks input,
bounds the traversals and owns the scope rule. The graph belongs to a **user**:
every call takes ``MemoryScope(user_id=...)`` with no session or agent (a narrower
scope would be silently widened, so it is refused). Erasing the user
(``memory.delete(scope=MemoryScope(user_id=...))``) erases their graph in the same
transaction on stores that keep both (SQLite).

**Contradiction rule.** A relation declared single-valued (``single_valued=`` on the
store) holds at most one object per subject at any time. Adding ``(s, r, o)`` when a
current fact ``(s, r, o')`` with ``o' != o`` exists closes the old fact: its
``valid_to`` becomes the new fact's ``valid_from``; nothing is deleted (a fact closed at
the instant it began, e.g. by a later fact of the same batch, is kept with an empty
validity). A new fact *older* than the current one becomes history: it is stored
with ``valid_to`` set to the current fact's ``valid_from``. Adding a fact
that is already current (same subject, relation and object) returns the current one.
Multi-valued relations (the default) never close each other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, field_validator

from ._errors import InvalidInput, UsageError
from ._records import MemoryScope, utcnow

__all__ = ["MAX_DEPTH", "Fact", "GraphPort", "KnowledgeGraph", "NewFact", "Related", "normalise_name"]

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

    async def add_facts(self, facts: Sequence[NewFact], *, user_id: str, now: datetime) -> list[Fact]: ...

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


class KnowledgeGraph:
    """What hosts hold: checks, bounds and the scope rule over a :class:`GraphPort`.

    Example:
        >>> graph = SQLiteGraph(memory, single_valued={"lives_in"})  # doctest: +SKIP
        >>> fact = NewFact(subject="Ann", relation="lives_in", object="Lisbon")
        >>> await graph.add_facts([fact], scope=ann)  # doctest: +SKIP
        >>> [f.object for f in await graph.facts_about("ann", scope=ann)]  # doctest: +SKIP
        ['Lisbon']
    """

    def __init__(self, port: GraphPort, *, backend: str = "custom") -> None:
        if not isinstance(port, GraphPort):
            raise UsageError(f"{type(port).__name__} does not implement GraphPort")
        self._port = port
        self.backend = backend

    @property
    def port(self) -> GraphPort:
        """The store underneath."""
        return self._port

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
        return await self._port.add_facts(list(facts), user_id=user, now=now) if facts else []

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
        return await self._port.facts_about(
            _check_name(entity, "entity"),
            user_id=user,
            as_of=self._when(as_of, "as_of"),
            history=history,
            limit=self._bound(limit, "limit", _MAX_RESULTS),
        )

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
        return await self._port.related(
            _check_name(entity, "entity"),
            user_id=user,
            depth=self._bound(depth, "depth", MAX_DEPTH),
            as_of=self._when(as_of, "as_of"),
            limit=self._bound(limit, "limit", _MAX_RESULTS),
        )

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
        return await self._port.paths(
            _check_name(source, "source"),
            _check_name(target, "target"),
            user_id=user,
            max_depth=self._bound(max_depth, "max_depth", MAX_DEPTH),
            as_of=self._when(as_of, "as_of"),
            limit=self._bound(limit, "limit", 100),
        )
