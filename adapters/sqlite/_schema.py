"""The file's tables: migrations, opening a file (read-write or read-only), and the bookkeeping rows.

``MIGRATIONS`` is a list of statement groups, group *i* taking the file from
version *i* to *i + 1*, applied in order in one transaction when a file is
opened; the version is recorded in ``meta.schema_version``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memoryport._embedding import EmbeddingPort
from memoryport._errors import BackendError, EmbedderMismatch, UsageError

from . import _erasure
from ._ann import ANN_DDL, ANN_FINE_DDL
from ._connection import Database, is_busy
from ._files import cannot_write, tighten
from ._graph import GRAPH_DDL
from ._rows import FILE_ROW, SLOT_MAX, Conn, fts_rowid, tenant_token

__all__ = [
    "FTS_DDL",
    "INBOX_DDL",
    "MIGRATIONS",
    "PAGE_SIZE",
    "PAGE_SIZES",
    "SCHEMA_VERSION",
    "SECURE_DELETE_FTS5",
    "SLOTS_VERSION",
    "bump",
    "meta_int",
    "open_file",
    "rekey_fts",
    "tenant_slots",
]

logger = logging.getLogger("memoryport")

SLOTS_DDL = (
    "ALTER TABLE generations ADD COLUMN slot INTEGER",
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('slots', 0)",
)

# The file's generation and record count move from ``meta`` to the ``generations`` row FILE_ROW (schema 7): an add
# then writes its bookkeeping in one statement and, while the file's users fit one page of that table, to one page
# (before: an UPDATE of ``meta`` and an upsert of ``generations``, ~60 µs of a ~320 µs transaction). Run on a file
# that has it already, it changes nothing: no ``meta`` rows are left to move, and the generation never goes back.
FOLD_DDL = (
    "INSERT INTO generations(tenant, gen, n) "
    "SELECT '', CAST(g.value AS INTEGER), CAST(r.value AS INTEGER) FROM meta g, meta r "
    "WHERE g.key = 'generation' AND r.key = 'records' "
    "ON CONFLICT(tenant) DO UPDATE SET gen = max(gen, excluded.gen), n = excluded.n",
    "INSERT OR IGNORE INTO generations(tenant, gen, n) VALUES ('', 0, 0)",
    "DELETE FROM meta WHERE key IN ('generation', 'records')",
)

# The write-behind log (schema 8; ``write_behind=True``, see ``_store.py``): an add of a store with the option
# commits one row here (the record as its ``records`` row would hold it, and its vector's bytes); the rows are
# moved into the real tables ("drained") in batches, and before any read or other write of any process that can
# write the file sees it. ``id`` is UNIQUE so that an id pending here is a duplicate as one in ``records`` is.
INBOX_DDL = (
    """CREATE TABLE IF NOT EXISTS inbox(
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        user_id TEXT, session_id TEXT, agent_id TEXT,
        text TEXT NOT NULL,
        metadata TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        updated_at INTEGER,
        vec BLOB)""",
)

# Each entry migrates the file from version i to i + 1, in one transaction.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID",
        """CREATE TABLE records(
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT, session_id TEXT, agent_id TEXT,
            text TEXT NOT NULL,
            metadata TEXT,
            created_at INTEGER NOT NULL,
            expires_at INTEGER)""",
        "CREATE INDEX records_user_time ON records(user_id, created_at)",
        "CREATE INDEX records_expiry ON records(expires_at) WHERE expires_at IS NOT NULL",
        "CREATE TABLE vectors(rid INTEGER PRIMARY KEY, vec BLOB NOT NULL)",
        """CREATE TABLE record_meta(rid INTEGER NOT NULL, key TEXT NOT NULL, tag TEXT NOT NULL, value,
            PRIMARY KEY(rid, key)) WITHOUT ROWID""",
        """CREATE TABLE generations(tenant TEXT PRIMARY KEY, gen INTEGER NOT NULL, n INTEGER NOT NULL DEFAULT 0)
            WITHOUT ROWID""",
        "INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', 0), ('records', 0)",
    ),
    ("ALTER TABLE records ADD COLUMN updated_at INTEGER",),
    GRAPH_DDL,
    SLOTS_DDL,  # each user's slot: the high bits of its records' FTS5 rowids (rekey_fts re-keys older files)
    ANN_DDL,  # the vector index of large scopes (_ann.py); files without one are searched exactly as before
    ANN_FINE_DDL,  # int8 codes in the index's lists; older indexes are dropped (rebuilt in the background)
    FOLD_DDL,  # the file's generation and record count in ``generations`` (row FILE_ROW), not ``meta``
    INBOX_DDL,  # the write-behind log of adds not yet in the tables (``write_behind=True``); empty otherwise
]
SCHEMA_VERSION = len(MIGRATIONS)
SLOTS_VERSION = MIGRATIONS.index(SLOTS_DDL) + 1  # files below it get their FTS5 rowids re-keyed

FTS_DDL = (
    "CREATE VIRTUAL TABLE records_fts USING fts5(body, tenant, content='', "
    "tokenize='porter unicode61 remove_diacritics 2')"
)
SECURE_DELETE_FTS5 = (3, 42, 0)

#: The page size of a new file unless ``page_size`` says otherwise, and the sizes allowed. 8 KiB (SQLite's own
#: default is 4 KiB): five 384-float vector rows fill a page where 4 KiB holds two, so bulk loads with vectors
#: take ~1.2x the records per CPU second, as with 16 KiB, while a single add writes half 16 KiB's WAL bytes
#: (docs/benchmarks-sqlite.md, "Bulk add, round six"); a file keeps the size it was created with (WAL mode
#: cannot change it).
PAGE_SIZE = 8192
PAGE_SIZES = (4096, 8192, 16384, 32768, 65536)


def meta_int(path: str, key: str, value: Any) -> int:
    """An integer setting of the file's ``meta`` table, or a typed error naming the file and key."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit() and len(value) < 20:
        return int(value)
    state = "missing" if value is None else f"{str(value)[:40]!r}, not an integer"
    raise UsageError(f"{path}: meta.{key} is {state}; the file is damaged or was not written by memoryport")


