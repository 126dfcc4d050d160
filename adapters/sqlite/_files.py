"""The database file on disk: created owner-only, kept owner-only, and whether this process may write it."""

from __future__ import annotations

import os
import tempfile

from memoryport._errors import UsageError

__all__ = ["cannot_write", "create_file", "tighten", "writable"]


def create_file(path: str) -> None:
    """Create the database owner-only (SQLite gives -wal/-shm its mode); typed errors naming the path."""
    if os.path.isdir(path):
        raise UsageError(f"{path} is a folder; give SQLiteMemory a file path such as {path}/memory.db")
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        pass
    except FileNotFoundError as exc:
        raise UsageError(f"cannot create the SQLite file: its folder does not exist ({exc.filename})") from None
    except PermissionError:
        raise UsageError(
            f"cannot create the SQLite file {path}: this user may not write in its folder "
            f"{os.path.dirname(os.path.abspath(path))}"
        ) from None
    except OSError as exc:  # read-only file system, name too long, ...
        raise UsageError(f"cannot create the SQLite file {path}: {exc.strerror}") from None
    else:
        os.close(fd)
    # Never open and close the file itself here: closing any descriptor of a file releases every POSIX lock
    # the process holds on it, SQLite's too. Another store of this process on the file would lose its locks,
    # and another process closing its last connection would take itself for the last one and delete the -wal
    # under that store (its later adds lost: tests/sqlite/test_sqlite_other_library.py).
    if not _may(path, os.R_OK):
        raise UsageError(f"cannot read the SQLite file {path}: permission denied (owned by another user?)")
    tighten(path)


def _may(path: str, mode: int) -> bool:
    """``os.access`` with the effective user where the platform can (what ``open`` checks), without opening."""
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def tighten(path: str) -> None:
    """Make our own database and its -wal/-shm owner-only (0600) if others may read them."""
    if os.name != "posix":
        return
    try:
        if os.stat(path).st_uid != os.geteuid():
            return  # another user's file: its -wal/-shm must stay usable by its owner
    except FileNotFoundError:
        return
    for suffix in ("", "-wal", "-shm"):
        try:
            st = os.stat(path + suffix)
        except FileNotFoundError:
            continue
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            try:
                os.chmod(path + suffix, 0o600)
            except OSError:  # a read-only file system: nothing can be written there either
                pass


def writable(path: str, *, folder: bool = False) -> bool:
    """Whether this process may write ``path`` (a file, or a folder to create -wal/-shm in)."""
    if folder:
        try:
            fd, probe = tempfile.mkstemp(prefix=".memoryport-probe-", dir=path)
        except OSError:
            return False
        os.close(fd)
        os.unlink(probe)
        return True
    return _may(path, os.W_OK)  # not open + close: see create_file


def cannot_write(path: str) -> str | None:
    """Why this process cannot write the database (the file, or its folder for -wal/-shm), or None."""
    folder = os.path.dirname(os.path.abspath(path))
    if not writable(path):
        return "the file is not writable by this user"
    if not writable(folder, folder=True):
        return f"its folder {folder} is not writable"
    return None
