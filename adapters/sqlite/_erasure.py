"""Erasure: rows leave every table, then the file is rebuilt and checkpointed, surviving a crash.

An erasure is finished in three steps, each recorded in ``meta.erase_pending``
so that a process killed between them leaves the work to the next open or write:

1. rows are erased (committed with the mark), but pages rebalanced while they
   lived may still hold their bytes in unused space, which ``secure_delete``
   never zeroes;
2. ``VACUUM`` rebuilt every page from the live rows; the old pages are still in
   the database file until the WAL is checkpointed;
3. (no key) the checkpoint overwrote and truncated the file; nothing is left.

See "Erasure" in ``docs/sqlite.md`` for why, what it costs and how it is tested.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ._ann import drop_rids
from ._rows import Conn, fts_rowid, tenant_token
from ._shm import purge_file

if TYPE_CHECKING:
    from ._connection import Database

__all__ = [
    "checkpoint",
    "checkpoint_wal",
    "erase_rows",
    "erase_stage",
    "expired_rows",
    "finish_erasure",
    "fts_slots",
    "mark_erased",
]

logger = logging.getLogger("memoryport")

Row = tuple[int, str, str | None]  # (rid, text, user_id) of a record to erase


def erase_rows(conn: Conn, rows: Sequence[Row], *, keyword_index: str, fts_secure_delete: bool) -> Counter[str]:
    """Delete rows from every table and mark the file; return minus the count per tenant."""
    tenants: Counter[str] = Counter()
    if not rows:
        return tenants
    mark_erased(conn)
    for _, _, user in rows:
        tenants[tenant_token(user)] -= 1
    if keyword_index == "fts5":
        slots = fts_slots(conn, [tenant_token(user) for _, _, user in rows])
        conn.executemany(
            "INSERT INTO records_fts(records_fts, rowid, body, tenant) VALUES ('delete', ?, ?, ?)",
            [(fts_rowid(slots[tenant_token(user)], rid), text, tenant_token(user)) for rid, text, user in rows],
        )
    # Out of the vector index too: their lists are rewritten without them (old pages zeroed).
    drop_rids(conn, [(rid, user) for rid, _, user in rows])
    rids = [(rid,) for rid, _, _ in rows]
    conn.executemany("DELETE FROM vectors WHERE rid = ?", rids)
    conn.executemany("DELETE FROM record_meta WHERE rid = ?", rids)
    conn.executemany("DELETE FROM records WHERE rid = ?", rids)
    if keyword_index == "fts5" and not fts_secure_delete:
        # Without FTS5 secure-delete, deleted words stay in old index segments
        # until a merge rewrites them; 'optimize' merges all (pages freed are
        # zeroed by PRAGMA secure_delete).
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
    return tenants


def fts_slots(conn: Conn, tenants: Iterable[str]) -> dict[str, int]:
    """The slots (see ``_rows.fts_rowid``) of tenants that have records: read, never assigned."""
    slots: dict[str, int] = {}
    for tenant in set(tenants):
        row = conn.execute("SELECT slot FROM generations WHERE tenant = ?", (tenant,)).fetchone()
        slots[tenant] = 0 if row is None or row[0] is None else int(row[0])
    return slots


def expired_rows(conn: Conn, now: int, *, users: Iterable[str | None] | None, cutoff: int | None) -> list[Row]:
    """Records past ``expires_at`` anywhere, and those created before ``cutoff`` (of ``users``, or all)."""
    rows = conn.execute(
        "SELECT rid, text, user_id FROM records WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
    ).fetchall()
    if cutoff is not None:
        if users is None:
            rows += conn.execute(
                "SELECT rid, text, user_id FROM records WHERE created_at < ? "
                "AND (expires_at IS NULL OR expires_at > ?)",
                (cutoff, now),
            ).fetchall()
        else:
            for user in set(users):
                rows += conn.execute(
                    "SELECT rid, text, user_id FROM records WHERE user_id IS ? AND created_at < ? "
                    "AND (expires_at IS NULL OR expires_at > ?)",
                    (user, cutoff, now),
                ).fetchall()
    return [(int(rid), str(text), user) for rid, text, user in rows]


def mark_erased(conn: Conn) -> None:
    """Record, in the erasing transaction, that the file must be rebuilt (step 1)."""
    conn.execute("INSERT INTO meta(key, value) VALUES ('erase_pending', 1) ON CONFLICT(key) DO UPDATE SET value = 1")


def erase_stage(conn: Conn) -> int:
    """0 when no erasure is pending, else the step it stopped at (1 or 2)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'erase_pending'").fetchone()
    return 0 if row is None else int(row[0])


def finish_erasure(db: Database, conn: Conn) -> bool:
    """Rebuild the file without what erased rows left behind, checkpoint, clear the mark.

    Called holding the write lock, outside a transaction. Returns False (after
    a WARNING) when a reader blocks the checkpoint; the next write retries.
    """
    if erase_stage(conn) == 1:
        # VACUUM copies only live rows into fresh pages: the unused space of
        # rebalanced pages (which kept erased bytes) is gone with the old pages.
        # VACUUM INTO + rename would cost one write less but pull the file from
        # under other connections and processes; VACUUM is an ordinary write.
        db.retry_busy(lambda: conn.execute("VACUUM"))
        _set_stage(db, conn, 2)
    done = checkpoint_wal(db, conn)
    # The index lists other processes shared in tmpfs (_shm.py): those not current any more (erased
    # codes among them) go. After the checkpoint, no snapshot from before the erasure is left to publish
    # one again; when a reader blocked it, the retry (next write) purges again.
    purge_file(db.path, conn, db.driver.Error)
    if not done:
        return False
    _set_stage(db, conn, 0)
    checkpoint_wal(db, conn)  # the WAL now holds only the page of that mark
    return True


def _set_stage(db: Database, conn: Conn, stage: int) -> None:
    def write(conn: Conn) -> None:
        if stage:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'erase_pending'", (stage,))
        else:
            conn.execute("DELETE FROM meta WHERE key = 'erase_pending'")

    db.transaction(conn, write)


def checkpoint_wal(db: Database, conn: Conn) -> bool:
    """Copy the WAL into the database and truncate it; False (and a WARNING) when a reader blocks it."""
    conn.execute("PRAGMA busy_timeout = 1000")
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(db.busy_timeout * 1000)}")
    if busy:
        logger.warning(
            "SQLite %s: a reader holds a transaction open, so the WAL checkpoint after a delete could not "
            "finish; erased texts stay in the files until the next write or open finishes the erasure "
            "(or memory.store.checkpoint() succeeds)",
            db.name,
        )
        return False
    db.wal_pages = 0
    return True


def checkpoint(db: Database) -> bool:
    """Finish a pending erasure, or just checkpoint the WAL; False (and a WARNING) when a reader blocks it."""
    db.refuse_if_read_only("checkpoint")
    with db.write_lock:
        conn = db.writer()
        if erase_stage(conn):
            return finish_erasure(db, conn)
        done = checkpoint_wal(db, conn)
        # Lists no longer current (a re-embedding drops the whole index) leave shared memory too.
        purge_file(db.path, conn, db.driver.Error)
        return done