def bump(
    conn: Conn, deltas: Mapping[str, int], old: Mapping[str, int] | None = None, file_gen: int | None = None
) -> tuple[int, dict[str, int]]:
    """Advance the file's generation for these tenants and their record counts by ``deltas``.

    The generation tells every process's vector cache that a tenant changed; the
    counts steer the keyword plan. Returns the new generation and the tenants'
    previous ones (-1: none). ``old``: those previous generations when the
    caller read them in this transaction already (as an add does), for every
    tenant of ``deltas``; else they are read here. ``file_gen``: likewise the
    file's generation (row :data:`~._rows.FILE_ROW`) as read in this transaction.

    One statement when both are given: the file's row (its generation and
    record count) and the tenants' rows in one upsert.
    """
    tenants = sorted(deltas)
    if not tenants:
        return -1, {}
    if file_gen is None:
        row = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (FILE_ROW,)).fetchone()
        file_gen = 0 if row is None else int(row[0])
    gen = file_gen + 1
    if old is None or not all(t in old for t in tenants):
        before: dict[str, int] = {}
        for tenant in tenants:
            row = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant,)).fetchone()
            before[tenant] = -1 if row is None else int(row[0])
    else:
        before = {t: old[t] for t in tenants}
    conn.executemany(
        "INSERT INTO generations(tenant, gen, n) VALUES (?, ?, ?) "
        "ON CONFLICT(tenant) DO UPDATE SET gen = excluded.gen, n = n + excluded.n",
        [(FILE_ROW, gen, sum(deltas.values())), *((t, gen, deltas[t]) for t in tenants if t != FILE_ROW)],
    )
    return gen, before


def tenant_slots(conn: Conn, tenants: Iterable[str]) -> dict[str, int]:
    """Each tenant's slot (see :func:`~._rows.fts_rowid`), giving the next free one to a tenant without one.

    A slot stays a tenant's while any of its records is in the file (its
    ``generations`` row goes only with its last record); beyond
    :data:`~._rows.SLOT_MAX` tenants, new ones share slot 0.
    """
    slots: dict[str, int] = {}
    for tenant in sorted(set(tenants)):
        row = conn.execute("SELECT slot FROM generations WHERE tenant = ?", (tenant,)).fetchone()
        if row is not None and row[0] is not None:
            slots[tenant] = int(row[0])
            continue
        taken = conn.execute(
            "UPDATE meta SET value = value + 1 WHERE key = 'slots' AND value < ? RETURNING value", (SLOT_MAX,)
        ).fetchone()
        slot = 0 if taken is None else int(taken[0])
        # gen -1 until bump() sets it in the same transaction (-1 reads as "no generation yet").
        conn.execute(
            "INSERT INTO generations(tenant, gen, n, slot) VALUES (?, -1, 0, ?) "
            "ON CONFLICT(tenant) DO UPDATE SET slot = excluded.slot",
            (tenant, slot),
        )
        slots[tenant] = slot
    return slots


