"""ZepMemory: memories as episodes in Zep's user graphs (extra ``zep``, zep-cloud 4.x, API v4).

(Over 500 lines: Zep's writes are asynchronous tasks, so users, task polling
and settling are this adapter's own.)

Each memoryport user is one Zep user whose external ``user_id`` is
``"mp-"`` followed by the hex SHA-256 of the memoryport user id (or its
HMAC-SHA-256 under ``hash_key``), so no user id reaches Zep. The Zep user is
created on the first write (lookup, then create; a concurrent create is
resolved through the 409 it gets). A record is one text episode in that user's
graph, with the record id and creation time kept in the episode's metadata
(``memoryport_id``, ``memoryport_created_at``) and the creation time also as
its ``reference_time``.

Zep processes writes asynchronously: ``episode.add``, ``episode.delete`` and
``user.delete`` answer 202 with a task. With ``wait=True`` (the default) every
write polls its tasks until they finish, so a search right after ``add`` sees
the new text and a read right after ``delete`` does not see the deleted one.
With ``wait=False`` writes return at once and :meth:`ZepStore.settle` waits
for everything still pending.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import logging
import time
import uuid as uuidlib
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from memoryport._errors import BackendError, MemoryportError, UnsupportedCapability, UsageError
from memoryport._extras import require
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

__all__ = ["ZepMemory", "ZepStore", "zep_user_id_for"]

logger = logging.getLogger("memoryport")
T = TypeVar("T")

_SOURCE = "memoryport"
_META_ID = "memoryport_id"
_META_CREATED = "memoryport_created_at"
_PAGE = 100
_SEARCH_PAGE = 50  # larger k reads further pages
_IN_CHUNK = 100  # ids per "in" metadata filter
_DONE = {"succeeded", "partial", "failed"}

_CAPABILITIES = frozenset({Capability.KEYWORD_SEARCH, Capability.GET, Capability.DELETE, Capability.EXPORT})


def zep_user_id_for(user_id: str, *, prefix: str = "mp-", hash_key: bytes | str | None = None) -> str:
    """The external Zep ``user_id`` that holds ``user_id``'s memories.

    ``prefix`` followed by the hex SHA-256 of the user id, or its HMAC-SHA-256
    under ``hash_key`` (then it cannot be guessed from a known user id).

    Example:
        >>> zep_user_id_for("ann")[:9]
        'mp-49915e'
    """
    return pseudonym(user_id, prefix=prefix, hash_key=hash_key)


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _is_zep_uuid(value: str) -> bool:
    """Zep's own ids are canonical dashed UUIDs (memoryport's default ids are undashed hex)."""
    try:
        return str(uuidlib.UUID(value)) == value.lower()
    except ValueError:
        return False


class ZepStore:
    """The :class:`~memoryport.MemoryPort` over a Zep client (no checks: the guard does them).

    Hosts usually build it through :func:`ZepMemory`, which returns it guarded;
    its arguments are ``ZepMemory``'s. Beyond the port it offers ``settle()``
    (:class:`~memoryport.SupportsSettle`), ``zep_user_id(scope)`` and ``client``.

    Example:
        >>> from memoryport import GuardedMemory
        >>> memory = GuardedMemory(ZepStore(AsyncZep(api_key=key), wait=False))  # doctest: +SKIP
        >>> await memory.store.settle()  # doctest: +SKIP
    """

    name = "zep"

    def __init__(
        self,
        client: Any,
        *,
        wait: bool = True,
        poll_interval: float = 0.5,
        wait_timeout: float = 120.0,
        id_prefix: str = "mp-",
        hash_key: bytes | str | None = None,
        search_reranker: str | None = None,
        concurrency: int = 4,
    ) -> None:
        zep = require("zep_cloud", extra="zep", feature="ZepMemory", package="zep-cloud")
        self._errors = require("zep_cloud.errors", extra="zep", feature="ZepMemory", package="zep-cloud")
        self._api_error = require(
            "zep_cloud.core.api_error", extra="zep", feature="ZepMemory", package="zep-cloud"
        ).ApiError
        self._types = require("zep_cloud.types", extra="zep", feature="ZepMemory", package="zep-cloud")
        if isinstance(client, zep.AsyncZep):
            self._async = True
        elif isinstance(client, zep.Zep):
            self._async = False
        else:
            raise UsageError(
                f"ZepMemory needs a zep_cloud.Zep or zep_cloud.AsyncZep client, not {type(client).__name__}"
            )
        if not id_prefix or len(id_prefix) > 400 or not id_prefix.isprintable():
            raise UsageError("ZepMemory(id_prefix=...) must be 1-400 printable characters (Zep ids hold 500)")
        if poll_interval < 0 or wait_timeout <= 0 or concurrency < 1:
            raise UsageError("ZepMemory needs poll_interval >= 0, wait_timeout > 0 and concurrency >= 1")
        self._client = client
        self._wait = wait
        self._poll = poll_interval
        self._timeout = wait_timeout
        self._prefix = id_prefix
        self._hash_key = hash_key
        self._reranker = search_reranker
        self._users: dict[str, str] = {}  # external user id -> Zep user uuid
        self._pending: set[str] = set()  # task uuids not yet waited for (wait=False)
        self._erasing: dict[str, str] = {}  # external user id -> its pending user.delete task
        self._user_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._concurrency = concurrency
        self.capabilities = _CAPABILITIES

    @property
    def client(self) -> Any:
        """The Zep client as given."""
        return self._client

    def __repr__(self) -> str:
        return f"ZepStore({type(self._client).__name__}, wait={self._wait})"

    # -- calling the SDK, sync or async -------------------------------------------

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._async:
            result = fn(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result
        # A blocking client must not stall the event loop.
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _collect(self, fn: Callable[..., Any], *args: Any, limit: int | None = None, **kwargs: Any) -> list[Any]:
        """Every item of a pager (following next_cursor), or the first ``limit`` items."""
        if self._async:
            pager = await fn(*args, **kwargs)
            items: list[Any] = []
            if limit == 0:
                return items
            async for item in pager:
                items.append(item)
                if limit is not None and len(items) >= limit:
                    break
            return items

        def run() -> list[Any]:
            return list(itertools.islice(iter(fn(*args, **kwargs)), limit))

        return await asyncio.to_thread(run)

    # -- users -------------------------------------------------------------------

    def zep_user_id(self, scope: MemoryScope) -> str:
        """The external Zep ``user_id`` that holds ``scope``'s memories.

        Example:
            >>> memory.store.zep_user_id(MemoryScope(user_id="ann"))  # doctest: +SKIP
            'mp-49915e0d...'
        """
        if scope.user_id is None:  # the guard refuses session/agent-only scopes first
            raise UsageError("ZepMemory needs MemoryScope(user_id=...)")
        return zep_user_id_for(scope.user_id, prefix=self._prefix, hash_key=self._hash_key)

    async def _known_user(self, scope: MemoryScope) -> str:
        """The Zep user uuid of ``scope``, created when absent."""
        user = await self._user(scope, create=True)
        if user is None:  # _user(create=True) returns a uuid or raises
            raise BackendError("zep returned no user", backend=self.name, operation="user")
        return user

    async def _user(self, scope: MemoryScope, *, create: bool) -> str | None:
        """The Zep user uuid for ``scope``; created when ``create`` and absent."""
        if not create:
            return await self._resolve(scope, create=False)
        # One lock per event loop: the *_sync twins run on a loop of their own.
        loop = asyncio.get_running_loop()
        lock = self._user_locks.get(loop)
        if lock is None:
            lock = self._user_locks[loop] = asyncio.Lock()
        async with lock:  # concurrent adds resolve (and create) each user once
            return await self._resolve(scope, create=True)

    async def _resolve(self, scope: MemoryScope, *, create: bool) -> str | None:
        ext = self.zep_user_id(scope)
        erasing = self._erasing.get(ext)
        if create and erasing is not None:
            # A write must not land in a user that a pending erase is about to remove.
            await self._wait_for([erasing], "delete")
            self._erasing.pop(ext, None)
        cached = self._users.get(ext)
        if cached is not None:
            return cached
        try:
            user = await self._call(self._client.user.lookup, user_id=ext)
        except self._errors.NotFoundError:
            if not create:
                return None
            try:
                user = await self._call(self._client.user.create, user_id=ext, metadata={"created_by": _SOURCE})
            except self._errors.ConflictError:
                # Another process created them between our lookup and create.
                user = await self._call(self._client.user.lookup, user_id=ext)
        if not user.uuid_:
            raise BackendError("zep returned a user without a uuid", backend=self.name, operation="user")
        self._users[ext] = str(user.uuid_)
        return self._users[ext]

    def _forget_user(self, scope: MemoryScope, stale: str | None = None) -> None:
        ext = self.zep_user_id(scope)
        if stale is None or self._users.get(ext) == stale:
            self._users.pop(ext, None)

    # -- tasks -------------------------------------------------------------------

    async def _settle(self, task_ids: Iterable[str | None], op: str) -> None:
        """Wait for tasks (wait=True) or remember them for settle() (wait=False)."""
        tasks = [t for t in task_ids if t]
        if not self._wait:
            self._pending.update(tasks)
            return
        await self._wait_for(tasks, op)

    async def _wait_for(self, tasks: Sequence[str], op: str) -> None:
        deadline = time.monotonic() + self._timeout
        remaining = list(dict.fromkeys(tasks))
        failed = 0
        while remaining:
            states = await self._map(lambda task_id: self._call(self._client.task.get, task_id), remaining)
            still: list[str] = []
            for task_id, task in zip(remaining, states, strict=True):
                if task.status not in _DONE:
                    still.append(task_id)
                    continue
                self._pending.discard(task_id)
                for ext in [e for e, t in self._erasing.items() if t == task_id]:
                    del self._erasing[ext]
                if task.status == "failed":
                    failed += 1
                elif task.status == "partial":
                    logger.warning("zep: a %s task finished only partly", op)
            remaining = still
            if not remaining:
                break
            if time.monotonic() > deadline:
                raise BackendError(
                    f"zep accepted the {op} but its processing did not finish within "
                    f"{self._timeout:g} s (wait_timeout); it may still complete later",
                    backend=self.name,
                    operation=op,
                )
            await asyncio.sleep(self._poll)
        if failed:
            raise BackendError(f"zep reported {failed} failed {op} task(s)", backend=self.name, operation=op)

    async def _map(self, fn: Callable[[Any], Awaitable[T]], items: Sequence[Any]) -> list[T]:
        """``fn`` over ``items``, at most ``concurrency`` at a time; every call finishes before
        the first failure is raised, so nothing is left in flight."""
        semaphore = asyncio.Semaphore(self._concurrency)

        async def one(item: Any) -> T:
            async with semaphore:
                return await fn(item)

        results = await asyncio.gather(*(one(item) for item in items), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results  # type: ignore[return-value]

    async def settle(self) -> None:
        """Wait until Zep has processed every write made with ``wait=False``.

        A no-op with ``wait=True`` (writes already waited). Raises
        :class:`~memoryport.BackendError` if a task failed or did not finish
        within ``wait_timeout``.

        Example:
            >>> await memory.store.settle()  # doctest: +SKIP
        """
        pending = sorted(self._pending)
        if pending:
            try:
                await self._wait_for(pending, "settle")
            except MemoryportError:
                raise
            except Exception as exc:  # called by hosts directly, not through the guard: map here
                error = type(exc).__name__
                raise BackendError(f"zep failed in settle: {error}", backend=self.name, operation="settle") from exc

    # -- episodes <-> records ----------------------------------------------------

    def _record(self, episode: Any, scope: MemoryScope) -> MemoryRecord:
        metadata = episode.metadata or {}
        record_id = metadata.get(_META_ID)
        created = parse_time(metadata.get(_META_CREATED)) or parse_time(episode.reference_time)
        created = created or parse_time(episode.created_at)
        if not isinstance(record_id, str) or not record_id:
            record_id = episode.uuid_  # an episode not written by memoryport: its own uuid is its id
        if not record_id or created is None or not episode.content:
            raise BackendError(
                "zep returned an episode without uuid, time or content", backend=self.name, operation="read"
            )
        return MemoryRecord(
            id=str(record_id), scope=MemoryScope(user_id=scope.user_id), text=episode.content, created_at=created
        )

    def _id_filter(self, ids: Sequence[str]) -> Any:
        t = self._types
        if len(ids) == 1:
            condition = t.MetadataFilter(property_name=_META_ID, operator="eq", value=ids[0])
        else:
            condition = t.MetadataFilter(property_name=_META_ID, operator="in", value=list(ids))
        return t.EpisodeListFilters(metadata_filters=t.MetadataFilterGroup(type="and", filters=[condition]))

    async def _all_episodes(self, user: str) -> list[Any]:
        return await self._collect(self._client.graph.episode.list, user, page_size=_PAGE)

    async def _find(self, user: str, ids: Sequence[str]) -> dict[str, Any]:
        """Our ids -> their episodes in this user's graph (absent ids are left out)."""
        found: dict[str, Any] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start : start + _IN_CHUNK]
            episodes = await self._collect(
                self._client.graph.episode.list, user, page_size=_PAGE, filters=self._id_filter(chunk)
            )
            for episode in episodes:
                record_id = (episode.metadata or {}).get(_META_ID)
                if record_id in chunk and record_id not in found:
                    found[record_id] = episode
        # Episodes written by other tools are addressed by their own uuid.
        for record_id in wanted:
            if record_id in found or not _is_zep_uuid(record_id):
                continue
            try:
                episode = await self._call(self._client.graph.episode.get, user, record_id)
            except self._errors.NotFoundError:
                continue
            owner = episode.user_uuid
            if not (episode.metadata or {}).get(_META_ID) and (owner is None or owner == user):
                found[record_id] = episode
        return found

    # -- the port ----------------------------------------------------------------

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        tasks: list[str | None] = []
        undo = Undo("zep")

        async def one(record: MemoryRecord) -> None:
            user = await self._known_user(record.scope)
            when = _iso(record.created_at)
            try:
                result = await self._add_episode(user, record, when)
            except self._errors.NotFoundError:
                # Our cached user was deleted elsewhere: resolve again, once.
                self._forget_user(record.scope, user)
                user = await self._known_user(record.scope)
                result = await self._add_episode(user, record, when)
            episode = result.episode
            if episode is None or not episode.uuid_:
                raise BackendError("zep accepted an episode but returned no uuid", backend=self.name, operation="add")
            undo.push(functools.partial(self._call, self._client.graph.episode.delete, user, str(episode.uuid_)))
            tasks.append(result.task.uuid_ if result.task is not None else None)

        async with undo:  # a failed batch deletes the episodes it wrote: nothing half-written stays
            # Users first, one at a time, so a batch never races itself into a 409.
            by_user: dict[str, tuple[MemoryScope, list[tuple[int, str]]]] = {}
            for i, record in enumerate(records):
                user = await self._known_user(record.scope)
                by_user.setdefault(user, (record.scope, []))[1].append((i, id_of(record)))
            for user, (scope, items) in by_user.items():
                try:
                    await self._refuse_existing(user, items)
                except self._errors.NotFoundError:
                    # Our cached user was deleted elsewhere: a fresh one holds no ids yet.
                    self._forget_user(scope, user)
                    await self._user(scope, create=True)
            await self._map(one, records)
            await self._settle(tasks, "add")
        return ids_of(records)

    async def _refuse_existing(self, user: str, items: Sequence[tuple[int, str]]) -> None:
        """Ids are unique within a user, as everywhere in memoryport: refuse a stored one."""
        found = await self._find(user, [record_id for _, record_id in items])
        if found:
            raise duplicate_id(min(i for i, record_id in items if record_id in found))

    async def _add_episode(self, user: str, record: MemoryRecord, when: str) -> Any:
        return await self._call(
            self._client.graph.episode.add,
            user,
            data=record.text,
            type="text",
            metadata={_META_ID: record.id, _META_CREATED: when},
            reference_time=when,
            source_description=_SOURCE,
        )

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, MetadataValue] | None
    ) -> list[MemoryHit]:
        if filters:  # the guard refuses filters first; a second line
            raise UnsupportedCapability("zep has no filters here", capability="filters", backend=self.name)
        user = await self._user(scope, create=False)
        if user is None:
            return SearchResults(mode="recent" if not query.strip() else "backend")
        if not query.strip():
            # Zep orders lists by its own ingestion time; ours is in metadata, so sort here.
            return recent((self._record(e, scope) for e in await self._all_episodes(user)), k)
        kwargs: dict[str, Any] = {"query": query, "page_size": min(k, _SEARCH_PAGE)}
        if self._reranker is not None:
            kwargs["reranker"] = self._reranker
        try:
            episodes = await self._collect(self._client.graph.search_episodes, user, limit=k, **kwargs)
        except self._errors.NotFoundError:
            self._forget_user(scope)
            return SearchResults(mode="backend")
        hits = []
        for rank, episode in enumerate(episodes):
            score = episode.score if episode.score is not None else 1.0 / (1 + rank)
            hits.append(MemoryHit(record=self._record(episode, scope), score=float(score), signal="backend"))
        return SearchResults(hits, mode="backend")

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        user = await self._user(scope, create=False)
        if user is None:
            return None
        try:
            episode = (await self._find(user, [id])).get(id)
        except self._errors.NotFoundError:
            self._forget_user(scope)
            return None
        return None if episode is None else self._record(episode, scope)

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        user = await self._user(scope, create=False)
        if user is None:
            return 0
        if ids is None:
            count = len(await self._all_episodes(user))
            try:
                result = await self._call(self._client.user.delete, user)
            except self._errors.NotFoundError:
                count = 0
                result = None
            self._forget_user(scope)
            task = result.task.uuid_ if result is not None and result.task else None
            if task and not self._wait:
                self._erasing[self.zep_user_id(scope)] = task
            await self._settle([task], "delete")
            return count
        found = await self._find(user, ids)

        async def one(episode: Any) -> str | None:
            try:
                result = await self._call(self._client.graph.episode.delete, user, episode.uuid_)
            except self._errors.NotFoundError:
                return None  # deleted meanwhile: not ours to count
            return str(result.task.uuid_) if result.task is not None and result.task.uuid_ else ""

        outcomes = await self._map(one, list(found.values()))
        await self._settle(outcomes, "delete")
        return sum(1 for o in outcomes if o is not None)

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        user = await self._user(scope, create=False)
        if user is None:
            return []
        return [self._record(e, scope) for e in await self._all_episodes(user)]

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        raise UnsupportedCapability("zep cannot purge", capability="purge", backend=self.name)


