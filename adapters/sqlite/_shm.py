"""The vector index's decoded lists shared by the processes open on one file: one copy in tmpfs.

Each process that probes a list decodes it (codes word by word, and a packed
row per vector: ``_ann.packed_rows``), about 450 bytes per vector at 384-d:
450 MB per process at 1M vectors. With sharing on (Linux, ``/dev/shm`` a
tmpfs), the first process to decode a list writes it to a *segment* in
``/dev/shm`` and maps it; the others map that segment instead of decoding, so
the pages exist once, whatever the number of processes.

- **Names** hash the file's identity (device, inode, ``meta.file_id``) and the
  user's tenant token keyed by ``meta.file_id``: ``memoryport-<file>.<user>.<list>.<version>``;
  no name holds a user id or anything a dictionary could reverse without the file.
- **Versions**: a list's ``v`` in ``ann_lists`` changes on every rewrite (a
  value of the file's generation counter, never reused), so a segment is the
  list at exactly one version. A process asks for the version its snapshot
  sees; a stale segment is never found under a current name.
- **Trust**: a segment is used only if it is a regular file owned by this uid,
  mode 0600, of the exact size, with a header naming this file, user, list,
  version, count and dimension, a CRC-32 of its body that matches, and rids equal
  to the row's in the file. Anything else is ignored; one of ours is unlinked (then replaced).
- **Publishing** writes a temporary file (0600, space reserved first: a full
  tmpfs fails there, not later), then hard-links it to its name: a reader sees
  a whole segment or none. It happens inside the reading transaction.
- **Cleaning**: a process that sees a newer version of a list than one it held
  unlinks the old one; an erasure (``_erasure.finish_erasure``, after its
  checkpoint: no snapshot from before the erasure is left to publish from)
  unlinks every segment of the file that is not current, so erased codes leave
  shared memory with the WAL. Every process holds a shared ``flock`` on
  ``memoryport-<file>.lock`` while open; the first one in (and the last one out,
  at ``close`` or at interpreter exit) gets it exclusively and unlinks every
  segment of the file. A killed process leaves its segments (at most one
  index's worth) until the next open of that file, or of any file whose
  opening finds that lock free (:func:`sweep`).
- **Off**: ``share_index=False`` or ``MEMORYPORT_SHARE_INDEX=0``; any failure
  (not Linux, no ``/dev/shm``, not tmpfs, full, denied) falls back to the
  process's private cache, which returns the same hits.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import mmap
import os
import secrets
import stat
import struct
import sys
import threading
import weakref
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryport._errors import InvalidInput

try:
    import fcntl
except ImportError:  # not POSIX (Windows): no sharing, each process keeps its own copy
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import numpy.typing as npt

    I64 = npt.NDArray[np.int64]
    U64 = npt.NDArray[np.uint64]
    U8 = npt.NDArray[np.uint8]
else:
    I64 = U64 = U8 = Any

__all__ = ["DIR", "ENV", "Names", "SharedLists", "file_prefix", "purge_file", "share_setting", "usable"]

#: Where segments live (must be a tmpfs: decoded codes never go to a disk). Tests point it elsewhere.
DIR = "/dev/shm"
#: The environment variable that turns sharing off (``0``/``off``/``false``/``no``) or on.
ENV = "MEMORYPORT_SHARE_INDEX"

_MAGIC = b"mpivf\x00\x01\n"
_HEAD = struct.Struct("<8s16s8sqqqqI")  # magic, file hash, user hash, list, version, count, dim, CRC-32 of the body
HEADER = 128
_ON = {"1", "on", "true", "yes"}
_OFF = {"0", "off", "false", "no"}


def share_setting(value: bool | None) -> bool:
    """Whether to share: ``value``, else ``$MEMORYPORT_SHARE_INDEX`` (on when unset); a bad value is refused."""
    if value is not None:
        if not isinstance(value, bool):
            raise InvalidInput(f"share_index must be True, False or None, not {value!r}", field="share_index")
        return value
    raw = os.environ.get(ENV)
    if raw is None or raw.strip() == "":
        return True
    word = raw.strip().lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise InvalidInput(f"${ENV} must be one of 1/0, on/off, true/false, yes/no, not {raw!r}", field="share_index")


_USABLE: dict[str, bool] = {}


def usable(directory: str | None = None) -> bool:
    """Whether ``directory`` (default :data:`DIR`) can hold segments: Linux, a writable tmpfs directory."""
    directory = DIR if directory is None else directory
    known = _USABLE.get(directory)
    if known is None:
        known = _USABLE[directory] = _check(directory)
    return known


def _check(directory: str) -> bool:
    if not sys.platform.startswith("linux") or fcntl is None:
        return False
    try:
        real = os.path.realpath(directory)
        if not os.path.isdir(real) or not os.access(real, os.W_OK | os.X_OK):
            return False
        best, kind = "", ""
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                parts = line.split()
                if len(parts) < 3:
                    continue
                point = parts[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, parts[2]
        return kind in ("tmpfs", "ramfs")
    except OSError:
        return False


def file_prefix(key: tuple[Any, ...]) -> tuple[bytes, str]:
    """The file's hash (in each header) and the prefix of its segments' names, from (device, inode, file id)."""
    digest = hashlib.blake2b(f"{key[0]}:{key[1]}:{key[2]}".encode(), digest_size=16, person=b"memoryport-shm").digest()
    return digest, "memoryport-" + digest[:12].hex()


class Names:
    """The names of one file's segments: ``<prefix>.<user hash>.<list>.<version>`` (see :func:`file_prefix`)."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.ident, self.prefix = file_prefix(key)
        self._salt = hashlib.blake2b(str(key[2]).encode(), digest_size=32, person=b"memoryport-user").digest()
        self._users: dict[str, bytes] = {}

    def user(self, tenant: str) -> bytes:
        """The user's 8-byte hash in names and headers: keyed by the file's random id."""
        found = self._users.get(tenant)
        if found is None:
            found = self._users[tenant] = hashlib.blake2b(tenant.encode(), key=self._salt, digest_size=8).digest()
        return found

    def name(self, tenant: str, no: int, v: int) -> str:
        return f"{self.prefix}.{self.user(tenant).hex()}.{no}.{v}"


