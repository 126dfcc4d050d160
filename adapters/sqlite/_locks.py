"""Locks that keep the file's ``-wal`` alive while a store has it open, whatever else the process does.

SQLite's locks are POSIX ``fcntl`` locks, which belong to the process: another
copy of SQLite in the same process (Python's ``sqlite3`` while the store uses
``pysqlite3``, or the reverse) does not see them, and closing *any* descriptor
of the file releases all of them. Either way, the next connection to close (of
that other copy, or of another process) gets the EXCLUSIVE lock SQLite takes to
tell it is the file's last user, checkpoints the WAL and deletes ``-wal`` and
``-shm`` under the store, whose later commits would go into the deleted WAL.

On Linux this module holds, for every file a store of this process has open,
an *open file description* lock (``F_OFD_SETLK``) for reading on the database
file's SHARED byte range and on the ``-shm``'s "dead man switch" byte: the
bytes SQLite's own SHARED locks use (``os_unix.c``). OFD locks conflict with
POSIX locks even within one process, and are released only with their own
descriptor. So nobody gets that EXCLUSIVE lock while the store is open (the
WAL is not deleted), and another copy of SQLite opening the file sees the
``-shm`` in use instead of re-initialising it under the store. One pair of
descriptors per file and process, shared by its stores: closing a descriptor
of the file would release the process's POSIX locks, so they are closed only
after the last store on the file closed its connections.
"""

from __future__ import annotations

import os
import sys
import threading
import time

try:
    import fcntl
except ImportError:  # Windows: SQLite's locks there are per handle, nothing to keep
    fcntl = None  # type: ignore[assignment]

__all__ = ["HAS_OFD", "pin", "unpin"]

#: Whether this platform has OFD locks (Linux 3.15+; Python exposes the constants on Linux only).
HAS_OFD = sys.platform == "linux" and fcntl is not None and hasattr(fcntl, "F_OFD_SETLK")

#: SQLite's lock bytes (os_unix.c): the database file's SHARED range, and the -shm's DMS byte
#: ((22 + SQLITE_SHM_NLOCK) * 4 + SQLITE_SHM_NLOCK with SQLITE_SHM_NLOCK = 8).
SHARED_FIRST = 0x40000000 + 2
SHARED_SIZE = 510
SHM_DMS = 128

_PINS: dict[tuple[int, int], list[int]] = {}  # file key -> [db fd, shm fd (or -1), holders]
_LOCK = threading.Lock()


def _ofd(fd: int, kind: int, start: int, length: int) -> None:
    import struct

    assert fcntl is not None
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", kind, os.SEEK_SET, start, length, 0))


def _lock_read(path: str, start: int, length: int, wait: float) -> int:
    """A descriptor of ``path`` holding an OFD read lock on ``start`` .. ``start + length``; OSError if not."""
    assert fcntl is not None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    deadline = time.monotonic() + wait
    while True:
        try:
            _ofd(fd, fcntl.F_RDLCK, start, length)
            return fd
        except OSError:
            # A connection holding the EXCLUSIVE lock for a moment (closing, in another process): wait.
            if time.monotonic() >= deadline:
                os.close(fd)
                raise
            time.sleep(0.01)


def pin(path: str, key: tuple[int, int], *, wait: float) -> bool:
    """Hold the locks for one more store of this process on the file ``key``; False where they cannot be held.

    Call it once the store's connections opened the file in WAL mode (``-shm``
    exists); ``wait``: how long a conflicting lock (a connection closing in
    another process) is waited for.
    """
    if not HAS_OFD:
        return False
    with _LOCK:
        held = _PINS.get(key)
        if held is not None:
            held[2] += 1
            return True
        try:
            db_fd = _lock_read(path, SHARED_FIRST, SHARED_SIZE, wait)
        except OSError:
            return False
        try:
            shm_fd = _lock_read(path + "-shm", SHM_DMS, 1, wait)
        except OSError:
            shm_fd = -1  # no -shm (a read-only file read as immutable): the database file's lock still holds
        _PINS[key] = [db_fd, shm_fd, 1]
        return True


def unpin(key: tuple[int, int]) -> list[int]:
    """One store fewer on the file: when it was the last, release the locks and return the descriptors.

    The caller closes them with :func:`close_later` *after* its SQLite
    connections: unlocked first, the last connection to close can checkpoint
    and delete the WAL as usual; closed last, closing them releases no POSIX
    lock a connection of the store still needs.
    """
    assert fcntl is not None
    with _LOCK:
        held = _PINS.get(key)
        if held is None:
            return []
        held[2] -= 1
        if held[2] > 0:
            return []
        del _PINS[key]
        fds = [fd for fd in held[:2] if fd >= 0]
        for fd in fds:
            try:
                _ofd(fd, fcntl.F_UNLCK, 0, 0)
            except OSError:
                pass
        return fds


def _forget_in_child() -> None:
    """After a fork, in the child: the parent's locks are not the child's to release.

    A forked child shares its parent's open file descriptions, and an OFD lock
    belongs to the description: unlocking the inherited descriptors (the child
    closing a store it inherited) would unlock the parent's, and the next
    connection to close anywhere could delete the -wal under the parent's
    stores. The child forgets them (closing its copies of the descriptors
    releases nothing: the parent still holds them); a store the child opens
    takes locks of its own.
    """
    global _LOCK
    _LOCK = threading.Lock()  # another thread of the parent may have held it at the fork
    inherited = [fd for held in _PINS.values() for fd in held[:2] if fd >= 0]
    _PINS.clear()
    close_later(inherited)


def close_later(fds: list[int]) -> None:
    """Close what :func:`unpin` returned (after the store's connections closed)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