def rekey_fts(conn: Conn) -> int:
    """Give every user a slot and re-index every record under its FTS5 rowid (a file from before slots).

    The index is emptied and filled again from ``records`` (the table is
    contentless: the texts come from there); returns the records indexed.
    """
    users = [r[0] for r in conn.execute("SELECT user_id FROM records GROUP BY user_id ORDER BY min(rid)")]
    slots = tenant_slots(conn, [tenant_token(u) for u in users])
    conn.execute("INSERT INTO records_fts(records_fts) VALUES ('delete-all')")
    done = 0
    cursor = conn.execute("SELECT rid, text, user_id FROM records ORDER BY rid")
    while rows := cursor.fetchmany(10_000):
        batch = []
        for rid, text, user in rows:
            tenant = tenant_token(user)
            batch.append((fts_rowid(slots[tenant], int(rid)), text, tenant))
        conn.executemany("INSERT INTO records_fts(rowid, body, tenant) VALUES (?, ?, ?)", batch)
        done += len(batch)
    return done


def open_file(
    db: Database,
    *,
    page_size: int | None = None,
    use_fts5: bool,
    embedder: EmbeddingPort | None,
    sqlite_version: tuple[int, ...],
    driver_name: str,
) -> str:
    """Open (and migrate) the file; return its keyword index, ``"fts5"`` or ``"like"``.

    Read-write when it can, else read-only (``db.read_only`` says why) when the
    file or its folder cannot be written. Every failure is a typed error naming
    the path; the connections are closed after one.
    """
    opening = _Opening(db, use_fts5, embedder, sqlite_version, driver_name, page_size)
    try:
        return opening.open()
    except db.driver.OperationalError as exc:
        db.close()
        why = None if is_busy(exc) else cannot_write(db.path)
        if why is None:
            raise BackendError(
                f"SQLite {db.path} could not be opened: {exc}", backend=db.backend, operation="open"
            ) from exc
    except db.driver.DatabaseError as exc:
        db.close()
        # "file is not a database", "database disk image is malformed": the path is wrong.
        raise UsageError(f"{db.path} cannot be opened as a memoryport SQLite file: {exc}") from exc
    except BaseException:
        db.close()
        raise
    # The file, or its folder (where SQLite keeps -wal and -shm), is not writable
    # by this process: open for reading, and refuse writes with a clear error.
    db.read_only = why
    try:
        return opening.open()
    except db.driver.OperationalError as exc:
        db.close()
        error: BaseException = exc
    except db.driver.DatabaseError as exc:
        db.close()
        raise UsageError(f"{db.path} cannot be opened even for reading ({why}): {exc}") from exc
    except BaseException:
        db.close()
        raise
    # A reader needs the -shm file; where it cannot be created and no -wal holds
    # changes, the file is read as immutable (nobody can be writing it in WAL mode then).
    try:
        wal_size = os.path.getsize(db.path + "-wal")
    except OSError:
        wal_size = 0
    if wal_size == 0 and not os.path.exists(db.path + "-shm"):
        db.ro_mode = "immutable=1"
        try:
            return opening.open()
        except db.driver.DatabaseError as exc:
            db.close()
            error = exc
        except BaseException:
            db.close()
            raise
    raise UsageError(f"{db.path} cannot be opened even for reading ({why}): {error}") from error