def _sizes(n: int, dim: int) -> tuple[int, int, int]:
    """(words of a sign code, bytes of a packed row, segment size) of ``n`` vectors of ``dim``."""
    words = max(1, -(-dim // 64))
    width = dim + 12
    return words, width, HEADER + 8 * n + 8 * words * n + width * n


class SharedLists:
    """The segments of one file, as this process sees them (one per ``AnnCache``).

    Opening takes the file's lifetime lock (shared); the first process in
    unlinks what killed processes left. :meth:`close` (the last store of the
    process on the file) unlinks every segment when no other process is open
    on the file. Raises ``OSError`` when the directory cannot be used.

    Example:
        >>> shared = SharedLists((dev, ino, file_id))  # doctest: +SKIP
        >>> shared.attach("t123", 4, 17, rids, 384)    # doctest: +SKIP
    """

    def __init__(self, key: tuple[Any, ...], directory: str | None = None) -> None:
        self.directory = DIR if directory is None else directory
        if not usable(self.directory):
            raise OSError(f"{self.directory} cannot hold shared segments")
        self.names = Names(key)
        self.ident, self.prefix = self.names.ident, self.names.prefix
        self.attached = 0  # lists mapped from another process's segment
        self.published = 0  # lists this process decoded and wrote
        self._lock = threading.Lock()
        path = os.path.join(self.directory, self.prefix + ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                raise OSError(f"{path} is not this user's")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # others are open on the file: their segments are current
            else:
                self.purge(None)  # alone: whatever is there was left by processes that died
            fcntl.flock(fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        self._pid = os.getpid()
        _OPEN.add(self)
        sweep(self.directory, self.prefix)

    def path(self, tenant: str, no: int, v: int) -> str:
        """Where the segment of list ``no`` of ``tenant`` at version ``v`` lives."""
        return os.path.join(self.directory, self.names.name(tenant, no, v))

    # -- use -------------------------------------------------------------------------------

    def attach(self, tenant: str, no: int, v: int, rids: bytes, dim: int) -> tuple[I64, U64, U8] | None:
        """List ``no`` of ``tenant`` at version ``v`` from its segment, if one is there and checks out.

        ``rids``: the row's rids as the file holds them (compared with the segment's).
        Returns (rids, codes word by word, packed rows), read-only views of the mapping.
        """
        n = len(rids) // 8
        if n == 0:
            return None
        path = self.path(tenant, no, v)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None  # absent, a symbolic link, or not ours to read
        words, width, size = _sizes(n, dim)
        try:
            st = os.fstat(fd)
            ours = st.st_uid == os.getuid()
            if not stat.S_ISREG(st.st_mode) or not ours or st.st_mode & 0o077 or st.st_size != size:
                if ours:
                    self._unlink(path)  # truncated or grown: replaced by the caller's decode
                return None
            mapped = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
        head = _HEAD.unpack_from(mapped, 0)
        body = memoryview(mapped)[HEADER:]
        expected = (_MAGIC, self.ident, self.names.user(tenant), no, v, n, dim)
        if head[:7] != expected or zlib.crc32(body) != head[7] or body[: 8 * n] != rids:
            body.release()
            mapped.close()
            self._unlink(path)
            return None
        body.release()
        parts = _views(mapped, n, words, width)
        with self._lock:
            self.attached += 1
        return parts

    def publish(self, tenant: str, no: int, v: int, rids: I64, codes: U64, rows: U8) -> tuple[I64, U64, U8] | None:
        """Write list ``no`` of ``tenant`` at version ``v`` (decoded: see ``_ann._List``) to its segment and map it.

        Returns the mapped views (the caller drops its own arrays), or None when
        it could not (full, denied): the caller keeps its private copy.
        """
        n = len(rids)
        if n == 0:
            return None
        dim = rows.shape[1] - 12
        words, width, size = _sizes(n, dim)
        if codes.shape != (words, n) or rows.shape != (n, width):
            return None
        path = self.path(tenant, no, v)
        pieces = [
            np.ascontiguousarray(rids, dtype=np.int64).data,
            np.ascontiguousarray(codes, dtype=np.uint64).data,
            np.ascontiguousarray(rows, dtype=np.uint8).data,
        ]
        crc = 0
        for piece in pieces:
            crc = zlib.crc32(piece, crc)
        head = _HEAD.pack(_MAGIC, self.ident, self.names.user(tenant), no, v, n, dim, crc).ljust(HEADER, b"\0")
        tmp = f"{path}.tmp{secrets.token_hex(6)}"
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            try:
                os.fchmod(fd, 0o600)
                os.posix_fallocate(fd, 0, size)  # a full tmpfs says so here (ENOSPC), not by SIGBUS later
                _write_all(fd, [memoryview(head), *pieces])
                mapped = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                # Another process published the same version meanwhile (or left garbage): use theirs if sound.
                theirs = self.attach(tenant, no, v, rids.tobytes(), dim)
                if theirs is not None:
                    mapped.close()
                    return theirs
                with contextlib.suppress(OSError):
                    os.link(tmp, path)  # the garbage was unlinked by attach: take its place
        except OSError:
            return None
        finally:
            self._unlink(tmp)
        with self._lock:
            self.published += 1
        return _views(mapped, n, words, width)

    def unlink(self, tenant: str, no: int, v: int) -> None:
        """Remove the segment of list ``no`` at version ``v`` (stale), if there is one."""
        self._unlink(self.path(tenant, no, v))

    def purge(self, current: Iterable[tuple[str, int, int]] | None) -> int:
        """Unlink this file's segments other than ``current`` (tenant, list, version); None: all. Returns how many."""
        keep = None if current is None else {self.names.name(tenant, no, v) for tenant, no, v in current}
        return purge_segments(self.directory, self.prefix, keep)

    def close(self) -> None:
        """This process is done with the file: the last process out unlinks every segment (and the lock)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        _OPEN.discard(self)
        if os.getpid() != self._pid:  # a forked child: the lock is its parent's (one open file description)
            os.close(fd)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # another process is open on the file
        else:
            self.purge(None)
            self._unlink(os.path.join(self.directory, self.prefix + ".lock"))
        finally:
            os.close(fd)

    @staticmethod
    def _unlink(path: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _views(mapped: mmap.mmap, n: int, words: int, width: int) -> tuple[I64, U64, U8]:
    at = HEADER
    rids = np.frombuffer(mapped, dtype=np.int64, count=n, offset=at)
    at += 8 * n
    codes = np.frombuffer(mapped, dtype=np.uint64, count=words * n, offset=at).reshape(words, n)
    at += 8 * words * n
    rows = np.frombuffer(mapped, dtype=np.uint8, count=width * n, offset=at).reshape(n, width)
    return rids, codes, rows


def _write_all(fd: int, pieces: list[memoryview]) -> None:
    for piece in pieces:
        view = piece.cast("B")
        while len(view):
            done = os.write(fd, view)
            view = view[done:]


_OPEN: weakref.WeakSet[SharedLists] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At interpreter exit, stores never closed still leave nothing behind when they were the last."""
    for shared in list(_OPEN):
        shared.close()


def sweep(directory: str, skip: str) -> int:
    """Clean up after dead processes on other files: each lock no process holds, its segments and itself go.

    A process killed (or exiting without closing) leaves its file's segments
    and lock; the next process to open any file in the same tmpfs removes
    them (a live process holds its files' locks shared). Returns how many locks went.
    """
    gone = 0
    try:
        names = [n for n in os.listdir(directory) if n.startswith("memoryport-") and n.endswith(".lock")]
    except OSError:
        return 0
    for name in names:
        prefix = name[: -len(".lock")]
        if prefix == skip:
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_uid != os.getuid():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: a live process is open on that file
        else:
            purge_segments(directory, prefix, None)
            with contextlib.suppress(OSError):
                os.unlink(path)
            gone += 1
        finally:
            os.close(fd)
    return gone


def purge_segments(directory: str, prefix: str, keep: set[str] | None) -> int:
    """Unlink the segments named ``prefix.*`` in ``directory`` not in ``keep`` (None: all but the lock)."""
    gone = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    start = prefix + "."
    lock = prefix + ".lock"
    for name in names:
        if not name.startswith(start) or name == lock or (keep is not None and name in keep):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            gone += 1
        except OSError:
            pass
    return gone


def purge_file(path: str, conn: Any, error: type[Exception] = OSError) -> int:
    """Unlink every segment of the file at ``path`` that is not a current list (``ann_lists`` as ``conn`` sees it).

    Called by an erasure after its checkpoint, whether or not this process shares:
    other processes may have published the erased users' lists. ``error``: the
    driver's base exception (a file being closed: the next open cleans).
    """
    if not usable():
        return 0
    try:
        st = os.stat(path)
        row = conn.execute("SELECT value FROM meta WHERE key = 'file_id'").fetchone()
        current = conn.execute("SELECT tenant, list, v FROM ann_lists").fetchall()
    except (OSError, error):
        return 0
    if row is None:
        return 0
    key = (st.st_dev, st.st_ino, str(row[0]))
    names = Names(key)
    return purge_segments(DIR, names.prefix, {names.name(str(t), int(no), int(v)) for t, no, v in current})
