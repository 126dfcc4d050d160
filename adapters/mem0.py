"""Mem0Memory: memoryport over the open-source Mem0 ``Memory`` / ``AsyncMemory``.

(Over 500 lines: erasing from Mem0 means reaching three stores of its own, the
vector store, the history database and the message/entity logs.)

The host builds the Mem0 client (its vector store, embedder, history database,
keys) and hands it over; this module never reads an API key. Mem0 is imported
only when a :class:`Mem0Store` is constructed, so ``import memoryport`` stays
free of it.

How memoryport maps onto Mem0 (mem0ai 2.x):

* scopes: ``user_id`` -> ``user_id``, ``session_id`` -> ``run_id``,
  ``agent_id`` -> ``agent_id``. Mem0 filters AND the ids they are given, which
  is memoryport's covers rule except for a query without a user id: Mem0 would
  also return other users' records, so every record read is checked against
  the scope here (and the search over-fetches to still return ``k``).
* Ids holding whitespace (Mem0 refuses them) or ``%`` are percent-escaped.
* one ``Memory.add(..., infer=False)`` per record (``infer=extract``), because Mem0 shares the
  metadata of a call across its messages; ``created_at`` rides in the metadata
  (Mem0 honours it), ``expires_at`` too (plus Mem0's own ``expiration_date``,
  rounded up to the day, so Mem0's own readers hide it as well).
* export lists through ``get_all`` with a large ``top_k`` and raises rather
  than returning a truncated list; erasure deletes the records and then their
  rows in Mem0's history database, and checks that nothing is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from memoryport._checks import check_int
from memoryport._errors import BackendError, InvalidInput, UsageError
from memoryport._extras import require
from memoryport._guard import GuardedMemory, GuardOptions
from memoryport._port import Capability, SearchResults
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope, MetadataValue
from memoryport.storekit import Undo, chunks, id_of, parse_time, recent

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["RESERVED_METADATA_KEYS", "Mem0Memory", "Mem0Store"]

logger = logging.getLogger("memoryport")

# Where memoryport keeps a record's exact expiry inside Mem0's payload.
EXPIRES_KEY = "memoryport_expires_at"

RESERVED_METADATA_KEYS = frozenset(
    {
        # Mem0's own payload fields: a metadata key of the same name would be
        # overwritten, dropped, or (``created_at``) change the record's time.
        "data",
        "hash",
        "created_at",
        "updated_at",
        "id",
        "text_lemmatized",
        "attributed_to",
        "user_id",
        "agent_id",
        "run_id",
        "actor_id",
        "role",
        "expiration_date",
        EXPIRES_KEY,
    }
)
"""Metadata keys a record stored in Mem0 may not use (Mem0 owns them)."""

_CAPABILITIES = frozenset(
    {
        Capability.SESSION_SCOPE,
        Capability.AGENT_SCOPE,
        Capability.METADATA,
        Capability.FILTERS,
        Capability.EXPIRY,
        Capability.VECTOR_SEARCH,
        Capability.GET,
        Capability.DELETE,
        Capability.EXPORT,
        Capability.PURGE,
    }
)

_MISSING = object()
_PUSHABLE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _encode_id(value: str) -> str:
    # Mem0 refuses ids with whitespace; escaping "%" too keeps the mapping one-to-one.
    if not any(ch == "%" or ch.isspace() for ch in value):
        return value
    return "".join(quote(ch, safe="") if ch == "%" or ch.isspace() else ch for ch in value)


def _decode_id(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = str(value)
    return unquote(text) if "%" in text else text


def _scope_filters(scope: MemoryScope) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    if scope.user_id is not None:
        filters["user_id"] = _encode_id(scope.user_id)
    if scope.session_id is not None:
        filters["run_id"] = _encode_id(scope.session_id)
    if scope.agent_id is not None:
        filters["agent_id"] = _encode_id(scope.agent_id)
    return filters


def _same_value(stored: Any, wanted: MetadataValue) -> bool:
    """Exact metadata match: equal values of the same JSON type (1 and 1.0 are one number; True is not 1)."""
    if wanted is None or isinstance(wanted, (bool, str)):
        return type(stored) is type(wanted) and stored == wanted
    if isinstance(stored, bool) or not isinstance(stored, (int, float)):
        return False
    return bool(stored == wanted)


def _pushed_filters(filters: Mapping[str, MetadataValue] | None) -> dict[str, Any]:
    """The part of ``filters`` Mem0 can narrow by itself; every filter is checked here after reading.

    Only plain equality is pushed down: Mem0's operator filters fail silently
    on some vector stores (faiss returns nothing), a bare ``"*"`` means "any
    value" to Mem0, and its equality is type-strict (``1`` would miss
    ``1.0``), so numbers, ``None`` and ``"*"`` are matched here only, and so
    are keys that Mem0 or its store would read as syntax (``a.b`` is a nested
    path to qdrant, ``OR`` a logical operator to Mem0).
    """
    return {
        key: value
        for key, value in (filters or {}).items()
        if _PUSHABLE_KEY.fullmatch(key)
        and key.upper() not in ("AND", "OR", "NOT")
        and (isinstance(value, bool) or (isinstance(value, str) and value != "*"))
    }


def _expiry_of(item: Mapping[str, Any], metadata: dict[str, Any]) -> datetime | None:
    exact = parse_time(metadata.pop(EXPIRES_KEY, None))
    if exact is not None:
        return exact
    day = item.get("expiration_date")
    if not day:
        return None
    # Mem0 hides a memory once its expiration_date (a day) is over.
    try:
        start = datetime.fromisoformat(str(day)[:10]).replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return start.replace(hour=23, minute=59, second=59, microsecond=999_999)


def _scalar(value: Any) -> MetadataValue:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    # Metadata written to Mem0 by other code may nest; memoryport's is flat.
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _rows(listed: Any) -> list[Any]:
    # Mem0's vector stores return either the rows or (rows, next_page).
    if isinstance(listed, (list, tuple)) and listed and isinstance(listed[0], (list, tuple)):
        return list(listed[0])
    return list(listed or [])


class Mem0Store:
    """The :class:`~memoryport.MemoryPort` over a Mem0 ``Memory`` or ``AsyncMemory`` (no checks: the guard does them).

    Hosts usually build it through :func:`Mem0Memory`, which returns it guarded;
    its arguments are ``Mem0Memory``'s. Beyond the port it offers
    ``check_records`` (:class:`~memoryport.SupportsCheckRecords`: Mem0's own
    metadata limits) and ``client``, the Mem0 client as given.

    Example:
        >>> from memoryport import GuardedMemory
        >>> memory = GuardedMemory(Mem0Store(Memory.from_config(config)))  # doctest: +SKIP
    """

    capabilities = _CAPABILITIES

    def __init__(self, client: Any, *, extract: bool = False, export_limit: int = 100_000, name: str = "mem0") -> None:
        mem0 = require("mem0", extra="mem0", feature="Mem0Memory", package="mem0ai")
        if isinstance(client, mem0.AsyncMemory):
            self._async = True
        elif isinstance(client, mem0.Memory):
            self._async = False
        elif isinstance(client, (mem0.MemoryClient, mem0.AsyncMemoryClient)):
            raise UsageError(
                "Mem0Memory takes the open-source mem0.Memory or mem0.AsyncMemory; the hosted "
                "platform's MemoryClient is not supported yet"
            )
        else:
            raise UsageError(f"Mem0Memory(client) takes a mem0.Memory or mem0.AsyncMemory, not {type(client).__name__}")
        self.client = client
        self._client = client
        self.extract = bool(extract)
        self._export_limit = check_int(export_limit, "export_limit")
        self.name = name
        # Mem0's sync Memory is not documented as thread-safe; calls run in
        # worker threads, so they take turns.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Mem0Store({type(self.client).__name__}, extract={self.extract})"

    # -- calling the SDK -------------------------------------------------

    def _fail(self, op: str, exc: BaseException | None, what: str | None = None) -> BackendError:
        error = type(exc).__name__ if exc is not None else "inconsistent state"
        logger.warning("backend %r failed in %s: %s", self.name, op, error)
        return BackendError(
            f"backend {self.name!r} failed in {op}: {what or error}",
            backend=self.name,
            operation=op,
        )

    async def _sdk(self, op: str, method: str, *args: Any, _missing_ok: bool = False, **kwargs: Any) -> Any:
        fn = getattr(self._client, method)
        try:
            if self._async:
                return await fn(*args, **kwargs)
            return await asyncio.to_thread(self._locked, fn, args, kwargs)
        except ValueError as exc:
            if _missing_ok and "not found" in str(exc):
                return _MISSING  # deleted meanwhile by someone else
            raise  # the guard maps it, as every SDK failure

    def _locked(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with self._lock:
            return fn(*args, **kwargs)

    async def _db(self, op: str, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(connection)`` on Mem0's history database in a worker thread."""
        db = getattr(self._client, "db", None)
        connection = getattr(db, "connection", None)
        if connection is None:
            raise self._fail(op, None, "mem0's history database is closed or unreachable")
        db_lock = getattr(db, "_lock", None) or contextlib.nullcontext()

        def run() -> Any:
            with db_lock:
                return fn(connection)

        return await asyncio.to_thread(run)

    # -- records <-> Mem0 --------------------------------------------------

    def _record(self, item: Mapping[str, Any], op: str) -> MemoryRecord:
        metadata = dict(item.get("metadata") or {})
        expires_at = _expiry_of(item, metadata)
        created = parse_time(item.get("created_at")) or parse_time(item.get("updated_at"))
        try:
            if created is None:
                raise ValueError("no creation time")
            scope = MemoryScope(
                user_id=_decode_id(item.get("user_id")),
                session_id=_decode_id(item.get("run_id")),
                agent_id=_decode_id(item.get("agent_id")),
            )
            return MemoryRecord(
                id=str(item["id"]),
                scope=scope,
                text=str(item.get("memory") or ""),
                metadata={str(k): _scalar(v) for k, v in metadata.items()},
                created_at=created,
                # Mem0 lets an expiry precede the creation (already expired): the
                # closest valid record expires right after its creation.
                expires_at=None if expires_at is None else max(expires_at, created + timedelta(microseconds=1)),
            )
        except (ValueError, KeyError) as exc:
            # Written by other code: a memory memoryport cannot represent.
            raise self._fail(op, exc, f"mem0 returned a memory memoryport cannot read ({type(exc).__name__})") from exc

    def _matches(self, record: MemoryRecord, scope: MemoryScope, filters: Mapping[str, MetadataValue] | None) -> bool:
        if not scope.covers(record.scope):
            return False
        return all(
            key in record.metadata and _same_value(record.metadata[key], v) for key, v in (filters or {}).items()
        )

    def _payload(self, record: MemoryRecord) -> tuple[dict[str, Any], dict[str, Any]]:
        ids = _scope_filters(record.scope)
        metadata: dict[str, Any] = dict(record.metadata)
        metadata["created_at"] = record.created_at.isoformat()
        kwargs: dict[str, Any] = {}
        if record.expires_at is not None:
            metadata[EXPIRES_KEY] = record.expires_at.isoformat()
            kwargs["expiration_date"] = record.expires_at.date().isoformat()
        return ids, {"metadata": metadata, **kwargs}

    # -- the port ----------------------------------------------------------

    def check_records(self, records: Sequence[MemoryRecord]) -> None:
        """Refuse records Mem0 would silently alter (used by add and by ``copy_memories``)."""
        for i, record in enumerate(records):
            clash = sorted(RESERVED_METADATA_KEYS & record.metadata.keys())
            if clash:
                raise InvalidInput(
                    f"records[{i}].metadata uses {', '.join(map(repr, clash))}, which mem0 reserves "
                    "for its own fields; rename the key",
                    field=f"records[{i}].metadata",
                )

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        self.check_records(records)
        # Mem0 writes the vector first and the history row second: with the
        # history closed, a record would be stored and could not be rolled back.
        self._history_open("add")
        ids: list[str] = []
        # A failed batch removes the memories it already wrote (and their history rows).
        async with Undo("mem0") as undo:
            for record in records:
                scope_ids, extra = self._payload(record)
                result = await self._sdk(
                    "add",
                    "add",
                    [{"role": "user", "content": record.text}],
                    infer=self.extract,
                    **scope_ids,
                    **extra,
                )
                items = [r for r in (result or {}).get("results", []) if isinstance(r, Mapping) and r.get("id")]
                added = [str(r["id"]) for r in items if r.get("event") == "ADD"]
                if added:
                    undo.push(functools.partial(self._remove, added, "add"))
                if self.extract:
                    # Mem0 decides what to store; report the first memory it touched.
                    touched = [str(r["id"]) for r in items if r.get("event") in ("ADD", "UPDATE")]
                    ids.append(touched[0] if touched else id_of(record))
                elif len(items) != 1:
                    raise self._fail("add", None, f"mem0 stored {len(items)} memories for one text")
                else:
                    ids.append(str(items[0]["id"]))
        return ids

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        if not query.strip():
            # Mem0 refuses an empty query: list the scope, newest first.
            return recent(await self._list(scope, filters, "search"), k)
        mem0_filters = {**_pushed_filters(filters), **_scope_filters(scope)}
        # A margin beyond k, so that records tied at the k-th score are all
        # seen and the order of ties (by id) is the same on every call.
        top_k = k + max(k, 10)
        while True:
            result = await self._sdk(
                "search",
                "search",
                query,
                top_k=top_k,
                filters=mem0_filters,
                threshold=0.0,
                show_expired=True,
            )
            items = list((result or {}).get("results", []))
            hits: list[MemoryHit] = []
            for item in items:
                record = self._record(item, "search")
                if self._matches(record, scope, filters):
                    # Rounded: the store's float noise must not reorder equal scores between calls.
                    score = round(float(item.get("score") or 0.0), 6)
                    hits.append(MemoryHit(record=record, score=score if math.isfinite(score) else 0.0, signal="vector"))
            if len(hits) > k or len(items) < top_k:
                hits.sort(key=lambda h: (-h.score, h.record.id or ""))
                return SearchResults(hits[:k], mode="vector")
            # A query without a user id also matched other users' records: look further.
            top_k *= 4

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        try:
            uuid.UUID(id)
        except ValueError:
            return None  # Mem0 ids are UUIDs; anything else cannot exist
        item = await self._sdk("get", "get", id)
        if not item:
            return None
        record = self._record(item, "get")
        return record if scope.covers(record.scope) else None

    def _history_open(self, op: str) -> None:
        # Checked before changing anything: Mem0's own add and delete write to
        # the history database and fail half-way when it is closed.
        if getattr(getattr(self._client, "db", None), "connection", None) is None:
            raise self._fail(op, None, "mem0's history database is closed or unreachable; nothing was changed")

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        self._history_open("delete")
        if ids is not None:
            found: list[str] = []
            for wanted in ids:
                record = await self.get(wanted, scope=scope)
                if record is not None and record.id is not None:
                    found.append(record.id)
            return len(await self._remove(found, "delete"))
        return await self._erase(scope)

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return await self._list(scope, None, "export")

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        # Mem0's API lists only within an id; purge spans every scope, so it
        # reads the vector store underneath (part of every Mem0 store's API).
        self._history_open("purge")
        store = getattr(self._client, "vector_store", None)
        if store is None:
            raise self._fail("purge", None, "mem0 client has no vector_store to purge")
        limit = self._export_limit
        listed = await self._store_call("purge", store.list, filters=None, top_k=limit)
        rows = _rows(listed)
        if len(rows) >= limit:
            raise self._fail(
                "purge",
                None,
                f"mem0's store listed {len(rows):,} memories, the most this adapter asks for "
                f"(export_limit={limit:,}); raise Mem0Memory(export_limit=...) to purge it",
            )
        doomed: list[str] = []
        for row in rows:
            payload = dict(getattr(row, "payload", None) or {})
            created = parse_time(payload.get("created_at"))
            expires = _expiry_of(payload, payload)
            if (expires is not None and expires <= now) or (
                created_before is not None and created is not None and created < created_before
            ):
                doomed.append(str(row.id))
        return len(await self._remove(doomed, "purge"))

    # -- helpers -----------------------------------------------------------

    async def _list(
        self, scope: MemoryScope, filters: Mapping[str, MetadataValue] | None, op: str
    ) -> list[MemoryRecord]:
        limit = self._export_limit
        result = await self._sdk(
            op,
            "get_all",
            filters={**_pushed_filters(filters), **_scope_filters(scope)},
            top_k=limit,
            show_expired=True,
        )
        items = list((result or {}).get("results", []))
        if len(items) >= limit:
            # get_all truncates silently at top_k: refuse to answer with part of the scope.
            raise self._fail(
                op,
                None,
                f"mem0 returned {len(items):,} memories, the most this adapter asks for "
                f"(export_limit={limit:,}); the scope may hold more. Raise Mem0Memory(export_limit=...)",
            )
        records = (self._record(item, op) for item in items)
        return [r for r in records if self._matches(r, scope, filters)]

    async def _remove(self, ids: Iterable[str], op: str) -> list[str]:
        """Delete these Mem0 ids and their history rows; return the ids that were there."""
        gone: list[str] = []
        for memory_id in ids:
            if await self._sdk(op, "delete", memory_id, _missing_ok=True) is not _MISSING:
                gone.append(memory_id)
        if gone:
            await self._forget_history(gone, op)
        return gone

    async def _forget_history(self, ids: Sequence[str], op: str) -> None:
        # Mem0 keeps every text it ever held in its history table (ADD rows, and
        # DELETE rows holding the deleted text); erasure must remove them too.
        def run(connection: Any) -> int:
            connection.execute("PRAGMA secure_delete=ON")
            try:
                for chunk in chunks(ids):
                    marks = ",".join("?" * len(chunk))
                    connection.execute(f"DELETE FROM history WHERE memory_id IN ({marks})", chunk)
                connection.commit()
            except BaseException:
                connection.rollback()
                raise
            left = 0
            for chunk in chunks(ids):
                marks = ",".join("?" * len(chunk))
                left += connection.execute(
                    f"SELECT count(*) FROM history WHERE memory_id IN ({marks})", chunk
                ).fetchone()[0]
            return int(left)

        left = await self._db(op, run)
        if left:
            raise self._fail(op, None, f"{left} history rows of deleted memories are still in mem0's history database")

    async def _forget_messages(self, scope: MemoryScope, op: str) -> None:
        # With extract=True Mem0 also keeps the last raw messages of each
        # user/agent/run combination; drop those the erased scope covers.
        def covered(session_scope: str) -> bool:
            parts = dict(p.split("=", 1) for p in (session_scope or "").split("&") if "=" in p)

            def value(key: str) -> str | None:
                raw = parts.get(key)
                if raw is None:
                    return None
                return _decode_id(unquote(raw))

            try:
                stored = MemoryScope(user_id=value("user_id"), session_id=value("run_id"), agent_id=value("agent_id"))
            except ValueError:
                return False
            return scope.covers(stored)

        def run(connection: Any) -> None:
            rows = connection.execute("SELECT id, session_scope FROM messages").fetchall()
            doomed = [row[0] for row in rows if covered(row[1])]
            if not doomed:
                return
            connection.execute("PRAGMA secure_delete=ON")
            try:
                for chunk in chunks(doomed):
                    connection.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk)
                connection.commit()
            except BaseException:
                connection.rollback()
                raise

        await self._db(op, run)

    async def _store_call(self, op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a method of Mem0's (synchronous) vector store in a worker thread."""
        return await asyncio.to_thread(self._locked, fn, args, kwargs)

    async def _forget_entities(self, scope: MemoryScope) -> None:
        # With extract=True and spaCy installed, Mem0 keeps entity names per
        # scope in "<collection>_entities"; its own per-memory clean-up runs
        # only when that store is open in this process. Clear the scope's.
        entities = getattr(self._client, "_entity_store", None)
        if entities is None:
            return
        listed = await self._store_call(
            "delete", entities.list, filters=_scope_filters(scope), top_k=self._export_limit
        )
        for row in _rows(listed):
            payload = getattr(row, "payload", None) or {}
            try:
                stored = MemoryScope(
                    user_id=_decode_id(payload.get("user_id")),
                    session_id=_decode_id(payload.get("run_id")),
                    agent_id=_decode_id(payload.get("agent_id")),
                )
            except ValueError:
                continue
            if scope.covers(stored):
                await self._store_call("delete", entities.delete, vector_id=row.id)

    async def _erase(self, scope: MemoryScope) -> int:
        erased: list[str] = []
        # Concurrent writers can add to the scope while it is being erased:
        # take a few passes, then say so rather than report a clean erase.
        for _ in range(3):
            records = await self._list(scope, None, "delete")
            if not records:
                break
            erased.extend(await self._remove([r.id for r in records if r.id is not None], "delete"))
        await self._forget_messages(scope, "delete")
        await self._forget_entities(scope)
        left = await self._list(scope, None, "delete")
        if left:
            raise self._fail("delete", None, f"{len(left)} memories of the scope are still in mem0 after erasing it")
        return len(erased)


def Mem0Memory(
    client: Any,
    *,
    extract: bool = False,
    export_limit: int = 100_000,
    name: str = "mem0",
    **guard: Unpack[GuardOptions],
) -> GuardedMemory[Mem0Store]:
    """Memory in Mem0 (the open-source ``mem0.Memory`` or ``mem0.AsyncMemory``), guarded.

    Returns a :class:`~memoryport.GuardedMemory` over a :class:`Mem0Store`.
    Pass a client the host built; its vector store, embedder and history
    database are the host's choice. Texts are stored as given (``extract=False``,
    no LLM call; Mem0's ``infer=False``); ``extract=True`` lets Mem0's LLM
    extract and merge facts instead, so what is stored is no longer the text
    given and the id returned is the first memory Mem0 added or updated for it
    (or the id memoryport assigned, when Mem0 stored nothing).

    Scopes: user, session (Mem0's ``run_id``) and agent. Metadata must be flat
    and may not use :data:`RESERVED_METADATA_KEYS`. Search is Mem0's vector
    search (``threshold=0.0``, so no weak hit is dropped — but Mem0 never
    returns a memory whose similarity is below zero); an empty query lists the
    newest records. ``export`` raises :class:`BackendError` when the scope holds
    ``export_limit`` memories or more, instead of answering with part of it.
    Erasing (``delete(scope=...)``) also removes the erased texts from Mem0's
    history database and checks that nothing is left. ``purge()`` removes
    expired and retained-out records (and their history) across the whole
    Mem0 store, including records other code wrote there.

    Sync ``Memory`` calls run in worker threads, so the event loop never blocks.
    SDK failures become :class:`BackendError` (chained, by the guard); logs
    carry only the error's type. ``aclose()`` leaves the client open: the host owns it.

    Args:
        client: a ``mem0.Memory`` or ``mem0.AsyncMemory`` instance.
        extract: let Mem0's LLM rewrite texts into facts (default ``False``).
        export_limit: the most memories one scope may hold for ``export``,
            erasure and empty-query search (Mem0 lists at most this many).
        name: the backend's name in events and errors.
        **guard: the guard's options (:class:`~memoryport.GuardOptions`).

    Raises:
        MissingExtra: ``mem0ai`` is not installed
            (``pip install "memoryport[mem0]"``).
        UsageError: ``client`` is not a Mem0 ``Memory``/``AsyncMemory``.

    Example:
        >>> from mem0 import Memory                                    # doctest: +SKIP
        >>> from memoryport import Mem0Memory, MemoryRecord, MemoryScope
        >>> memory = Mem0Memory(Memory.from_config(config))            # doctest: +SKIP
        >>> ann = MemoryScope(user_id="ann")
        >>> memory.add_sync([MemoryRecord(scope=ann, text="Ann likes green tea")])  # doctest: +SKIP
        ['5d0c...']
        >>> [h.record.text for h in memory.search_sync("tea", scope=ann)]  # doctest: +SKIP
        ['Ann likes green tea']
    """
    return GuardedMemory(Mem0Store(client, extract=extract, export_limit=export_limit, name=name), **guard)
