"""MemoryExtractor: extraction after a turn, consolidation of old sessions, reconciliation of similar pairs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from .._embedding import EmbeddingPort, check_matrix
from .._errors import InvalidInput, ModelError, UsageError
from .._events import EventSink, MemoryEvent, current_sink, deliver
from .._port import Capability
from .._records import MemoryRecord, MemoryScope, utcnow
from .._sync import run_sync
from ..curated import AgentMemory, MemoryItem, NewMemory, normalise_entity, owner, word_overlap
from ..models import ModelPort
from . import _prompts as P
from ._schemas import Add, ConsolidationAnswer, Delete, ExtractionAnswer, Noop, ReconciliationAnswer, Update
from ._types import (
    ConsolidationResult,
    DecisionOutcome,
    ExtractionPolicy,
    ExtractionResult,
    PairOutcome,
    ReconciliationResult,
    Session,
    Turn,
)

if TYPE_CHECKING:
    from ..loop import ConversationLog

__all__ = ["SESSION_KEY", "MemoryExtractor", "last_turn", "session_key"]

logger = logging.getLogger("memoryport.extraction")

SESSION_KEY = "consolidated:"
"""Prefix of the host metadata keys of a consolidation note: ``consolidated:<hash of the session id>`` = ``True``.

One key per session (see :func:`session_key`), so that a note two sessions both
produced (dedup merges them into one memory) keeps the mark of each.
"""


def session_key(session_id: str) -> str:
    """The metadata key marking a memory as consolidated from ``session_id``.

    Example:
        >>> session_key("chat-1")
        'consolidated:eaeb9111b1c67442'
    """
    import hashlib

    return SESSION_KEY + hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]

# curated memory's well-known keys (see memoryport.curated), read and filtered on here.
_SOURCE = "mp:source"
_PINNED = "mp:pinned"
_SUPERSEDED_BY = "mp:superseded_by"
_LOG = "mp:log"  # memoryport.loop's records

_A = TypeVar("_A", bound=BaseModel)
_ROLES = ("user", "assistant")


def _text_of(content: object) -> str:
    """The text of an OpenAI- or Anthropic-shaped message content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (str, bytes)):
        parts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type", "text") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def last_turn(messages: object) -> list[tuple[str, str]]:
    """The last turn of a conversation: its user and assistant messages from the last user message on.

    System, tool and developer messages are left out (the system prompt may hold
    memories already; tool output is not what the user said).

    Example:
        >>> last_turn([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
        ...            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}])
        [('user', 'hi'), ('assistant', 'hello')]
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInput("messages must be a list of {'role', 'content'} mappings", field="messages")
    rows: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"messages[{i}] must be a mapping", field=f"messages[{i}]")
        role = message.get("role")
        if role == "user":
            rows = []
        if role in _ROLES:
            text = _text_of(message.get("content")).strip()
            if text:
                rows.append((str(role), text))
    return rows


class MemoryExtractor:
    """Learns memories from conversations with a language model, through curated memory.

    * :meth:`extract` after a turn: the model sees the turn and the
      ``candidates`` (10) most similar memories, under short handles (``m1`` ...,
      never their ids), and decides ADD, UPDATE, DELETE or NOOP for each piece
      of information; turns under ``min_words`` (20) or over ``max_turn_chars`` are skipped, decisions
      under ``min_confidence`` (0.4) dropped.
    * :meth:`consolidate` folds sessions whose last turn is ``consolidate_after``
      (14 days) old, with ``min_session_turns`` (5) or more, into notes
      (``mp:source`` = ``consolidation``).
    * :meth:`reconcile` asks the model about pairs of memories more similar than
      ``reconcile_cosine`` (0.85): agreeing pairs reinforce the older (+0.05), a
      contradiction supersedes it, doubt weakens it (-0.1).

    Every change goes through :class:`~memoryport.curated.AgentMemory` (dedup,
    supersession, lineage, events). The model's answer is validated with
    pydantic before anything is written: a malformed answer, a timeout
    (``timeout``, 3 s) or any model error changes nothing, is logged without
    content and counted in :attr:`stats`, and :meth:`extract` returns a
    ``failed`` result instead of raising, so a host's turn is never lost. A
    decision naming a memory the model was not shown in that call (an id, a
    handle never given, another user's memory) changes nothing and is counted
    as rejected. Memories are written in the owner's scope (the user, and
    agent, across sessions; see :func:`~memoryport.curated.owner`).

    Args:
        memory: the curated memory written to.
        model: any :class:`~memoryport.models.ModelPort`.
        policy: thresholds and prompts (:class:`ExtractionPolicy`).
        embedder: compares memories for :meth:`reconcile` (default: the memory's own;
            without either, word overlap).
        clock: the current time (for tests and replays).

    Example:
        >>> import asyncio, os, tempfile
        >>> from memoryport import CallableModel, MemoryScope, SQLiteMemory
        >>> from memoryport.curated import AgentMemory
        >>> memory = AgentMemory(SQLiteMemory(os.path.join(tempfile.mkdtemp(), "m.db")))
        >>> model = CallableModel(lambda messages: {"decisions": [
        ...     {"action": "ADD", "text": "Ann is vegetarian", "kind": "preference", "confidence": 0.9}]})
        >>> extractor = MemoryExtractor(memory, model, policy=ExtractionPolicy(min_words=3))
        >>> turn = [{"role": "user", "content": "I stopped eating meat last year"},
        ...         {"role": "assistant", "content": "Noted!"}]
        >>> result = asyncio.run(extractor.extract(turn, scope=MemoryScope(user_id="ann", session_id="s1")))
        >>> result.status, result.count("ADD")
        ('applied', 1)
        >>> [m.text for m in memory.list_memories_sync(scope=MemoryScope(user_id="ann"))]
        ['Ann is vegetarian']
        >>> memory.close()
    """

    def __init__(
        self,
        memory: AgentMemory,
        model: ModelPort,
        *,
        policy: ExtractionPolicy | None = None,
        embedder: EmbeddingPort | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not isinstance(memory, AgentMemory):
            raise UsageError(f"memory must be an AgentMemory, not {type(memory).__name__}")
        if not isinstance(model, ModelPort):
            raise UsageError(f"model must be a ModelPort (e.g. CallableModel or OpenAIModel), not "
                             f"{type(model).__name__}")
        policy = ExtractionPolicy() if policy is None else policy
        if not isinstance(policy, ExtractionPolicy):
            raise UsageError(f"policy must be an ExtractionPolicy, not {type(policy).__name__}")
        if policy.consolidation_kind not in memory.policy.kinds:
            raise UsageError(f"ExtractionPolicy.consolidation_kind {policy.consolidation_kind!r} is not a kind of "
                             "the memory's CurationPolicy")
        if embedder is not None and not isinstance(embedder, EmbeddingPort):
            raise UsageError(f"embedder must be an EmbeddingPort, not {type(embedder).__name__}")
        self.memory = memory
        self.model = model
        self.policy = policy
        self.embedder = embedder
        self._clock = clock
        self._stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"MemoryExtractor(model={self.model.name!r}, backend={self.memory.memory.backend!r})"

    @property
    def stats(self) -> dict[str, int]:
        """Counters since construction: turns, skips and failures by reason, decisions by action and outcome.

        Keys: ``turns``; ``skipped_short``/``skipped_long``/``skipped_empty``; ``failed_<reason>`` (``timeout``,
        ``malformed``, ``http``, ``connect``, ``refused``, ``error``, ``store``); ``decisions_<ACTION>``;
        ``applied_<ACTION>``; ``rejected``; ``low_confidence``; ``unchanged``; ``sessions_consolidated``;
        ``notes_written``; ``pairs_<RELATION>``; ``pairs_applied``.
        """
        return dict(self._stats)

    def _now(self) -> datetime:
        now = self._clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise UsageError("MemoryExtractor's clock must return an aware datetime")
        return now.astimezone(timezone.utc)

    async def _ask(
        self, what: str, system: str, user: str, shape: type[_A], ctx: EventSink | None = None
    ) -> _A | str:
        """The model's validated answer, or the reason it failed (logged without content, counted).

        The model's usage (``model.used``) goes to ``ctx`` when one is given.
        """
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        error: BaseException
        token = current_sink.set(ctx) if ctx is not None else None
        try:
            raw = await asyncio.wait_for(
                self.model.complete_json(messages, schema=shape.model_json_schema()), self.policy.timeout
            )
            return shape.model_validate(raw)
        except (asyncio.TimeoutError, TimeoutError) as exc:
            reason, error = "timeout", exc
        except ModelError as exc:
            reason, error = exc.reason, exc
        except ValidationError as exc:
            reason, error = "malformed", exc
        except (UsageError, InvalidInput):
            raise
        except Exception as exc:  # a third party's ModelPort may raise anything: never lose the turn
            reason, error = "error", exc
        finally:
            if token is not None:
                current_sink.reset(token)
        self._stats[f"failed_{reason}"] += 1
        logger.warning("%s skipped: the model %r failed (%s, %s)", what, self.model.name, reason,
                       type(error).__name__)
        return reason

    # -- extraction -----------------------------------------------------------------

    async def extract(
        self, messages: Sequence[Mapping[str, Any]], *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> ExtractionResult:
        """Learn from the last turn of ``messages`` (OpenAI- or Anthropic-shaped dicts).

        Model failures do not raise: the result says ``failed`` and why, and
        nothing changed. A call that asked the model sends ``memory.extracted``
        to ``ctx`` (counts only: written memories in ``count``, decisions as
        ``<action>_<status>`` in ``usage``, a failure's reason in ``error``), and
        the model's usage (``model.used``) too. Bad arguments raise (:class:`~memoryport.InvalidInput`,
        :class:`~memoryport.UsageError`), and so does a failing store
        (:class:`~memoryport.BackendError`, counted as ``failed_store``).

        Example:
            >>> result = await extractor.extract(messages, scope=ann_chat)  # doctest: +SKIP
            >>> result.status, [(d.action, d.status) for d in result.decisions]  # doctest: +SKIP
            ('applied', [('ADD', 'applied'), ('NOOP', 'unchanged')])
        """
        if not isinstance(scope, MemoryScope):
            raise UsageError("scope is required: pass scope=MemoryScope(user_id=...)")
        turn = last_turn(messages)
        self._stats["turns"] += 1
        if not turn:
            self._stats["skipped_empty"] += 1
            return ExtractionResult(status="skipped", reason="empty")
        if sum(len(text.split()) for _, text in turn) < self.policy.min_words:
            self._stats["skipped_short"] += 1
            return ExtractionResult(status="skipped", reason="short")
        if sum(len(text) for _, text in turn) > self.policy.max_turn_chars:
            self._stats["skipped_long"] += 1
            logger.info("extraction skipped: the turn is over max_turn_chars (%d)", self.policy.max_turn_chars)
            return ExtractionResult(status="skipped", reason="long")
        home = owner(scope)
        shown: list[MemoryItem] = []
        if self.policy.candidates:
            query = " ".join(text for role, text in turn if role == "user") or turn[-1][1]
            # A search query, not stored: the start of a very long turn finds the same neighbours.
            query = query[: self.memory.memory.limits.max_query_chars]
            shown = await self.memory.recall(query, scope=home, k=self.policy.candidates, reinforce=False,
                                             ranking="relevance", ctx=ctx)
        handles = {f"m{i + 1}": item for i, item in enumerate(shown)}
        system = self.policy.extract_prompt.format(kinds=", ".join(self.memory.policy.kinds))
        user = P.extract_user(turn, [(h, m.kind or "memory", m.text) for h, m in handles.items()])
        start = time.perf_counter()
        answer = await self._ask("extraction", system, user, ExtractionAnswer, ctx)
        if isinstance(answer, str):
            result = ExtractionResult(status="failed", reason=answer, shown=len(shown))
            self._event(result, scope, start, ctx)
            return result
        try:
            outcomes = await self._apply(answer, handles, home, ctx)
        except (UsageError, InvalidInput):
            raise
        except Exception:
            self._stats["failed_store"] += 1
            raise
        for outcome in outcomes:
            self._stats[f"decisions_{outcome.action}"] += 1
            if outcome.status == "applied":
                self._stats[f"applied_{outcome.action}"] += 1
            else:
                self._stats[outcome.status] += 1
        self._stats["extracted"] += 1
        result = ExtractionResult(status="applied", decisions=tuple(outcomes), shown=len(shown))
        self._event(result, scope, start, ctx)
        return result

    def _event(self, result: ExtractionResult, scope: MemoryScope, start: float, ctx: EventSink | None) -> None:
        """``memory.extracted`` to ``ctx``: decisions by outcome in ``usage``, the failure's reason in ``error``."""
        usage = Counter(f"{d.action.lower()}_{d.status}" for d in result.decisions)
        deliver(ctx, MemoryEvent(name="memory.extracted", backend=self.model.name, count=len(result.written),
                                 latency_ms=(time.perf_counter() - start) * 1000, scope_kind=scope.kind,
                                 error=result.reason if result.status == "failed" else None, usage=dict(usage)))

    def _new_memory(self, decision: Add, scope: MemoryScope) -> NewMemory | str:
        """The memory an ADD asks for, or why it cannot be stored (checked before anything is written)."""
        kinds = self.memory.policy.kinds
        kind = decision.kind.strip().lower() if decision.kind else None
        if kind not in kinds:
            if kind is not None:
                self._stats["kind_defaulted"] += 1
            kind = self.memory.policy.default_kind
        entities: list[str] = []
        for name in decision.entities:
            try:
                entities.append(normalise_entity(name, "entities"))
            except InvalidInput:
                self._stats["entities_dropped"] += 1
        entities = list(dict.fromkeys(entities))
        if len(entities) > self.memory.policy.max_entities:
            self._stats["entities_dropped"] += len(entities) - self.memory.policy.max_entities
            entities = entities[: self.memory.policy.max_entities]
        try:
            self.memory.memory.limits.check_record(MemoryRecord(scope=scope, text=decision.text), "text",
                                                   utcnow(), scope=False)
        except InvalidInput:
            return "invalid text"
        return NewMemory(decision.text, kind=kind, source=self.policy.source, entities=entities)

    async def _apply(
        self, answer: ExtractionAnswer, handles: Mapping[str, MemoryItem], home: MemoryScope, ctx: EventSink | None
    ) -> list[DecisionOutcome]:
        line = self.policy.min_confidence
        outcomes: list[DecisionOutcome | None] = [None] * len(answer.decisions)
        adds: list[tuple[int, NewMemory]] = []
        updates: list[tuple[int, MemoryItem, str]] = []
        deletes: list[tuple[int, MemoryItem]] = []
        targeted: set[str] = set()
        # Plan every decision before writing anything.
        for i, d in enumerate(answer.decisions):
            if isinstance(d, Noop):
                outcomes[i] = DecisionOutcome("NOOP", "unchanged")
                continue
            if d.confidence < line:
                outcomes[i] = DecisionOutcome(d.action, "low_confidence")
                continue
            if isinstance(d, Add):
                new = self._new_memory(d, home)
                if isinstance(new, str):
                    outcomes[i] = DecisionOutcome("ADD", "rejected", reason=new)
                else:
                    adds.append((i, new))
                continue
            item = handles.get(d.memory.strip().lower())
            if item is None:
                outcomes[i] = DecisionOutcome(d.action, "rejected", reason="not shown")
            elif item.id in targeted:
                outcomes[i] = DecisionOutcome(d.action, "rejected", memory_id=item.id, reason="conflict")
            elif item.pinned:
                outcomes[i] = DecisionOutcome(d.action, "rejected", memory_id=item.id, reason="pinned")
            elif isinstance(d, Update):
                targeted.add(item.id)
                if d.text == item.text:
                    outcomes[i] = DecisionOutcome("UPDATE", "unchanged", memory_id=item.id)
                elif isinstance(check := self._new_memory(Add(action="ADD", text=d.text, confidence=1.0), home),
                                str):
                    outcomes[i] = DecisionOutcome("UPDATE", "rejected", memory_id=item.id, reason=check)
                else:
                    updates.append((i, item, d.text))
            else:
                assert isinstance(d, Delete)
                targeted.add(item.id)
                deletes.append((i, item))
        if adds:
            done = await self.memory.remember_many([n for _, n in adds], scope=home, within=home, ctx=ctx)
            for (i, _), remembered in zip(adds, done, strict=True):
                outcomes[i] = DecisionOutcome("ADD", "applied", memory_id=remembered.id, result=remembered.action)
        for i, item, text in updates:
            try:
                fresh = await self.memory.update(item.id, scope=home, text=text,
                                                 keep_history=self.policy.keep_history, ctx=ctx)
            except InvalidInput:  # superseded since it was shown
                fresh = None
            outcomes[i] = (DecisionOutcome("UPDATE", "rejected", memory_id=item.id, reason="changed")
                           if fresh is None else DecisionOutcome("UPDATE", "applied", memory_id=fresh.id))
        if deletes:
            ids = [item.id for _, item in deletes]
            live = {r.id for r in await self._live(ids, home, ctx)}
            if live:
                await self.memory.delete([x for x in ids if x in live], scope=home, ctx=ctx)
            for i, item in deletes:
                outcomes[i] = (DecisionOutcome("DELETE", "applied", memory_id=item.id) if item.id in live
                               else DecisionOutcome("DELETE", "rejected", memory_id=item.id, reason="changed"))
        return [o for o in outcomes if o is not None]

    async def _live(self, ids: Sequence[str], scope: MemoryScope, ctx: EventSink | None) -> list[MemoryRecord]:
        found = []
        for record_id in ids:
            record = await self.memory.memory.get(record_id, scope=scope, ctx=ctx)
            if record is not None and _SUPERSEDED_BY not in record.metadata:
                found.append(record)
        return found

    # -- consolidation ----------------------------------------------------------------

    async def consolidate(
        self, sessions: Iterable[Session], *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> ConsolidationResult:
        """Fold old sessions of ``scope``'s user into notes; say which were consolidated and why others were not.

        A session qualifies when it has ``min_session_turns`` (5) or more turns
        and its last turn is ``consolidate_after`` (14 days) old or older; one
        already consolidated (a note carries its id under ``consolidated_session``)
        is skipped, so running it daily is safe. A transcript over
        ``max_session_chars`` goes to the model in parts. A model failure
        leaves that session as it was (it is tried again next time).

        Example:
            >>> result = await extractor.consolidate(sessions, scope=MemoryScope(user_id="ann"))  # doctest: +SKIP
            >>> result.consolidated                                                             # doctest: +SKIP
            {'chat-3': ['4be1...', '9f0c...']}
        """
        if not isinstance(scope, MemoryScope):
            raise UsageError("scope is required: pass scope=MemoryScope(user_id=...)")
        if isinstance(sessions, (Session, str)) or not isinstance(sessions, Iterable):
            raise UsageError("consolidate() takes a list of Session")
        checked = [self._check_session(s, f"sessions[{i}]") for i, s in enumerate(sessions)]
        home = owner(scope)
        now = self._now()
        policy = self.policy
        result = ConsolidationResult()
        for session in checked:
            if len(session.turns) < policy.min_session_turns:
                result.skipped[session.id] = "too short"
                continue
            if now - max(t.at for t in session.turns) < policy.consolidate_after:
                result.skipped[session.id] = "too recent"
                continue
            done = await self.memory.memory.search(
                "", scope=home, k=1, filters={session_key(session.id): True}, ctx=ctx)
            if done:
                result.skipped[session.id] = "already consolidated"
                continue
            notes: list[NewMemory] = []
            failed: str | None = None
            for part in self._parts(session):
                answer = await self._ask("consolidation", policy.consolidate_prompt,
                                         P.consolidate_user(session.id, part), ConsolidationAnswer, ctx)
                if isinstance(answer, str):
                    failed = answer
                    break
                for note in answer.notes:
                    new = self._new_memory(Add(action="ADD", text=note.text, entities=note.entities,
                                               confidence=1.0), home)
                    if isinstance(new, str):
                        self._stats["rejected"] += 1
                        continue
                    notes.append(NewMemory(new.text, kind=policy.consolidation_kind,
                                           source=policy.consolidation_source, entities=new.entities,
                                           metadata={session_key(session.id): True}))
            if failed is not None:
                result.skipped[session.id] = failed
                continue
            written = await self.memory.remember_many(notes, scope=home, within=home, ctx=ctx) if notes else []
            result.consolidated[session.id] = list(dict.fromkeys(r.id for r in written))
            self._stats["sessions_consolidated"] += 1
            self._stats["notes_written"] += len(written)
        return result

    async def consolidate_log(
        self, log: ConversationLog, *, scope: MemoryScope, ctx: EventSink | None = None
    ) -> ConsolidationResult:
        """:meth:`consolidate` the sessions of a :class:`~memoryport.loop.ConversationLog` that are old enough.

        Lists the sessions of ``scope``'s owner (the user, across sessions) with
        a turn older than ``consolidate_after``, reads each session's turns in
        full, and consolidates those that qualify (a session with a newer turn
        is still going on and is skipped as ``too recent``).

        Example:
            >>> log = ConversationLog(memory.memory)                                  # doctest: +SKIP
            >>> (await extractor.consolidate_log(log, scope=ann)).consolidated        # doctest: +SKIP
            {'chat-3': ['4be1...']}
        """
        from ..loop import ConversationLog

        if not isinstance(log, ConversationLog):
            raise UsageError(f"log must be a ConversationLog, not {type(log).__name__}")
        if not isinstance(scope, MemoryScope):
            raise UsageError("scope is required: pass scope=MemoryScope(user_id=...)")
        home = owner(scope)
        cutoff = self._now() - self.policy.consolidate_after
        page = log.memory.limits.max_k
        old = await self._all_turns(log, home, page, until=cutoff, ctx=ctx)
        sessions: list[Session] = []
        for session_id in dict.fromkeys(t.scope.session_id for t in old):
            if session_id is None:
                continue
            turns = await self._all_turns(log, MemoryScope(user_id=home.user_id, session_id=session_id,
                                                           agent_id=home.agent_id), page, ctx=ctx)
            sessions.append(Session(session_id, [Turn(t.role, t.text, t.at) for t in turns]))
        return await self.consolidate(sessions, scope=home, ctx=ctx)

    @staticmethod
    async def _all_turns(
        log: ConversationLog, scope: MemoryScope, page: int, *, until: datetime | None = None,
        ctx: EventSink | None = None,
    ) -> list[Any]:
        """Every turn in ``scope`` up to ``until``, oldest first, read a page at a time (newest pages first)."""
        seen: dict[str, Any] = {}
        bound = until
        while True:
            batch = await log.history(scope=scope, limit=page, until=bound, ctx=ctx)
            fresh = [t for t in batch if t.id not in seen]
            for t in fresh:
                seen[t.id] = t
            if len(batch) < page or not fresh:
                break
            bound = min(t.at for t in batch)
        return sorted(seen.values(), key=lambda t: (t.at, t.index))

    def _check_session(self, session: object, field: str) -> Session:
        if not isinstance(session, Session):
            raise UsageError(f"{field} must be a Session, not {type(session).__name__}")
        if not isinstance(session.id, str) or not session.id.strip():
            raise InvalidInput(f"{field}.id must be a non-empty string", field=f"{field}.id")
        self.memory.memory.limits.check_id(session.id, f"{field}.id")
        if isinstance(session.turns, (str, bytes)) or not isinstance(session.turns, Sequence):
            raise InvalidInput(f"{field}.turns must be a list of Turn", field=f"{field}.turns")
        for j, turn in enumerate(session.turns):
            where = f"{field}.turns[{j}]"
            if not isinstance(getattr(turn, "text", None), str) or not isinstance(getattr(turn, "role", None), str):
                raise InvalidInput(f"{where} must be a Turn with a role and a text", field=where)
            at = getattr(turn, "at", None)
            if not isinstance(at, datetime) or at.tzinfo is None:
                raise InvalidInput(f"{where}.at must be an aware datetime", field=f"{where}.at")
        return session

    def _parts(self, session: Session) -> list[list[tuple[str, str, str]]]:
        """The session's turns in parts of at most ``max_session_chars`` (a longer turn is a part by itself)."""
        parts: list[list[tuple[str, str, str]]] = [[]]
        size = 0
        for turn in sorted(session.turns, key=lambda t: t.at):
            row = (turn.at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M"), turn.role, turn.text)
            length = len(turn.text) + 40
            if parts[-1] and size + length > self.policy.max_session_chars:
                parts.append([])
                size = 0
            parts[-1].append(row)
            size += length
        return [p for p in parts if p]

    # -- reconciliation ---------------------------------------------------------------

    async def reconcile(
        self, *, scope: MemoryScope, dry_run: bool = False, ctx: EventSink | None = None
    ) -> ReconciliationResult:
        """Find pairs of near-identical memories of ``scope``'s user and let the model reconcile each.

        Pairs over ``reconcile_cosine`` (0.85; word overlap over
        ``reconcile_overlap`` without an embedder), most similar first, each
        memory in at most one pair, at most ``max_pairs`` per call. For each
        pair (A older, B newer): REINFORCE adds ``reinforce_step`` (0.05) to A,
        CONTRADICT makes B supersede A (A stays in B's history, hidden from
        recall), WEAKEN takes ``weaken_step`` (0.1) from A, UNRELATED changes
        nothing. Pinned memories are never weakened or superseded. Nothing is
        deleted; with ``dry_run=True`` nothing changes at all.

        Example:
            >>> result = await extractor.reconcile(scope=MemoryScope(user_id="ann"))  # doctest: +SKIP
            >>> [(p.relation, p.applied) for p in result.pairs]                         # doctest: +SKIP
            [('CONTRADICT', True)]
        """
        if not isinstance(scope, MemoryScope):
            raise UsageError("scope is required: pass scope=MemoryScope(user_id=...)")
        if not isinstance(dry_run, bool):
            raise UsageError("dry_run must be True or False")
        guard = self.memory.memory
        if Capability.EXPORT not in guard.capabilities:
            from .._errors import UnsupportedCapability

            raise UnsupportedCapability(
                f"MemoryExtractor.reconcile() needs the 'export' capability, which the {guard.backend!r} backend "
                "does not have", capability=Capability.EXPORT.value, backend=guard.backend)
        home = owner(scope)
        # Memories only: not superseded versions, nor the loop's records (conversation turns, tool calls, scratch).
        records = [r for r in await guard.export(home, ctx=ctx)
                   if _SUPERSEDED_BY not in r.metadata and _LOG not in r.metadata]
        records.sort(key=lambda r: (r.created_at, str(r.id)))
        records = records[-self.policy.max_scan :]
        pairs, measure = await self._similar_pairs(records)
        outcomes: list[PairOutcome] = []
        failed: Counter[str] = Counter()
        step = self.policy.pairs_per_call
        for start in range(0, len(pairs), step):
            batch = pairs[start : start + step]
            shown = {f"p{n + 1}": pair for n, pair in enumerate(batch)}
            answer = await self._ask("reconciliation", self.policy.reconcile_prompt,
                                     P.reconcile_user([(h, a.text, b.text) for h, (a, b, _) in shown.items()]),
                                     ReconciliationAnswer, ctx)
            if isinstance(answer, str):
                failed[answer] += 1
                continue
            seen: set[str] = set()
            for verdict in answer.pairs:
                handle = verdict.pair.strip().lower()
                if handle not in shown or handle in seen:
                    self._stats["rejected"] += 1
                    continue
                seen.add(handle)
                older, newer, similarity = shown[handle]
                self._stats[f"pairs_{verdict.relation}"] += 1
                outcome = await self._settle(older, newer, similarity, verdict.relation, home, dry_run, ctx)
                if outcome.applied:
                    self._stats["pairs_applied"] += 1
                outcomes.append(outcome)
        return ReconciliationResult(pairs=tuple(outcomes), measure=measure, scanned=len(records),
                                    failed=dict(failed), dry_run=dry_run)

    async def _similar_pairs(
        self, records: Sequence[MemoryRecord]
    ) -> tuple[list[tuple[MemoryRecord, MemoryRecord, float]], str]:
        """Disjoint pairs over the threshold, most similar first; the first of each pair is the older."""
        import numpy as np

        n = len(records)
        embedder = self.embedder or self.memory.embedder
        if n < 2:
            return [], "cosine" if embedder is not None else "overlap"
        if embedder is not None:
            rows = check_matrix(await embedder.embed([r.text for r in records]), n, int(embedder.dim),
                                str(embedder.name)).astype(np.float64)
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            rows = rows / np.where(norms == 0, 1.0, norms)
            sims = rows @ rows.T
            line, measure = self.policy.reconcile_cosine, "cosine"
            found = [(float(sims[i, j]), i, j) for i, j in zip(*np.nonzero(np.triu(sims > line, k=1)), strict=True)]
        else:
            line, measure = self.policy.reconcile_overlap, "overlap"
            found = []
            for i in range(n):
                for j in range(i + 1, n):
                    s = word_overlap(records[i].text, records[j].text)
                    if s > line:
                        found.append((s, i, j))
        found.sort(key=lambda t: (-t[0], t[1], t[2]))
        used: set[int] = set()
        pairs: list[tuple[MemoryRecord, MemoryRecord, float]] = []
        for s, i, j in found:
            if i in used or j in used:
                continue
            used.update((i, j))
            pairs.append((records[int(i)], records[int(j)], round(s, 6)))
            if len(pairs) >= self.policy.max_pairs:
                break
        return pairs, measure

    async def _settle(
        self,
        older: MemoryRecord,
        newer: MemoryRecord,
        similarity: float,
        relation: str,
        home: MemoryScope,
        dry_run: bool,
        ctx: EventSink | None,
    ) -> PairOutcome:
        def out(applied: bool, reason: str | None = None) -> PairOutcome:
            return PairOutcome(str(older.id), str(newer.id), similarity, relation, applied, reason)

        if relation == "UNRELATED":
            return out(False, "unrelated")
        if relation != "REINFORCE" and older.metadata.get(_PINNED) is True:
            return out(False, "pinned")
        if dry_run:
            return out(False, "dry run")
        if relation == "CONTRADICT":
            done = await self.memory.supersede(str(older.id), by=str(newer.id), scope=home, ctx=ctx)
            return out(done, None if done else "changed")
        delta = self.policy.reinforce_step if relation == "REINFORCE" else -self.policy.weaken_step
        changed = await self.memory.reinforce([str(older.id)], delta, scope=home, ctx=ctx)
        return out(bool(changed), None if changed else "changed")

    # -- blocking twins -------------------------------------------------------------------

    def extract_sync(self, messages: Sequence[Mapping[str, Any]], *, scope: MemoryScope) -> ExtractionResult:
        """Blocking twin of :meth:`extract`."""
        return run_sync(self.extract(messages, scope=scope), method="extract")

    def consolidate_log_sync(self, log: ConversationLog, *, scope: MemoryScope) -> ConsolidationResult:
        """Blocking twin of :meth:`consolidate_log`."""
        return run_sync(self.consolidate_log(log, scope=scope), method="consolidate_log")

    def consolidate_sync(self, sessions: Iterable[Session], *, scope: MemoryScope) -> ConsolidationResult:
        """Blocking twin of :meth:`consolidate`."""
        return run_sync(self.consolidate(sessions, scope=scope), method="consolidate")

    def reconcile_sync(self, *, scope: MemoryScope, dry_run: bool = False) -> ReconciliationResult:
        """Blocking twin of :meth:`reconcile`."""
        return run_sync(self.reconcile(scope=scope, dry_run=dry_run), method="reconcile")
