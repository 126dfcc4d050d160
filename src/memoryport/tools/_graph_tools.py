"""``facts_about`` and ``related``: the entity graph as tools for a model, scope from the host."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError

from .._errors import BackendError, InvalidInput, UsageError
from .._graph import MAX_DEPTH, Fact, KnowledgeGraph
from .._records import MemoryScope
from ._context import ScopeFrom, ToolContext, ToolError, user_scope
from ._tool import ToolArgs as _Args
from ._tools import MemoryTool, _arguments_error, _schema

__all__ = [
    "FACTS_ABOUT_DESCRIPTION",
    "GRAPH_LIMIT",
    "RELATED_DESCRIPTION",
    "FactsAboutArgs",
    "RelatedArgs",
    "facts_about_result",
    "graph_tools",
    "related_result",
]

logger = logging.getLogger("memoryport")


class FactsAboutArgs(_Args):
    entity: str = Field(description="The person, place or thing to look up, by name (e.g. 'Ann' or 'Acme').")


class RelatedArgs(_Args):
    entity: str = Field(description="The person, place or thing to start from, by name.")
    depth: int = Field(default=2, ge=1, le=MAX_DEPTH, description=f"How many hops to follow (1 to {MAX_DEPTH}).")


FACTS_ABOUT_DESCRIPTION = (
    "Look up what is currently known about a person, place or thing in the current user's knowledge "
    "graph: facts as (subject, relation, object) that are true now, with the date each became true."
)
RELATED_DESCRIPTION = (
    "Find what is connected to a person, place or thing in the current user's knowledge graph, up to "
    f"a few hops away (depth 1 to {MAX_DEPTH}, default 2), each with the fact that links it."
)
GRAPH_LIMIT = 50
"""How many facts or entities a graph tool returns at most (by default)."""


def _fact(f: Fact) -> dict[str, Any]:
    return {"subject": f.subject, "relation": f.relation, "object": f.object, "since": f.valid_from.isoformat()}


async def facts_about_result(graph: KnowledgeGraph, entity: str, scope: MemoryScope, limit: int) -> dict[str, Any]:
    """What the ``facts_about`` tool returns to the model."""
    facts = await graph.facts_about(entity, scope=scope, limit=limit)
    return {"entity": entity, "facts": [_fact(f) for f in facts], "count": len(facts)}


async def related_result(
    graph: KnowledgeGraph, entity: str, depth: int, scope: MemoryScope, limit: int
) -> dict[str, Any]:
    """What the ``related`` tool returns to the model."""
    found = await graph.related(entity, scope=scope, depth=depth, limit=limit)
    return {
        "entity": entity,
        "related": [{"entity": r.entity, "depth": r.depth, "via": _fact(r.fact)} for r in found],
        "count": len(found),
    }


def graph_tools(
    graph: KnowledgeGraph, *, scope_from: ScopeFrom = user_scope, limit: int = GRAPH_LIMIT
) -> list[MemoryTool]:
    """``facts_about(entity)`` and ``related(entity, depth=2)`` over a graph of your own, as loose tools.

    Over a memory whose backend keeps the graph, ``memory_tools(memory, graph=True)``
    offers the same two tools (registered classes) beside the memory tools.

    The scope comes from the :class:`ToolContext` (the user, through ``scope_from``),
    never from the model's arguments, which name only entities. Combine them with the
    memory tools: ``MemoryTools.from_tools([*memory_tools(memory), *graph_tools(graph)], memory)``.

    Example:
        >>> tools = MemoryTools.from_tools([*memory_tools(memory), *graph_tools(graph)], memory)  # doctest: +SKIP
        >>> await tools.dispatch("facts_about", {"entity": "Ann"}, ToolContext(user_id="ann"))  # doctest: +SKIP
        {'entity': 'Ann', 'facts': [{'subject': 'Ann', 'relation': 'lives_in', 'object': 'Porto', ...}], 'count': 1}
    """
    if not isinstance(graph, KnowledgeGraph):
        raise UsageError(f"graph_tools() takes a KnowledgeGraph (e.g. SQLiteGraph(memory)), not {type(graph).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1_000:
        raise UsageError("limit must be an int from 1 to 1000")

    def scope(context: ToolContext) -> Any:
        if not isinstance(context, ToolContext):
            raise UsageError(f"graph tools need a ToolContext, not {type(context).__name__}")
        return scope_from(context)

    def parse(model: type[_Args], arguments: Mapping[str, Any]) -> Any:
        try:
            return model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise _arguments_error(exc, model) from None

    async def guarded(call: Any) -> Any:
        try:
            return await call()
        except InvalidInput as exc:
            raise ToolError("invalid_input", str(exc)) from None
        except BackendError as exc:
            logger.warning("graph tool: backend %r failed (%s)", exc.backend, type(exc.__cause__ or exc).__name__)
            raise ToolError("unavailable", "the knowledge graph is unavailable right now; try again later.") from exc

    async def facts_about(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        args: FactsAboutArgs = parse(FactsAboutArgs, arguments)
        return await guarded(lambda: facts_about_result(graph, args.entity, scope(context), limit))  # type: ignore[no-any-return]

    async def related(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        args: RelatedArgs = parse(RelatedArgs, arguments)
        return await guarded(lambda: related_result(graph, args.entity, args.depth, scope(context), limit))  # type: ignore[no-any-return]

    return [
        MemoryTool(
            name="facts_about",
            description=FACTS_ABOUT_DESCRIPTION,
            parameters=_schema(FactsAboutArgs),
            effect="read_only",
            handler=facts_about,
        ),
        MemoryTool(
            name="related",
            description=RELATED_DESCRIPTION,
            parameters=_schema(RelatedArgs),
            effect="read_only",
            handler=related,
        ),
    ]