def ZepMemory(
    client: Any,
    *,
    wait: bool = True,
    poll_interval: float = 0.5,
    wait_timeout: float = 120.0,
    id_prefix: str = "mp-",
    hash_key: bytes | str | None = None,
    search_reranker: str | None = None,
    concurrency: int = 4,
    **guard: Unpack[GuardOptions],
) -> GuardedMemory[ZepStore]:
    """Memories as episodes in Zep user graphs, guarded (extra ``zep``).

    Returns a :class:`~memoryport.GuardedMemory` over a :class:`ZepStore`
    (``memory.store.zep_user_id(scope)``, ``memory.store.settle()``).

    User scope only (``MemoryScope(user_id=...)``), no metadata, filters or
    expiry: those raise :class:`~memoryport.UnsupportedCapability`. Search is
    Zep's episode search (its ``score``, higher is better); an empty query
    lists the newest texts. Erasing a user (``delete(scope=...)``) deletes the
    Zep user with their graph.

    Args:
        client: a ``zep_cloud.Zep`` or ``zep_cloud.AsyncZep`` the host built
            (API key, base URL, timeout and ``max_retries`` are the host's
            choice; the adapter reads no keys). A blocking ``Zep`` client runs
            in worker threads.
        wait: poll each write's task until Zep has processed it (default), so
            reads right after a write see it. ``False`` returns at once; call
            ``memory.store.settle()`` to wait for pending writes.
        poll_interval: seconds between task polls.
        wait_timeout: give up waiting (with :class:`~memoryport.BackendError`;
            the write may still complete) after this many seconds per call.
        id_prefix: put before the hashed user id to form Zep's ``user_id``.
        hash_key: when given, Zep user ids are HMAC-SHA-256 of the user id
            under this key instead of a plain SHA-256.
        search_reranker: passed to Zep's episode search (e.g.
            ``"cross_encoder"``); ``None`` uses Zep's default.
        concurrency: how many requests one call keeps in flight (episode
            adds and deletes, task polls).
        **guard: the guard's options (:class:`~memoryport.GuardOptions`).

    Example:
        >>> from zep_cloud import AsyncZep                              # doctest: +SKIP
        >>> memory = ZepMemory(AsyncZep(api_key=key))                     # doctest: +SKIP
        >>> ann = MemoryScope(user_id="ann")                              # doctest: +SKIP
        >>> await memory.add([MemoryRecord(scope=ann, text="Ann likes green tea")])  # doctest: +SKIP
        >>> [h.record.text for h in await memory.search("tea", scope=ann)]  # doctest: +SKIP
        ['Ann likes green tea']
    """

    store = ZepStore(
        client,
        wait=wait,
        poll_interval=poll_interval,
        wait_timeout=wait_timeout,
        id_prefix=id_prefix,
        hash_key=hash_key,
        search_reranker=search_reranker,
        concurrency=concurrency,
    )
    return GuardedMemory(store, **guard)
