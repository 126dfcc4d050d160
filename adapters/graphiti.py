"""GraphitiMemory: memories in a Graphiti knowledge graph (extra ``graphiti``).

(Over 500 lines: two add paths — the zero-LLM bulk path and extraction —,
Kuzu's naive datetimes, and the read-only view of Graphiti's own facts as an
entity graph (:func:`GraphitiGraph`) are this adapter's own.)

Each memoryport user is one Graphiti ``group_id``: ``"mp-"`` followed by the
SHA-256 of the user id in hex (or an HMAC-SHA-256 when ``hash_key`` is given),
so no user id is written to the graph and every group id matches Graphiti's
``^[a-zA-Z0-9_-]+$``.

A record is one episode (``EpisodicNode``) whose ``name`` is the record id and
whose ``content`` is the text, stored under a uuid derived from the group and
the record id (so ``get`` and ``delete`` need no index of their own). By
default (``extract=False``) the adapter also writes one fact (``EntityEdge``)
holding the text verbatim, from the user's entity node to itself, with the
record id and creation time in its ``attributes``, through Graphiti's bulk
writer: no LLM is called. With ``extract=True`` each text goes through
``Graphiti.add_episode`` and the host's LLM extracts the facts; search then
returns those facts, each hit carrying the id and creation time of the text it
came from.
"""

from __future__ import annotations

import functools
import logging
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn

from memoryport._errors import BackendError, UnsupportedCapability, UsageError
from memoryport._extras import require
from memoryport._graph import Fact, KnowledgeGraph, NewFact, Related
from memoryport._graph_extract import normalise_relation
from memoryport._guard import GuardedMemory, GuardOptions
from memoryport._port import Capability, SearchResults
from memoryport._records import (
    MemoryHit,
    MemoryRecord,
    MemoryScope,
    MetadataValue,
    pseudonym,
)
from memoryport.storekit import Undo, duplicate_id, id_of, ids_of, parse_time, recent

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["GraphitiGraph", "GraphitiGraphPort", "GraphitiMemory", "GraphitiStore", "group_id_for"]

logger = logging.getLogger("memoryport")

# Marks episodes and facts this adapter wrote, so foreign ones in a group are told apart.
_SOURCE = "memoryport"
_FACT_NAME = "MEMORY"
_ATTR_ID = "memoryport_id"
_ATTR_CREATED = "memoryport_created_at"
_NAMESPACE = uuidlib.uuid5(uuidlib.NAMESPACE_URL, "https://memoryport.invalid/graphiti")
_PAGE = 500
_CONTEXT_EPISODES = 10  # graphiti's own RELEVANT_SCHEMA_LIMIT for add_episode's context

_CAPABILITIES = frozenset(
    {
        Capability.KEYWORD_SEARCH,
        Capability.VECTOR_SEARCH,
        Capability.GET,
        Capability.DELETE,
        Capability.EXPORT,
    }
)


def group_id_for(user_id: str, *, prefix: str = "mp-", hash_key: bytes | str | None = None) -> str:
    """The Graphiti group id that holds ``user_id``'s memories.

    ``prefix`` followed by the hex SHA-256 of the user id, or its HMAC-SHA-256
    under ``hash_key`` when one is given (then the group id cannot be guessed
    from a known user id).

    Example:
        >>> group_id_for("ann")[:10]
        'mp-49915e0'
    """
    return pseudonym(user_id, prefix=prefix, hash_key=hash_key)


