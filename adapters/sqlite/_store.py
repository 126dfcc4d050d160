"""The SQLite port: the store's settings and its port methods; each job lives in its own module.

Plain storage behind :class:`memoryport.GuardedMemory`; see ``docs/sqlite.md``.

| module | its one job |
|---|---|
| ``_files.py`` | the file on disk: created owner-only, permissions, may we write it |
| ``_connection.py`` | connections (one per thread) and transactions; finishing a pending erasure after a write |
| ``_schema.py`` | tables and migrations; opening a file read-write or read-only; the bookkeeping rows |
| ``_rows.py`` | records as rows and back; the SQL of scopes |
| ``_where.py`` | the SQL of metadata filters (operators included) and time ranges |
| ``_fts.py`` | FTS5 and LIKE query strings from a user's words |
| ``_keyword.py`` | keyword ranking: FTS5 BM25, per-user BM25, LIKE |
| ``_vectors.py`` | embedding a batch; the vector cache (shared per file) and the cosine ranking |
| ``_timeline.py`` | each user's records in time order in RAM, for a search's neighbour lookups |
| ``_ann.py`` | the vector index of large scopes: IVF lists of sign-bit and int8 codes, exact re-rank |
| ``_search.py`` | a search once the query is embedded: recent, keyword, vector, hybrid, context |
| ``_update.py`` | ``update``: texts, metadata and expiry changed in place |
| ``_erasure.py`` | deleting rows from every table, then VACUUM and checkpoint, crash-safe |
| ``_reembed.py`` | re-embedding a file with another embedder |
| ``_driver.py`` | which SQLite library to use |
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextvars
import functools
import json
import logging
import operator
import os
import threading
import time
import types
import weakref
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

import numpy as np

from memoryport import ranking
from memoryport._checks import check_duration, check_int, check_number
from memoryport._embedding import EmbeddingPort
from memoryport._errors import EmbedderMismatch, InvalidInput, UsageError
from memoryport._port import Capability, SearchResults
from memoryport._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, SearchMode, utcnow
from memoryport._rerank import RerankerPort
from memoryport.storekit import blocking_embed, chunks, duplicate_id, embed_unit_blocking, ids_of

from . import _erasure
from ._ann import REBUILD_GROWTH, AnnParams, build_index, drop_index, index_add
from ._connection import DURABILITY, Database, NotHere, is_busy
from ._driver import load_driver, version_tuple
from ._erasure import erase_rows, expired_rows
from ._files import create_file
from ._graph import SQLiteGraphStore, erase_graph
from ._reembed import reembed_file
from ._rows import (
    COLUMNS,
    FILE_ROW,
    Cond,
    Conn,
    ScopeKey,
    filter_sql,
    fts_rowid,
    record_from_row,
    scope_sql,
    tenant_token,
    us,
    us_all,
)
from ._schema import PAGE_SIZES, SCHEMA_VERSION, SECURE_DELETE_FTS5, bump, open_file, tenant_slots
from ._search import recent, search_hits, vector_at_once
from ._shm import share_setting
from ._timeline import Timelines
from ._update import update_records
from ._vectors import F32, INLINE_VECTORS, NotCached, attach, detach, embed
from ._where import Where, meta_row

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "reembed_file"]

logger = logging.getLogger("memoryport")


def _settle(pending: Future[F32 | None], qvec: F32 | None) -> None:
    """Give ``pending`` its result unless it has one (the embedding thread and the search's end may race)."""
    try:
        pending.set_result(qvec)
    except InvalidStateError:
        pass


T = TypeVar("T")


@types.coroutine
def _resumed(coroutine: Coroutine[Any, Any, T], step: Any) -> Generator[Any, None, T]:
    """Await ``coroutine`` from where it stands: it was stepped once (``send(None)``) and yielded ``step``.

    The awaiting task waits on ``step`` as the coroutine asked; what the task throws in (a cancellation) goes
    into the coroutine; from its next step on, ``yield from`` delegates everything to it.
    """
    while True:
        try:
            yield step
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:
            try:
                step = coroutine.throw(exc)
            except StopIteration as done:
                result: T = done.value
                return result
            continue
        return cast("T", (yield from coroutine))


def _retrieved(worker: asyncio.Future[Any]) -> None:
    """Consume a finished worker's outcome, that nobody awaits (no 'exception was never retrieved')."""
    if not worker.cancelled():
        worker.exception()


#: Adds of at most this many records may commit on the caller's thread (``inline_writes``).
INLINE_MAX = 8

#: The writer thread drains the write-behind log this long after the first add it holds (seconds) ...
DRAIN_DELAY = 0.02

#: ... or as soon as this process has logged this many records since its last drain.
DRAIN_ROWS = 256

#: A drain moves the log's rows into the tables in batches of at most this many (one transaction for all).
DRAIN_BATCH = 1000

#: The columns of an ``inbox`` row (``_schema.INBOX_DDL``) after ``seq``: the record as ``records`` holds it
#: (as selected with ``_rows.COLUMNS``, ``seq`` in the place of ``rid``), then the vector's bytes.
_INBOX_COLUMNS = "seq, id, user_id, session_id, agent_id, text, metadata, created_at, expires_at, updated_at, vec"


@functools.lru_cache(maxsize=256)
def _log_sql(shape: tuple[bool, ...], check_embedder: bool) -> str:
    """The ``INSERT INTO inbox`` of one record whose columns 2-10 (after ``id``) are NULL where ``shape`` says.

    NULLs are written in the SQL (see :func:`_insert_sql`); the id (``?1``) is
    inserted only when ``records`` does not hold it yet (the log's own UNIQUE
    index refuses one pending there), and, with ``check_embedder``, only when
    the file keeps no vectors: no row means one of the two, see
    :meth:`SQLiteStore._log_refused`.
    """
    values = ["?1"]
    n = 1
    for null in shape:
        if null:
            values.append("NULL")
        else:
            n += 1
            values.append(f"?{n}")
    guard = " AND NOT EXISTS (SELECT 1 FROM meta WHERE key = 'embedder_name')" if check_embedder else ""
    return (
        f"INSERT INTO inbox({_INBOX_COLUMNS.removeprefix('seq, ')}) SELECT {', '.join(values)} "
        f"WHERE NOT EXISTS (SELECT 1 FROM records WHERE id = ?1){guard}"
    )


#: An add of records of at most this many users reads their ``generations`` rows in its first statement.
HEAD_TENANTS = 32

#: The threshold suggested for ``ann_threshold`` when a host opts in to the vector index (``_ann.py``).
#: Not the default (its results are approximate): at 1M vectors the index starts searching in about 0.5 s instead
#: of 12-37 s and a warm search took 18-27 ms vs 755 ms for the exact scan, recall@10 1.000 (docs/benchmarks-sqlite.md).
ANN_THRESHOLD = 50_000


def file_identity(path: str, db: Database) -> tuple[Any, ...] | None:
    """The file's device, inode and random id (``meta.file_id``): the key of caches shared in the process."""
    try:
        st = os.stat(path)
        row = db.conn().execute("SELECT value FROM meta WHERE key = 'file_id'").fetchone()
    except (OSError, db.driver.Error):
        return None
    return None if row is None else (st.st_dev, st.st_ino, str(row[0]))


_RECORD_COLUMNS = (
    "id",
    "user_id",
    "session_id",
    "agent_id",
    "text",
    "metadata",
    "created_at",
    "expires_at",
    "updated_at",
)
#: Where a row of :func:`_rows_of` may hold None (the others never do): the scope's three ids, metadata, expiry, update.
_NULLABLE = (1, 2, 3, 5, 7, 8)

Shape = tuple[bool, ...]  # per column of _NULLABLE: is it NULL


@functools.lru_cache(maxsize=128)
def _insert_sql(shape: Shape) -> str:
    """The ``INSERT INTO records`` of rows of ``shape``: NULL written in the SQL, not bound.

    The drivers bind ``None`` slowly: pysqlite3 and the standard library's
    ``sqlite3`` try the adaptation protocol on every ``None`` (an attribute
    lookup that fails, ~3 µs each); five of them per row cost more than the
    row's insert (17 vs 3 µs per row in a side-by-side run here).
    """
    nulls = {col for col, null in zip(_NULLABLE, shape, strict=True) if null}
    values = ["?"] + ["NULL" if i in nulls else "?" for i in range(len(_RECORD_COLUMNS))]
    return f"INSERT INTO records(rid, {', '.join(_RECORD_COLUMNS)}) VALUES ({', '.join(values)})"


@functools.lru_cache(maxsize=64)
def _head_sql(tenants: int) -> str:
    """The one read at the start of an add: the erasure mark, the file's embedder, whether any record is past
    due (bound ``now``), the next rid, whether the write-behind log holds rows, and the ``generations`` rows of
    the file (:data:`~._rows.FILE_ROW`) and of each of ``tenants`` tenants (one result row per row found; a single
    row of NULLs there when none is).

    Five statements before (a ``meta`` read, the expiry check, ``max(rid)``, a
    slot and a generation read per tenant), each a few µs of a small add's CPU.
    """
    head = (
        "SELECT (SELECT value FROM meta WHERE key = 'erase_pending'), "
        "(SELECT value FROM meta WHERE key = 'embedder_name'), "
        "EXISTS (SELECT 1 FROM records WHERE expires_at IS NOT NULL AND expires_at <= ?1), "
        "(SELECT coalesce(max(rid), 0) + 1 FROM records), "
        "EXISTS (SELECT 1 FROM inbox)"
    )
    marks = "".join(", ?" for _ in range(tenants))
    return f"{head}, g.tenant, g.gen, g.slot FROM (SELECT 1) LEFT JOIN generations g ON g.tenant IN (''{marks})"


class _Batch:
    """A batch as the rows of each table, built in one pass over the records (see :func:`_rows_of`)."""

    __slots__ = ("fts", "fts_select", "fts_whole", "groups", "metas", "tenants")

    def __init__(self) -> None:
        #: ``records`` rows by :data:`Shape`: rid and the non-NULL values.
        self.groups: dict[Shape, list[tuple[Any, ...]]] = {}
        #: ``records_fts`` rows (FTS5 rowid, text, tenant token) to bind, when not :attr:`fts_select`.
        self.fts: list[tuple[int, str, str]] = []
        #: Or the FTS5 rows as ``INSERT ... SELECT`` from the batch's ``records`` rows (the texts are not
        #: bound twice): per user, (its slot's high rowid bits, tenant token, user id). Empty without FTS5.
        self.fts_select: list[tuple[int, str, str | None]] = []
        #: :attr:`fts_select` holds the batch's only user: no need to pick its rows by ``user_id``.
        self.fts_whole = False
        #: ``record_meta`` rows.
        self.metas: list[tuple[Any, ...]] = []
        #: Each record's tenant token.
        self.tenants: list[str] = []


#: The FTS5 rows of a batch's records ``rid BETWEEN ?3 AND ?4`` (rowid: the user's high bits ``?1`` + rid).
_FTS_SELECT = (
    "INSERT INTO records_fts(rowid, body, tenant) SELECT ?1 + rid, text, ?2 FROM records WHERE rid BETWEEN ?3 AND ?4"
)

#: The ``vectors`` rows of a batch from one BLOB ``?2`` of ``?3`` vectors of ``?4`` bytes each, rids from ``?1``.
_VECTORS_SQL = (
    "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3) "
    "INSERT INTO vectors(rid, vec) SELECT ?1 + i, substr(?2, i * ?4 + 1, ?4) FROM k"
)

#: A batch of records of at most this many users writes its FTS5 rows by ``INSERT ... SELECT`` per user.
FTS_SELECT_USERS = 4

#: A batch of at least this many records writes its FTS5 and vector rows by one statement from SQL (above);
#: a smaller one binds them row by row: for one record the ``SELECT`` costs ~10 µs more and the recursive
#: ``WITH`` ~80 µs more than a bound row (docs/benchmarks-sqlite.md), each row bound ~1-4 µs more.
SQL_ROWS_MIN = 32

_IS_NONE = functools.partial(operator.is_, None)
_NOT_NONE = functools.partial(operator.is_not, None)
_SCOPE = operator.attrgetter("scope")
_TEXT = operator.attrgetter("text")
_METADATA = operator.attrgetter("metadata")
_CREATED = operator.attrgetter("created_at")
_EXPIRES = operator.attrgetter("expires_at")
_UPDATED = operator.attrgetter("updated_at")
_USER = operator.attrgetter("scope.user_id")


def _rows_of(records: Sequence[MemoryRecord], ids: Sequence[str], base: int, slots: Mapping[str, int] | None) -> _Batch:
    """The rows of a batch (record ``i`` stored as ``ids[i]``) whose first record gets rid ``base`` (the rest
    follow it); FTS5 rows when ``slots`` (each tenant's slot) is given.

    The usual batch (one scope, no metadata, expiry nor update time) is built
    column by column, in C (``map``, ``zip``): a few list passes instead of a
    Python loop per record. Any other batch goes through :func:`_rows_loop`.
    """
    n = len(records)
    if n == 1:
        return _row_of(records, ids, base, slots)
    if slots is not None:
        fts_rowid(0, base + n - 1)  # the last rid fits the FTS5 rowid's bits (else ValueError)
    first = records[0].scope
    if (
        list(map(_SCOPE, records)).count(first) != n
        or any(map(_METADATA, records))
        or list(map(_EXPIRES, records)).count(None) != n
        or list(map(_UPDATED, records)).count(None) != n
    ):
        return _rows_loop(records, ids, base, slots)
    batch = _Batch()
    triple = (first.user_id, first.session_id, first.agent_id)
    shape = (*(v is None for v in triple), True, True, True)
    texts = list(map(_TEXT, records))
    created = us_all(map(_CREATED, records))
    columns = [range(base, base + n), ids, *([v] * n for v in triple if v is not None), texts, created]
    batch.groups[shape] = list(zip(*columns, strict=True))
    tenant = tenant_token(first.user_id)
    if slots is not None:
        high = fts_rowid(slots[tenant], 0)
        if n >= SQL_ROWS_MIN:
            batch.fts_select.append((high, tenant, first.user_id))
            batch.fts_whole = True
        else:
            batch.fts = list(zip(range(high | base, (high | base) + n), texts, [tenant] * n, strict=True))
    batch.tenants = [tenant] * n
    return batch


def _row_of(records: Sequence[MemoryRecord], ids: Sequence[str], base: int, slots: Mapping[str, int] | None) -> _Batch:
    """:func:`_rows_of` of a batch of one usual record (no metadata, expiry nor update time; any other goes
    through :func:`_rows_loop`): the rows built directly, ~5 µs instead of the column passes' ~20."""
    r = records[0]
    if r.metadata or r.expires_at is not None or r.updated_at is not None:
        return _rows_loop(records, ids, base, slots)
    scope = r.scope
    user, session, agent = scope.user_id, scope.session_id, scope.agent_id
    tenant = tenant_token(user)
    batch = _Batch()
    row = (base, ids[0], *[v for v in (user, session, agent) if v is not None], r.text, us(r.created_at))
    batch.groups[(user is None, session is None, agent is None, True, True, True)] = [row]
    if slots is not None:
        batch.fts = [(fts_rowid(slots[tenant], base), r.text, tenant)]
    batch.tenants = [tenant]
    return batch


def _rows_loop(
    records: Sequence[MemoryRecord], ids: Sequence[str], base: int, slots: Mapping[str, int] | None
) -> _Batch:
    """:func:`_rows_of` for any batch: one pass; records sharing one scope object read its fields, tenant
    token and slot once."""
    batch = _Batch()
    groups, fts, metas, tenants = batch.groups, batch.fts, batch.metas, batch.tenants
    users: dict[str | None, tuple[int, str]] = {}
    last_scope: MemoryScope | None = None
    scope_ids: tuple[Any, ...] = ()
    scope_shape: Shape = ()
    tenant = ""
    high = 0
    for rid, r, record_id in zip(range(base, base + len(records)), records, ids, strict=True):
        scope = r.scope
        if scope is not last_scope:
            last_scope = scope
            triple = (scope.user_id, scope.session_id, scope.agent_id)
            scope_ids = tuple(v for v in triple if v is not None)
            scope_shape = tuple(v is None for v in triple)
            tenant = tenant_token(scope.user_id)
            high = 0 if slots is None else fts_rowid(slots[tenant], 0)
            users[scope.user_id] = (high, tenant)
        text, metadata, expires, updated = r.text, r.metadata, r.expires_at, r.updated_at
        if not metadata and expires is None and updated is None:  # the usual record
            shape = (*scope_shape, True, True, True)
            row: tuple[Any, ...] = (rid, record_id, *scope_ids, text, us(r.created_at))
        else:
            values: list[Any] = [rid, record_id, *scope_ids, text]
            if metadata:
                values.append(json.dumps(metadata, ensure_ascii=False))
                metas.extend((rid, *meta_row(k, v)) for k, v in metadata.items())
            values.append(us(r.created_at))
            if expires is not None:
                values.append(us(expires))
            if updated is not None:
                values.append(us(updated))
            shape = (*scope_shape, not metadata, expires is None, updated is None)
            row = tuple(values)
        group = groups.get(shape)
        if group is None:
            group = groups[shape] = []
        group.append(row)
        if slots is not None:
            fts.append((high | rid, text, tenant))
        tenants.append(tenant)
    if slots is not None and len(users) <= FTS_SELECT_USERS and len(records) >= SQL_ROWS_MIN:
        batch.fts_select = [(high, tenant, user) for user, (high, tenant) in users.items()]
        batch.fts_whole = len(users) == 1
        batch.fts = []
    return batch


def _nothing(conn: Conn) -> None:
    """A read that reads nothing: :meth:`~._connection.Database.read` drains the write-behind log before it."""


def _as_list(ids: Sequence[str]) -> list[str]:
    """``ids`` as a list: the guard's own list as it is (it knows then that it need not check them again)."""
    return ids if isinstance(ids, list) else list(ids)


def _drain_loop(ref: weakref.ReferenceType[SQLiteStore], wake: threading.Event, full: threading.Event) -> None:
    """The drain thread of a ``write_behind`` store: moves the log into the tables shortly after adds (see
    :meth:`SQLiteStore._logged_more`). It holds the store only while draining, and ends when the store is
    closed or collected."""
    while True:
        wake.wait()
        store = ref()
        if store is None or store._closed:
            return
        del store
        full.wait(DRAIN_DELAY)
        store = ref()
        if store is None or store._closed:
            return
        store._drain_once()
        del store


def _stop_drain(wake: threading.Event, full: threading.Event) -> None:
    """Wake a drain thread whose store was collected (``weakref.finalize``): it finds the store gone and ends."""
    wake.set()
    full.set()


#: The open ``write_behind`` stores of this process that logged adds (weakly: a dropped store is still collected).
_LOGGING: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()
if hasattr(os, "register_at_fork"):  # a forked child's exit must not use its parent's stores (connections)
    os.register_at_fork(after_in_child=_LOGGING.clear)


@atexit.register
def _drain_at_exit() -> None:
    """At a normal exit, drain what the stores still open logged, as closing them would: a script that adds
    and ends without closing (its drain thread, a daemon, would be stopped) leaves its records in the tables,
    where a read-only opener or another tool reading the file sees them. A failure is logged (the next open
    of a process that can write drains the log)."""
    for store in list(_LOGGING):
        if store._closed:
            continue
        store._drain_or_warn(store.db.drain_now, " at exit", "the next open drains it")


class SQLiteStore:
    """The :class:`~memoryport.MemoryPort` over one SQLite file (no checks of records: the guard does them).

    Hosts usually build it through :func:`~memoryport.adapters.sqlite.SQLiteMemory`,
    which returns it guarded; ``GuardedMemory(SQLiteStore(path))`` is the same
    thing spelled out. Its arguments are those of ``SQLiteMemory`` except
    ``retention``, a :class:`~datetime.timedelta` of records to delete on every
    write (``SQLiteMemory`` passes the guard's ``retention_days``).
    Beyond the port it offers ``stats()``, ``checkpoint()`` and ``aclose()``
    (the :class:`~memoryport.SupportsStats`, :class:`~memoryport.SupportsCheckpoint`
    and :class:`~memoryport.SupportsClose` protocols) and describes the file:
    ``path``, ``driver_name``, ``sqlite_version``, ``keyword_index``,
    ``fts_secure_delete``, ``embedder``, ``read_only``.

    Example:
        >>> import os, tempfile
        >>> from memoryport import GuardedMemory
        >>> memory = GuardedMemory(SQLiteStore(os.path.join(tempfile.mkdtemp(), "m.db")))
        >>> memory.store.stats()["records"]
        0
        >>> memory.close()
    """

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: EmbeddingPort | None = None,
        retention: timedelta | None = None,
        driver: str | None = None,
        use_fts5: bool = True,
        workers: int = 4,
        busy_timeout: float = 30.0,
        cache_bytes: int = 2 << 30,
        candidates: int = 50,
        search_mode: str = "hybrid",
        reranker: RerankerPort | None = None,
        rerank_candidates: int = 20,
        context_weight: float = ranking.NEIGHBOUR_WEIGHT,
        context_window: int = ranking.NEIGHBOUR_WINDOW,
        durability: str = "normal",
        min_similarity: float = 0.0,
        inline_writes: bool = True,
        ann_threshold: int | None = None,
        share_index: bool | None = None,
        page_size: int | None = None,
        date_weight: float = ranking.DATE_WEIGHT,
        previous_weight: float = ranking.PREVIOUS_WEIGHT,
        previous_mode: str = ranking.PREVIOUS_MODE,
        session_weight: float = ranking.SESSION_WEIGHT,
        session_gap: timedelta = ranking.SESSION_GAP,
        speaker_weight: float = ranking.SPEAKER_WEIGHT,
        time_weight: float = ranking.TIME_WEIGHT,
        context_key_weight: float = ranking.CONTEXT_KEY_WEIGHT,
        context_key_window: int = ranking.CONTEXT_KEY_WINDOW,
        length_weight: float = ranking.LENGTH_WEIGHT,
        length_pivot: int = ranking.LENGTH_PIVOT,
        write_behind: bool = True,
    ) -> None:
        if not isinstance(write_behind, bool):
            raise InvalidInput(f"write_behind must be True or False, not {write_behind!r}", field="write_behind")
        #: Small adds commit one row to the write-behind log (``inbox``), drained into the tables later.
        self.write_behind = write_behind
        if not isinstance(durability, str) or durability not in DURABILITY:
            raise InvalidInput(
                f"durability must be one of {', '.join(map(repr, DURABILITY))}, not {durability!r}", field="durability"
            )
        self.durability = durability
        if not isinstance(inline_writes, bool):
            raise InvalidInput("inline_writes must be True or False", field="inline_writes")
        # At durability="full" a commit waits for an fsync (milliseconds): never on the caller's thread.
        self.inline_writes = inline_writes and durability == "normal"
        if embedder is not None and not isinstance(embedder, EmbeddingPort):
            raise UsageError(f"embedder must be an EmbeddingPort, not {type(embedder).__name__}")
        if reranker is not None and not isinstance(reranker, RerankerPort):
            raise UsageError(f"reranker must be a RerankerPort, not {type(reranker).__name__}")
        workers = check_int(workers, "workers")
        candidates = check_int(candidates, "candidates")
        rerank_candidates = check_int(rerank_candidates, "rerank_candidates")
        context_weight = check_number(context_weight, "context_weight", minimum=0.0, maximum=1.0)
        context_window = check_int(context_window, "context_window", minimum=0)
        min_similarity = check_number(min_similarity, "min_similarity", minimum=-1.0, maximum=1.0)
        if ann_threshold is not None:
            ann_threshold = check_int(ann_threshold, "ann_threshold", minimum=1)
        share = share_setting(share_index)
        if page_size is not None and (check_int(page_size, "page_size") not in PAGE_SIZES):
            raise InvalidInput(
                f"page_size must be a power of two from {PAGE_SIZES[0]:,} to {PAGE_SIZES[-1]:,}, not {page_size!r}",
                field="page_size",
            )
        date_weight = check_number(date_weight, "date_weight", minimum=0.0, maximum=1.0)
        previous_weight = check_number(previous_weight, "previous_weight", minimum=0.0, maximum=1.0)
        if not isinstance(previous_mode, str) or previous_mode not in ranking.PREVIOUS_MODES:
            raise InvalidInput(
                f"previous_mode must be one of {', '.join(map(repr, ranking.PREVIOUS_MODES))}, not {previous_mode!r}",
                field="previous_mode",
            )
        session_weight = check_number(session_weight, "session_weight", minimum=0.0, maximum=1.0)
        speaker_weight = check_number(speaker_weight, "speaker_weight", minimum=0.0, maximum=1.0)
        time_weight = check_number(time_weight, "time_weight", minimum=0.0, maximum=1.0)
        context_key_weight = check_number(context_key_weight, "context_key_weight", minimum=0.0, maximum=1.0)
        context_key_window = check_int(context_key_window, "context_key_window", minimum=0)
        length_weight = check_number(length_weight, "length_weight", minimum=0.0, maximum=1.0)
        length_pivot = check_int(length_pivot, "length_pivot", minimum=1)
        session_gap = check_duration(session_gap, "session_gap")
        if search_mode not in ("hybrid", "vector", "keyword"):
            raise InvalidInput("search_mode must be 'hybrid', 'vector' or 'keyword'", field="search_mode")
        self.search_mode: SearchMode = search_mode  # type: ignore[assignment]  # one of three, checked above
        self.path = os.fspath(path)
        if self.path == ":memory:" or self.path.startswith("file:"):
            raise UsageError("SQLiteMemory needs a file path (it opens one connection per thread)")
        self.embedder = embedder
        self.retention = retention
        self.driver_name, self.driver = load_driver(driver)
        self.sqlite_version = version_tuple(self.driver)
        self.busy_timeout = busy_timeout
        self.candidates = candidates
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates
        self.context_weight = context_weight
        self.context_window = context_window
        self.min_similarity = min_similarity
        self.ann_params = None if ann_threshold is None else AnnParams(threshold=ann_threshold)
        self.date_weight = date_weight
        self.previous_weight = previous_weight
        self.previous_mode = previous_mode
        self.session_weight = session_weight
        self.speaker_weight = speaker_weight
        self.time_weight = time_weight
        self.context_key_weight = context_key_weight
        self.context_key_window = context_key_window
        self.length_weight = length_weight
        self.length_pivot = length_pivot
        # Measurement only (docs/retrieval.md): False keeps hybrid search from letting records into the
        # keyword list by their contextual credit alone.
        self.context_key_admit = True
        self.session_gap = session_gap
        self._closed = False
        self._builds: dict[str, threading.Thread] = {}
        create_file(self.path)
        self.db = Database(self.path, self.driver, busy_timeout=busy_timeout, backend=self.name, durability=durability)
        self.keyword_index = open_file(
            self.db,
            page_size=page_size,
            use_fts5=use_fts5,
            embedder=embedder,
            sqlite_version=self.sqlite_version,
            driver_name=self.driver_name,
        )
        self.fts_secure_delete = self.keyword_index == "fts5" and self.sqlite_version >= SECURE_DELETE_FTS5
        # Vectors in RAM are shared by every store of this process open on the same file.
        self._dim = int(embedder.dim) if embedder is not None else 0
        self._file_key = file_identity(self.path, self.db)
        # Only a store with an index has lists to share (True/False); the others have no say (None).
        self.vectors, self.ann = attach(
            self._file_key, self._dim, cache_bytes, share=share if self.ann_params and embedder else None
        )
        # Each user's records in time order for the neighbour lookups of searches (valid per generation).
        self.timelines = Timelines()
        caps = {
            Capability.SESSION_SCOPE,
            Capability.AGENT_SCOPE,
            Capability.METADATA,
            Capability.FILTERS,
            Capability.EXPIRY,
            Capability.KEYWORD_SEARCH,
            Capability.GET,
            Capability.DELETE,
            Capability.EXPORT,
            Capability.PURGE,
            Capability.UPDATE,
            Capability.COUNT,
            Capability.TIME_RANGE,
            Capability.FILTER_OPERATORS,
            Capability.GRAPH,
        }
        if embedder is not None:
            caps.add(Capability.VECTOR_SEARCH)
        self.capabilities = frozenset(caps)
        self._graph: SQLiteGraphStore | None = None
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="memoryport-sqlite")
        # Every write runs on this one thread: its connection's page cache stays
        # warm. A write on another connection of this process makes SQLite drop
        # the cache of the next connection to write (a single add cost ~70 µs
        # more when consecutive adds landed on different pool threads).
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryport-sqlite-write")
        # Pure numpy work only (never SQL, never a wait on the pool above): no deadlock.
        self.numpy = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memoryport-sqlite-numpy")
        # The write-behind log: every store that can write the file drains it before its reads and writes
        # (another process may log adds), and opening drains what a crashed process left there.
        self._logged = 0  # records this process logged since its last drain (an estimate: it only wakes the drain)
        self._wake = threading.Event()
        self._full = threading.Event()
        self._drainer: threading.Thread | None = None
        if self.db.read_only is None:
            self.db.drain = self._drain_log
            try:
                self.db.read(_nothing)  # drains what a process killed after its adds left in the log
            except BaseException:
                self._shutdown()
                raise
            if write_behind:
                # The thread holds the store weakly: a store dropped without closing is still collected (its
                # logged rows stay in the file, drained at the next open), and collecting it ends the thread.
                self._drainer = threading.Thread(
                    target=_drain_loop,
                    args=(weakref.ref(self), self._wake, self._full),
                    name="memoryport-sqlite-drain",
                    daemon=True,
                )
                weakref.finalize(self, _stop_drain, self._wake, self._full)
                self._drainer.start()

    @property
    def read_only(self) -> str | None:
        """Why the file is open read-only (the file or its folder cannot be written), or None."""
        return self.db.read_only

    async def _run(self, fn: Callable[[], T], *, write: bool = False) -> T:
        if self._closed:
            raise UsageError("this SQLiteMemory is closed")
        return await asyncio.get_running_loop().run_in_executor(self._writer if write else self._pool, fn)

    def _erase(self, conn: Conn, rows: Sequence[tuple[int, str, str | None]]) -> dict[str, int]:
        # Erased records leave this process's keyword word lists and users' word indexes now, and this store's
        # timelines (their texts) (other processes' at their next search: the generations change).
        self.ann.words.clear()
        self.timelines.clear()
        return erase_rows(conn, rows, keyword_index=self.keyword_index, fts_secure_delete=self.fts_secure_delete)

    # -- the port: writes ------------------------------------------------------

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        return await self.add_with_ids(records, ids_of(records))

    async def add_with_ids(self, records: Sequence[MemoryRecord], ids: Sequence[str]) -> list[str]:
        """:meth:`add` with the batch's ids beside its records (``ids[i]`` for ``records[i]``, whose own id
        may be unset): what the guard calls, so that it need not copy each record to set its id."""
        self.db.refuse_if_read_only("add")
        if len(ids) != len(records):
            raise UsageError(f"add_with_ids got {len(ids)} ids for {len(records)} records")
        if not records:
            return []
        vectors: F32 | None = None
        if self.embedder is not None:
            vectors = await embed(self.embedder, [r.text for r in records])
        if self._closed:
            raise UsageError("this SQLiteMemory is closed")
        if self.write_behind and len(records) <= INLINE_MAX:
            # One row per record into the write-behind log, and a commit (see _log_here).
            rows = self._log_rows(records, ids, vectors)
            if not (self.inline_writes and self._log_here(rows, vectors is None)):
                write = self._log_write(rows, vectors is None)
                await self._run(lambda: self.db.write_staged(write, drain=False), write=True)
            self._logged_more(len(rows))
            return _as_list(ids)
        if self.inline_writes and len(records) <= INLINE_MAX:
            # A small add that can finish without waiting commits right here (~0.1 ms of
            # SQL): a hop to the writer thread costs as much when idle, and milliseconds
            # when the machine is busy and the thread waits to be scheduled.
            done = self.db.write_here(self._add_write(records, ids, vectors, here=True))
            if done is not None:
                (gen, old, erased, base), follow_up = done
                self.vectors.extend(records, vectors, base, gen, old, erased)
                self.timelines.extend(records, base, gen, old, erased)
                if follow_up:
                    self._after_write_here()
                return _as_list(ids)
        # Without an embedder, the write refuses a file that keeps vectors (in its transaction: no extra hop).
        return await self._run(lambda: self._add(records, ids, vectors), write=True)

    # -- the write-behind log ---------------------------------------------------

    def _log_here(self, rows: list[tuple[str, tuple[Any, ...]]], check_embedder: bool) -> bool:
        """A small add with ``write_behind`` committed on the caller's thread; False when it would wait.

        One row per record into ``inbox`` and a commit, nothing else: as durable
        as an add to the tables at the same ``durability`` (the same commit;
        ``inline_writes`` is on at ``"normal"`` only), refused in the same ways
        (a duplicate id, stored or pending; no embedder on a file that keeps
        vectors). The drain thread moves the rows into the tables soon after
        (:data:`DRAIN_DELAY`, :data:`DRAIN_ROWS`); any read or other write
        drains them first. One record is one statement in a transaction of its
        own (no ``BEGIN`` nor ``COMMIT`` statement: :meth:`~._connection.Database.insert_here`).
        """
        if len(rows) == 1:
            try:
                one = self.db.insert_here(*rows[0])
            except self.driver.IntegrityError:
                raise duplicate_id(0) from None  # pending in the log
            if one is None:
                return False
            changed, due = one
            if changed != 1:
                self._log_refused(self.db.conn(), 0, check_embedder)
        else:
            done = self.db.write_here(self._log_write(rows, check_embedder))
            if done is None:
                return False
            due = done[1]
        if due:
            self._after_write_here()
        return True

    def _after_write_here(self) -> None:
        """A write on the caller's thread said a checkpoint (or an erasure's finish) is due: on the writer
        thread, not awaited."""
        try:
            self._writer.submit(self.db.after_write_here)
        except RuntimeError:  # closing meanwhile: closing the file checkpoints it
            pass

    def _embedder_mismatch(self, name: object) -> EmbedderMismatch:
        """The error of an add without an embedder to a file that keeps vectors of embedder ``name``."""
        return EmbedderMismatch(
            f"{os.path.basename(self.path)} keeps vectors of embedder {name!r}; "
            "open it with that embedder to add records"
        )

    def _logged_more(self, n: int) -> None:
        """Wake the drain thread: it waits :data:`DRAIN_DELAY`, or less once :data:`DRAIN_ROWS` are logged."""
        if not self._logged:
            _LOGGING.add(self)
        self._logged += n
        if not self._wake.is_set():
            self._wake.set()
        if self._logged >= DRAIN_ROWS and not self._full.is_set():
            self._full.set()

    def _log_rows(
        self, records: Sequence[MemoryRecord], ids: Sequence[str], vectors: F32 | None
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """The ``INSERT INTO inbox`` of each record and its parameters (see :func:`_log_sql`)."""
        check_embedder = vectors is None
        blobs: list[bytes | None] = [None] * len(records) if vectors is None else [v.tobytes() for v in vectors]
        rows: list[tuple[str, tuple[Any, ...]]] = []
        for r, record_id, blob in zip(records, ids, blobs, strict=True):
            scope = r.scope
            cols = (
                scope.user_id,
                scope.session_id,
                scope.agent_id,
                r.text,
                json.dumps(r.metadata, ensure_ascii=False) if r.metadata else None,
                us(r.created_at),
                None if r.expires_at is None else us(r.expires_at),
                None if r.updated_at is None else us(r.updated_at),
                blob,
            )
            # Which columns are NULL, and the others' values (C loops: ~1 µs less than two generators).
            shape = tuple(map(_IS_NONE, cols))
            rows.append((_log_sql(shape, check_embedder), (record_id, *filter(_NOT_NONE, cols))))
        return rows

    def _log_write(
        self, rows: list[tuple[str, tuple[Any, ...]]], check_embedder: bool
    ) -> Callable[[Conn], tuple[None, int]]:
        """The transaction of a logged add: its rows' inserts (:meth:`_log_rows`), in order."""

        def write(conn: Conn) -> tuple[None, int]:
            for i, (sql, params) in enumerate(rows):
                try:
                    inserted = conn.execute(sql, params).rowcount
                except self.driver.IntegrityError:
                    raise duplicate_id(i) from None  # pending in the log (or earlier in this batch)
                if inserted != 1:
                    self._log_refused(conn, i, check_embedder)
            return None, 0

        return write

    def _log_refused(self, conn: Conn, i: int, check_embedder: bool) -> None:
        """Raise why record ``i`` of a logged add was not inserted: the file keeps vectors, or its id is stored."""
        if check_embedder:
            row = conn.execute("SELECT value FROM meta WHERE key = 'embedder_name'").fetchone()
            if row is not None:
                raise self._embedder_mismatch(row[0])
        raise duplicate_id(i)

    def _drain_log(self, conn: Conn, here: bool) -> Callable[[], None] | None:
        """Move every row of the write-behind log into the tables, in the caller's transaction on ``conn``.

        The rows go through the add's own batch path (:meth:`_add_write`), in
        the order they were logged, in batches of :data:`DRAIN_BATCH`: the
        records, FTS5, metadata, vectors, generations, the vector index and
        expiry exactly as a direct add writes them (the rids follow the order
        of the log). The log's rows are deleted in the same transaction
        (``secure_delete`` zeroes them). Returns what to do after the commit
        (extend this process's caches), or None when the log was empty.
        """
        done: list[tuple[list[MemoryRecord], F32 | None, tuple[int, dict[str, int], bool, int]]] = []
        while True:
            rows = conn.execute(f"SELECT {_INBOX_COLUMNS} FROM inbox ORDER BY seq LIMIT ?", (DRAIN_BATCH,)).fetchall()
            if not rows:
                break
            # A run of rows with vectors, or without (a file's rows are all one or the other), per batch.
            at = 0
            while at < len(rows):
                kind = rows[at][10] is None
                end = at + 1
                while end < len(rows) and (rows[end][10] is None) == kind:
                    end += 1
                run = rows[at:end]
                records = [record_from_row(row[:10]) for row in run]
                ids = [str(row[1]) for row in run]
                vectors: F32 | None = None
                if not kind:
                    vectors = np.frombuffer(b"".join(row[10] for row in run), dtype=np.float32).reshape(len(run), -1)
                (result, _stage) = self._add_write(records, ids, vectors, here=here, draining=True)(conn)
                done.append((records, vectors, result))
                at = end
            conn.execute("DELETE FROM inbox WHERE seq <= ?", (rows[-1][0],))
        if not done:
            return None

        def after() -> None:
            self._logged = 0
            for records, vectors, (gen, old, erased, base) in done:
                self.vectors.extend(records, vectors, base, gen, old, erased)
                self.timelines.extend(records, base, gen, old, erased)

        return after

    def _drain_once(self) -> None:
        """One round of the drain thread (:func:`_drain_loop`): the log into the tables; a failure is logged."""
        self._wake.clear()
        self._full.clear()
        # On failure the rows stay in the log: the next read, write or wake retries.
        if not self._drain_or_warn(self.db.drain_now, "", "the next read or write retries"):
            time.sleep(DRAIN_DELAY)

    def _drain_or_warn(self, drain: Callable[[], object], when: str, then: str) -> bool:
        """Run ``drain`` (the write-behind log into the tables); False, and a WARNING saying what happens
        ``then``, when it fails (the rows stay in the log)."""
        try:
            drain()
        except Exception as exc:
            logger.warning(
                "SQLite %s: draining the write-behind log%s failed (%s); %s",
                os.path.basename(self.path),
                when,
                type(exc).__name__,
                then,
            )
            return False
        return True

    def _needs_embedder(self) -> str | None:
        row = self.db.conn().execute("SELECT value FROM meta WHERE key = 'embedder_name'").fetchone()
        return None if row is None else str(row[0])

    def _add(self, records: Sequence[MemoryRecord], ids: Sequence[str], vectors: F32 | None) -> list[str]:
        gen, old, erased, base = self.db.write_staged(self._add_write(records, ids, vectors, here=False))
        self.vectors.extend(records, vectors, base, gen, old, erased)
        self.timelines.extend(records, base, gen, old, erased)
        return _as_list(ids)

    def _add_write(
        self,
        records: Sequence[MemoryRecord],
        ids: Sequence[str],
        vectors: F32 | None,
        *,
        here: bool,
        draining: bool = False,
    ) -> Callable[[Conn], tuple[tuple[int, dict[str, int], bool, int], int]]:
        """The transaction of an add; ``here``: on the caller's thread, so raise NotHere for slow work;
        ``draining``: the write-behind log's rows being moved (the log is not empty then)."""
        now = us(utcnow())
        cutoff = None if self.retention is None else us(utcnow() - self.retention)

        users = set(map(_USER, records))
        tenants = sorted({tenant_token(user) for user in users})
        # A batch of many users reads their rows the old way (one statement each), not in one SQL text per size.
        head_tenants = tenants if len(tenants) <= HEAD_TENANTS else []
        head_sql = _head_sql(len(head_tenants))

        def write(conn: Conn) -> tuple[tuple[int, dict[str, int], bool, int], int]:
            # One statement reads all the bookkeeping this write needs (see _head_sql).
            head = conn.execute(head_sql, (now, *head_tenants)).fetchall()
            erase_pending, embedder_name, due, base = head[0][0], head[0][1], head[0][2], int(head[0][3])
            if vectors is None and embedder_name is not None:
                raise self._embedder_mismatch(embedder_name)
            if here and erase_pending:
                raise NotHere  # the erasure's rebuild (VACUUM) follows: the writer thread's job
            if here and not draining and head[0][4]:
                raise NotHere  # the write-behind log first (write_staged drains it in this transaction)
            # Records past due go with every write (their users' retained-out ones too).
            expired = expired_rows(conn, now, users=users, cutoff=cutoff) if due or cutoff is not None else []
            if here and expired:
                raise NotHere
            touched: dict[str, int] = {}
            if expired:
                touched = self._erase(conn, expired)
                base = int(conn.execute("SELECT coalesce(max(rid), 0) + 1 FROM records").fetchone()[0])
            # The tenants' generations and FTS5 slots as stored (a tenant without a row has neither yet).
            known = {str(t): (int(g), sl) for *_, t, g, sl in head if t is not None}
            old = {t: known[t][0] if t in known else -1 for t in head_tenants}
            file_gen = known[FILE_ROW][0] if FILE_ROW in known else None
            slots = None
            if self.keyword_index == "fts5":
                slots = {t: int(known[t][1]) for t in tenants if t in known and known[t][1] is not None}
                if len(slots) < len(tenants):
                    slots.update(tenant_slots(conn, [t for t in tenants if t not in slots]))
            batch = _rows_of(records, ids, base, slots)
            try:
                for shape, rows in batch.groups.items():
                    conn.executemany(_insert_sql(shape), rows)
            except self.driver.IntegrityError:
                self._raise_duplicate(conn, ids, base)
                raise
            if batch.fts:
                conn.executemany("INSERT INTO records_fts(rowid, body, tenant) VALUES (?, ?, ?)", batch.fts)
            last = base + len(records) - 1
            for high, tenant, user in batch.fts_select:
                # The texts just written, read back in SQLite rather than bound a second time.
                if batch.fts_whole:
                    conn.execute(_FTS_SELECT, (high, tenant, base, last))
                else:
                    conn.execute(_FTS_SELECT + " AND +user_id IS ?", (high, tenant, base, last, user))
            if batch.metas:
                conn.executemany("INSERT INTO record_meta VALUES (?, ?, ?, ?)", batch.metas)
            row_tenants = batch.tenants
            if vectors is not None:
                blob = vectors.tobytes()
                size = len(blob) // len(records)
                if len(records) >= SQL_ROWS_MIN:
                    # One statement for the batch: its rows cut from one BLOB in SQLite (a tuple and a bytes
                    # object per row cost ~3 µs per vector more; docs/benchmarks-sqlite.md).
                    conn.execute(_VECTORS_SQL, (base, blob, len(records), size))
                else:
                    conn.executemany(
                        "INSERT INTO vectors(rid, vec) VALUES (?, ?)",
                        [(base + i, blob[at : at + size]) for i, at in enumerate(range(0, len(blob), size))],
                    )
                if index_add(conn, self.ann, row_tenants, range(base, base + len(records)), vectors):
                    file_gen = None  # advanced for the index's version: bump reads it again
            deltas: dict[str, int] = {row_tenants[0]: 1} if len(row_tenants) == 1 else collections.Counter(row_tenants)
            for tenant, count in touched.items():
                deltas[tenant] = deltas.get(tenant, 0) + count
            # The file's generation as read first, unless an erasure or the vector index advanced it since.
            gen, before = bump(conn, deltas, old, None if expired else file_gen)
            stage = 1 if expired else int(erase_pending or 0)
            return (gen, before, bool(expired), base), stage

        return write

    def _raise_duplicate(self, conn: Conn, ids: Sequence[str], base: int) -> None:
        """Raise the typed error naming the first record whose id (``ids``, in order) is stored already (or
        repeats one earlier in the batch); ``base``: the batch's first rid (its own rows written before the
        failure are not "stored already")."""
        stored: set[str] = set()
        for chunk in chunks(ids):
            stored.update(
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM records WHERE rid < ? AND id IN ({','.join('?' * len(chunk))})", [base, *chunk]
                )
            )
        seen: set[str] = set()
        for i, record_id in enumerate(ids):
            if record_id in stored or record_id in seen:
                raise duplicate_id(i)
            seen.add(record_id)

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        self.db.refuse_if_read_only("delete")
        return await self._run(lambda: self._delete(ids, scope), write=True)

    def _delete(self, ids: Sequence[str] | None, scope: MemoryScope) -> int:
        where, params = scope_sql(scope)

        def write(conn: Conn) -> int:
            rows: list[tuple[int, str, str | None]] = []
            if ids is None:
                rows = conn.execute(f"SELECT rid, text, user_id FROM records r WHERE {where}", params).fetchall()
            else:
                for chunk in chunks(ids):
                    rows += conn.execute(
                        f"SELECT rid, text, user_id FROM records r WHERE {where} "
                        f"AND r.id IN ({','.join('?' * len(chunk))})",
                        params + chunk,
                    ).fetchall()
            bump(conn, self._erase(conn, rows))
            if (
                ids is None
                and conn.execute("SELECT 1 FROM records WHERE user_id IS ? LIMIT 1", (scope.user_id,)).fetchone()
                is None
            ):
                # Nothing of this user is left: drop even the hashed key of its generation, and its
                # vector index (its centroids are averages of the user's vectors).
                conn.execute("DELETE FROM generations WHERE tenant = ?", (tenant_token(scope.user_id),))
                drop_index(conn, tenant_token(scope.user_id))
            whole_user = scope.user_id is not None and scope.session_id is None and scope.agent_id is None
            # Erasing a user erases their entity graph too (same transaction).
            if ids is None and whole_user and erase_graph(conn, str(scope.user_id)):
                _erasure.mark_erased(conn)
            return len(rows)

        return self.db.write(write, erasing=True)

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        self.db.refuse_if_read_only("purge")
        cutoff = None if created_before is None else us(created_before)

        def write(conn: Conn) -> int:
            rows = expired_rows(conn, us(now), users=None, cutoff=cutoff)
            bump(conn, self._erase(conn, rows))
            return len(rows)

        return await self._run(lambda: self.db.write(write, erasing=True), write=True)

    async def update(self, changes: Sequence[MemoryUpdate], *, scope: MemoryScope) -> list[str]:
        self.db.refuse_if_read_only("update")
        return await update_records(self, changes, scope)

    # -- the port: reads -----------------------------------------------------

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        where, params = scope_sql(scope)

        def read(conn: Conn) -> MemoryRecord | None:
            row = conn.execute(f"SELECT {COLUMNS} FROM records r WHERE r.id = ? AND {where}", [id, *params]).fetchone()
            return None if row is None else record_from_row(row)

        return await self._run(lambda: self.db.read(read))

    async def export(
        self, scope: MemoryScope, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[MemoryRecord]:
        where, params = scope_sql(scope)
        tsql, tparams = filter_sql(Where.of(None, since, until))

        def read(conn: Conn) -> list[MemoryRecord]:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM records r WHERE {where}{tsql} ORDER BY r.created_at, r.rid", params + tparams
            )
            scopes: dict[ScopeKey, MemoryScope] = {}  # one scope object per scope (see record_from_row)
            return [record_from_row(row, scopes) for row in rows]

        return await self._run(lambda: self.db.read(read))

    async def search(
        self,
        query: str,
        *,
        scope: MemoryScope,
        k: int,
        filters: Mapping[str, Any] | None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryHit]:
        # Filters (with operators) and the time range travel together from here on.
        return await self._search_where(query, scope, k, Where.of(filters, since, until))

    async def count(
        self,
        scope: MemoryScope,
        *,
        filters: Mapping[str, Any] | None,
        since: datetime | None,
        until: datetime | None,
    ) -> int:
        where, params = scope_sql(scope)
        csql, cparams = filter_sql(Where.of(filters, since, until))

        def read(conn: Conn) -> int:
            row = conn.execute(
                f"SELECT count(*) FROM records r WHERE {where} AND (r.expires_at IS NULL OR r.expires_at > ?){csql}",
                [*params, us(utcnow()), *cparams],
            ).fetchone()
            return int(row[0])

        return await self._run(lambda: self.db.read(read))

    async def _search_where(self, query: str, scope: MemoryScope, k: int, filters: Cond) -> list[MemoryHit]:
        if not query.strip():
            return await self._run(lambda: self.db.read(lambda conn: recent(conn, scope, k, filters)))
        fetch = ranking.rerank_pool(k, self.reranker, self.rerank_candidates)
        qvec: F32 | None = None
        mode: SearchMode = "keyword"
        if self.embedder is not None and self.search_mode == "hybrid":
            hits, mode = await self._search_hybrid(self.embedder, query, scope, fetch, filters)
        else:
            if self.embedder is not None and self.search_mode != "keyword":
                qvec = await self._embed_query(self.embedder, query)
                mode = "keyword" if qvec is None else self.search_mode
            found = self._search_inline(query, qvec, mode, scope, fetch, filters)
            if found is None:
                found = await self._run(
                    lambda: self.db.read(lambda conn: search_hits(self, conn, query, qvec, mode, scope, fetch, filters))
                )
            hits = found
        if self.reranker is not None:
            hits = await ranking.rerank(self.reranker, query, hits, backend=f"SQLite {os.path.basename(self.path)}")
        return SearchResults(hits[:k], mode=mode)

    async def _embed_query(self, embedder: EmbeddingPort, query: str) -> F32 | None:
        """The query's unit vector, or None (logged) when the embedder fails: the search then uses keywords only."""
        try:
            rows: F32 = await embed(embedder, [query])
        except Exception as exc:
            logger.warning(
                "SQLite %s: the embedder failed during search (%s); searching by keywords only",
                os.path.basename(self.path),
                type(exc).__name__,
            )
            return None
        vector: F32 = rows[0]
        return vector

    async def _search_hybrid(
        self, embedder: EmbeddingPort, query: str, scope: MemoryScope, k: int, filters: Cond
    ) -> tuple[list[MemoryHit], SearchMode]:
        """A hybrid search whose keyword half runs while the query is being embedded; the hits and the mode used.

        A local model takes milliseconds to embed a question, about as long as
        the keyword half: the worker runs the FTS5 query and looks up its
        candidates' neighbours meanwhile, then waits for the vector, in the same
        read transaction (see ``_search.search_hits``). An embedder that
        answers at once (a cache) is waited for here instead, so that the
        vector half still runs beside the keyword half; when both halves then
        read only RAM, the search runs right here (:meth:`_hybrid_inline`). If the embedder fails,
        the search ranks by keywords alone (mode ``keyword``), as before.
        """
        pending: Future[F32 | None] = Future()
        blocking = blocking_embed(embedder)
        embedding: Coroutine[Any, Any, F32 | None] | None = None
        step: Any = None
        if blocking is not None:
            # A blocking embedder (LocalEmbedder) runs in a thread that hands the vector to the
            # worker itself: no hop through the event loop between the embedding and the vector half.
            run = contextvars.copy_context().run  # usage events reach this operation's sink
            asyncio.get_running_loop().run_in_executor(None, run, self._embed_into, embedder, blocking, query, pending)
        else:
            # The embedding's first step runs right here, in this task: an embedder that answers at once (a cache)
            # costs no task and no event-loop cycle (~0.1 ms); one that waits goes on in this task too (below).
            embedding = self._embed_query(embedder, query)
            try:
                step = embedding.send(None)
            except StopIteration as done:
                embedding = None
                _settle(pending, done.value)
                unit = done.value
                if unit is not None:
                    found = self._or_worker(lambda: self._hybrid_inline(query, unit, scope, k, filters))
                    if found is not None:
                        return found, "hybrid"
        read = lambda: self.db.read(  # noqa: E731
            lambda conn: search_hits(self, conn, query, None, "hybrid", scope, k, filters, pending=pending)
        )
        try:
            if embedding is None:
                hits = await self._run(read)
            else:
                # The embedding waits (I/O): the worker runs the keyword half meanwhile and then waits for the
                # vector, which this task hands it when the embedding ends (or None: it failed, or this search
                # was cancelled). The embedding stays in this task from its first step to its end: an embedder's
                # asyncio.timeout or anyio cancel scope, entered in one task, is left in the same task.
                worker = asyncio.ensure_future(self._run(read))
                try:
                    _settle(pending, await _resumed(embedding, step))
                except BaseException:
                    worker.add_done_callback(_retrieved)  # (its hits or error are no one's now)
                    raise
                hits = await worker
        finally:
            if not pending.done():
                # The search failed or was cancelled before it waited for the vector: never leave a worker waiting.
                _settle(pending, None)
        return hits, "hybrid" if pending.result() is not None else "keyword"

    def _embed_into(
        self, embedder: EmbeddingPort, blocking: Callable[[list[str]], Any], query: str, pending: Future[F32 | None]
    ) -> None:
        """:meth:`_embed_query` in this thread, through the embedder's ``embed_sync``, into ``pending``."""
        qvec: F32 | None = None
        try:
            qvec = embed_unit_blocking(embedder, blocking, [query])[0]
        except Exception as exc:
            logger.warning(
                "SQLite %s: the embedder failed during search (%s); searching by keywords only",
                os.path.basename(self.path),
                type(exc).__name__,
            )
        _settle(pending, qvec)

    def graph_port(self) -> SQLiteGraphStore:
        """The entity graph in this file (hosts hold ``KnowledgeGraph(memory)``; see ``docs/graph.md``)."""
        if self._graph is None:
            self._graph = SQLiteGraphStore(self)
        return self._graph

    def _search_inline(
        self, query: str, qvec: F32 | None, mode: SearchMode, scope: MemoryScope, k: int, filters: Cond
    ) -> list[MemoryHit] | None:
        """A small vector search run right here, on the caller's thread; None when it must go to a worker.

        The hop to a worker thread and back costs more than ranking a few
        thousand vectors (docs/benchmarks-sqlite.md, "Fixed cost"), so a vector
        search of a scope whose vectors are in RAM, current and at most
        :data:`INLINE_VECTORS` runs without it: a millisecond or two on the
        event loop's thread, on that thread's own connection. That connection
        never waits for a lock; anything that would wait (a busy file, vectors
        to load) goes to the worker instead, as every other call does.

        A user's scope searched through its vector index runs here too once the
        index's centroids are cached and the lists it probes are current (a few
        milliseconds: a shortlist from the cached codes and a few hundred
        vectors read by rid); anything to read first goes to the worker.
        """
        if self._closed:
            return None
        if qvec is None and mode == "keyword":
            return self._or_worker(lambda: self._keyword_inline(query, scope, k, filters))
        if qvec is None or mode != "vector":
            return None
        vector = qvec
        return self._or_worker(lambda: self._vector_inline(query, vector, scope, k, filters))

    def _or_worker(self, run: Callable[[], list[MemoryHit] | None]) -> list[MemoryHit] | None:
        """``run()``, or None (a worker runs the search) where it would have to wait or read first:
        vectors or a timeline to load, the write-behind log to drain with waiting, a busy file."""
        try:
            return run()
        except (NotCached, NotHere):
            return None
        except self.driver.OperationalError as exc:
            if is_busy(exc):
                return None
            raise

    def _vector_inline(
        self, query: str, qvec: F32, scope: MemoryScope, k: int, filters: Cond
    ) -> list[MemoryHit] | None:
        """The vector search of :meth:`_search_inline` (raises what :meth:`_or_worker` turns into None)."""
        indexed = (
            self.ann_params is not None
            and scope.session_id is None
            and scope.agent_id is None
            and self.ann.has(tenant_token(scope.user_id))
        )
        if not indexed:
            # One statement when the vectors in RAM are current (most searches), else the transaction.
            found = self.db.at_once(lambda conn: vector_at_once(self, conn, qvec, scope, k, filters))
            if found is not None:
                return found
            size = self.vectors.cached_size(scope)
            if size is None or size > INLINE_VECTORS:
                return None
        return self.db.read_nowait(
            lambda conn: search_hits(self, conn, query, qvec, "vector", scope, k, filters, load=False)
        )

    def _keyword_inline(self, query: str, scope: MemoryScope, k: int, filters: Cond) -> list[MemoryHit] | None:
        """A keyword search run right here, on the caller's thread, when it reads nothing but RAM; else None.

        The hop to a worker thread and back (~0.2 ms) is a fifth of a keyword search of a
        user whose records and words are in RAM (its timeline and word index, current in
        this snapshot): such a search runs here, on this thread's connection that never
        waits for a lock, in one read transaction, as the worker would run it (the same
        function, the same hits). Anything else goes to the worker: filters or a time
        range, a timeline or an index to build or extend (``search_hits(..., load=False)``
        raises ``NotCached``), the write-behind log to drain with waiting, a busy file.
        """
        if filters or self.keyword_index != "fts5":
            return None
        user = scope.user_id
        if not self.timelines.held(user) or not self.ann.words.users.current(user):
            return None  # nothing kept: no transaction to find that out
        return self.db.read_nowait(
            lambda conn: search_hits(self, conn, query, None, "keyword", scope, k, filters, load=False)
        )

    def _hybrid_inline(
        self, query: str, qvec: F32, scope: MemoryScope, k: int, filters: Cond
    ) -> list[MemoryHit] | None:
        """A hybrid search run right here, on the caller's thread, when both halves read nothing but RAM; else None.

        What :meth:`_keyword_inline` does for keyword search, for a hybrid search whose query vector
        came at once (a cache): when the user's timeline and word index are current and its vectors
        are in RAM, at most :data:`INLINE_VECTORS` of them, the whole search runs on this thread's
        connection that never waits for a lock, in one read transaction, the matrix product on a numpy
        thread beside the keyword half, as the worker would run it (the same function, the same hits),
        without the hop to a worker and back. Anything else goes to the worker (``search_hits(...,
        load=False)`` raises ``NotCached`` before handing anything to another thread; see :meth:`_or_worker`).
        """
        if self._closed or filters or self.keyword_index != "fts5":
            return None
        user = scope.user_id
        if not self.timelines.held(user) or not self.ann.words.users.current(user):
            return None  # nothing kept: no transaction to find that out
        size = self.vectors.cached_size(scope)
        if size is None or size > INLINE_VECTORS:
            return None
        return self.db.read_nowait(
            lambda conn: search_hits(self, conn, query, qvec, "hybrid", scope, k, filters, load=False)
        )

    # -- the vector index ----------------------------------------------------------

    async def build_index(self, scope: MemoryScope) -> int:
        """Build (or rebuild) the vector index of ``scope``'s user now; return how many vectors it holds.

        Searches build it by themselves, in the background, once a user has
        ``ann_threshold`` records; this is for a host that wants it ready
        (after a bulk import) and for tests.

        Example:
            >>> await memory.store.build_index(MemoryScope(user_id="ann"))  # doctest: +SKIP
            1000000
        """
        self.db.refuse_if_read_only("build_index")
        if self.embedder is None:
            raise UsageError("build_index needs an embedder: this store keeps no vectors")
        return await self._run(lambda: self._build(scope.user_id))

    def _build(self, user_id: str | None) -> int:
        return build_index(
            self.db.read,
            lambda fn: self.db.write(fn),
            user_id,
            self._dim,
            stop=lambda: self._closed,
        )

    def maybe_build(self, conn: Conn, scope: MemoryScope, built: int | None) -> None:
        """Start building ``scope``'s user's index in the background when it is large enough and has none
        (or grew :data:`~._ann.REBUILD_GROWTH` times since its last build)."""
        params = self.ann_params
        if params is None or self.db.read_only is not None or self._closed:
            return
        tenant = tenant_token(scope.user_id)
        if tenant in self.ann.building:
            return
        row = conn.execute("SELECT n FROM generations WHERE tenant = ?", (tenant,)).fetchone()
        n = 0 if row is None else int(row[0])
        if n < params.threshold or (built is not None and n < REBUILD_GROWTH * max(built, 1)):
            return
        with self.ann.lock:
            if tenant in self.ann.building:
                return
            self.ann.building.add(tenant)

        def run() -> None:
            try:
                self._build(scope.user_id)
            except Exception as exc:  # a background build must not take the process down; searches stay exact
                if not self._closed:
                    logger.warning(
                        "SQLite %s: building a vector index failed (%s); searches stay exact",
                        os.path.basename(self.path),
                        type(exc).__name__,
                    )
            finally:
                with self.ann.lock:
                    self.ann.building.discard(tenant)
                self._builds.pop(tenant, None)

        thread = threading.Thread(target=run, name="memoryport-sqlite-index", daemon=True)
        self._builds[tenant] = thread
        thread.start()

    # -- maintenance -------------------------------------------------------------

    def checkpoint(self) -> bool:
        """Finish a pending erasure, or just checkpoint the WAL; False (and a WARNING) when a reader blocks it."""
        self.db.refuse_if_read_only("checkpoint")
        self.db.drain_now()
        return _erasure.checkpoint(self.db)

    def stats(self) -> dict[str, Any]:
        """Record and vector counts, schema version, page size, embedder, driver and SQLite version.

        Example:
            >>> memory.store.stats()["records"]  # doctest: +SKIP
            42
        """

        def read(conn: Conn) -> dict[str, Any]:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            return {
                "records": conn.execute("SELECT count(*) FROM records").fetchone()[0],
                "vectors": conn.execute("SELECT count(*) FROM vectors").fetchone()[0],
                "schema_version": int(meta["schema_version"]),
                "page_size": int(conn.execute("PRAGMA page_size").fetchone()[0]),
                "keyword_index": self.keyword_index,
                "fts_secure_delete": self.fts_secure_delete,
                "embedder": meta.get("embedder_name"),
                "dim": meta.get("embedder_dim"),
                "driver": self.driver_name,
                "sqlite_version": ".".join(map(str, self.sqlite_version)),
            }

        return self.db.read(read)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, keyword_index={self.keyword_index!r}, driver={self.driver_name!r})"

    async def aclose(self) -> None:
        """Stop the worker threads and close every connection."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._closed = True
        if self._drainer is not None:
            self._wake.set()
            self._full.set()
            self._drainer.join()
        for thread in list(self._builds.values()):
            thread.join()
        self._writer.shutdown(wait=True)
        if self.db.drain is not None:
            # A read drains the log: nothing of this process's adds waits for the next open.
            self._drain_or_warn(lambda: self.db.read(_nothing), " on close", "the next open drains it")
        self._pool.shutdown(wait=True)
        self.numpy.shutdown(wait=True)
        self.timelines.clear()
        self.db.close()
        detach(self._file_key, self._dim)
