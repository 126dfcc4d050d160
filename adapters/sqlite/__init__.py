"""SQLite, the built-in backend: everything in one file.

:class:`SQLiteStore` is the store (a plain :class:`~memoryport.MemoryPort`);
:func:`SQLiteMemory` returns it held by a :class:`~memoryport.GuardedMemory`,
which is what hosts use. See ``docs/sqlite.md`` for the file layout, the
concurrency model, search and fusion, erasure and re-embedding.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from memoryport._embedding import EmbeddingPort
from memoryport._guard import GuardedMemory, GuardOptions, retention_period
from memoryport._rerank import RerankerPort
from memoryport._sync import run_sync
from memoryport.ranking import (
    CONTEXT_KEY_WEIGHT,
    CONTEXT_KEY_WINDOW,
    DATE_WEIGHT,
    LENGTH_PIVOT,
    LENGTH_WEIGHT,
    NEIGHBOUR_WEIGHT,
    NEIGHBOUR_WINDOW,
    PREVIOUS_MODE,
    PREVIOUS_WEIGHT,
    SESSION_GAP,
    SESSION_WEIGHT,
    SPEAKER_WEIGHT,
    TIME_WEIGHT,
)

from ._driver import available_drivers, load_driver
from ._graph import SQLiteGraph
from ._store import ANN_THRESHOLD, SCHEMA_VERSION, SQLiteStore, reembed_file

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ANN_THRESHOLD",
    "SCHEMA_VERSION",
    "SQLiteGraph",
    "SQLiteMemory",
    "SQLiteStore",
    "available_drivers",
    "load_driver",
    "reembed_file",
    "reembed_file_sync",
]


def SQLiteMemory(
    path: str | os.PathLike[str],
    embedder: EmbeddingPort | None = None,
    *,
    driver: str | None = None,
    use_fts5: bool = True,
    workers: int = 4,
    busy_timeout: float = 30.0,
    cache_bytes: int = 2 << 30,
    candidates: int = 50,
    search_mode: str = "hybrid",
    reranker: RerankerPort | None = None,
    rerank_candidates: int = 20,
    context_weight: float = NEIGHBOUR_WEIGHT,
    context_window: int = NEIGHBOUR_WINDOW,
    durability: str = "normal",
    min_similarity: float = 0.0,
    inline_writes: bool = True,
    ann_threshold: int | None = None,
    share_index: bool | None = None,
    page_size: int | None = None,
    date_weight: float = DATE_WEIGHT,
    previous_weight: float = PREVIOUS_WEIGHT,
    previous_mode: str = PREVIOUS_MODE,
    session_weight: float = SESSION_WEIGHT,
    session_gap: timedelta = SESSION_GAP,
    speaker_weight: float = SPEAKER_WEIGHT,
    time_weight: float = TIME_WEIGHT,
    context_key_weight: float = CONTEXT_KEY_WEIGHT,
    context_key_window: int = CONTEXT_KEY_WINDOW,
    length_weight: float = LENGTH_WEIGHT,
    length_pivot: int = LENGTH_PIVOT,
    write_behind: bool = True,
    **guard: Unpack[GuardOptions],
) -> GuardedMemory[SQLiteStore]:
    """Long-term memory in one SQLite file: FTS5 keyword search, optional vectors, real erasure.

    Returns a :class:`~memoryport.GuardedMemory` over a :class:`SQLiteStore`
    (``memory.store`` gives the store: ``stats()``, ``checkpoint()``, ``path``).
    The file (and its ``-wal``/``-shm``) is created owner-only (0600) in WAL
    mode. Calls run in worker threads, each on its own connection, so one file
    is safe across threads, event loops and processes; a batch is one
    transaction. With an ``embedder`` every record is embedded on add and
    search fuses BM25 and cosine scores (:func:`memoryport.ranking.fuse`); if
    the embedder fails during a search, the search goes on by keywords with a
    WARNING. Deletes are real: rows are zeroed (``secure_delete``), words leave
    the FTS5 index, and the WAL is checkpointed.

    Args:
        path: the database file; created if absent (its folder must exist).
        embedder: an :class:`~memoryport.EmbeddingPort`; its name and dimension
            are recorded in the file, and opening the file with another raises
            :class:`~memoryport.EmbedderMismatch` (re-embed with :func:`reembed_file`).
        driver: ``"auto"`` (newest installed SQLite), ``"sqlite3"``,
            ``"pysqlite3"`` or ``"sqlean"``; ``$MEMORYPORT_SQLITE_DRIVER`` if None.
        use_fts5: ``False`` creates a new file with the LIKE keyword search
            (what a SQLite without FTS5 gets); for tests.
        workers: worker threads (each holds one connection).
        busy_timeout: seconds a writer waits for another process's write.
        cache_bytes: bound on the vectors kept in RAM (least recently used go).
        candidates: how many keyword and vector candidates hybrid search fuses.
        search_mode: with an embedder, ``"hybrid"`` (BM25 and cosine fused),
            ``"vector"`` (cosine only) or ``"keyword"`` (BM25 only).
        reranker: a :class:`~memoryport.RerankerPort` (e.g. ``CrossEncoderReranker``)
            that re-orders the best ``rerank_candidates`` hits of the first
            stage; if it fails, search keeps the fused order with a WARNING.
        rerank_candidates: how many first-stage hits the reranker scores.
        context_weight: conversational context for keyword and hybrid search: a
            record written just before or after a match in the same scope gets
            this share of the match's score (half of it two records away, up to
            ``context_window``). Helps when memories are turns of a conversation
            (measured on LoCoMo: hybrid recall@10 66.9 -> 75.5); set 0 for a
            store of unrelated facts. Pure vector search never uses it.
        context_window: how many records on each side receive context.
        durability: what a committed write survives (the journal is WAL either
            way). ``"normal"`` (SQLite ``synchronous=NORMAL``): an application
            crash or kill loses nothing committed; a power loss or OS crash can
            lose the last transactions committed before it (never corrupts the
            file). ``"full"`` (``synchronous=FULL``): every commit is fsynced,
            so it survives a power loss too; each write then waits for the disk.
        min_similarity: in hybrid search, a record that no query word matches
            comes back only when its cosine similarity to the query is at
            least this (0 keeps every candidate). Keeps an unrelated record
            from looking like a match when nothing better exists; the right
            value depends on the model (0.2 for all-MiniLM-L6-v2, see
            docs/sqlite.md, "What scores mean").
        inline_writes: let a small ``add`` (up to 8 records) at
            ``durability="normal"`` commit on the caller's thread when it can
            finish without waiting (the write lock free, no other process
            writing, nothing expired to delete, no erasure to finish): about
            0.1 ms on the event loop instead of a hop to the writer thread,
            which costs as much when idle and far more on a busy machine.
            ``False`` sends every write to the writer thread.
        ann_threshold: opt in to a vector index in the file for users with
            at least this many records (``ANN_THRESHOLD``, 50,000, is the
            suggested value; IVF lists of sign-bit and int8 codes, exact re-rank: see
            docs/sqlite.md, "The vector index"), built in the background by the
            first search that finds it missing; below it, and for narrower
            scopes, vector search is exact. ``None`` (the default): always
            exact. At 1M vectors the index answers a first search far sooner,
            holds under half the memory (about 450 bytes per vector, one
            copy for the processes open on the file: ``share_index``) and
            searches warm in about 0.04x the time of the exact scan (18-27 ms vs 755 ms at recall@10 1.000 on
            clustered vectors, loaded machine); opt-in because its results
            are approximate.
        share_index: processes open on the same file share one copy of the
            index's decoded lists (Linux: segments in the tmpfs ``/dev/shm``,
            mode 0600, named by hashes, removed by erasures and by the last
            process to close the file; see docs/sqlite.md, "One copy for all
            processes"). ``None`` (the default): on unless
            ``$MEMORYPORT_SHARE_INDEX`` is ``0``/``off``/``false``/``no``;
            ``False``: each process keeps its own copy. Where tmpfs cannot be
            used, each process keeps its own copy (same hits).
        page_size: the SQLite page size in bytes of a file this call creates
            (a power of two from 4,096 to 65,536); ``None``: 8,192. A file
            keeps the size it was created with (in WAL mode SQLite cannot
            change it): opening an existing file with another ``page_size``
            raises :class:`~memoryport.UsageError`. 8,192 and 16,384 load
            records with 384-float vectors in bulk with ~1.2x the records per
            CPU second of 4,096 (a 1.5 KB vector fills a 4 KiB page with two
            rows); a single add writes ~1.5-1.8x (8,192) or ~3x (16,384) the WAL
            bytes of 4,096; searches the same: docs/benchmarks-sqlite.md,
            "Bulk add, round six".
        date_weight: keyword and hybrid search lift records written on the
            date a query names ("on 7 July, 2023", "in May 2022": see
            :func:`memoryport.ranking.query_dates`) by this much (normalised
            scores; 0 turns it off). A query without a date is unaffected.
        previous_weight: hybrid search scores each vector candidate that is a
            reply as if its vector were mixed with the previous record's of its
            exact scope, ``v + w·v_prev`` (:func:`memoryport.ranking.mix_previous`),
            so a reply ("Ann: Yes, twice!") is found by the turn it answers.
            0 turns it off (LoCoMo hybrid recall@10 +0.8: docs/retrieval.md).
        previous_mode: which candidates are mixed (:func:`memoryport.ranking.mixes_previous`):
            ``"replies"`` (default): a transcript line (``"Name: ..."``) whose
            predecessor has another speaker and was written less than
            ``session_gap`` before it, so records without a speaker prefix
            (facts, notes) keep their own vectors; ``"all"``: every record
            (unrelated facts -1 recall@1).
        session_weight: keyword and hybrid search add this share of the best
            score in a candidate's session to it (:func:`memoryport.ranking.session_boost`):
            records of one exact scope written less than ``session_gap`` apart
            form a session. 0 turns it off.
        session_gap: the pause that starts a new session (30 minutes).
        speaker_weight: keyword and hybrid search add this to a candidate
            spoken by someone the query names: a record written as a
            transcript line, ``"Jon: I went to a fair"``, for "Which events
            has Jon been to?" (:func:`memoryport.ranking.speaker_boost`).
            Records without a ``"Name: "`` prefix are unaffected. 0 turns it off.
        time_weight: for a query asking when ("When did...", "What year..."),
            keyword and hybrid search add this to a candidate that mentions a
            time ("yesterday", "last week", a weekday, a month, a year):
            :func:`memoryport.ranking.time_boost`. Other queries are
            unaffected. 0 turns it off.
        context_key_weight: contextual keyword keys for keyword and hybrid
            search: a record is credited this share of the IDF of each query
            word that a record of its session within ``context_key_window``
            holds and it does not (:func:`memoryport.ranking.context_keys`),
            as if its keyword key held its neighbours' words; in hybrid
            search such a record can become a keyword candidate by that
            credit alone. Computed at search time from the texts the
            neighbour lookup reads: nothing is stored. Needs FTS5 (the LIKE
            fallback has no IDF). 0 turns it off.
        context_key_window: how many records on each side lend their words.
        length_weight: keyword and hybrid search add up to this to a
            candidate for its length, ``length_weight × min(1, characters /
            length_pivot)`` (:func:`memoryport.ranking.length_boost`): BM25
            and cosine similarity favour short texts, while a longer record
            is more often the one that answers. 0 turns it off.
        length_pivot: the length in characters from which a record gets all
            of ``length_weight`` (250).
        write_behind: a small ``add`` (up to 8 records) commits one row per
            record to a log table in the same file (``inbox``) instead of
            writing the records, keyword index, vectors and bookkeeping; a
            thread moves the log into those tables ("drains" it) about 20 ms
            later or every 256 records, and every read or other write of any
            process that can write the file drains it first, so a record added
            is found by the next search exactly as without the option. The add
            fails as it would without it (a duplicate id, stored or still in
            the log; a missing embedder; a read-only or closed store). It is
            exactly as durable as an add without it, at each ``durability``:
            once it returns, an application crash or kill loses nothing (the
            next open drains the log); a power loss or OS crash can lose the
            last commits at ``"normal"``, none at ``"full"``. On by default
            (one more thread per store); ``False`` writes every add straight to
            the tables. A process that opens the file read-only cannot drain:
            it sees a logged record once the writer drained it (tens of
            milliseconds). See docs/sqlite.md, "Write-behind".
        **guard: the guard's options (:class:`~memoryport.GuardOptions`);
            ``retention_days`` also makes the store delete records past it on
            every write to their user and on ``purge()``.

    Example:
        >>> import tempfile, os
        >>> from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
        >>> memory = SQLiteMemory(os.path.join(tempfile.mkdtemp(), "memory.db"))
        >>> ann = MemoryScope(user_id="ann")
        >>> _ = memory.add_sync([MemoryRecord(scope=ann, text="Ann drinks green tea")])
        >>> [h.record.text for h in memory.search_sync("teas", scope=ann)]
        ['Ann drinks green tea']
        >>> memory.store.stats()["records"]
        1
        >>> memory.close()
    """
    store = SQLiteStore(
        path,
        embedder=embedder,
        retention=retention_period(guard.get("retention_days")),
        driver=driver,
        use_fts5=use_fts5,
        workers=workers,
        busy_timeout=busy_timeout,
        cache_bytes=cache_bytes,
        candidates=candidates,
        search_mode=search_mode,
        reranker=reranker,
        rerank_candidates=rerank_candidates,
        context_weight=context_weight,
        context_window=context_window,
        durability=durability,
        min_similarity=min_similarity,
        inline_writes=inline_writes,
        ann_threshold=ann_threshold,
        share_index=share_index,
        page_size=page_size,
        date_weight=date_weight,
        previous_weight=previous_weight,
        previous_mode=previous_mode,
        session_weight=session_weight,
        session_gap=session_gap,
        speaker_weight=speaker_weight,
        time_weight=time_weight,
        context_key_weight=context_key_weight,
        context_key_window=context_key_window,
        length_weight=length_weight,
        length_pivot=length_pivot,
        write_behind=write_behind,
    )
    return GuardedMemory(store, **guard)


def reembed_file_sync(
    path: str | os.PathLike[str],
    embedder: EmbeddingPort,
    *,
    progress: Callable[[int, int], None] | None = None,
    batch_size: int = 256,
    driver: str | None = None,
) -> int:
    """Blocking twin of :func:`reembed_file`.

    Example:
        >>> reembed_file_sync("memory.db", new_embedder)  # doctest: +SKIP
        1200
    """
    return run_sync(
        reembed_file(path, embedder, progress=progress, batch_size=batch_size, driver=driver), method="reembed"
    )