class GraphitiStore:
    """The :class:`~memoryport.MemoryPort` over a Graphiti instance (no checks: the guard does them).

    Hosts usually build it through :func:`GraphitiMemory`, which returns it
    guarded; its arguments are ``GraphitiMemory``'s. Beyond the port it offers
    ``group_id(scope)`` and ``client``, the Graphiti instance as given.

    Example:
        >>> from memoryport import GuardedMemory
        >>> memory = GuardedMemory(GraphitiStore(graphiti))  # doctest: +SKIP
    """

    name = "graphiti"

    def __init__(
        self, client: Any, *, extract: bool = False, id_prefix: str = "mp-", hash_key: bytes | str | None = None
    ) -> None:
        self._sdk = _import_sdk()
        if not isinstance(client, self._sdk.Graphiti):
            raise UsageError(f"GraphitiMemory needs a graphiti_core.Graphiti instance, not {type(client).__name__}")
        if not id_prefix or not all(c.isascii() and (c.isalnum() or c in "_-") for c in id_prefix):
            raise UsageError("GraphitiMemory(id_prefix=...) must be non-empty ASCII letters, digits, '_' or '-'")
        self._g = client
        self._extract = extract
        self._prefix = id_prefix
        self._hash_key = hash_key
        self.capabilities = _CAPABILITIES

    # -- naming --------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The Graphiti instance as given."""
        return self._g

    def __repr__(self) -> str:
        return f"GraphitiStore({type(self._g).__name__}, extract={self._extract})"

    def group_id(self, scope: MemoryScope) -> str:
        """The Graphiti group id that holds ``scope``'s memories.

        Example:
            >>> memory.store.group_id(MemoryScope(user_id="ann"))  # doctest: +SKIP
            'mp-49915e0d...'
        """
        if scope.user_id is None:  # the guard refuses session/agent-only scopes first
            raise UsageError("GraphitiMemory needs MemoryScope(user_id=...)")
        return group_id_for(scope.user_id, prefix=self._prefix, hash_key=self._hash_key)

    @staticmethod
    def _episode_uuid(group: str, record_id: str) -> str:
        return str(uuidlib.uuid5(_NAMESPACE, f"{group}\x00{record_id}"))

    @staticmethod
    def _fact_uuid(group: str, record_id: str) -> str:
        return str(uuidlib.uuid5(_NAMESPACE, f"{group}\x00{record_id}\x00fact"))

    @staticmethod
    def _user_node_uuid(group: str) -> str:
        return str(uuidlib.uuid5(_NAMESPACE, f"{group}\x00user"))

    def _driver(self, group: str) -> Any:
        """The driver for one group, as Graphiti's own add_episode picks it: the same
        driver on Neo4j and Kuzu, the group's own graph on FalkorDB."""
        driver = self._g.driver
        if getattr(driver, "_database", None) == group:
            return driver
        return driver.clone(database=group)

    # -- reading ---------------------------------------------------------------

    def _record(self, episode: Any, scope: MemoryScope) -> MemoryRecord:
        ours = episode.source_description == _SOURCE
        created = parse_time(episode.valid_at) or parse_time(episode.created_at)
        if created is None:  # data read from the graph: checked, never asserted (-O strips asserts)
            raise BackendError("graphiti returned an episode without a time", backend=self.name, operation="read")
        return MemoryRecord(
            id=episode.name if ours else episode.uuid,
            scope=MemoryScope(user_id=scope.user_id),
            text=episode.content,
            created_at=created,
        )

    async def _episode(self, group: str, record_id: str) -> Any | None:
        nodes = self._sdk.nodes
        errors = self._sdk.errors
        driver = self._driver(group)
        try:
            episode = await nodes.EpisodicNode.get_by_uuid(driver, self._episode_uuid(group, record_id))
            if episode.group_id == group and episode.name == record_id:
                return episode
        except errors.NodeNotFoundError:
            pass
        # Episodes written by other tools into this group are addressed by their own uuid.
        try:
            episode = await nodes.EpisodicNode.get_by_uuid(driver, record_id)
        except errors.NodeNotFoundError:
            return None
        if episode.group_id == group and episode.source_description != _SOURCE:
            return episode
        return None

    async def _episodes(self, group: str) -> list[Any]:
        """Every episode of the group, page by page (ordered by uuid, descending)."""
        found: list[Any] = []
        cursor: str | None = None
        while True:
            page = await self._sdk.nodes.EpisodicNode.get_by_group_ids(
                self._driver(group), [group], limit=_PAGE, uuid_cursor=cursor
            )
            found.extend(page)
            if len(page) < _PAGE:
                return found
            cursor = page[-1].uuid

    # -- the port ----------------------------------------------------------------

    async def _refuse_existing(self, records: Sequence[MemoryRecord]) -> None:
        """Ids are unique within a user, as everywhere in memoryport: refuse a stored one."""
        by_group: dict[str, list[tuple[int, str]]] = {}
        for i, record in enumerate(records):
            by_group.setdefault(self.group_id(record.scope), []).append((i, id_of(record)))
        for group, items in by_group.items():
            uuids = {self._episode_uuid(group, record_id): i for i, record_id in items}
            found = await self._sdk.nodes.EpisodicNode.get_by_uuids(self._driver(group), list(uuids))
            if found:
                raise duplicate_id(min(uuids[e.uuid] for e in found if e.uuid in uuids))

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        await self._refuse_existing(records)
        # Kuzu writes row by row: a failed batch undoes whatever of it reached the graph.
        async with Undo("graphiti") as undo:
            if self._extract:
                await self._add_extracted(records, undo)
            else:
                await self._add_verbatim(records, undo)
        return ids_of(records)

    async def _add_verbatim(self, records: Sequence[MemoryRecord], undo: Undo) -> None:
        sdk = self._sdk
        by_group: dict[str, list[MemoryRecord]] = {}
        for record in records:
            by_group.setdefault(self.group_id(record.scope), []).append(record)
        embedder = self._g.embedder
        for group, batch in by_group.items():
            user = sdk.nodes.EntityNode(
                uuid=self._user_node_uuid(group),
                name="user",
                group_id=group,
                labels=["Entity"],
                summary="",
                created_at=min(r.created_at for r in batch),
            )
            # One embedder call per batch; a failing embedder fails the add before any write.
            vectors = await embedder.create_batch([r.text for r in batch])
            if len(vectors) != len(batch):
                raise BackendError(
                    f"the Graphiti embedder returned {len(vectors)} vectors for {len(batch)} texts",
                    backend=self.name,
                    operation="add",
                )
            episodes, mentions, facts = [], [], []
            for record, vector in zip(batch, vectors, strict=True):
                record_id = id_of(record)
                ep_uuid = self._episode_uuid(group, record_id)
                fact_uuid = self._fact_uuid(group, record_id)
                episodes.append(
                    sdk.nodes.EpisodicNode(
                        uuid=ep_uuid,
                        name=record_id,
                        group_id=group,
                        source=sdk.nodes.EpisodeType.text,
                        source_description=_SOURCE,
                        content=record.text,
                        created_at=record.created_at,
                        valid_at=record.created_at,
                        entity_edges=[fact_uuid],
                    )
                )
                mentions.append(
                    sdk.edges.EpisodicEdge(
                        uuid=str(uuidlib.uuid5(_NAMESPACE, f"{ep_uuid}\x00mentions")),
                        source_node_uuid=ep_uuid,
                        target_node_uuid=user.uuid,
                        group_id=group,
                        created_at=record.created_at,
                    )
                )
                facts.append(
                    sdk.edges.EntityEdge(
                        uuid=fact_uuid,
                        group_id=group,
                        source_node_uuid=user.uuid,
                        target_node_uuid=user.uuid,
                        created_at=record.created_at,
                        name=_FACT_NAME,
                        fact=record.text,
                        fact_embedding=[float(x) for x in vector],
                        episodes=[ep_uuid],
                        valid_at=record.created_at,
                        attributes={_ATTR_ID: record_id, _ATTR_CREATED: record.created_at.isoformat()},
                    )
                )
            for record_id in ids_of(batch):
                undo.push(functools.partial(self._delete_one, group, record_id))
            await sdk.add_nodes_and_edges_bulk(self._driver(group), episodes, mentions, [user], facts, embedder)

    async def _add_extracted(self, records: Sequence[MemoryRecord], undo: Undo) -> None:
        sdk = self._sdk
        for record in records:
            record_id = id_of(record)
            group = self.group_id(record.scope)
            ep_uuid = self._episode_uuid(group, record_id)
            # The context Graphiti would fetch itself, taken before our episode exists,
            # so the LLM does not see the new text twice (as current and as previous).
            previous = await self._g.retrieve_episodes(
                record.created_at,
                last_n=_CONTEXT_EPISODES,
                group_ids=[group],
                source=sdk.nodes.EpisodeType.text,
                driver=self._driver(group),
            )
            # add_episode(uuid=...) processes an episode that already exists: save ours
            # first, so its uuid is derived from the record id like on the verbatim path.
            episode = sdk.nodes.EpisodicNode(
                uuid=ep_uuid,
                name=record_id,
                group_id=group,
                source=sdk.nodes.EpisodeType.text,
                source_description=_SOURCE,
                content=record.text,
                created_at=record.created_at,
                valid_at=record.created_at,
            )
            await episode.save(self._driver(group))
            undo.push(functools.partial(self._delete_one, group, record_id))
            await self._g.add_episode(
                name=record_id,
                episode_body=record.text,
                source_description=_SOURCE,
                reference_time=record.created_at,
                source=sdk.nodes.EpisodeType.text,
                group_id=group,
                uuid=ep_uuid,
                previous_episode_uuids=[p.uuid for p in previous if p.uuid != ep_uuid],
            )

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        if filters:  # the guard refuses filters first; a second line
            raise UnsupportedCapability("graphiti has no filters", capability="filters", backend=self.name)
        group = self.group_id(scope)
        if not query.strip():
            return recent((self._record(e, scope) for e in await self._episodes(group)), k)
        config = self._sdk.search_config(k)
        results = await self._g.search_(query, config=config, group_ids=[group], driver=self._driver(group))
        hits: list[MemoryHit] = []
        cache: dict[str, Any | None] = {}
        for edge, score in zip(results.edges, results.edge_reranker_scores, strict=False):
            record = await self._fact_record(edge, scope, cache)
            if record is not None:
                hits.append(MemoryHit(record=record, score=float(score), signal="hybrid"))
        return SearchResults(hits[:k], mode="hybrid")

    async def _fact_record(self, edge: Any, scope: MemoryScope, cache: dict[str, Any | None]) -> MemoryRecord | None:
        attributes = edge.attributes or {}
        created = parse_time(attributes.get(_ATTR_CREATED))
        record_id = attributes.get(_ATTR_ID)
        if isinstance(record_id, str) and record_id and created is not None:
            return MemoryRecord(
                id=record_id, scope=MemoryScope(user_id=scope.user_id), text=edge.fact, created_at=created
            )
        # An extracted fact: it belongs to the text (episode) it came from.
        for ep_uuid in edge.episodes or []:
            if ep_uuid not in cache:
                try:
                    cache[ep_uuid] = await self._sdk.nodes.EpisodicNode.get_by_uuid(
                        self._driver(edge.group_id), ep_uuid
                    )
                except self._sdk.errors.NodeNotFoundError:
                    cache[ep_uuid] = None
            episode = cache[ep_uuid]
            if episode is not None and episode.group_id == edge.group_id:
                source = self._record(episode, scope)
                return source.model_copy(update={"text": edge.fact})
        return None

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        episode = await self._episode(self.group_id(scope), id)
        return None if episode is None else self._record(episode, scope)

    async def _delete_one(self, group: str, record_id: str) -> bool:
        episode = await self._episode(group, record_id)
        if episode is None:
            return False
        fact_uuid = self._fact_uuid(group, record_id)
        if episode.source_description == _SOURCE and list(episode.entity_edges or []) == [fact_uuid]:
            # Written verbatim: remove the fact and the episode ourselves. Graphiti's
            # remove_episode would ask the LLM to rebuild the user node's summary.
            try:
                fact = await self._sdk.edges.EntityEdge.get_by_uuid(self._driver(group), fact_uuid)
                await fact.delete(self._driver(group))
            except self._sdk.errors.EdgeNotFoundError:
                pass
            await episode.delete(self._driver(group))
        else:
            await self._g.remove_episode(episode.uuid)
        return True

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        group = self.group_id(scope)
        if ids is None:
            count = len(await self._episodes(group))
            await self._sdk.clear_data(self._driver(group), group_ids=[group])
            return count
        count = 0
        for record_id in ids:
            if await self._delete_one(group, record_id):
                count += 1
        driver = self._driver(group)
        if count and not await self._sdk.nodes.EpisodicNode.get_by_group_ids(driver, [group], limit=1):
            # The last text is gone: drop the user's node so nothing of them stays behind.
            await self._sdk.clear_data(driver, group_ids=[group])
        return count

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return [self._record(e, scope) for e in await self._episodes(self.group_id(scope))]

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        raise UnsupportedCapability("graphiti cannot purge", capability="purge", backend=self.name)


