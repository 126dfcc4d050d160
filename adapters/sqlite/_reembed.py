"""Re-embedding a file with another embedder: new vectors beside the old ones, swapped in by one transaction."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from memoryport._checks import check_int
from memoryport._embedding import EmbeddingPort
from memoryport._errors import UsageError

from ._rows import Conn
from ._schema import bump
from ._vectors import embed

if TYPE_CHECKING:
    from ._store import SQLiteStore

__all__ = ["reembed_file"]


async def reembed_file(
    path: str | os.PathLike[str],
    embedder: EmbeddingPort,
    *,
    progress: Callable[[int, int], None] | None = None,
    batch_size: int = 256,
    driver: str | None = None,
) -> int:
    """Re-embed every record of a file with ``embedder`` and record it as the file's embedder.

    The way out of :class:`~memoryport.EmbedderMismatch`. ``progress(done,
    total)`` is called after each batch. New vectors go to a side table in
    batches and are swapped in by one transaction at the end, so a crash or an
    embedder failure leaves the file as it was (the next run resumes).
    Returns how many records were embedded.

    Example:
        >>> await reembed_file("memory.db", new_embedder,  # doctest: +SKIP
        ...                    progress=lambda done, total: print(done, "/", total))
    """
    check_int(batch_size, "batch_size")

    from ._store import SQLiteStore  # the store module re-exports this function

    def open_store() -> SQLiteStore:
        if not os.path.exists(os.fspath(path)):
            raise UsageError(f"no such SQLite file: {os.fspath(path)}")
        return SQLiteStore(path, driver=driver, workers=1)

    store = await asyncio.to_thread(open_store)
    try:
        return await _reembed(store, embedder, progress, batch_size)
    finally:
        await store.aclose()


async def _reembed(
    store: SQLiteStore,
    embedder: EmbeddingPort,
    progress: Callable[[int, int], None] | None,
    batch_size: int,
) -> int:
    def setup(conn: Conn) -> int:
        conn.execute("CREATE TABLE IF NOT EXISTS vectors_reembed(rid INTEGER PRIMARY KEY, vec BLOB NOT NULL)")
        conn.execute("DELETE FROM vectors_reembed WHERE rid NOT IN (SELECT rid FROM records)")
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])

    total = await asyncio.to_thread(store.db.write, setup)
    done = 0
    missing = (
        "SELECT r.rid, r.text FROM records r LEFT JOIN vectors_reembed n ON n.rid = r.rid "
        "WHERE n.rid IS NULL ORDER BY r.rid LIMIT ?"
    )
    if progress is not None:
        progress(0, total)
    while True:
        batch = await asyncio.to_thread(store.db.read, lambda conn: conn.execute(missing, (batch_size,)).fetchall())
        if not batch:

            def swap(conn: Conn) -> bool:
                if conn.execute(missing, (1,)).fetchone() is not None:
                    return False  # records arrived meanwhile: embed them first
                conn.execute("DELETE FROM vectors_reembed WHERE rid NOT IN (SELECT rid FROM records)")
                # The index was built from the old vectors (perhaps another dimension): gone; rebuilt on demand.
                conn.execute("DELETE FROM ann_assign")
                conn.execute("DELETE FROM ann_lists")
                conn.execute("DELETE FROM ann_index")
                conn.execute("DELETE FROM vectors")
                conn.execute("INSERT INTO vectors SELECT rid, vec FROM vectors_reembed")
                conn.execute("DROP TABLE vectors_reembed")
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('embedder_name', ?), ('embedder_dim', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (embedder.name, int(embedder.dim)),
                )
                bump(conn, {r[0]: 0 for r in conn.execute("SELECT tenant FROM generations WHERE tenant != ''")})
                return True

            if await asyncio.to_thread(store.db.write, swap):
                await asyncio.to_thread(store.checkpoint)
                break
            continue
        vectors = await embed(embedder, [text for _, text in batch])
        rows = [(rid, vectors[i].tobytes()) for i, (rid, _) in enumerate(batch)]

        def insert(conn: Conn, rows: list[tuple[int, bytes]] = rows) -> None:
            conn.executemany("INSERT OR REPLACE INTO vectors_reembed VALUES (?, ?)", rows)

        await asyncio.to_thread(store.db.write, insert)
        done += len(batch)
        if progress is not None:
            progress(min(done, max(total, done)), max(total, done))
    return done
