"""Connections and transactions: one connection per worker thread, writes serialised, reads on a snapshot.

:class:`Database` knows the file and the driver; it does not know the schema.
After every write transaction it finishes an erasure left pending in the file
(see ``_erasure.py``): by this write, or by a process killed before it could.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.request
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from memoryport._errors import BackendError, UsageError, WalRemoved

from . import _erasure, _locks
from ._rows import Conn

__all__ = ["CHECKPOINT_PAGES", "DURABILITY", "Database", "NotHere", "is_busy"]

logger = logging.getLogger("memoryport")
T = TypeVar("T")


#: ``durability=`` → SQLite's ``synchronous`` level (the journal is always WAL).
#: ``normal``: a commit is appended to the WAL without fsync; it survives the
#: application's crash, a power loss or OS crash can lose the last transactions
#: (never corrupts the file). ``full``: every commit fsyncs the WAL; it survives
#: a power loss too, at the price of one fsync per write.
DURABILITY = {"normal": "NORMAL", "full": "FULL"}

#: Copy the WAL back into the file once about this many pages were written to it
#: since (SQLite's own ``wal_autocheckpoint`` would do it inside whichever commit
#: crossed the mark, possibly a small add running on the caller's event loop).
CHECKPOINT_PAGES = 10_000


#: The SQLite library each file of this process is open through, by (device, inode):
#: the Databases holding it, and the driver module's name.
_LIBRARIES: dict[tuple[int, int], tuple[str, weakref.WeakSet[Database]]] = {}
_LIBRARIES_LOCK = threading.Lock()


def claim_library(db: Database) -> None:
    """Record that ``db`` opens its file through its driver; refuse a second SQLite library on the same file.

    Two copies of SQLite in one process (Python's ``sqlite3`` and
    ``pysqlite3``, say) each think they are alone with the file: POSIX locks
    belong to the process, so neither sees the other's, and the second one to
    open a WAL file re-initialises the ``-shm`` index the first one has mapped
    (a crash with SIGBUS, or a corrupt file:
    https://sqlite.org/howtocorrupt.html, "multiple copies of SQLite").
    Also refuses (:class:`~memoryport.WalRemoved`) while another Database of the
    same library on the file lost its ``-wal`` (see :meth:`Database.check_wal`):
    SQLite would hand the new connections that store's map of the deleted ``-shm``.
    """
    try:
        st = os.stat(db.path)
    except OSError:
        return  # opening will fail with its own error
    key = (st.st_dev, st.st_ino)
    name = db.driver.__name__
    with _LIBRARIES_LOCK:
        held = _LIBRARIES.get(key)
        if held is not None and held[0] == name and any(other.wal_removed() for other in held[1]):
            # That store's connections keep SQLite's map of the deleted -shm alive: a new connection of the same
            # library would share it, while other processes use a new -shm (each would overwrite the other's).
            raise WalRemoved(
                f"{os.path.basename(db.path)} cannot be opened again yet: another store of this process on the file "
                "lost its -wal to another SQLite library (see WalRemoved); close every store of this process on "
                "the file first, then open it",
                backend=db.backend,
                operation="open",
            )
        if held is not None and held[0] != name and len(held[1]):
            raise UsageError(
                f"{os.path.basename(db.path)} is already open in this process through another SQLite library "
                f"({held[0]}); open it with the same driver= (two copies of SQLite in one process break each "
                f"other's locks and can corrupt the file)"
            )
        if held is None or held[0] != name:
            held = _LIBRARIES[key] = (name, weakref.WeakSet())
        held[1].add(db)


def release_library(db: Database) -> None:
    """Forget ``db``'s claim on its file (see :func:`claim_library`)."""
    with _LIBRARIES_LOCK:
        for key, (_, holders) in list(_LIBRARIES.items()):
            holders.discard(db)
            if not len(holders):
                del _LIBRARIES[key]


class NotHere(Exception):
    """A write tried on the caller's thread that cannot finish there without waiting; run it on the writer."""


def is_busy(exc: BaseException) -> bool:
    """Whether a driver error means another connection holds the lock."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Database:
    """The SQLite file as connections: per-thread, read-write or read-only, with write and read transactions."""

    def __init__(
        self,
        path: str,
        driver: ModuleType,
        *,
        busy_timeout: float,
        backend: str = "sqlite",
        durability: str = "normal",
    ) -> None:
        self.path = path
        self.synchronous = DURABILITY[durability]
        self.driver = driver
        self.busy_timeout = busy_timeout
        self.backend = backend
        #: Why the file is open read-only (None: read-write); set when opening finds it cannot write.
        self.read_only: str | None = None
        #: The URI parameter of a read-only open: ``mode=ro``, or ``immutable=1`` where -shm cannot be made.
        self.ro_mode = "mode=ro"
        self.write_lock = threading.Lock()
        #: The one connection every write of this process uses (under ``write_lock``),
        #: from whichever thread: its page cache stays warm. Reads use per-thread ones.
        self._writer: Conn | None = None
        #: The writer's busy timeout is 0 (left so by :meth:`write_here`; :meth:`writer` restores it).
        self._writer_nowait = False
        #: WAL pages written since this process last checkpointed (an estimate; see :meth:`wrote`).
        self.wal_pages = 0
        self._local = threading.local()
        self._connections: list[Conn] = []
        self._conn_lock = threading.Lock()
        #: Moves the write-behind log (table ``inbox``) into the tables, in the caller's write transaction on
        #: the given connection (``here``: on the caller's thread, so raise :class:`NotHere` for slow work);
        #: returns what to do once that transaction committed, or None when the log was empty. Set by the
        #: store of a file this process can write (None: read-only, nothing can be drained): every write
        #: transaction runs it first, and every read first drains a log it finds non-empty, so that nothing
        #: ever sees the file with rows still in the log (see "Write-behind" in ``docs/sqlite.md``).
        self.drain: Callable[[Conn, bool], Callable[[], None] | None] | None = None
        #: The file's ``-wal`` held open (POSIX), to notice another SQLite library removing it (see :meth:`check_wal`).
        self._wal_fd: int | None = None
        #: The file's key in ``_locks`` while this Database holds its share of the locks that keep the -wal alive.
        self._pinned: tuple[int, int] | None = None
        claim_library(self)

    def keep_wal(self) -> None:
        """Once the connections opened the file in WAL mode: keep its ``-wal`` from being deleted under them.

        On Linux, OFD locks on SQLite's own lock bytes (see ``_locks.py``): no
        other copy of SQLite in this process, nor another process after a
        descriptor of the file was closed here, can then take itself for the
        file's last user and delete the WAL. Elsewhere, or if the locks could not
        be taken, :meth:`watch_wal`: every read and write checks the WAL first.
        No-op where there is no ``-wal`` (a read-only file read as immutable).
        """
        if self.ro_mode == "immutable=1" or self._pinned is not None or self._wal_fd is not None:
            return
        try:
            st = os.stat(self.path)
        except OSError:
            return
        key = (st.st_dev, st.st_ino)
        if _locks.pin(self.path, key, wait=self.busy_timeout):
            self._pinned = key
        else:
            self.watch_wal()

    def watch_wal(self) -> None:
        """Hold the file's ``-wal`` open from now on (once the connections use it), for :meth:`check_wal`.

        No-op where there is no ``-wal`` (a read-only file opened as immutable)
        and off POSIX (Windows does not delete a file that is open).
        """
        if os.name != "posix" or self._wal_fd is not None:
            return
        try:
            self._wal_fd = os.open(self.path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._wal_fd = None

    def wal_removed(self) -> bool:
        """Whether the ``-wal`` held open since opening was deleted (see :meth:`check_wal`)."""
        fd = self._wal_fd
        if fd is None:
            return False
        try:
            return os.fstat(fd).st_nlink == 0
        except OSError:
            return False

    def check_wal(self, operation: str) -> None:
        """Raise :class:`~memoryport.WalRemoved` when the ``-wal`` the connections use was deleted.

        Another copy of SQLite in this process (Python's ``sqlite3`` while this
        file is open through ``pysqlite3``, say) does not see this process's
        locks: closing its last connection to the file, it checkpoints the WAL
        into the file and deletes ``-wal`` and ``-shm``. These connections keep
        both open: what they would commit goes into the deleted WAL (lost at
        close, unseen by other processes) and what they read misses other
        processes' writes. So every read and write checks first (one ``fstat``
        of the ``-wal`` held open since opening: no link left means deleted) and
        refuses; what was committed before the deletion is in the file (its
        deleter checkpointed it), and reopening the store continues from there.
        A write committed while the other library closes (from another thread,
        within that microsecond) is not covered. Costs one ``fstat`` (+1.7 to
        +2.4 µs per logged add measured), so only where :meth:`keep_wal` could
        not take its locks (off Linux); with them the WAL is never deleted.
        """
        if self._wal_fd is not None and self.wal_removed():
            raise WalRemoved(
                f"SQLite {self.name}: its -wal file was removed under this store, most likely by another SQLite "
                f"library of this process (a connection to the file opened through a module other than the "
                f"store's {self.driver.__name__}, then closed; closing any descriptor of the file releases the "
                "process's locks, and another process may then delete it too); "
                + (
                    "this write would be lost at close, so nothing was written. "
                    if operation == "write"
                    else "this read could miss other processes' writes, so nothing was read. "
                )
                + "What the store acknowledged before is in the file: "
                "close the store and open it again (to look into a live file from this process, use "
                "memory.store.driver.connect(path))",
                backend=self.backend,
                operation=operation,
            )

    @property
    def name(self) -> str:
        """The file's name, for log lines (never the whole path)."""
        return os.path.basename(self.path)

    def _connect(self, *, writer: bool = False, busy_timeout: float | None = None) -> Conn:
        timeout = self.busy_timeout if busy_timeout is None else busy_timeout
        if self.read_only is None:
            target, uri = self.path, False
        else:
            target = "file:" + urllib.request.pathname2url(os.path.abspath(self.path)) + "?" + self.ro_mode
            uri = True
        conn = self.driver.connect(target, timeout=timeout, isolation_level=None, check_same_thread=False, uri=uri)
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        # Reads straight from the OS page cache instead of a copy per page: random
        # row lookups in a large file cost 5-8 µs each through read() here, and a
        # warm 1M-vector load took 9.3 s with 1 GiB mapped, 2.9 s with all of it.
        # Address space only; SQLite caps it at its compile-time maximum.
        conn.execute("PRAGMA mmap_size = 8589934592")
        conn.execute("PRAGMA cache_size = -32768")
        # Checkpoint every ~40 MB of WAL instead of ~4 MB: hot index pages are
        # copied back less often (bulk add of 100k: 91k instead of 70k records/s).
        # The writer connection checkpoints itself (see wrote()); readers never
        # write. Erasures still checkpoint (TRUNCATE) at once.
        conn.execute(f"PRAGMA wal_autocheckpoint = {0 if writer else CHECKPOINT_PAGES}")
        with self._conn_lock:
            self._connections.append(conn)
        return conn

    def conn(self) -> Conn:
        """This thread's connection (opened on first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def writer(self) -> Conn:
        """The writers' connection (opened on first use); use it only holding :attr:`write_lock`.

        It waits up to the busy timeout for another process's lock (restored here
        if :meth:`write_here` left it at 0).
        """
        conn = self._writer
        if conn is None:
            conn = self._writer = self._connect(writer=True)
        if self._writer_nowait:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self._writer_nowait = False
        return conn

    def _writer_here(self) -> Conn:
        """The writers' connection with a busy timeout of 0 (holding :attr:`write_lock`), for :meth:`write_here`.

        The timeout stays 0 until :meth:`writer` restores it: consecutive small
        adds on the caller's thread pay no ``PRAGMA`` (two statements, ~10 % of
        such an add's CPU before).
        """
        conn = self._writer
        if conn is None:
            conn = self._writer = self._connect(writer=True)
        if not self._writer_nowait:
            conn.execute("PRAGMA busy_timeout = 0")
            self._writer_nowait = True
        return conn

    def wrote(self, pages: int) -> bool:
        """Count ``pages`` more written to the WAL (an estimate); True when a checkpoint is due.

        Called holding :attr:`write_lock` after a commit. The estimate errs high
        for small writes (every table and index touched counts a page).
        """
        self.wal_pages += pages
        return self.wal_pages >= CHECKPOINT_PAGES

    def checkpoint_passive(self) -> None:
        """Copy what the WAL holds back into the file without waiting for readers (holding ``write_lock``).

        What SQLite's ``wal_autocheckpoint`` does; a reader still using old
        pages only stops it early (the next one continues). Failures are logged.
        """
        self.wal_pages = 0
        try:
            self.writer().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except self.driver.Error as exc:
            logger.warning(
                "SQLite %s: a WAL checkpoint failed (%s); the next one retries", self.name, type(exc).__name__
            )

    def read_nowait(self, fn: Callable[[Conn], T]) -> T:
        """:meth:`read` on the caller's thread, on a connection that never waits for a lock.

        For the fast path of a small search run on the event loop's thread: when
        the file is busy (a WAL recovery or checkpoint in another process) it
        raises the driver's ``OperationalError`` at once instead of blocking the
        loop; the caller then runs the search in a worker thread.
        """
        self.check_wal("read")
        conn = self._nowait()
        conn.execute("BEGIN")
        if self.drain is not None and self._logged(conn):
            # The write-behind log holds adds: drain them here if that needs no waiting, else NotHere.
            conn.execute("COMMIT")
            if self.write_here(_drained, drain=True) is None:
                raise NotHere
            conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def _nowait(self) -> Conn:
        """This thread's connection that never waits for a lock (opened on first use)."""
        conn: Conn | None = getattr(self._local, "nowait", None)
        if conn is None:
            conn = self._local.nowait = self._connect(busy_timeout=0.0)
        return conn

    def at_once(self, fn: Callable[[Conn], T]) -> T:
        """``fn`` on :meth:`read_nowait`'s connection, outside a transaction: each statement its own snapshot.

        For a caller that reads in one statement, and checks in it that what it used from RAM is current.
        """
        self.check_wal("read")
        return fn(self._nowait())

    @staticmethod
    def _logged(conn: Conn) -> bool:
        """Whether the write-behind log holds rows (in the caller's read transaction)."""
        return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM inbox)").fetchone()[0])

    def drain_now(self) -> None:
        """Move the write-behind log into the tables now (a write transaction of its own; no-op when empty)."""
        self.write_staged(_drained)

    def retry_busy(self, fn: Callable[[], T]) -> T:
        """Call ``fn``, retrying with back-off while another process holds the lock past the busy timeout."""
        for attempt in range(6):
            try:
                return fn()
            except self.driver.OperationalError as exc:
                if not is_busy(exc) or attempt == 5:
                    raise
                time.sleep(0.05 * (2**attempt))
        raise AssertionError("unreachable")

    def begin(self, conn: Conn, immediate: bool = True) -> None:
        """Start a transaction (``BEGIN IMMEDIATE`` takes the write lock at once)."""
        self.retry_busy(lambda: conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN"))

    def transaction(self, conn: Conn, fn: Callable[[Conn], T], *, immediate: bool = True) -> T:
        """``fn`` in one transaction on ``conn``: committed if it returns, rolled back if it raises."""
        self.begin(conn, immediate)
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def write(self, fn: Callable[[Conn], T], *, erasing: bool = False) -> T:
        """Run ``fn`` in one write transaction; then finish any erasure pending in the file.

        A write that erased rows marks the file (``_erasure.mark_erased``, same
        transaction); so does nothing else. The mark is read back before the
        commit, so an erasure interrupted in another process (killed after its
        commit) is finished by the next write of any process. If finishing fails
        (a full disk, ...), an erasing call (``delete``, ``purge``) raises, since
        its bytes are not gone yet; any other write has committed and must not
        look failed (a retry would store it twice): it logs a WARNING. The mark
        stays either way, and the next write or open retries.
        """

        def body(conn: Conn) -> tuple[T, int]:
            return fn(conn), _erasure.erase_stage(conn)

        return self.write_staged(body, erasing=erasing)

    def write_staged(self, fn: Callable[[Conn], tuple[T, int]], *, erasing: bool = False, drain: bool = True) -> T:
        """:meth:`write` for a ``fn`` that returns its result and the file's erasure stage at its end.

        ``fn`` knows the stage when it read ``meta.erase_pending`` in the
        transaction and erased nothing after (or erased: stage 1); it saves
        :meth:`write` a statement per transaction. The write-behind log is
        drained first, in the same transaction (``drain=False``: an add to the log).
        """
        with self.write_lock:
            self.check_wal("write")
            conn = self.writer()
            before = conn.total_changes
            after: list[Callable[[], None] | None] = [None]
            hook = self.drain if drain else None
            if hook is not None:

                def body(conn: Conn) -> tuple[T, int]:
                    after[0] = hook(conn, False)
                    return fn(conn)

                result, pending = self.transaction(conn, body)
            else:
                result, pending = self.transaction(conn, fn)
            if after[0] is not None:
                after[0]()
            if self.wrote(pages_of(conn.total_changes - before)) and not pending:
                self.checkpoint_passive()
            if pending:
                try:
                    _erasure.finish_erasure(self, conn)
                except self.driver.Error as exc:
                    if erasing:
                        raise BackendError(
                            f"SQLite {self.name}: the records were deleted, but rebuilding the file to erase "
                            f"their bytes failed ({exc}); the next write or open retries",
                            backend=self.backend,
                            operation="delete",
                        ) from exc
                    logger.warning(
                        "SQLite %s: finishing an erasure failed (%s); the next write or open retries",
                        self.name,
                        type(exc).__name__,
                    )
            return result

    def write_here(self, fn: Callable[[Conn], tuple[T, int]], *, drain: bool = False) -> tuple[T, bool] | None:
        """:meth:`write_staged` on the caller's thread if it can finish without waiting, else None.

        None (nothing written) when another thread of this process holds the
        write lock, another process holds the file's (at ``BEGIN`` or at any
        statement after: this connection never waits), or ``fn`` raised
        :class:`NotHere` (its transaction is rolled back). Any other error of
        ``fn`` rolls back and propagates, as on the writer thread. The second
        item of the result says a checkpoint (or a pending erasure's finish)
        is due: the caller hands it to the writer thread. Readers never block
        it (WAL); a full ``synchronous`` would fsync here, so callers use it at
        ``synchronous=NORMAL`` only. ``drain``: drain the write-behind log first
        (an add that finds the log non-empty raises NotHere itself instead).
        """
        if not self.write_lock.acquire(blocking=False):
            return None
        try:
            self.check_wal("write")
            # Another process's write lock: no waiting here (the busy timeout is for the writer thread).
            conn = self._writer_here()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except self.driver.OperationalError as exc:
                if is_busy(exc):
                    return None
                raise
            before = conn.total_changes
            after = None
            try:
                if drain and self.drain is not None:
                    after = self.drain(conn, True)
                result, pending = fn(conn)
                conn.execute("COMMIT")
            except NotHere:
                conn.execute("ROLLBACK")
                return None
            except self.driver.OperationalError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if is_busy(exc):  # this connection waits for nobody: the writer thread (which does) runs it again
                    return None
                raise
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if after is not None:
                after()
            due = self.wrote(pages_of(conn.total_changes - before))
            return result, bool(pending) or due
        finally:
            self.write_lock.release()

    def insert_here(self, sql: str, params: tuple[Any, ...]) -> tuple[int, bool] | None:
        """One statement as a transaction of its own (autocommit) on the caller's thread; None if it would wait.

        What :meth:`write_here` does for a write of one statement, without its
        ``BEGIN IMMEDIATE`` and ``COMMIT`` (two statements, ~8 µs of a ~30 µs
        logged add): SQLite runs a statement outside a transaction in one of its
        own, committed when the statement ends. Returns the rows it changed and
        whether a checkpoint is due (the caller hands it to the writer thread);
        None (nothing written) when another thread or process holds the write
        lock. Never drains the write-behind log: it is the log's own add.
        """
        if not self.write_lock.acquire(blocking=False):
            return None
        try:
            self.check_wal("write")
            conn = self._writer_here()
            try:
                changed = int(conn.execute(sql, params).rowcount)
            except self.driver.OperationalError as exc:
                if is_busy(exc):
                    return None
                raise
            return changed, self.wrote(2 * changed)  # a table page and its id index's per row
        finally:
            self.write_lock.release()

    def after_write_here(self) -> None:
        """On the writer thread, after :meth:`write_here` said so: finish a pending erasure, or checkpoint."""
        with self.write_lock:
            conn = self.writer()
            if _erasure.erase_stage(conn):
                try:
                    _erasure.finish_erasure(self, conn)
                except self.driver.Error as exc:
                    logger.warning(
                        "SQLite %s: finishing an erasure failed (%s); the next write or open retries",
                        self.name,
                        type(exc).__name__,
                    )
            elif self.wal_pages >= CHECKPOINT_PAGES:
                self.checkpoint_passive()

    def read(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` in one read transaction: every statement sees the same snapshot."""
        self.check_wal("read")
        conn = self.conn()
        # A concurrent batch is seen whole or not at all.
        self.begin(conn, immediate=False)
        if self.drain is not None and self._logged(conn):
            # Adds still in the write-behind log (of this process or another): into the tables first.
            conn.execute("COMMIT")
            self.drain_now()
            self.begin(conn, immediate=False)
        try:
            return fn(conn)
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def refuse_if_read_only(self, operation: str) -> None:
        """Raise :class:`UsageError` naming the file and why, when it is open read-only."""
        if self.read_only is not None:
            raise UsageError(
                f"{self.path} is open read-only ({self.read_only}); {operation} needs write access to the file "
                "and its folder"
            )

    def close(self) -> None:
        """Close every connection of every thread (best effort)."""
        # The last store of this process on the file unlocks first (so that its last connection checkpoints
        # and deletes the WAL as usual) and closes the locks' descriptors last (see _locks.unpin).
        key, self._pinned = self._pinned, None
        unlocked = _locks.unpin(key) if key is not None else []
        with self._conn_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except Exception:  # closing is best effort
                    pass
            self._connections.clear()
        self._local = threading.local()
        self._writer = None
        self._writer_nowait = False
        fd, self._wal_fd = self._wal_fd, None
        if fd is not None:
            os.close(fd)
        _locks.close_later(unlocked)
        release_library(self)


def _drained(conn: Conn) -> tuple[None, int]:
    """The write of :meth:`Database.drain_now`: nothing but the drain (run before it) and the erasure stage."""
    return None, _erasure.erase_stage(conn)


def pages_of(changes: int) -> int:
    """An estimate of the WAL pages a transaction of ``changes`` row changes wrote.

    A small write touches a page per row changed (each table and index its own);
    a large one packs many rows per page. Errs high, so checkpoints come early
    rather than late.
    """
    return changes if changes < 64 else 64 + (changes - 64) // 4