class _Sdk:
    """The graphiti_core pieces the adapter uses, imported once."""

    def __init__(self) -> None:
        core = require("graphiti_core", extra="graphiti", feature="GraphitiMemory", package="graphiti-core")
        self.Graphiti = core.Graphiti
        self.nodes = require("graphiti_core.nodes", extra="graphiti", feature="GraphitiMemory", package="graphiti-core")
        self.edges = require("graphiti_core.edges", extra="graphiti", feature="GraphitiMemory", package="graphiti-core")
        self.errors = require(
            "graphiti_core.errors", extra="graphiti", feature="GraphitiMemory", package="graphiti-core"
        )
        bulk = require(
            "graphiti_core.utils.bulk_utils", extra="graphiti", feature="GraphitiMemory", package="graphiti-core"
        )
        self.add_nodes_and_edges_bulk = bulk.add_nodes_and_edges_bulk
        maintenance = require(
            "graphiti_core.utils.maintenance.graph_data_operations",
            extra="graphiti",
            feature="GraphitiMemory",
            package="graphiti-core",
        )
        self.clear_data = maintenance.clear_data
        self._config = require(
            "graphiti_core.search.search_config", extra="graphiti", feature="GraphitiMemory", package="graphiti-core"
        )

    def search_config(self, k: int) -> Any:
        """Facts only, BM25 + cosine fused by RRF: reranker scores without an LLM or cross-encoder call."""
        cfg = self._config
        return cfg.SearchConfig(
            edge_config=cfg.EdgeSearchConfig(
                search_methods=[cfg.EdgeSearchMethod.bm25, cfg.EdgeSearchMethod.cosine_similarity],
                reranker=cfg.EdgeReranker.rrf,
            ),
            limit=k,
        )


