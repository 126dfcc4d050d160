"""AgentMemory: curated memory (kinds, importance, dedup, lineage, decay, caps, reminders) above the guard.

(Over 500 lines: one class whose policies share its read-modify-write helpers and
its metadata encoding; each policy is a section. The next split is one module per
policy family — lineage, decay and cap, reminders — with the class as a façade.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal, Union

from .._embedding import EmbeddingPort, check_matrix
from .._errors import EmbeddingError, InvalidInput, UnsupportedCapability, UsageError
from .._events import EventSink
from .._guard import GuardedMemory
from .._port import Capability
from .._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, MetadataValue, new_id, utcnow
from .._sync import run_sync
from ..storekit import Undo
from . import _keys as K
from ._policy import CurationPolicy, containment, cosine, word_overlap
from ._types import (
    DecayReport,
    Duration,
    ImportanceChange,
    MemoryItem,
    MemoryStats,
    NewMemory,
    Remembered,
    Removal,
    RemovalItem,
    parse_duration,
)

__all__ = ["AgentMemory"]

Outcome = Union[Literal["positive", "negative"], float]
"""Feedback for :meth:`AgentMemory.reinforce`: ``"positive"``, ``"negative"`` or a change in [-1, 1]."""

_REQUIRED = (Capability.METADATA, Capability.FILTERS, Capability.GET, Capability.UPDATE, Capability.DELETE)
_CHUNK = 500


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def owner(scope: MemoryScope) -> MemoryScope:
    """The scope dedup and the capacity cap look in: the user (and agent), across sessions.

    A scope without a user is its own owner (an anonymous chat never widens).

    Example:
        >>> owner(MemoryScope(user_id="ann", session_id="chat-1"))
        MemoryScope(user_id='ann', session_id=None, agent_id=None)
    """
    if scope.user_id is None or scope.session_id is None:
        return scope
    return MemoryScope(user_id=scope.user_id, agent_id=scope.agent_id)


class AgentMemory:
    """Curated memory for an agent, over any :class:`~memoryport.GuardedMemory` that can hold it.

    Everything it stores is an ordinary record whose metadata carries
    well-known ``mp:`` keys (kind, importance, source, entities, pinned, due
    time, use, lineage; see :mod:`memoryport.curated`), so export, copy and
    erasure keep working on it. It holds a guard and adds policies:

    * typed memories with an importance from their source (:class:`CurationPolicy`);
    * dedup on write: a near-duplicate updates or reinforces the existing memory;
    * supersession: ``update(..., keep_history=True)`` keeps the old version,
      hidden from recall unless asked for, erased with the user;
    * reinforcement on recall and by feedback, and :meth:`decay` for disuse;
    * salience ranking (relevance, importance, recency; see :class:`Salience`);
    * a capacity cap per user, evicting the least salient unpinned memories;
    * reminders (:meth:`upcoming`, :meth:`mark_done`, :meth:`mark_reminded`);
    * forgetting by query, decay pruning and eviction, each with a dry run first.

    It needs the backend's ``metadata``, ``filters``, ``get``, ``update`` and
    ``delete`` capabilities and refuses at construction otherwise
    (:class:`~memoryport.UnsupportedCapability` naming the first one missing);
    a method needing more (``count``, ``export``) refuses when called.

    Args:
        memory: the guarded backend (``SQLiteMemory(path)``, ``CallableMemory(...)``,
            ``GuardedMemory(store)``, ...).
        policy: the policies' settings.
        embedder: compares texts by cosine similarity for dedup and
            ``forget(query)``. Without it the layer uses the backend's score when
            the backend searched by vectors alone, and word overlap otherwise.
        clock: the current time (for tests and replays); aware datetimes.

    Example:
        >>> import asyncio, os, tempfile
        >>> from memoryport import MemoryScope, SQLiteMemory
        >>> from memoryport.curated import AgentMemory
        >>> memory = AgentMemory(SQLiteMemory(os.path.join(tempfile.mkdtemp(), "m.db")))
        >>> ann = MemoryScope(user_id="ann")
        >>> memory.remember_sync("Ann likes green tea", scope=ann).action
        'added'
        >>> memory.remember_sync("ann likes green tea!", scope=ann).action
        'updated'
        >>> memory.close()
    """

    def __init__(
        self,
        memory: GuardedMemory,
        *,
        policy: CurationPolicy | None = None,
        embedder: EmbeddingPort | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not isinstance(memory, GuardedMemory):
            raise UsageError(
                "AgentMemory(memory) takes a GuardedMemory (e.g. SQLiteMemory(path) or GuardedMemory(store)), "
                f"not {type(memory).__name__}"
            )
        for capability in _REQUIRED:
            if capability not in memory.capabilities:
                raise UnsupportedCapability(
                    f"AgentMemory needs the {capability.value!r} capability, which the {memory.backend!r} backend "
                    f"does not have (it needs {', '.join(c.value for c in _REQUIRED)})",
                    capability=capability.value,
                    backend=memory.backend,
                )
        if policy is None:
            policy = CurationPolicy()
        if not isinstance(policy, CurationPolicy):
            raise UsageError(f"policy must be a CurationPolicy, not {type(policy).__name__}")
        if embedder is not None and not isinstance(embedder, EmbeddingPort):
            raise UsageError(f"embedder must be an EmbeddingPort, not {type(embedder).__name__}")
        self.memory = memory
        self.policy = policy
        self.embedder = embedder
        self._clock = clock

    def __repr__(self) -> str:
        return f"AgentMemory(backend={self.memory.backend!r})"

    # -- helpers -------------------------------------------------------------

    def _now(self) -> datetime:
        now = self._clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise UsageError("AgentMemory's clock must return an aware datetime")
        return now.astimezone(timezone.utc)

    def _need(self, capability: Capability, what: str) -> None:
        if capability not in self.memory.capabilities:
            raise UnsupportedCapability(
                f"{what} needs the {capability.value!r} capability, which the {self.memory.backend!r} backend "
                "does not have",
                capability=capability.value,
                backend=self.memory.backend,
            )

    def _item(self, record: MemoryRecord, **extra: Any) -> MemoryItem:
        item = MemoryItem.from_record(record, self.policy.default_importance)
        if extra:
            from dataclasses import replace

            item = replace(item, **extra)
        return item

    def _kind(self, kind: object, field: str) -> str:
        if kind is None:
            return self.policy.default_kind
        if not isinstance(kind, str) or kind not in self.policy.kinds:
            raise InvalidInput(f"{field} must be one of {', '.join(self.policy.kinds)}", field=field)
        return kind

    @staticmethod
    def _importance(value: object, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidInput(f"{field} must be a number from 0 to 1", field=field)
        if not 0.0 <= value <= 1.0:
            raise InvalidInput(f"{field} must be from 0 to 1, got {value}", field=field)
        return float(value)

    def _entities(self, entities: object, field: str) -> list[str]:
        if isinstance(entities, str):
            entities = [entities]
        if not isinstance(entities, Sequence):
            raise InvalidInput(f"{field} must be a list of names", field=field)
        names = list(dict.fromkeys(K.normalise_entity(e, field) for e in entities))
        if len(names) > self.policy.max_entities:
            raise InvalidInput(
                f"{field} names {len(names)} entities; the limit is {self.policy.max_entities} "
                "(CurationPolicy.max_entities)",
                field=field,
            )
        return names

    def _build(self, new: NewMemory, field: str, now: datetime) -> tuple[dict[str, MetadataValue], datetime | None]:
        """The metadata and expiry of a new memory, every field checked."""
        if not isinstance(new, NewMemory):
            raise UsageError(f"{field} must be a NewMemory, not {type(new).__name__}")
        if not isinstance(new.text, str) or not new.text.strip():
            raise InvalidInput(f"{field}.text must be a non-empty string", field=f"{field}.text")
        source = self.policy.default_source if new.source is None else new.source
        if not isinstance(source, str) or not source.strip():
            raise InvalidInput(f"{field}.source must be a non-empty string", field=f"{field}.source")
        importance = (
            self.policy.importance_for(source)
            if new.importance is None
            else self._importance(new.importance, f"{field}.importance")
        )
        md = K.check_host_metadata(new.metadata, f"{field}.metadata")
        md[K.KIND] = self._kind(new.kind, f"{field}.kind")
        md[K.IMPORTANCE] = importance
        md[K.SOURCE] = source
        if not isinstance(new.pinned, bool):
            raise InvalidInput(f"{field}.pinned must be true or false", field=f"{field}.pinned")
        if new.pinned:
            md[K.PINNED] = True
        if new.due_at is not None:
            md[K.DUE_AT] = K.to_epoch(new.due_at, f"{field}.due_at")
        for name in self._entities(new.entities, f"{field}.entities"):
            md[K.ENTITY + name] = True
        expires = None if new.ttl is None else now + parse_duration(new.ttl, f"{field}.ttl")
        return md, expires

    def _check(self, record: MemoryRecord, field: str) -> None:
        """The guard's bounds, before anything of a batch is written (nothing half-written)."""
        self.memory.limits.check_record(record, field, utcnow(), scope=False)

    def _record(self, field: str, **data: Any) -> MemoryRecord:
        try:
            record = MemoryRecord(**data)
        except InvalidInput as exc:
            where = f"{field}.{exc.field.removeprefix('record.')}"
            raise InvalidInput(f"{where}: {str(exc).split(': ', 1)[-1]}", field=where, limit=exc.limit) from None
        self._check(record, field)
        return record

    def _live_filters(self, include_superseded: bool, include_log: bool = False) -> dict[str, Any]:
        """Current curated memories: not superseded (unless asked), not the agent loop's records (``mp:log``)."""
        filters: dict[str, Any] = {} if include_log else {K.LOG: {"$exists": False}}
        if not include_superseded:
            filters[K.SUPERSEDED_BY] = {"$exists": False}
        return filters

    async def _similarities(
        self, text: str, hits: Sequence[MemoryHit], *, purpose: Literal["dedup", "forget"]
    ) -> tuple[list[float], Literal["cosine", "overlap", "words"]]:
        """How similar each hit is to ``text``, and by which measure.

        With an embedder: cosine of the embeddings. Else, when the backend
        searched by vectors alone, its scores (cosine). Else words: Jaccard
        overlap for dedup, the share of the query's words for forget.
        """
        if not hits:
            return [], "cosine" if self.embedder is not None else ("overlap" if purpose == "dedup" else "words")
        if self.embedder is not None:
            texts = [text, *(h.record.text for h in hits)]
            try:
                raw = await self.embedder.embed(texts)
            except EmbeddingError:
                raise
            except Exception as exc:
                name = str(getattr(self.embedder, "name", "embedder"))
                raise EmbeddingError(f"embedder {name!r} failed: {type(exc).__name__}", backend=name,
                                     operation="embed") from exc
            rows = check_matrix(raw, len(texts), int(self.embedder.dim), str(self.embedder.name))
            return [cosine(rows[0], rows[i + 1]) for i in range(len(hits))], "cosine"
        if all(h.signal == "vector" for h in hits):
            return [float(h.score) for h in hits], "cosine"
        if purpose == "dedup":
            return [word_overlap(text, h.record.text) for h in hits], "overlap"
        return [containment(text, h.record.text) for h in hits], "words"

    async def _get_many(self, ids: Sequence[str], scope: MemoryScope, ctx: EventSink | None) -> list[MemoryRecord]:
        found: list[MemoryRecord] = []
        for record_id in dict.fromkeys(ids):
            record = await self.memory.get(record_id, scope=scope, ctx=ctx)
            if record is not None:
                found.append(record)
        return found

    async def _apply(self, changes: Sequence[MemoryUpdate], scope: MemoryScope, ctx: EventSink | None) -> list[str]:
        done: list[str] = []
        for start in range(0, len(changes), _CHUNK):
            done.extend(await self.memory.update(changes[start : start + _CHUNK], scope=scope, ctx=ctx))
        return done

    def _touched(self, md: Mapping[str, MetadataValue], now: datetime, boost: float) -> dict[str, MetadataValue]:
        """``md`` after one use: importance raised by ``boost`` (bounded), last use now, one more use."""
        out = dict(md)
        current = md.get(K.IMPORTANCE)
        if isinstance(current, bool) or not isinstance(current, (int, float)):
            current = self.policy.default_importance
        out[K.IMPORTANCE] = round(_clamp(float(current) + boost), 6)
        out[K.LAST_USED] = int(now.timestamp())
        uses = md.get(K.USES)
        out[K.USES] = (uses if isinstance(uses, int) and not isinstance(uses, bool) else 0) + 1
        return out

    # -- writing -----------------------------------------------------------------

    async def remember(
        self,
        text: str,
        *,
        scope: MemoryScope,
        kind: str | None = None,
        importance: float | None = None,
        source: str | None = None,
        entities: Sequence[str] = (),
        pinned: bool = False,
        due_at: datetime | None = None,
        ttl: Duration | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        within: MemoryScope | None = None,
        ctx: EventSink | None = None,
    ) -> Remembered:
        """Store one memory, or update/reinforce its near-duplicate; say which.

        Example:
            >>> result = await memory.remember("Ann is allergic to nuts", scope=ann, kind="fact")  # doctest: +SKIP
            >>> result.action, result.id                                                            # doctest: +SKIP
            ('added', '3f0c...')
        """
        new = NewMemory(text, kind, importance, source, tuple(entities) if not isinstance(entities, str)
                        else (entities,), pinned, due_at, ttl, metadata)
        return (await self.remember_many([new], scope=scope, within=within, ctx=ctx))[0]

    async def remember_many(
        self,
        memories: Sequence[NewMemory],
        *,
        scope: MemoryScope,
        within: MemoryScope | None = None,
        ctx: EventSink | None = None,
    ) -> list[Remembered]:
        """Store a batch; each one is checked for a near-duplicate first (in store and earlier in the batch).

        Every item is checked before anything is written: one bad item stores
        nothing. New memories go in one ``add``, duplicates in one ``update``.
        With ``max_memories`` set, the least salient unpinned memories are
        evicted afterwards (reported in ``Remembered.evicted``).

        Dedup and the cap look ``within`` a scope that must cover ``scope``;
        by default the owner: the user (and agent) across sessions, see
        :func:`owner`. Pass ``within=scope`` to keep them inside one session.

        Example:
            >>> results = await memory.remember_many(
            ...     [NewMemory("Likes jazz", kind="preference"), NewMemory("Call mum", kind="reminder",
            ...      due_at=datetime(2026, 5, 1, 9, tzinfo=timezone.utc))], scope=ann)  # doctest: +SKIP
        """
        if isinstance(memories, (NewMemory, str)) or not isinstance(memories, Sequence):
            raise UsageError("remember_many() takes a list of NewMemory")
        if not isinstance(scope, MemoryScope):
            raise UsageError("scope is required: pass scope=MemoryScope(user_id=...)")
        if len(memories) > self.memory.limits.max_batch:
            raise InvalidInput(
                f"memories has {len(memories):,} items; the limit is {self.memory.limits.max_batch:,}",
                field="memories",
                limit="max_batch",
            )
        now = self._now()
        built = [self._build(m, f"memories[{i}]", now) for i, m in enumerate(memories)]
        home = owner(scope) if within is None else within
        if not isinstance(home, MemoryScope) or not home.covers(scope):
            raise UsageError("within must be a MemoryScope that covers scope (e.g. the user's scope)")
        policy = self.policy
        results: list[Remembered | None] = [None] * len(memories)
        adds: dict[str, MemoryRecord] = {}  # pending new records by their pre-assigned id
        updates: dict[str, MemoryRecord] = {}  # existing records as they will be written
        records = [
            self._record(f"memories[{i}]", id=new_id(), scope=scope, text=new.text, metadata=md, expires_at=expires)
            for i, (new, (md, expires)) in enumerate(zip(memories, built, strict=True))
        ]
        for i, (new, (md, expires), record) in enumerate(zip(memories, built, records, strict=True)):
            match = await self._duplicate(new.text, home, adds, updates, ctx) if policy.dedup else None
            if match is None:
                assert record.id is not None
                adds[record.id] = record
                results[i] = Remembered(id=record.id, action="added")
                continue
            existing, similarity, measure = match
            dup_id = str(existing.id)
            merged, action = self._merge(existing, new, md, expires, now)
            self._check(merged, f"memories[{i}]")
            # A duplicate of a memory earlier in this batch stays one record, added once.
            (adds if dup_id in adds else updates)[dup_id] = merged
            results[i] = Remembered(
                id=dup_id, action=action, duplicate_of=dup_id, similarity=round(similarity, 6), measure=measure
            )
        # Adds and updates are two calls: if the updates fail, the adds are taken
        # back, so a batch is never left half written.
        async with Undo(self.memory.backend) as undo:
            if adds:
                added = list(adds)
                await self.memory.add(list(adds.values()), ctx=ctx)
                undo.push(lambda: self.memory.delete(added, scope=home, ctx=ctx))
            if updates:
                changes = []
                for record_id, record in updates.items():
                    change: dict[str, Any] = {"id": record_id, "text": record.text, "metadata": record.metadata}
                    if record.expires_at is not None:
                        change["expires_at"] = record.expires_at
                    changes.append(MemoryUpdate(**change))
                await self._apply(changes, scope=home, ctx=ctx)
        evicted: tuple[str, ...] = ()
        if policy.max_memories is not None and adds:
            plan = await self._eviction(home, protect=set(adds) | set(updates), ctx=ctx)
            if plan.items:
                await self.memory.delete(plan.ids, scope=home, ctx=ctx)
                evicted = tuple(plan.ids)
        out = [r for r in results if r is not None]
        if evicted:
            from dataclasses import replace

            out = [replace(r, evicted=evicted) for r in out]
        return out

    async def _duplicate(
        self,
        text: str,
        home: MemoryScope,
        adds: Mapping[str, MemoryRecord],
        updates: Mapping[str, MemoryRecord],
        ctx: EventSink | None,
    ) -> tuple[MemoryRecord, float, Literal["cosine", "overlap"]] | None:
        """The most similar memory at or over the dedup threshold, in this batch or in the store.

        Records already changed earlier in the batch are compared as they will be written.
        """
        policy = self.policy
        stored = await self.memory.search(
            text, scope=home, k=policy.dedup_candidates, filters=self._live_filters(False), ctx=ctx
        )
        in_store = [
            h if h.record.id not in updates else MemoryHit(record=updates[str(h.record.id)], score=h.score,
                                                           signal=h.signal)
            for h in stored
        ]
        # Batch entries have no backend score: they are compared by the embedder or by words.
        in_batch = [MemoryHit(record=r, score=0.0, signal="backend") for r in adds.values()]
        best: tuple[MemoryRecord, float, Literal["cosine", "overlap"]] | None = None
        for group in (in_batch, in_store):
            if not group:
                continue
            sims, measure = await self._similarities(text, group, purpose="dedup")
            assert measure != "words"
            line = policy.dedup_cosine if measure == "cosine" else policy.dedup_overlap
            for hit, similarity in zip(group, sims, strict=False):
                if similarity >= line and (best is None or similarity > best[1]):
                    best = (hit.record, similarity, measure)
        return best

    def _merge(
        self,
        existing: MemoryRecord,
        new: NewMemory,
        md: dict[str, MetadataValue],
        expires: datetime | None,
        now: datetime,
    ) -> tuple[MemoryRecord, Literal["updated", "reinforced"]]:
        """``existing`` after a near-duplicate ``new`` arrived (``md``: new's metadata)."""
        old = existing.metadata
        old_importance = old.get(K.IMPORTANCE)
        if isinstance(old_importance, bool) or not isinstance(old_importance, (int, float)):
            old_importance = self.policy.default_importance
        merged = dict(old)
        for key, value in md.items():
            if key in (K.IMPORTANCE, K.KIND, K.SOURCE):
                continue
            merged[key] = value  # host keys, entities, pin and due time of the new one join
        if new.kind is not None:
            merged[K.KIND] = md[K.KIND]
        merged.setdefault(K.KIND, md[K.KIND])
        merged.setdefault(K.SOURCE, md[K.SOURCE])
        merged[K.IMPORTANCE] = max(float(old_importance), float(md[K.IMPORTANCE]))  # type: ignore[arg-type]
        if self.policy.on_duplicate == "update" and new.text != existing.text:
            merged = self._touched(merged, now, 0.0)
            action: Literal["updated", "reinforced"] = "updated"
            text = new.text
        else:
            merged = self._touched(merged, now, self.policy.recall_boost)
            action = "reinforced"
            text = existing.text
        record = existing.model_copy(
            update={"text": text, "metadata": merged, "expires_at": expires or existing.expires_at}
        )
        return record, action

    async def update(
        self,
        id: str,
        *,
        scope: MemoryScope,
        text: str | None = None,
        keep_history: bool = False,
        kind: str | None = None,
        importance: float | None = None,
        entities: Sequence[str] | None = None,
        pinned: bool | None = None,
        due_at: datetime | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        ctx: EventSink | None = None,
    ) -> MemoryItem | None:
        """Change a memory; with ``keep_history=True`` a new version supersedes it.

        The old version then carries ``mp:superseded_by`` (hidden from recall
        unless ``include_superseded=True``) and the new one ``mp:supersedes``;
        both stay in the old version's scope, so erasing the user erases both.
        Fields not given are kept; ``entities`` replaces the list; ``metadata``
        (the host's keys) is merged. Returns ``None`` when no memory with this
        id is in ``scope``.

        Example:
            >>> item = await memory.update(old_id, text="Ann moved to Lyon", keep_history=True,
            ...                            scope=ann)  # doctest: +SKIP
            >>> item.supersedes == old_id                                                    # doctest: +SKIP
            True
        """
        record_id = self.memory.limits.check_id(id, "id")
        current = await self.memory.get(record_id, scope=scope, ctx=ctx)
        if current is None:
            return None
        if K.SUPERSEDED_BY in current.metadata:
            raise InvalidInput(
                f"memory {record_id} is superseded by {current.metadata[K.SUPERSEDED_BY]}; update the newest version",
                field="id",
            )
        md = dict(current.metadata)
        if kind is not None:
            md[K.KIND] = self._kind(kind, "kind")
        if importance is not None:
            md[K.IMPORTANCE] = self._importance(importance, "importance")
        if entities is not None:
            md = {k: v for k, v in md.items() if not k.startswith(K.ENTITY)}
            md.update({K.ENTITY + name: True for name in self._entities(entities, "entities")})
        if pinned is not None:
            if not isinstance(pinned, bool):
                raise InvalidInput("pinned must be true or false", field="pinned")
            md.pop(K.PINNED, None)
            if pinned:
                md[K.PINNED] = True
        if due_at is not None:
            md[K.DUE_AT] = K.to_epoch(due_at, "due_at")
            md.pop(K.DONE_AT, None)
            md.pop(K.REMINDED_AT, None)
        md.update(K.check_host_metadata(metadata, "metadata"))
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise InvalidInput("text must be a non-empty string", field="text")
        if not keep_history:
            change: dict[str, Any] = {"id": record_id, "metadata": md}
            if text is not None:
                change["text"] = text
            done = await self.memory.update([MemoryUpdate(**change)], scope=scope, ctx=ctx)
            if not done:
                return None
            fresh = await self.memory.get(record_id, scope=scope, ctx=ctx)
            return None if fresh is None else self._item(fresh)
        if text is None:
            raise UsageError("update(keep_history=True) needs the new text")
        md[K.SUPERSEDES] = record_id
        md.pop(K.SUPERSEDED_BY, None)
        version = MemoryRecord(id=new_id(), scope=current.scope, text=text, metadata=md,
                               expires_at=current.expires_at)
        assert version.id is not None
        await self.memory.add([version], ctx=ctx)
        old_md = dict(current.metadata)
        old_md[K.SUPERSEDED_BY] = version.id
        await self.memory.update([MemoryUpdate(id=record_id, metadata=old_md)], scope=scope, ctx=ctx)
        fresh = await self.memory.get(version.id, scope=scope, ctx=ctx)
        return None if fresh is None else self._item(fresh)

    async def supersede(
        self, old_id: str, *, by: str, scope: MemoryScope, ctx: EventSink | None = None
    ) -> bool:
        """Mark memory ``old_id`` as superseded by the existing memory ``by`` (lineage, no new record).

        What :meth:`update` with ``keep_history=True`` does when the newer
        version is already stored (reconciliation finds two memories that
        contradict each other): the old one gets ``mp:superseded_by`` (hidden
        from recall), and the oldest version of ``by`` gets ``mp:supersedes``,
        so :meth:`history` walks from ``by`` down to ``old_id`` and deleting
        ``by`` takes ``old_id`` with it. Returns ``False`` and changes nothing
        when either is not in ``scope``, they are the same, ``old_id`` is
        already superseded, or it is already in ``by``'s history.

        Example:
            >>> await memory.supersede(paris.id, by=lyon.id, scope=ann)  # doctest: +SKIP
            True
        """
        old_id = self.memory.limits.check_id(old_id, "old_id")
        by = self.memory.limits.check_id(by, "by")
        if old_id == by:
            return False
        old = await self.memory.get(old_id, scope=scope, ctx=ctx)
        newer = await self.memory.get(by, scope=scope, ctx=ctx)
        if old is None or newer is None or K.SUPERSEDED_BY in old.metadata or K.SUPERSEDED_BY in newer.metadata:
            return False
        root = newer
        seen = {by}
        while isinstance(below := root.metadata.get(K.SUPERSEDES), str):
            if below == old_id or below in seen:
                return False
            seen.add(below)
            previous = await self.memory.get(below, scope=scope, ctx=ctx)
            if previous is None:
                break
            root = previous
        if isinstance(root.metadata.get(K.SUPERSEDES), str):
            return False  # the chain ends in a version that is gone: do not overwrite its link
        root_md = dict(root.metadata)
        root_md[K.SUPERSEDES] = old_id
        old_md = dict(old.metadata)
        old_md[K.SUPERSEDED_BY] = str(root.id)
        await self._apply([MemoryUpdate(id=str(root.id), metadata=root_md), MemoryUpdate(id=old_id, metadata=old_md)],
                          scope, ctx)
        return True

    async def _patch(
        self,
        ids: Sequence[str],
        scope: MemoryScope,
        change: Callable[[dict[str, MetadataValue]], dict[str, MetadataValue]],
        ctx: EventSink | None,
    ) -> list[str]:
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise UsageError("ids must be a list of memory ids")
        checked = [self.memory.limits.check_id(x, f"ids[{i}]") for i, x in enumerate(ids)]
        records = await self._get_many(checked, scope, ctx)
        changes = [MemoryUpdate(id=r.id, metadata=change(dict(r.metadata))) for r in records]
        return await self._apply(changes, scope, ctx) if changes else []

    async def pin(
        self, ids: Sequence[str], *, scope: MemoryScope, pinned: bool = True, ctx: EventSink | None = None
    ) -> list[str]:
        """Pin (or unpin) memories: pinned ones are never decayed, evicted or pruned. Returns the ids changed.

        Example:
            >>> await memory.pin([item.id], scope=ann)  # doctest: +SKIP
        """

        def change(md: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
            md.pop(K.PINNED, None)
            if pinned:
                md[K.PINNED] = True
            return md

        return await self._patch(ids, scope, change, ctx)

    async def mark_done(self, ids: Sequence[str], *, scope: MemoryScope, ctx: EventSink | None = None) -> list[str]:
        """Mark reminders done: they leave :meth:`upcoming`. Returns the ids changed.

        Example:
            >>> await memory.mark_done([reminder.id], scope=ann)  # doctest: +SKIP
        """
        stamp = int(self._now().timestamp())
        return await self._patch(ids, scope, lambda md: {**md, K.DONE_AT: stamp}, ctx)

    async def mark_reminded(
        self, ids: Sequence[str], *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> list[str]:
        """Record that the user was reminded now (they stay upcoming until done). Returns the ids changed.

        Example:
            >>> await memory.mark_reminded([reminder.id], scope=ann)  # doctest: +SKIP
        """
        stamp = int(self._now().timestamp())
        return await self._patch(ids, scope, lambda md: {**md, K.REMINDED_AT: stamp}, ctx)

    async def reinforce(
        self, ids: Sequence[str], outcome: Outcome = "positive", *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> list[MemoryItem]:
        """Explicit feedback: ``"positive"`` adds ``feedback_step`` to importance, ``"negative"`` takes it.

        A number in [-1, 1] is the change itself. Importance stays in [0, 1];
        the use is recorded. Returns the memories as they are now.

        Example:
            >>> [m.importance for m in await memory.reinforce([item.id], "positive", scope=ann)]  # doctest: +SKIP
            [0.9]
        """
        if outcome == "positive":
            delta = self.policy.feedback_step
        elif outcome == "negative":
            delta = -self.policy.feedback_step
        elif isinstance(outcome, (int, float)) and not isinstance(outcome, bool) and math.isfinite(outcome) and (
            -1.0 <= outcome <= 1.0
        ):
            delta = float(outcome)
        else:
            raise InvalidInput("outcome must be 'positive', 'negative' or a number from -1 to 1", field="outcome")
        now = self._now()
        done = await self._patch(ids, scope, lambda md: self._touched(md, now, delta), ctx)
        return [self._item(r) for r in await self._get_many(done, scope, ctx)]

    # -- reading -----------------------------------------------------------------

    def _filters(
        self,
        *,
        kind: str | Sequence[str] | None,
        entity: str | None,
        min_importance: float | None,
        max_importance: float | None,
        include_superseded: bool,
        include_log: bool = False,
    ) -> dict[str, Any]:
        filters: dict[str, Any] = self._live_filters(include_superseded, include_log)
        if kind is not None:
            if isinstance(kind, str):
                filters[K.KIND] = self._kind(kind, "kind")
            else:
                kinds = [self._kind(k, "kind") for k in kind]
                if not kinds:
                    raise InvalidInput("kind must name at least one kind", field="kind")
                filters[K.KIND] = kinds[0] if len(kinds) == 1 else {"$in": kinds}
        if entity is not None:
            filters[K.entity_key(entity)] = True
        bounds: dict[str, float] = {}
        if min_importance is not None:
            bounds["$gte"] = self._importance(min_importance, "min_importance")
        if max_importance is not None:
            bounds["$lte"] = self._importance(max_importance, "max_importance")
        if bounds:
            filters[K.IMPORTANCE] = bounds
        return filters

    def _rank(self, hits: Sequence[MemoryHit], now: datetime) -> list[MemoryItem]:
        """Order hits by salience (see :class:`Salience`)."""
        weights = self.policy.salience
        items = [self._item(h.record, score=float(h.score)) for h in hits]
        if not items:
            return []
        scores = [float(h.score) for h in hits]
        low, high = min(scores), max(scores)
        span = high - low
        ratio = low >= 0 and high > 0  # score / best keeps the backend's own spread: near-ties stay near 1
        ranked: list[tuple[float, int, MemoryItem]] = []
        for i, item in enumerate(items):
            relevance = scores[i] / high if ratio else (1.0 if span <= 0 else (scores[i] - low) / span)
            salience = weights.relevance * relevance + weights.standing(item.importance, item.last_touched, now)
            ranked.append((salience, i, item))
        ranked.sort(key=lambda t: (-t[0], t[1]))
        from dataclasses import replace

        return [replace(item, salience=round(s, 6)) for s, _, item in ranked]

    async def recall(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int = 5,
        kind: str | Sequence[str] | None = None,
        entity: str | None = None,
        min_importance: float | None = None,
        max_importance: float | None = None,
        since: Any = None,
        until: Any = None,
        include_superseded: bool = False,
        include_log: bool = False,
        ranking: Literal["salience", "relevance"] = "salience",
        reinforce: bool = True,
        ctx: EventSink | None = None,
    ) -> list[MemoryItem]:
        """The ``k`` most salient memories for ``query`` (``ranking="relevance"``: the backend's order).

        Superseded versions are hidden unless ``include_superseded=True``, and
        the agent loop's records (conversation turns, tool calls, scratch items;
        see :mod:`memoryport.loop`) unless ``include_log=True``. An empty query
        lists the newest. Each memory returned is reinforced
        (``recall_boost``, last use, one more use) unless ``reinforce=False``
        or the policy's ``recall_boost`` is 0. ``since``/``until`` are the
        port's time range over ``created_at``.

        Example:
            >>> [m.text for m in await memory.recall("drinks", scope=ann, kind="preference")]  # doctest: +SKIP
            ['Ann likes green tea']
        """
        if ranking not in ("salience", "relevance"):
            raise InvalidInput("ranking must be 'salience' or 'relevance'", field="ranking")
        limits = self.memory.limits
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= limits.max_k:
            raise InvalidInput(f"k must be an integer from 1 to {limits.max_k}", field="k", limit="max_k")
        filters = self._filters(kind=kind, entity=entity, min_importance=min_importance,
                                max_importance=max_importance, include_superseded=include_superseded,
                                include_log=include_log)
        blank = not isinstance(query, str) or not query.strip()
        fetch = k if (ranking == "relevance" or blank) else min(limits.max_k, max(k * self.policy.candidates, k + 10))
        hits = await self.memory.search(query, scope=scope, k=fetch, filters=filters, since=since, until=until,
                                        ctx=ctx)
        now = self._now()
        if ranking == "salience" and not blank:
            items = self._rank(hits, now)[:k]
        else:
            items = [self._item(h.record, score=float(h.score)) for h in hits[:k]]
        if reinforce and self.policy.recall_boost > 0 and items:
            boost = self.policy.recall_boost
            changes = [MemoryUpdate(id=i.id, metadata=self._touched(i.record.metadata, now, boost))
                       for i in items if K.LOG not in i.record.metadata]
            if changes:
                await self._apply(changes, scope, ctx)
        return items

    async def get(self, id: str, *, scope: MemoryScope, ctx: EventSink | None = None) -> MemoryItem | None:
        """One memory by id (superseded versions too), or ``None``; does not count as a use.

        Example:
            >>> (await memory.get(result.id, scope=ann)).kind  # doctest: +SKIP
            'fact'
        """
        record = await self.memory.get(id, scope=scope, ctx=ctx)
        return None if record is None else self._item(record)

    async def history(self, id: str, *, scope: MemoryScope, ctx: EventSink | None = None) -> list[MemoryItem]:
        """The versions of a memory, newest first, following ``mp:supersedes`` back.

        Example:
            >>> [m.text for m in await memory.history(item.id, scope=ann)]  # doctest: +SKIP
            ['Ann lives in Lyon', 'Ann lives in Paris']
        """
        versions: list[MemoryItem] = []
        seen: set[str] = set()
        current: str | None = id
        while current is not None and current not in seen:
            seen.add(current)
            record = await self.memory.get(current, scope=scope, ctx=ctx)
            if record is None:
                break
            item = self._item(record)
            versions.append(item)
            current = item.supersedes
        return versions

    async def list_memories(
        self,
        *,
        scope: MemoryScope,
        kind: str | Sequence[str] | None = None,
        entity: str | None = None,
        min_importance: float | None = None,
        max_importance: float | None = None,
        since: Any = None,
        until: Any = None,
        include_superseded: bool = False,
        include_log: bool = False,
        limit: int = 100,
        ctx: EventSink | None = None,
    ) -> list[MemoryItem]:
        """Memories by kind, entity, importance range and time, newest first (the port's filters and range).

        Example:
            >>> prefs = await memory.list_memories(scope=ann, kind="preference", min_importance=0.7)  # doctest: +SKIP
        """
        filters = self._filters(kind=kind, entity=entity, min_importance=min_importance,
                                max_importance=max_importance, include_superseded=include_superseded,
                                include_log=include_log)
        hits = await self.memory.search("", scope=scope, k=limit, filters=filters, since=since, until=until, ctx=ctx)
        return [self._item(h.record) for h in hits]

    async def upcoming(
        self,
        *,
        scope: MemoryScope,
        within: Duration = "7d",
        include_overdue: bool = True,
        limit: int = 100,
        ctx: EventSink | None = None,
    ) -> list[MemoryItem]:
        """Memories due within ``within`` from now (and overdue ones), not done, soonest first.

        At most ``limit`` (from 1 to the guard's ``limits.max_k``), always the
        soonest due: when more are due than one listing returns, the due-time
        bound is narrowed until the listing is complete (items due in the very
        same second as the last one kept may then be chosen among arbitrarily).

        Example:
            >>> [m.text for m in await memory.upcoming(scope=ann, within="7d")]  # doctest: +SKIP
            ['Dentist on Friday at 9']
        """
        fetch = self.memory.limits.max_k
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= fetch:
            raise InvalidInput(f"limit must be an integer from 1 to {fetch}", field="limit")
        now = self._now()
        upper = int((now + parse_duration(within, "within")).timestamp())
        while True:
            due: dict[str, int] = {"$lte": upper}
            if not include_overdue:
                due["$gte"] = int(now.timestamp())
            filters: dict[str, Any] = {
                **self._live_filters(False),
                K.DUE_AT: due,
                K.DONE_AT: {"$exists": False},
            }
            hits = await self.memory.search("", scope=scope, k=fetch, filters=filters, ctx=ctx)
            items = sorted((self._item(h.record) for h in hits), key=lambda m: (m.due_at or now, m.created_at))
            if len(hits) < fetch:
                return items[:limit]
            # A full listing holds the newest matches, not necessarily the soonest due.
            # The `limit` soonest of all are due no later than the limit-th soonest seen
            # here, so list again up to that bound until the listing is complete.
            bound = items[limit - 1].due_at
            narrower = upper if bound is None else int(bound.timestamp())
            if narrower >= upper:
                return items[:limit]
            upper = narrower

    async def stats(
        self, *, scope: MemoryScope, months: int = 12, entities: bool = True, ctx: EventSink | None = None
    ) -> MemoryStats:
        """Counts by kind and month (the backend's ``count``) and by entity (one export).

        Example:
            >>> (await memory.stats(scope=ann)).by_kind["preference"]  # doctest: +SKIP
            3
        """
        self._need(Capability.COUNT, "AgentMemory.stats()")
        if isinstance(months, bool) or not isinstance(months, int) or not 0 <= months <= 1200:
            raise InvalidInput("months must be an integer from 0 to 1200", field="months")
        count = self.memory.count
        operators = Capability.FILTER_OPERATORS in self.memory.capabilities
        records: list[MemoryRecord] | None = None
        if entities or not operators:
            # Entity names are keys nobody knows in advance; without operators, "not superseded"
            # and "due, not done" cannot be counted by the backend either: one export answers both.
            self._need(Capability.EXPORT, "AgentMemory.stats()")
            records = await self.memory.export(scope, ctx=ctx)
        # The agent loop's records (mp:log) are not memories: they are left out of every count.
        memories = {K.LOG: {"$exists": False}}
        if operators:
            total = await count(scope, filters=memories, ctx=ctx)
        else:
            assert records is not None
            records = [r for r in records if K.LOG not in r.metadata]
            total = len(records)
        by_kind = {kind: await count(scope, filters={K.KIND: kind}, ctx=ctx) for kind in self.policy.kinds}
        pinned = await count(scope, filters={K.PINNED: True}, ctx=ctx)
        if operators:
            current = await count(scope, filters=self._live_filters(False), ctx=ctx)
            due = await count(scope, filters={K.DUE_AT: {"$exists": True}, K.DONE_AT: {"$exists": False}}, ctx=ctx)
        else:
            assert records is not None
            current = sum(K.SUPERSEDED_BY not in r.metadata for r in records)
            due = sum(K.DUE_AT in r.metadata and K.DONE_AT not in r.metadata for r in records)
        now = self._now()
        by_month: dict[str, int] = {}
        year, month = now.year, now.month
        starts: list[datetime] = []
        for _ in range(months):
            starts.append(datetime(year, month, 1, tzinfo=timezone.utc))
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        for start in reversed(starts):
            end = datetime(start.year + (start.month == 12), start.month % 12 + 1, 1, tzinfo=timezone.utc)
            if operators:
                by_month[f"{start:%Y-%m}"] = await count(scope, filters=memories, since=start, until=end, ctx=ctx)
            else:
                assert records is not None
                by_month[f"{start:%Y-%m}"] = sum(start <= r.created_at < end for r in records)
        by_entity: dict[str, int] | None = None
        if entities:
            assert records is not None
            tally: dict[str, int] = {}
            for record in records:
                for name in K.entities_of(record.metadata):
                    tally[name] = tally.get(name, 0) + 1
            by_entity = dict(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))
        return MemoryStats(total=total, current=current, by_kind=by_kind, by_month=by_month, by_entity=by_entity,
                           pinned=pinned, due=due)

    async def relink(
        self, ids: Mapping[str, str], *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> list[str]:
        """Point lineage keys at new ids after a copy; returns the ids changed.

        :func:`~memoryport.copy_memories` gives copied records fresh ids (its
        report's ``ids`` maps old to new), so ``mp:supersedes`` and
        ``mp:superseded_by`` would still name the source's ids. Run this on the
        target with that map: versions stay linked, and deleting a memory takes
        its older versions with it there too.

        Example:
            >>> report = await copy_memories(old, new, ann)                      # doctest: +SKIP
            >>> await AgentMemory(new).relink(report.ids, scope=ann)             # doctest: +SKIP
        """
        if not isinstance(ids, Mapping):
            raise UsageError("relink() takes the id map of a copy (CopyReport.ids: old id -> new id)")
        self._need(Capability.EXPORT, "AgentMemory.relink()")
        changes: list[MemoryUpdate] = []
        for record in await self.memory.export(scope, ctx=ctx):
            md = dict(record.metadata)
            changed = False
            for key in (K.SUPERSEDES, K.SUPERSEDED_BY):
                old = md.get(key)
                if isinstance(old, str) and old in ids and ids[old] != old:
                    md[key] = ids[old]
                    changed = True
            if changed:
                changes.append(MemoryUpdate(id=record.id, metadata=md))
        return await self._apply(changes, scope, ctx) if changes else []

    # -- destructive policies: a dry run first ------------------------------------

    async def _lineage(
        self, records: Sequence[MemoryRecord], scope: MemoryScope, taken: set[str], ctx: EventSink | None
    ) -> list[RemovalItem]:
        """The older versions of ``records`` (they go with the newest: nothing forgotten lingers)."""
        out: list[RemovalItem] = []
        for record in records:
            older = record.metadata.get(K.SUPERSEDES)
            while isinstance(older, str) and older not in taken:
                previous = await self.memory.get(older, scope=scope, ctx=ctx)
                if previous is None:
                    break
                taken.add(older)
                out.append(RemovalItem(id=older, text=previous.text, score=0.0, reason="older version"))
                older = previous.metadata.get(K.SUPERSEDES)
        return out

    async def forget(
        self,
        query: str,
        *,
        scope: MemoryScope,
        threshold: float | None = None,
        k: int = 50,
        dry_run: bool = True,
        include_pinned: bool = False,
        ctx: EventSink | None = None,
    ) -> Removal:
        """Forget every memory similar enough to ``query``; by default only say what would go.

        Similarity is cosine with an embedder (or a vector-only backend), else
        the share of the query's words a memory contains. Memories at or above
        ``threshold`` (default ``CurationPolicy.forget_threshold``, 0.75) go,
        with their older versions; pinned ones stay unless ``include_pinned``.
        The ``k`` (50) best search hits are considered: call again for more.
        Only ``dry_run=False`` deletes.

        Example:
            >>> preview = await memory.forget("coffee", scope=ann)             # doctest: +SKIP
            >>> [(i.text, round(i.score, 2)) for i in preview.items]            # doctest: +SKIP
            [('Ann drinks coffee black', 1.0)]
            >>> (await memory.forget("coffee", scope=ann, dry_run=False)).removed  # doctest: +SKIP
            1
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string (forget never takes everything)", field="query")
        line = self.policy.forget_threshold if threshold is None else self._importance(threshold, "threshold")
        if not isinstance(dry_run, bool):
            raise UsageError("dry_run must be True or False")
        hits = await self.memory.search(query, scope=scope, k=k, filters=self._live_filters(True), ctx=ctx)
        sims, measure = await self._similarities(query, hits, purpose="forget")
        chosen = sorted(((s, h) for s, h in zip(sims, hits, strict=False) if s >= line), key=lambda t: -t[0])
        items: list[RemovalItem] = []
        kept: list[str] = []
        taken: set[str] = set()
        records: list[MemoryRecord] = []
        for similarity, hit in chosen:
            record_id = str(hit.record.id)
            if hit.record.metadata.get(K.PINNED) is True and not include_pinned:
                kept.append(record_id)
                continue
            taken.add(record_id)
            records.append(hit.record)
            items.append(RemovalItem(id=record_id, text=hit.record.text, score=round(similarity, 6), reason="match"))
        items.extend(await self._lineage(records, scope, taken, ctx))
        removed = 0
        if not dry_run and items:
            removed = await self.memory.delete([i.id for i in items], scope=scope, ctx=ctx)
        return Removal(dry_run=dry_run, items=tuple(items), removed=removed, kept_pinned=tuple(kept),
                       measure=measure, threshold=line)

    async def delete(self, ids: Sequence[str], *, scope: MemoryScope, ctx: EventSink | None = None) -> int:
        """Delete memories by id, with their older versions. Returns how many records went.

        Example:
            >>> await memory.delete([item.id], scope=ann)  # doctest: +SKIP
            1
        """
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise UsageError("delete() takes a list of ids")
        checked = [self.memory.limits.check_id(x, f"ids[{i}]") for i, x in enumerate(ids)]
        records = await self._get_many(checked, scope, ctx)
        taken = {str(r.id) for r in records}
        older = await self._lineage(records, scope, taken, ctx)
        doomed = [str(r.id) for r in records] + [o.id for o in older]
        return await self.memory.delete(doomed, scope=scope, ctx=ctx) if doomed else 0

    async def decay(
        self,
        *,
        scope: MemoryScope,
        prune_below: float | None = None,
        dry_run: bool = True,
        ctx: EventSink | None = None,
    ) -> DecayReport:
        """Lower the importance of memories unused for a ``decay_period`` or more; optionally prune.

        A memory unused (not recalled, reinforced or rewritten) for at least
        ``decay_period`` has its importance multiplied by
        ``decay_factor ** (unused time / decay_period)``, counted from the last
        decay or the last use: calling it daily or monthly ends the same.
        Pinned memories never decay and are never pruned. With
        ``prune_below``, unpinned memories whose importance ends below it go.
        By default only a preview (``dry_run=True``): nothing changes.

        Example:
            >>> report = await memory.decay(scope=ann, prune_below=0.1)          # doctest: +SKIP
            >>> report.pruned.ids                                                # doctest: +SKIP
            ['9a1b...']
            >>> await memory.decay(scope=ann, prune_below=0.1, dry_run=False)    # doctest: +SKIP
        """
        self._need(Capability.EXPORT, "AgentMemory.decay()")
        line = None if prune_below is None else self._importance(prune_below, "prune_below")
        if not isinstance(dry_run, bool):
            raise UsageError("dry_run must be True or False")
        now = self._now()
        period = self.policy.decay_period.total_seconds()
        factor = self.policy.decay_factor
        changed: list[ImportanceChange] = []
        updates: list[MemoryUpdate] = []
        doomed: list[RemovalItem] = []
        for record in await self.memory.export(scope, ctx=ctx):
            if K.LOG in record.metadata:
                continue
            item = self._item(record)
            if item.pinned:
                continue
            unused = (now - item.last_touched).total_seconds()
            after = item.importance
            if unused >= period:
                decayed = K.from_epoch(record.metadata.get(K.DECAYED_AT))
                start = max(item.last_touched, decayed) if decayed is not None else item.last_touched
                elapsed = max(0.0, (now - start).total_seconds())
                # Six decimals: a call moments after the last one changes nothing.
                after = round(_clamp(item.importance * factor ** (elapsed / period)), 6)
                if after != item.importance:
                    changed.append(ImportanceChange(id=item.id, before=item.importance, after=after))
                    md = dict(record.metadata)
                    md[K.IMPORTANCE] = after
                    md[K.DECAYED_AT] = int(now.timestamp())
                    updates.append(MemoryUpdate(id=item.id, metadata=md))
            if line is not None and after < line:
                doomed.append(RemovalItem(id=item.id, text=item.text, score=round(after, 6), reason="below threshold"))
        doomed.sort(key=lambda i: (i.score, i.id))
        removed = 0
        if not dry_run:
            gone = {i.id for i in doomed}
            if updates:
                await self._apply([u for u in updates if u.id not in gone], scope, ctx)
            if doomed:
                removed = await self.memory.delete([i.id for i in doomed], scope=scope, ctx=ctx)
        pruned = Removal(dry_run=dry_run, items=tuple(doomed), removed=removed, threshold=line)
        return DecayReport(dry_run=dry_run, changed=tuple(changed), pruned=pruned)

    async def _eviction(self, home: MemoryScope, *, protect: set[str], ctx: EventSink | None) -> Removal:
        """What the capacity cap takes from ``home`` now (a dry run)."""
        cap = self.policy.max_memories
        if cap is None:
            return Removal(dry_run=True, items=())
        self._need(Capability.COUNT, "CurationPolicy.max_memories")
        self._need(Capability.EXPORT, "CurationPolicy.max_memories")
        # Everything in the scope first (cheap); the agent loop's records are not
        # memories and do not count against the cap, so over it, the export decides.
        if await self.memory.count(home, ctx=ctx) <= cap:
            return Removal(dry_run=True, items=(), threshold=float(cap))
        records = [r for r in await self.memory.export(home, ctx=ctx) if K.LOG not in r.metadata]
        total = len(records)
        if total <= cap:
            return Removal(dry_run=True, items=(), threshold=float(cap))
        now = self._now()
        weights = self.policy.salience
        ranked: list[tuple[float, datetime, MemoryRecord]] = []
        for record in records:
            if record.metadata.get(K.PINNED) is True or record.id in protect:
                continue
            item = self._item(record)
            ranked.append((weights.standing(item.importance, item.last_touched, now), item.created_at, record))
        ranked.sort(key=lambda t: (t[0], t[1]))
        excess = total - cap
        items = tuple(
            RemovalItem(id=str(r.id), text=r.text, score=round(s, 6), reason="over capacity")
            for s, _, r in ranked[:excess]
        )
        return Removal(dry_run=True, items=items, threshold=float(cap))

    async def evict(self, *, scope: MemoryScope, dry_run: bool = True, ctx: EventSink | None = None) -> Removal:
        """What the capacity cap would evict from the owner of ``scope`` now; ``dry_run=False`` evicts it.

        The cap (``CurationPolicy.max_memories``) counts a user's memories
        across sessions (per agent when the scope names one). The least salient
        unpinned memories go first (importance and recency, see
        :meth:`Salience.standing`); pinned ones never go, even if the cap
        cannot be met. Writes evict by themselves; this shows it beforehand.

        Example:
            >>> (await memory.evict(scope=ann)).ids  # doctest: +SKIP
            []
        """
        if not isinstance(dry_run, bool):
            raise UsageError("dry_run must be True or False")
        home = owner(scope)
        plan = await self._eviction(home, protect=set(), ctx=ctx)
        if dry_run or not plan.items:
            return plan
        removed = await self.memory.delete(plan.ids, scope=home, ctx=ctx)
        return Removal(dry_run=False, items=plan.items, removed=removed, threshold=plan.threshold)

    # -- lifecycle and blocking twins ----------------------------------------------

    async def aclose(self) -> None:
        """Close the guarded backend."""
        await self.memory.aclose()

    async def __aenter__(self) -> AgentMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Blocking twin of :meth:`aclose`."""
        run_sync(self.aclose(), method="close")

    def remember_sync(self, text: str, *, scope: MemoryScope, **kwargs: Any) -> Remembered:
        """Blocking twin of :meth:`remember`."""
        return run_sync(self.remember(text, scope=scope, **kwargs), method="remember")

    def recall_sync(self, query: str, *, scope: MemoryScope, **kwargs: Any) -> list[MemoryItem]:
        """Blocking twin of :meth:`recall`."""
        return run_sync(self.recall(query, scope=scope, **kwargs), method="recall")

    def forget_sync(self, query: str, *, scope: MemoryScope, **kwargs: Any) -> Removal:
        """Blocking twin of :meth:`forget`."""
        return run_sync(self.forget(query, scope=scope, **kwargs), method="forget")

    def upcoming_sync(self, *, scope: MemoryScope, **kwargs: Any) -> list[MemoryItem]:
        """Blocking twin of :meth:`upcoming`."""
        return run_sync(self.upcoming(scope=scope, **kwargs), method="upcoming")

    def decay_sync(self, *, scope: MemoryScope, **kwargs: Any) -> DecayReport:
        """Blocking twin of :meth:`decay`."""
        return run_sync(self.decay(scope=scope, **kwargs), method="decay")

    def remember_many_sync(
        self, memories: Sequence[NewMemory], *, scope: MemoryScope, **kwargs: Any
    ) -> list[Remembered]:
        """Blocking twin of :meth:`remember_many`."""
        return run_sync(self.remember_many(memories, scope=scope, **kwargs), method="remember_many")

    def update_sync(self, id: str, *, scope: MemoryScope, **kwargs: Any) -> MemoryItem | None:
        """Blocking twin of :meth:`update`."""
        return run_sync(self.update(id, scope=scope, **kwargs), method="update")

    def get_sync(self, id: str, *, scope: MemoryScope) -> MemoryItem | None:
        """Blocking twin of :meth:`get`."""
        return run_sync(self.get(id, scope=scope), method="get")

    def delete_sync(self, ids: Sequence[str], *, scope: MemoryScope) -> int:
        """Blocking twin of :meth:`delete`."""
        return run_sync(self.delete(ids, scope=scope), method="delete")

    def reinforce_sync(
        self, ids: Sequence[str], outcome: Outcome = "positive", *, scope: MemoryScope
    ) -> list[MemoryItem]:
        """Blocking twin of :meth:`reinforce`."""
        return run_sync(self.reinforce(ids, outcome, scope=scope), method="reinforce")

    def list_memories_sync(self, *, scope: MemoryScope, **kwargs: Any) -> list[MemoryItem]:
        """Blocking twin of :meth:`list_memories`."""
        return run_sync(self.list_memories(scope=scope, **kwargs), method="list_memories")

    def stats_sync(self, *, scope: MemoryScope, **kwargs: Any) -> MemoryStats:
        """Blocking twin of :meth:`stats`."""
        return run_sync(self.stats(scope=scope, **kwargs), method="stats")

    def evict_sync(self, *, scope: MemoryScope, dry_run: bool = True) -> Removal:
        """Blocking twin of :meth:`evict`."""
        return run_sync(self.evict(scope=scope, dry_run=dry_run), method="evict")

    def relink_sync(self, ids: Mapping[str, str], *, scope: MemoryScope) -> list[str]:
        """Blocking twin of :meth:`relink`."""
        return run_sync(self.relink(ids, scope=scope), method="relink")

    def mark_done_sync(self, ids: Sequence[str], *, scope: MemoryScope) -> list[str]:
        """Blocking twin of :meth:`mark_done`."""
        return run_sync(self.mark_done(ids, scope=scope), method="mark_done")

