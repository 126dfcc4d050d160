"""SQLiteMemory: the built-in backend, everything in one SQLite file.

See ``docs/sqlite.md`` for the file layout, the concurrency model, search and
fusion, erasure and re-embedding.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from memoryport._embedding import EmbeddingPort
from memoryport._errors import InvalidInput, UsageError
from memoryport._events import EventSink
from memoryport._guard import GuardedMemory
from memoryport._records import DEFAULT_LIMITS, Limits
from memoryport._rerank import RerankerPort
from memoryport._sync import run_sync
from memoryport.ranking import NEIGHBOUR_WEIGHT, NEIGHBOUR_WINDOW

from ._driver import available_drivers, load_driver
from ._store import SCHEMA_VERSION, SQLiteStore, reembed_file

__all__ = ["SCHEMA_VERSION", "SQLiteMemory", "available_drivers", "load_driver", "reembed_file"]


class SQLiteMemory(GuardedMemory):
    """Long-term memory in one SQLite file: FTS5 keyword search, optional vectors, real erasure.

    The file (and its ``-wal``/``-shm``) is created owner-only (0600) in WAL
    mode. Calls run in worker threads, each on its own connection, so one file
    is safe across threads, event loops and processes; a batch is one
    transaction. With an ``embedder`` every record is embedded on add and
    search fuses BM25 and cosine scores (:func:`memoryport.ranking.fuse`); if the
    embedder fails during a search, the search goes on by keywords with a
    WARNING. Deletes are real: rows are zeroed (``secure_delete``), words leave
    the FTS5 index, and the WAL is checkpointed.

    Args:
        path: the database file; created if absent (its folder must exist).
        embedder: an :class:`~memoryport.EmbeddingPort`; its name and dimension
            are recorded in the file, and opening the file with another raises
            :class:`~memoryport.EmbedderMismatch` (re-embed with :meth:`reembed`).
        retention_days: hide records older than this; they are deleted on
            writes to their user and by :meth:`purge`.
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
        limits, sink, capture_content: see :class:`~memoryport.GuardedMemory`.

    Example:
        >>> import tempfile, os
        >>> from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
        >>> memory = SQLiteMemory(os.path.join(tempfile.mkdtemp(), "memory.db"))
        >>> ann = MemoryScope(user_id="ann")
        >>> _ = memory.add_sync([MemoryRecord(scope=ann, text="Ann drinks green tea")])
        >>> [h.record.text for h in memory.search_sync("teas", scope=ann)]
        ['Ann drinks green tea']
        >>> memory.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        embedder: EmbeddingPort | None = None,
        retention_days: float | None = None,
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
        limits: Limits = DEFAULT_LIMITS,
        sink: EventSink | None = None,
        capture_content: bool = False,
    ) -> None:
        if embedder is not None and not isinstance(embedder, EmbeddingPort):
            raise UsageError(f"embedder must be an EmbeddingPort, not {type(embedder).__name__}")
        if retention_days is not None and not retention_days > 0:
            raise InvalidInput("retention_days must be a positive number or None", field="retention_days")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidInput("workers must be a positive integer", field="workers")
        if reranker is not None and not isinstance(reranker, RerankerPort):
            raise UsageError(f"reranker must be a RerankerPort, not {type(reranker).__name__}")
        if isinstance(rerank_candidates, bool) or not isinstance(rerank_candidates, int) or rerank_candidates < 1:
            raise InvalidInput("rerank_candidates must be a positive integer", field="rerank_candidates")
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise InvalidInput("candidates must be a positive integer", field="candidates")
        if isinstance(context_weight, bool) or not isinstance(context_weight, (int, float)) or not (
            0.0 <= context_weight <= 1.0
        ):
            raise InvalidInput("context_weight must be a number from 0 to 1", field="context_weight")
        if isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 0:
            raise InvalidInput("context_window must be a non-negative integer", field="context_window")
        store = SQLiteStore(
            path,
            embedder=embedder,
            retention=None if retention_days is None else timedelta(days=retention_days),
            driver=driver,
            use_fts5=use_fts5,
            workers=workers,
            busy_timeout=busy_timeout,
            cache_bytes=cache_bytes,
            candidates=candidates,
            search_mode=search_mode,
            reranker=reranker,
            rerank_candidates=rerank_candidates,
            context_weight=float(context_weight),
            context_window=context_window,
            durability=durability,
        )
        self._store = store
        super().__init__(
            store, retention_days=retention_days, limits=limits, sink=sink, capture_content=capture_content
        )

    @property
    def path(self) -> str:
        """The database file."""
        return self._store.path

    @property
    def driver(self) -> str:
        """The SQLite driver in use (``"sqlite3"``, ``"pysqlite3"`` or ``"sqlean"``)."""
        return self._store.driver_name

    @property
    def sqlite_version(self) -> str:
        """The SQLite library version in use, e.g. ``"3.51.1"``."""
        return ".".join(map(str, self._store.sqlite_version))

    @property
    def keyword_index(self) -> str:
        """``"fts5"`` or ``"like"`` (the fallback for a SQLite without FTS5)."""
        return self._store.keyword_index

    @property
    def fts_secure_delete(self) -> bool:
        """Whether deleted words leave the FTS5 index at once (SQLite 3.42+) rather than by a merge."""
        return self._store.fts_secure_delete

    @property
    def embedder(self) -> EmbeddingPort | None:
        """The embedder, or ``None`` (keyword search only)."""
        return self._store.embedder

    def stats(self) -> dict[str, Any]:
        """Record and vector counts, schema version, embedder, driver and SQLite version.

        Example:
            >>> memory.stats()["records"]  # doctest: +SKIP
            42
        """
        return self._store.stats()

    @staticmethod
    async def reembed(
        path: str | os.PathLike[str],
        embedder: EmbeddingPort,
        *,
        progress: Callable[[int, int], None] | None = None,
        batch_size: int = 256,
        driver: str | None = None,
    ) -> int:
        """Re-embed every record of a file with ``embedder`` and record it as the file's embedder.

        The way out of :class:`~memoryport.EmbedderMismatch`. ``progress(done,
        total)`` is called after each batch. New vectors are written beside the
        old ones and swapped in by one transaction at the end, so a crash or an
        embedder failure leaves the file as it was (the next run resumes).
        Returns how many records were embedded.

        Example:
            >>> await SQLiteMemory.reembed("memory.db", new_embedder,  # doctest: +SKIP
            ...                            progress=lambda done, total: print(done, "/", total))
        """
        return await reembed_file(path, embedder, progress=progress, batch_size=batch_size, driver=driver)

    @staticmethod
    def reembed_sync(
        path: str | os.PathLike[str],
        embedder: EmbeddingPort,
        *,
        progress: Callable[[int, int], None] | None = None,
        batch_size: int = 256,
        driver: str | None = None,
    ) -> int:
        """Blocking twin of :meth:`reembed`.

        Example:
            >>> SQLiteMemory.reembed_sync("memory.db", new_embedder)  # doctest: +SKIP
            1200
        """
        return run_sync(
            reembed_file(path, embedder, progress=progress, batch_size=batch_size, driver=driver), method="reembed"
        )

    def checkpoint(self) -> bool:
        """Checkpoint and truncate the WAL now; ``False`` (with a WARNING) when a reader blocks it.

        Example:
            >>> memory.checkpoint()  # doctest: +SKIP
            True
        """
        return self._store.checkpoint()

    def __repr__(self) -> str:
        return f"SQLiteMemory({self.path!r}, keyword_index={self.keyword_index!r}, driver={self.driver!r})"
