"""The conversation log: turns stored per session as ordinary records, their history and search."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from .._errors import InvalidInput, UsageError
from .._events import EventSink
from .._guard import GuardedMemory
from .._port import Capability
from .._records import MemoryRecord, MemoryScope, MetadataValue, new_id, utcnow
from .._sync import run_sync
from .._timerange import TimeBound
from ..curated import AgentMemory
from ..curated._keys import check_host_metadata, host_metadata
from ..curated._types import Duration, parse_duration
from . import _keys as K

__all__ = ["ROLES", "ConversationLog", "NewTurn", "Role", "Turn", "memory_of"]

Role = Literal["user", "assistant", "system", "tool"]
"""Who spoke a turn."""
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
"""Every role a turn may have."""

_TICK = timedelta(microseconds=1)
_REQUIRED = (Capability.METADATA, Capability.FILTERS, Capability.SESSION_SCOPE)


def memory_of(memory: object, what: str) -> GuardedMemory:
    """The guard of ``memory`` (a :class:`GuardedMemory`, or an :class:`AgentMemory` holding one)."""
    if isinstance(memory, AgentMemory):
        return memory.memory
    if isinstance(memory, GuardedMemory):
        return memory
    raise UsageError(
        f"{what} takes a GuardedMemory (e.g. SQLiteMemory(path)) or an AgentMemory, not {type(memory).__name__}"
    )


def check_role(role: object, field: str = "role") -> str:
    """``role`` if it is one of :data:`ROLES`, else :class:`~memoryport.InvalidInput`."""
    if not isinstance(role, str):
        raise InvalidInput(f"{field} must be a string, one of {', '.join(ROLES)}", field=field)
    if not role.strip():
        raise InvalidInput(f"{field} must not be empty; use one of {', '.join(ROLES)}", field=field)
    if role not in ROLES:
        raise InvalidInput(f"{field} {role[:40]!r} is unknown; use one of {', '.join(ROLES)}", field=field)
    return role


@dataclass(frozen=True)
class NewTurn:
    """One turn to log with :meth:`ConversationLog.store_turns`.

    Attributes:
        role: ``user``, ``assistant``, ``system`` or ``tool``.
        text: what was said (non-empty; never truncated: an oversize text is refused).
        at: when (aware; default now). Turns of a session are logged in time order.
        name: the speaker's name, or the tool's on a ``tool`` turn.
        metadata: the host's own keys (not starting with ``mp:``).

    Example:
        >>> NewTurn("user", "Book a table for two").role
        'user'
    """

    role: str
    text: str
    at: datetime | None = None
    name: str | None = None
    metadata: Mapping[str, MetadataValue] | None = None


@dataclass(frozen=True)
class Turn:
    """One logged turn, as read back from its record.

    Attributes:
        id: the record's id.
        role: who spoke.
        text: what was said.
        index: the turn's position in its session, from 0.
        at: when (the record's ``created_at``).
        scope: the session's scope.
        name: the speaker's or tool's name, or ``None``.
        metadata: the host's own keys.
        score: the search score (``ConversationLog.search`` only).
        record: the underlying record.

    Example:
        >>> turn.role, turn.index, turn.text                      # doctest: +SKIP
        ('user', 0, 'Book a table for two')
    """

    id: str
    role: str
    text: str
    index: int
    at: datetime
    scope: MemoryScope
    name: str | None = None
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    score: float | None = None
    record: MemoryRecord | None = field(default=None, repr=False, compare=False)

    @property
    def session_id(self) -> str | None:
        """The session (conversation) the turn belongs to."""
        return self.scope.session_id

    @classmethod
    def from_record(cls, record: MemoryRecord, score: float | None = None) -> Turn:
        """Read a turn's keys from its record (odd values take safe defaults)."""
        md = record.metadata
        role = md.get(K.ROLE)
        index = md.get(K.TURN_INDEX)
        name = md.get(K.NAME)
        return cls(
            id=str(record.id),
            role=role if isinstance(role, str) else "user",
            text=record.text,
            index=index if isinstance(index, int) and not isinstance(index, bool) else -1,
            at=record.created_at,
            scope=record.scope,
            name=name if isinstance(name, str) else None,
            metadata=host_metadata(md),
            score=score,
            record=record,
        )


class ConversationLog:
    """Conversation turns stored per session, as ordinary records on any backend that can hold them.

    Each turn is a record in the session's scope whose metadata carries
    ``mp:log="turn"``, ``mp:role``, ``mp:turn`` (its index) and, when given,
    ``mp:name``; its time is the record's ``created_at``. Export, copy, erasure
    and retention therefore apply to turns as to any record, and curated
    memory (:class:`~memoryport.AgentMemory`) leaves them out of recall unless
    asked (``include_log=True``).

    Needs the backend's ``metadata``, ``filters`` and ``session_scope``
    capabilities and refuses at construction otherwise
    (:class:`~memoryport.UnsupportedCapability`). Writing needs a scope with a
    session; reading takes any scope (a user's scope reads all their sessions).

    Turn indexes count from 0 per session in the order turns are logged through
    this object (it remembers the last index it gave, and reads the newest
    stored turn otherwise); keep one writer per session.

    Args:
        memory: a :class:`~memoryport.GuardedMemory` or an :class:`~memoryport.AgentMemory`.
        max_chars: the longest turn text accepted (default: the guard's ``max_text_chars``).
            Longer ones are refused, never truncated.
        ttl: keep turns this long (``"30d"``; sets ``expires_at``, needs ``expiry``).
        clock: the current time (tests, replays).

    Example:
        >>> import os, tempfile
        >>> from memoryport import MemoryScope, SQLiteMemory
        >>> from memoryport.loop import ConversationLog
        >>> log = ConversationLog(SQLiteMemory(os.path.join(tempfile.mkdtemp(), "m.db")))
        >>> chat = MemoryScope(user_id="ann", session_id="chat-1")
        >>> log.store_turn_sync("user", "Book a table at Luigi's for Friday", scope=chat).index
        0
        >>> log.store_turn_sync("assistant", "Done: Friday 8 pm at Luigi's.", scope=chat).index
        1
        >>> [t.role for t in log.history_sync(scope=chat)]
        ['user', 'assistant']
        >>> [t.text for t in log.search_sync("Luigi table", scope=MemoryScope(user_id="ann"), k=1)]
        ["Book a table at Luigi's for Friday"]
        >>> log.memory.close()
    """

    def __init__(
        self,
        memory: GuardedMemory | AgentMemory,
        *,
        max_chars: int | None = None,
        ttl: Duration | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        guard = memory_of(memory, "ConversationLog()")
        K.require(guard, _REQUIRED, "ConversationLog")
        self.max_chars = K.text_cap(guard, max_chars)
        self.ttl = K.ttl_of(guard, ttl, "ConversationLog")
        self.memory = guard
        self._clock = clock
        self._next: dict[MemoryScope, int] = {}

    def __repr__(self) -> str:
        return f"ConversationLog(backend={self.memory.backend!r})"

    def _now(self) -> datetime:
        return K.aware_now(self._clock, "ConversationLog")

    @staticmethod
    def _filters(role: str | None) -> dict[str, Any]:
        filters: dict[str, Any] = {K.LOG: K.TURN}
        if role is not None:
            filters[K.ROLE] = check_role(role)
        return filters

    async def _last(self, scope: MemoryScope, ctx: EventSink | None) -> Turn | None:
        hits = await self.memory.search("", scope=scope, k=1, filters={K.LOG: K.TURN}, ctx=ctx)
        return Turn.from_record(hits[0].record) if hits else None

    # -- writing -----------------------------------------------------------------

    async def store_turn(
        self,
        role: Role | str,
        text: str,
        *,
        scope: MemoryScope,
        at: datetime | None = None,
        name: str | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        ctx: EventSink | None = None,
    ) -> Turn:
        """Log one turn of the session ``scope`` names; returns it with its index.

        Raises:
            InvalidInput: an empty or unknown role, an empty or oversize text, a
                naive or future time, a time before the session's last turn,
                ``mp:`` host keys. Nothing is stored then.
            UsageError: a scope without a session.

        Example:
            >>> turn = await log.store_turn("user", "Hi", scope=chat)   # doctest: +SKIP
        """
        turns = await self.store_turns([NewTurn(role, text, at, name, metadata)], scope=scope, ctx=ctx)
        return turns[0]

    async def store_turns(
        self, turns: Sequence[NewTurn], *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> list[Turn]:
        """Log a batch of turns of one session, in order, in one write (all or nothing).

        Example:
            >>> await log.store_turns([NewTurn("user", "Hi"), NewTurn("assistant", "Hello!")],
            ...                       scope=chat)                    # doctest: +SKIP
        """
        if isinstance(turns, (NewTurn, str)) or not isinstance(turns, Sequence):
            raise UsageError("store_turns() takes a list of NewTurn")
        scope = K.check_scope(scope, session=True, what="a conversation turn")
        if not turns:
            return []
        if len(turns) > self.memory.limits.max_batch:
            raise InvalidInput(
                f"turns has {len(turns):,} items; the limit is {self.memory.limits.max_batch:,}",
                field="turns",
                limit="max_batch",
            )
        now = self._now()
        checked: list[tuple[NewTurn, datetime, dict[str, MetadataValue]]] = []
        for i, turn in enumerate(turns):
            where = f"turns[{i}]"
            if not isinstance(turn, NewTurn):
                raise UsageError(f"{where} is a {type(turn).__name__}, not a NewTurn")
            md = check_host_metadata(turn.metadata, f"{where}.metadata")
            md[K.LOG] = K.TURN
            md[K.ROLE] = check_role(turn.role, f"{where}.role")
            K.check_text(turn.text, f"{where}.text", self.max_chars)
            if turn.name is not None:
                md[K.NAME] = K.check_name(turn.name, f"{where}.name")
            if turn.at is None:
                # Default times strictly increase within a batch, so the newest turn is unambiguous.
                at = now if not checked else max(now, checked[-1][1] + _TICK)
                checked.append((turn, at, md))
                continue
            at = turn.at
            if not isinstance(at, datetime) or at.tzinfo is None or at.tzinfo.utcoffset(at) is None:
                raise InvalidInput(f"{where}.at must be a timezone-aware datetime", field=f"{where}.at")
            at = at.astimezone(timezone.utc)
            if checked and at < checked[-1][1]:
                raise InvalidInput(f"{where}.at is earlier than the turn before it; log turns in order",
                                   field=f"{where}.at")
            checked.append((turn, at, md))
        last = await self._last(scope, ctx)
        if last is not None and turns[0].at is None and checked[0][1] <= last.at:
            base = last.at + _TICK
            shifted: list[tuple[NewTurn, datetime, dict[str, MetadataValue]]] = []
            for turn, at, md in checked:
                at = max(at, base) if turn.at is None else at
                base = at + _TICK
                shifted.append((turn, at, md))
            checked = shifted
        if last is not None and checked[0][1] < last.at:
            raise InvalidInput(
                "turns[0].at is earlier than the session's last logged turn; log turns in order", field="turns[0].at"
            )
        # No await between reading and reserving the next index: concurrent writers
        # through this object get distinct indexes.
        start = max(0 if last is None else last.index + 1, self._next.get(scope, 0))
        records: list[MemoryRecord] = []
        for offset, (turn, at, md) in enumerate(checked):
            md[K.TURN_INDEX] = start + offset
            expires = None if self.ttl is None else at + self.ttl
            try:
                record = MemoryRecord(id=new_id(), scope=scope, text=turn.text, metadata=md, created_at=at,
                                      expires_at=expires)
            except InvalidInput as exc:
                where = f"turns[{offset}].{exc.field.removeprefix('record.')}"
                raise InvalidInput(f"{where}: {str(exc).split(': ', 1)[-1]}", field=where, limit=exc.limit) from None
            self.memory.limits.check_record(record, f"turns[{offset}]", utcnow(), scope=False)
            records.append(record)
        self._next[scope] = start + len(records)
        try:
            await self.memory.add(records, ctx=ctx)
        except BaseException:
            # Nothing was stored: the indexes are free again unless another write took later ones.
            if self._next.get(scope) == start + len(records):
                self._next[scope] = start
            raise
        return [Turn.from_record(r) for r in records]

    # -- reading -----------------------------------------------------------------

    async def history(
        self,
        *,
        scope: MemoryScope,
        limit: int = 20,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        role: Role | str | None = None,
        ctx: EventSink | None = None,
    ) -> list[Turn]:
        """The last ``limit`` turns in ``scope``, oldest first (a session, or all of a user's sessions).

        Example:
            >>> [t.text for t in await log.history(scope=chat, limit=20)]   # doctest: +SKIP
        """
        scope = K.check_scope(scope, session=False, what="history()")
        limit = K.check_limit(limit, "limit", self.memory.limits.max_k)
        hits = await self.memory.search("", scope=scope, k=limit, filters=self._filters(role), since=since,
                                        until=until, ctx=ctx)
        turns = [Turn.from_record(h.record) for h in hits]
        turns.sort(key=lambda t: (t.at, t.session_id or "", t.index))
        return turns

    async def recent(
        self,
        *,
        scope: MemoryScope,
        within: Duration = "7d",
        limit: int = 50,
        ctx: EventSink | None = None,
    ) -> list[Turn]:
        """Turns of the last ``within`` (default 7 days), at most ``limit`` (the newest), oldest first.

        Example:
            >>> await log.recent(scope=MemoryScope(user_id="ann"), within="7d", limit=50)  # doctest: +SKIP
        """
        span = parse_duration(within, "within")
        return await self.history(scope=scope, limit=limit, since=self._now() - span, ctx=ctx)

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int = 10,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
        role: Role | str | None = None,
        ctx: EventSink | None = None,
    ) -> list[Turn]:
        """Turns in ``scope`` matching ``query``, best first, each with its ``score``.

        The backend's search decides the mode: keyword on SQLite, hybrid with an
        embedder, vector-only on a vector store. ``since``/``until`` bound the
        turn's time; ``role`` keeps one speaker. A blank query lists the newest.

        Example:
            >>> [t.text for t in await log.search("restaurant", scope=ann, since="30d")]  # doctest: +SKIP
        """
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, not {type(query).__name__}", field="query")
        scope = K.check_scope(scope, session=False, what="search()")
        k = K.check_limit(k, "k", self.memory.limits.max_k)
        hits = await self.memory.search(query, scope=scope, k=k, filters=self._filters(role), since=since,
                                        until=until, ctx=ctx)
        return [Turn.from_record(h.record, score=float(h.score)) for h in hits]

    async def count(self, *, scope: MemoryScope, ctx: EventSink | None = None) -> int:
        """How many turns ``scope`` holds (needs the backend's ``count``).

        Example:
            >>> await log.count(scope=chat)   # doctest: +SKIP
            2
        """
        scope = K.check_scope(scope, session=False, what="count()")
        K.require(self.memory, (Capability.COUNT,), "ConversationLog.count()")
        return await self.memory.count(scope, filters={K.LOG: K.TURN}, ctx=ctx)

    async def next_index(self, *, scope: MemoryScope, ctx: EventSink | None = None) -> int:
        """The index the next turn of this session will get (how many were logged, when none were erased).

        Example:
            >>> await log.next_index(scope=chat)   # doctest: +SKIP
            2
        """
        scope = K.check_scope(scope, session=True, what="next_index()")
        last = await self._last(scope, ctx)
        return max(0 if last is None else last.index + 1, self._next.get(scope, 0))

    async def delete_session(self, *, scope: MemoryScope, dry_run: bool = True, ctx: EventSink | None = None) -> int:
        """Delete every turn of one session (turns only); by default only count what would go.

        Example:
            >>> await log.delete_session(scope=chat)                 # doctest: +SKIP
            2
            >>> await log.delete_session(scope=chat, dry_run=False)  # doctest: +SKIP
            2
        """
        scope = K.check_scope(scope, session=True, what="delete_session()")
        if not isinstance(dry_run, bool):
            raise UsageError("dry_run must be True or False")
        K.require(self.memory, (Capability.EXPORT, Capability.DELETE), "ConversationLog.delete_session()")
        ids = [str(r.id) for r in await self.memory.export(scope, ctx=ctx) if K.is_log(r.metadata, K.TURN)]
        if dry_run or not ids:
            return len(ids)
        self._next.pop(scope, None)
        done = 0
        step = self.memory.limits.max_ids
        for start in range(0, len(ids), step):
            done += await self.memory.delete(ids[start : start + step], scope=scope, ctx=ctx)
        return done

    # -- blocking twins ------------------------------------------------------------

    def store_turn_sync(self, role: Role | str, text: str, *, scope: MemoryScope, **kwargs: Any) -> Turn:
        """Blocking twin of :meth:`store_turn`."""
        return run_sync(self.store_turn(role, text, scope=scope, **kwargs), method="store_turn", owner="log")

    def store_turns_sync(self, turns: Sequence[NewTurn], *, scope: MemoryScope, **kwargs: Any) -> list[Turn]:
        """Blocking twin of :meth:`store_turns`."""
        return run_sync(self.store_turns(turns, scope=scope, **kwargs), method="store_turns", owner="log")

    def history_sync(self, *, scope: MemoryScope, **kwargs: Any) -> list[Turn]:
        """Blocking twin of :meth:`history`."""
        return run_sync(self.history(scope=scope, **kwargs), method="history", owner="log")

    def recent_sync(self, *, scope: MemoryScope, **kwargs: Any) -> list[Turn]:
        """Blocking twin of :meth:`recent`."""
        return run_sync(self.recent(scope=scope, **kwargs), method="recent", owner="log")

    def search_sync(self, query: str, *, scope: MemoryScope, **kwargs: Any) -> list[Turn]:
        """Blocking twin of :meth:`search`."""
        return run_sync(self.search(query, scope=scope, **kwargs), method="search", owner="log")


