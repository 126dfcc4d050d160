"""The scratchpad: a session's working memory (``scratch``/``think``), promoted to long-term memory at its end."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._errors import InvalidInput, UsageError
from .._events import EventSink
from .._port import Capability
from .._records import MemoryRecord, MemoryScope, MemoryUpdate, new_id, utcnow
from .._sync import run_sync
from ..curated import AgentMemory, NewMemory, Remembered
from ..curated._types import Duration
from . import _keys as K

__all__ = ["ScratchEnd", "ScratchItem", "Scratchpad"]

_REQUIRED = (Capability.METADATA, Capability.FILTERS, Capability.SESSION_SCOPE, Capability.UPDATE,
             Capability.DELETE)


@dataclass(frozen=True)
class ScratchItem:
    """One item of a session's scratchpad.

    Attributes:
        id: the record's id.
        key: the item's key (writing the same key again replaces it), or ``None``.
        content: the note.
        at: when it was first written.
        score: the search score (:meth:`Scratchpad.think` with a query only).

    Example:
        >>> item.key, item.content                              # doctest: +SKIP
        ('flight', 'LH 1234 leaves 9:40 from gate B12')
    """

    id: str
    key: str | None
    content: str
    at: datetime
    score: float | None = None
    record: MemoryRecord | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_record(cls, record: MemoryRecord, score: float | None = None) -> ScratchItem:
        """Read an item from its record."""
        key = record.metadata.get(K.KEY)
        return cls(id=str(record.id), key=key if isinstance(key, str) else None, content=record.text,
                   at=record.created_at, score=score, record=record)


@dataclass(frozen=True)
class ScratchEnd:
    """What :meth:`Scratchpad.end` did (or, in a dry run, would do).

    Attributes:
        dry_run: nothing changed when ``True``.
        promote: the items chosen for long-term memory.
        discard: the items that go with the scratchpad.
        promoted: what curated memory did with each promoted item (added,
            updated or reinforced a memory); empty in a dry run.
        removed: how many scratch items were deleted.

    Example:
        >>> done = await pad.end(scope=chat, promote=["flight"], dry_run=False)   # doctest: +SKIP
        >>> [r.action for r in done.promoted]                                   # doctest: +SKIP
        ['added']
    """

    dry_run: bool
    promote: tuple[ScratchItem, ...]
    discard: tuple[ScratchItem, ...]
    promoted: tuple[Remembered, ...] = ()
    removed: int = 0


class Scratchpad:
    """A session's working memory: notes the agent jots while it works, kept apart from long-term memory.

    ``scratch(content, key)`` writes a note (a key given again replaces that
    note); ``think(query)`` finds notes again (all of them, oldest first, for a
    blank query). At the end of the session, :meth:`end` promotes the chosen
    notes to curated long-term memory (with its dedup: a promoted note that
    repeats a memory reinforces it) and discards the rest — by default as a
    dry run that only shows what would happen.

    Items are ordinary records marked ``mp:log="scratch"`` in the session's
    scope, left out of curated recall; export and erasure include them.
    Needs ``metadata``, ``filters``, ``session_scope``, ``update`` and ``delete``.

    Args:
        memory: the curated memory promoted items go to.
        max_items: the most notes one session may hold (a full pad refuses more).
        max_chars: the longest note (default: the guard's ``max_text_chars``); never truncated.
        ttl: keep notes at most this long if the session never ends (needs ``expiry``).
        clock: the current time.

    Example:
        >>> import os, tempfile
        >>> from memoryport import MemoryScope, SQLiteMemory
        >>> from memoryport.curated import AgentMemory
        >>> from memoryport.loop import Scratchpad
        >>> memory = AgentMemory(SQLiteMemory(os.path.join(tempfile.mkdtemp(), "m.db")))
        >>> chat = MemoryScope(user_id="ann", session_id="trip")
        >>> pad = Scratchpad(memory)
        >>> _ = pad.scratch_sync("Flight LH 1234 leaves at 9:40", key="flight", scope=chat)
        >>> _ = pad.scratch_sync("Hotel check-in after 15:00", scope=chat)
        >>> [i.content for i in pad.think_sync("flight", scope=chat)]
        ['Flight LH 1234 leaves at 9:40']
        >>> end = pad.end_sync(scope=chat, promote=["flight"], dry_run=False)
        >>> [r.action for r in end.promoted], end.removed
        (['added'], 2)
        >>> [m.text for m in memory.recall_sync("flight", scope=chat)]
        ['Flight LH 1234 leaves at 9:40']
        >>> memory.close()
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        max_items: int = 200,
        max_chars: int | None = None,
        ttl: Duration | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not isinstance(memory, AgentMemory):
            raise UsageError(f"Scratchpad() takes an AgentMemory (promotion goes there), not {type(memory).__name__}")
        guard = memory.memory
        K.require(guard, _REQUIRED, "Scratchpad")
        if isinstance(max_items, bool) or not isinstance(max_items, int) or not 1 <= max_items <= guard.limits.max_k:
            raise UsageError(f"max_items must be an integer from 1 to {guard.limits.max_k}")
        self.max_chars = K.text_cap(guard, max_chars)
        self.ttl = K.ttl_of(guard, ttl, "Scratchpad")
        self.memory = memory
        self.max_items = max_items
        self._clock = clock

    def __repr__(self) -> str:
        return f"Scratchpad(backend={self.memory.memory.backend!r})"

    def _now(self) -> datetime:
        return K.aware_now(self._clock, "Scratchpad")

    async def _all(self, scope: MemoryScope, ctx: EventSink | None) -> list[ScratchItem]:
        # A pad holds at most max_items (<= max_k): one listing is complete.
        hits = await self.memory.memory.search("", scope=scope, k=self.max_items, filters={K.LOG: K.SCRATCH},
                                               ctx=ctx)
        items = [ScratchItem.from_record(h.record) for h in hits]
        items.sort(key=lambda i: (i.at, i.id))
        return items

    async def scratch(
        self, content: str, key: str | None = None, *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> ScratchItem:
        """Write a note to the session's scratchpad; with a ``key`` already used, replace that note.

        Raises:
            InvalidInput: an empty or oversize note, a bad key, or a full pad.
            UsageError: a scope without a session.

        Example:
            >>> await pad.scratch("Budget: 800 EUR", key="budget", scope=chat)   # doctest: +SKIP
        """
        scope = K.check_scope(scope, session=True, what="the scratchpad")
        K.check_text(content, "content", self.max_chars)
        if key is not None:
            key = K.check_name(key, "key")
        guard = self.memory.memory
        items = await self._all(scope, ctx)
        if key is not None:
            same = [i for i in items if i.key == key]
            if same:
                done = await guard.update([MemoryUpdate(id=same[0].id, text=content)], scope=scope, ctx=ctx)
                if done:
                    fresh = await guard.get(same[0].id, scope=scope, ctx=ctx) if Capability.GET in \
                        guard.capabilities else None
                    if fresh is not None:
                        return ScratchItem.from_record(fresh)
                    return ScratchItem(id=same[0].id, key=key, content=content, at=same[0].at)
        if len(items) >= self.max_items:
            raise InvalidInput(
                f"the scratchpad of this session is full ({self.max_items} notes); end it or replace a note by key",
                field="content",
                limit="max_items",
            )
        md: dict[str, Any] = {K.LOG: K.SCRATCH}
        if key is not None:
            md[K.KEY] = key
        now = self._now()
        record = MemoryRecord(id=new_id(), scope=scope, text=content, metadata=md, created_at=now,
                              expires_at=None if self.ttl is None else now + self.ttl)
        guard.limits.check_record(record, "content", utcnow(), scope=False)
        await guard.add([record], ctx=ctx)
        return ScratchItem.from_record(record)

    async def think(
        self, query: str = "", *, scope: MemoryScope, k: int = 5, ctx: EventSink | None = None
    ) -> list[ScratchItem]:
        """Notes matching ``query``, best first; a blank query gives every note, oldest first.

        Example:
            >>> [i.content for i in await pad.think("budget", scope=chat)]   # doctest: +SKIP
            ['Budget: 800 EUR']
        """
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, not {type(query).__name__}", field="query")
        scope = K.check_scope(scope, session=True, what="the scratchpad")
        k = K.check_limit(k, "k", self.memory.memory.limits.max_k)
        if not query.strip():
            return await self._all(scope, ctx)
        hits = await self.memory.memory.search(query, scope=scope, k=k, filters={K.LOG: K.SCRATCH}, ctx=ctx)
        return [ScratchItem.from_record(h.record, score=float(h.score)) for h in hits]

    async def discard(self, keys: Sequence[str], *, scope: MemoryScope, ctx: EventSink | None = None) -> int:
        """Drop notes by key or id now; returns how many went. An unknown key or id is an error (nothing goes).

        Example:
            >>> await pad.discard(["budget"], scope=chat)   # doctest: +SKIP
            1
        """
        scope = K.check_scope(scope, session=True, what="the scratchpad")
        chosen = self._choose(await self._all(scope, ctx), keys, "keys")
        if not chosen:
            return 0
        return await self.memory.memory.delete([i.id for i in chosen], scope=scope, ctx=ctx)

    @staticmethod
    def _choose(items: Sequence[ScratchItem], wanted: Sequence[str], field: str) -> list[ScratchItem]:
        if isinstance(wanted, str) or not isinstance(wanted, Sequence):
            raise UsageError(f"{field} must be a list of note keys or ids")
        by_key = {i.key: i for i in items if i.key is not None}
        by_id = {i.id: i for i in items}
        chosen: dict[str, ScratchItem] = {}
        for n, name in enumerate(wanted):
            if not isinstance(name, str):
                raise InvalidInput(f"{field}[{n}] must be a string", field=f"{field}[{n}]")
            item = by_key.get(name) or by_id.get(name)
            if item is None:
                raise InvalidInput(f"{field}[{n}] names no note of this session's scratchpad", field=f"{field}[{n}]")
            chosen[item.id] = item
        return list(chosen.values())

    async def end(
        self,
        *,
        scope: MemoryScope,
        promote: Sequence[str] = (),
        kind: str | None = None,
        importance: float | None = None,
        source: str = "scratchpad",
        dry_run: bool = True,
        ctx: EventSink | None = None,
    ) -> ScratchEnd:
        """End the session's scratchpad: the notes named in ``promote`` (keys or ids) become long-term memories, the
        rest are discarded. By default only a preview (``dry_run=True``).

        Promoted notes go through :meth:`AgentMemory.remember_many` (kind,
        importance and source as given; dedup applies) before anything is
        deleted, so a failure never loses a note.

        Example:
            >>> preview = await pad.end(scope=chat, promote=["flight"])                 # doctest: +SKIP
            >>> [i.content for i in preview.discard]                                    # doctest: +SKIP
            ['Hotel check-in after 15:00']
            >>> await pad.end(scope=chat, promote=["flight"], kind="fact", dry_run=False)  # doctest: +SKIP
        """
        scope = K.check_scope(scope, session=True, what="the scratchpad")
        if not isinstance(dry_run, bool):
            raise UsageError("dry_run must be True or False")
        items = await self._all(scope, ctx)
        chosen = self._choose(items, promote, "promote")
        ids = {i.id for i in chosen}
        rest = tuple(i for i in items if i.id not in ids)
        news = [NewMemory(i.content, kind=kind, importance=importance, source=source) for i in chosen]
        if dry_run:
            # Check what promotion would store, so the real run cannot fail on it.
            for n, new in enumerate(news):
                self.memory._build(new, f"promote[{n}]", self._now())
            return ScratchEnd(dry_run=True, promote=tuple(chosen), discard=rest)
        promoted = await self.memory.remember_many(news, scope=scope, ctx=ctx) if news else []
        removed = 0
        if items:
            removed = await self.memory.memory.delete([i.id for i in items], scope=scope, ctx=ctx)
        return ScratchEnd(dry_run=False, promote=tuple(chosen), discard=rest, promoted=tuple(promoted),
                          removed=removed)

    # -- blocking twins ------------------------------------------------------------

    def scratch_sync(self, content: str, key: str | None = None, *, scope: MemoryScope, **kwargs: Any) -> ScratchItem:
        """Blocking twin of :meth:`scratch`."""
        return run_sync(self.scratch(content, key, scope=scope, **kwargs), method="scratch", owner="pad")

    def think_sync(self, query: str = "", *, scope: MemoryScope, **kwargs: Any) -> list[ScratchItem]:
        """Blocking twin of :meth:`think`."""
        return run_sync(self.think(query, scope=scope, **kwargs), method="think", owner="pad")

    def end_sync(self, *, scope: MemoryScope, **kwargs: Any) -> ScratchEnd:
        """Blocking twin of :meth:`end`."""
        return run_sync(self.end(scope=scope, **kwargs), method="end", owner="pad")