@dataclass
class _Opening:
    db: Database
    use_fts5: bool
    embedder: EmbeddingPort | None
    sqlite_version: tuple[int, ...]
    driver_name: str
    page_size: int | None = None

    def open(self) -> str:
        db = self.db
        conn = db.conn()
        if db.read_only is None:
            # Takes effect only on a file without tables yet (before WAL mode writes its first page); a file
            # keeps its size, checked in _open.
            conn.execute(f"PRAGMA page_size = {int(self.page_size or PAGE_SIZE)}")
            conn.execute("PRAGMA journal_mode = WAL")
            tighten(db.path)
        kind, pending = db.transaction(conn, self._open, immediate=db.read_only is None)
        db.keep_wal()  # the -wal exists now (unless read as immutable): keep it from being deleted under us
        if pending and db.read_only is None:  # an erasure that a killed process left half done
            with db.write_lock:
                _erasure.finish_erasure(db, conn)
        return kind

    def _open(self, conn: Conn) -> tuple[str, int]:
        db = self.db
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = meta_int(db.path, "schema_version", None if row is None else row[0])
        elif tables - {"sqlite_sequence"}:
            raise UsageError(f"{db.path} is an SQLite file but not a memoryport store")
        else:
            version = 0
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"{db.path} has schema version {version}, newer than this memoryport "
                f"({SCHEMA_VERSION}); upgrade memoryport"
            )
        if self.page_size is not None and version:
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            if size != self.page_size:
                raise UsageError(
                    f"{db.path} has pages of {size:,} bytes, not page_size={self.page_size:,}: a file keeps the "
                    "page size it was created with (open it without page_size, or copy its records into a new "
                    "file with copy_memories)"
                )
        if db.read_only is not None:
            return self._open_read_only(conn, version), 0
        created = version == 0
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (SCHEMA_VERSION,),
        )
        # A random id of this file: with its device and inode, the key of the caches shared in a process.
        conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('file_id', lower(hex(randomblob(16))))")
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if created:
            if self.use_fts5 and self._has_fts5(conn):
                conn.execute(FTS_DDL)
                kind = "fts5"
            else:
                kind = "like"
                logger.warning(
                    "%s: keyword search in %s uses LIKE (no word stems, no BM25 ranking)",
                    f"SQLite {'.'.join(map(str, self.sqlite_version))} has no FTS5"
                    if self.use_fts5
                    else "use_fts5=False",
                    db.name,
                )
            conn.execute("INSERT INTO meta(key, value) VALUES ('keyword_index', ?)", (kind,))
        else:
            kind = self._existing_index(conn, meta)
            if kind == "fts5" and version < SLOTS_VERSION:
                logger.warning("SQLite %s: re-indexing the keyword index by user (once, for this version)", db.name)
                rekey_fts(conn)
        if kind == "fts5" and self.sqlite_version >= SECURE_DELETE_FTS5:
            conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('secure-delete', 1)")
        self._check_embedder(conn, meta)
        return kind, _erasure.erase_stage(conn)

    def _open_read_only(self, conn: Conn, version: int) -> str:
        """The checks of :meth:`_open` without its writes (migrations, settings, the embedder's record)."""
        db = self.db
        if version < SCHEMA_VERSION:
            raise UsageError(
                f"{db.path} has schema version {version} and needs migrating to {SCHEMA_VERSION}, "
                f"but it is read-only ({db.read_only})"
            )
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        kind = self._existing_index(conn, meta)
        if (
            meta.get("embedder_name") is not None
            or conn.execute("SELECT 1 FROM records UNION ALL SELECT 1 FROM inbox LIMIT 1").fetchone()
        ):
            self._check_embedder(conn, meta)
        if _erasure.erase_stage(conn):
            logger.warning(
                "SQLite %s: an erasure was interrupted and cannot be finished, the file is read-only (%s); "
                "erased texts may remain in it until a process that can write opens it",
                db.name,
                db.read_only,
            )
        return kind

    def _has_fts5(self, conn: Conn) -> bool:
        try:
            conn.execute("CREATE VIRTUAL TABLE temp.memoryport_fts_probe USING fts5(x)")
            conn.execute("DROP TABLE temp.memoryport_fts_probe")
        except self.db.driver.OperationalError:
            return False
        return True

    def _existing_index(self, conn: Conn, meta: Mapping[str, Any]) -> str:
        path = self.db.path
        kind = meta.get("keyword_index", "like")
        if kind not in ("fts5", "like"):
            raise UsageError(f"{path}: meta.keyword_index is {kind!r}, not 'fts5' or 'like'; the file is damaged")
        if kind == "fts5" and not self._has_fts5(conn):
            raise UsageError(
                f"{path} uses FTS5, which SQLite "
                f"{'.'.join(map(str, self.sqlite_version))} of driver {self.driver_name!r} lacks; "
                'open it with another driver (pip install "memoryport[sqlite-new]")'
            )
        return str(kind)

    def _check_embedder(self, conn: Conn, meta: Mapping[str, Any]) -> None:
        name, dim = meta.get("embedder_name"), meta.get("embedder_dim")
        if dim is not None:
            dim = meta_int(self.db.path, "embedder_dim", dim)
        emb = self.embedder
        way_out = (
            "re-embed it first: `await SQLiteMemory.reembed(path, embedder, progress=...)` "
            "(or `SQLiteMemory.reembed_sync(...)`; with the local model: `memoryport reembed --db PATH`)"
        )
        if emb is None:
            return
        if name is None:
            # Records still in the write-behind log count: they were added without vectors too.
            count = conn.execute("SELECT (SELECT count(*) FROM records) + (SELECT count(*) FROM inbox)").fetchone()[0]
            if count:
                raise EmbedderMismatch(
                    f"{self.db.name} holds {count} records without vectors and was opened "
                    f"with embedder {emb.name!r}; {way_out}"
                )
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('embedder_name', ?), ('embedder_dim', ?)",
                (emb.name, int(emb.dim)),
            )
            return
        if name != emb.name or dim is None or int(dim) != int(emb.dim):
            raise EmbedderMismatch(
                f"{self.db.name} holds vectors of embedder {name!r} (dim {dim}) and was opened "
                f"with {emb.name!r} (dim {emb.dim}); open it with the same embedder, or {way_out}"
            )