_SDK: _Sdk | None = None


def _import_sdk() -> _Sdk:
    global _SDK
    if _SDK is None:
        _SDK = _Sdk()
    return _SDK


def GraphitiMemory(
    client: Any,
    *,
    extract: bool = False,
    id_prefix: str = "mp-",
    hash_key: bytes | str | None = None,
    **guard: Unpack[GuardOptions],
) -> GuardedMemory[GraphitiStore]:
    """Memories in a Graphiti knowledge graph, guarded (extra ``graphiti``).

    Returns a :class:`~memoryport.GuardedMemory` over a :class:`GraphitiStore`
    (``memory.store.group_id(scope)``, ``memory.store.client``).

    User scope only (``MemoryScope(user_id=...)``), no metadata, filters or
    expiry: those raise :class:`~memoryport.UnsupportedCapability`. Each user is
    one Graphiti group (see :func:`group_id_for`); erasing a user clears the
    group. Search is Graphiti's hybrid fact search (BM25 and cosine similarity
    fused by reciprocal rank, higher is better); an empty query lists the
    newest texts.

    Args:
        client: a ``graphiti_core.Graphiti`` the host built (driver, embedder,
            LLM and cross-encoder clients are the host's; the adapter reads no
            API keys). Indices must exist: call
            ``await graphiti.build_indices_and_constraints()`` once (on Kuzu
            0.31.2 see the docs for the two workarounds).
        extract: ``False`` (default) stores each text verbatim as one fact
            without any LLM call; ``True`` runs ``add_episode`` so the LLM
            extracts facts, and search returns those facts.
        id_prefix: put before the hashed user id to form the group id.
        hash_key: when given, group ids are HMAC-SHA-256 of the user id under
            this key instead of a plain SHA-256.
        **guard: the guard's options (:class:`~memoryport.GuardOptions`).

    Example:
        >>> from graphiti_core import Graphiti                              # doctest: +SKIP
        >>> memory = GraphitiMemory(Graphiti(graph_driver=driver, llm_client=llm,
        ...                                  embedder=embedder, cross_encoder=reranker))  # doctest: +SKIP
        >>> ann = MemoryScope(user_id="ann")                                 # doctest: +SKIP
        >>> await memory.add([MemoryRecord(scope=ann, text="Ann likes green tea")])  # doctest: +SKIP
        >>> [h.record.text for h in await memory.search("tea", scope=ann)]   # doctest: +SKIP
        ['Ann likes green tea']
    """

    return GuardedMemory(GraphitiStore(client, extract=extract, id_prefix=id_prefix, hash_key=hash_key), **guard)


class GraphitiGraphPort:
    """Graphiti's own facts (``EntityEdge``, ``valid_at``/``invalid_at``) as a read-only :class:`~memoryport.GraphPort`.

    Each call reads the user's group (entities and facts, page by page) and walks
    it in memory with the reference graph (:class:`~memoryport.testing.InMemoryGraph`):
    cost grows with the user's graph, which Graphiti keeps per group. A fact maps as
    ``subject`` = source entity's name, ``relation`` = the edge's name in
    ``snake_case``, ``object`` = target's name, ``valid_from`` = ``valid_at`` (else
    ``created_at``), ``valid_to`` = ``invalid_at`` (else ``expired_at``), ``memory_id``
    = the record id of the first episode it came from. The verbatim facts this
    adapter writes for ``extract=False`` are not entity facts and are left out.
    Entities whose names match case-insensitively are one entity; Graphiti has no
    aliases. Writes (``add_facts``, ``add_entity``) raise
    :class:`~memoryport.UnsupportedCapability`: Graphiti writes and invalidates its
    facts through its own model pipeline (``GraphitiMemory(extract=True)``).
    """

    def __init__(self, store: GraphitiStore) -> None:
        self._store = store

    @staticmethod
    def _refuse(what: str) -> NoReturn:
        raise UnsupportedCapability(
            f"{what} is not available on Graphiti's graph: Graphiti writes, deduplicates and invalidates its facts "
            "with its own model (store texts with GraphitiMemory(extract=True)); see docs/graph.md",
            capability=Capability.GRAPH.value,
            backend="graphiti",
        )

    async def add_entity(self, name: str, aliases: Sequence[str], *, user_id: str) -> str:
        self._refuse("add_entity")

    async def add_facts(
        self, facts: Sequence[NewFact], *, user_id: str, now: datetime, single_valued: frozenset[str]
    ) -> list[Fact]:
        self._refuse("add_facts")

    async def erase(self, *, user_id: str) -> int:
        self._refuse("erase (erase the user through the memory: memory.delete(scope=...))")

    async def _paged(self, kind: Any, group: str) -> list[Any]:
        found: list[Any] = []
        cursor: str | None = None
        driver = self._store._driver(group)
        while True:
            try:
                page = await kind.get_by_group_ids(driver, [group], limit=_PAGE, uuid_cursor=cursor)
            except self._store._sdk.errors.GroupsEdgesNotFoundError:
                page = []
            found.extend(page)
            if len(page) < _PAGE:
                return found
            cursor = page[-1].uuid

    async def _graph(self, user_id: str) -> Any:
        from memoryport.testing import InMemoryGraph

        store = self._store
        group = store.group_id(MemoryScope(user_id=user_id))
        try:
            nodes = await self._paged(store._sdk.nodes.EntityNode, group)
            edges = await self._paged(store._sdk.edges.EntityEdge, group)
            episodes = {
                e.uuid: (e.name if e.source_description == _SOURCE else e.uuid) for e in await store._episodes(group)
            }
        except Exception as exc:
            raise BackendError(
                f"graphiti failed to read the graph ({type(exc).__name__})", backend=store.name, operation="graph"
            ) from exc
        facts: list[tuple[str, str, Fact]] = []
        for edge in edges:
            if edge.group_id != group or (edge.name == _FACT_NAME and _ATTR_ID in (edge.attributes or {})):
                continue  # another group's (never expected), or a verbatim text of extract=False
            began = parse_time(edge.valid_at) or parse_time(edge.created_at)
            relation = normalise_relation(str(edge.name or ""))
            if began is None or not relation:
                continue
            source = next((episodes[e] for e in edge.episodes or [] if e in episodes), None)
            fact = Fact.model_construct(
                id=edge.uuid,
                subject=edge.source_node_uuid,
                relation=relation,
                object=edge.target_node_uuid,
                valid_from=began,
                valid_to=parse_time(edge.invalid_at) or parse_time(edge.expired_at),
                memory_id=source,
            )
            facts.append((edge.source_node_uuid, edge.target_node_uuid, fact))
        graph = InMemoryGraph()
        graph.load(user_id, {n.uuid: n.name for n in nodes if n.group_id == group and n.name}, facts)
        return graph

    async def facts_about(
        self, entity: str, *, user_id: str, as_of: datetime | None, history: bool, limit: int
    ) -> list[Fact]:
        graph = await self._graph(user_id)
        found: list[Fact] = await graph.facts_about(entity, user_id=user_id, as_of=as_of, history=history, limit=limit)
        return found

    async def related(
        self, entity: str, *, user_id: str, depth: int, as_of: datetime | None, limit: int
    ) -> list[Related]:
        graph = await self._graph(user_id)
        found: list[Related] = await graph.related(entity, user_id=user_id, depth=depth, as_of=as_of, limit=limit)
        return found

    async def paths(
        self, source: str, target: str, *, user_id: str, max_depth: int, as_of: datetime | None, limit: int
    ) -> list[list[Fact]]:
        graph = await self._graph(user_id)
        found: list[list[Fact]] = await graph.paths(
            source, target, user_id=user_id, max_depth=max_depth, as_of=as_of, limit=limit
        )
        return found


def GraphitiGraph(memory: GuardedMemory) -> KnowledgeGraph:
    """Read Graphiti's own facts as an entity graph: ``facts_about``, ``related`` and ``paths`` (no writes).

    ``GraphitiMemory`` does not declare the ``graph`` capability (Graphiti writes
    its facts itself, so ``KnowledgeGraph(memory)`` is refused); this read-only
    view maps Graphiti's edges and their ``valid_at``/``invalid_at`` onto
    :class:`~memoryport.Fact` (see :class:`GraphitiGraphPort`). Use it with
    ``GraphitiMemory(extract=True)``, whose texts become Graphiti facts; the scope
    rule is the graph's: ``MemoryScope(user_id=...)``, one Graphiti group.

    Example:
        >>> memory = GraphitiMemory(graphiti, extract=True)  # doctest: +SKIP
        >>> graph = GraphitiGraph(memory)  # doctest: +SKIP
        >>> [f.object for f in await graph.facts_about("Ann", scope=ann)]  # doctest: +SKIP
        ['Lisbon']
    """
    if not isinstance(memory, GuardedMemory) or not isinstance(memory.store, GraphitiStore):
        raise UsageError("GraphitiGraph() takes a GraphitiMemory(...)")
    return KnowledgeGraph(GraphitiGraphPort(memory.store), backend="graphiti")
