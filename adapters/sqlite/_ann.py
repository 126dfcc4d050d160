"""The vector index of a large scope: IVF lists of sign-bit and int8 codes in the file, then an exact re-rank.

A user (tenant) with at least ``ann_threshold`` vectors gets an index, kept in
the same SQLite file as everything else:

- ``ann_index``: per tenant, the ``nlist`` centroids (spherical k-means on a
  sample of the tenant's vectors) and a version that changes on every rebuild;
- ``ann_lists``: per (tenant, list), the rids of the vectors nearest that
  centroid and their *sign-bit codes* (1 bit per dimension: 48 bytes for
  384-d) and their *int8 codes* (each component scaled by the vector's
  largest, one byte per dimension, plus that scale), plus a version ``v``
  bumped on every rewrite;
- ``ann_assign``: rid -> row (a list, or its tail: :func:`tail_of`), so a
  delete finds the row to rewrite.

A search ranks the centroids, scans the sign codes of the ``nprobe`` best
lists by Hamming distance (``bitwise_count`` over 64-bit words) and keeps the
``shortlist`` nearest (:func:`shortlist`); their int8 codes estimate each
cosine to within about 1e-3 (:func:`estimate`); the ``rerank`` best by that
estimate that are live, in the scope and match the filters are read from
``records`` and ``vectors`` by rid and ranked exactly: the scores are true
cosine similarities. When fewer than ``rerank`` pass the checks, the next best
estimates are tried (twice as many each time); when fewer than ``k`` pass in
the whole shortlist, the caller falls back to the exact scan.

Lists are read on demand and kept in a process-wide cache keyed by the file's
identity (device, inode and a random id written in the file), shared by every
store open on the file in this process (about 440 bytes per vector at 384-d:
a quarter of the float32 vectors). Other processes on the file share the
decoded lists too: each list at each version is decoded once into a segment in
tmpfs and mapped by every process that probes it (``_shm.py``; off, or where
tmpfs cannot be used, each process decodes its own). A cached list is reused
while its tenant's generation is unchanged, and otherwise re-validated by its version.

Writes keep the index exact in membership: an add assigns the new vectors to
their nearest centroid and rewrites those lists' *tails* (small rows searched
with their lists, merged into them beyond ``TAIL_MAX``), a delete or erasure rewrites
the lists without the erased rids (their codes leave the file with the old
pages: ``secure_delete`` and the erasure's VACUUM), an update does both. Only
the centroids age; a tenant that grew ``REBUILD_GROWTH`` times since its build
is rebuilt in the background.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._keyword_large import WordLists
from ._rows import Cond, Conn, filter_sql, next_generation, scope_sql, tenant_token
from ._shm import SharedLists

if TYPE_CHECKING:
    import numpy.typing as npt

    F32 = npt.NDArray[np.float32]
    I64 = npt.NDArray[np.int64]
    U64 = npt.NDArray[np.uint64]
    Parts = tuple[I64, U64, npt.NDArray[np.int8], F32]  # rids, sign codes (n, words), int8 codes, scales
else:
    F32 = I64 = U64 = Parts = Any

__all__ = [
    "ANN_DDL",
    "ANN_FINE_DDL",
    "REBUILD_GROWTH",
    "TAIL_MAX",
    "AnnCache",
    "AnnParams",
    "NotCached",
    "build_index",
    "centroids_of",
    "search",
    "shortlist",
    "tail_of",
    "codes_of",
    "drop_index",
    "estimate",
    "fine_of",
    "drop_rids",
    "hamming",
    "hamming_columns",
    "index_add",
    "nearest",
]

logger = logging.getLogger("memoryport")

ANN_DDL: tuple[str, ...] = (
    """CREATE TABLE ann_index(tenant TEXT PRIMARY KEY, nlist INTEGER NOT NULL, dim INTEGER NOT NULL,
        centroids BLOB NOT NULL, built INTEGER NOT NULL, version INTEGER NOT NULL)""",
    """CREATE TABLE ann_lists(tenant TEXT NOT NULL, list INTEGER NOT NULL, v INTEGER NOT NULL,
        rids BLOB NOT NULL, codes BLOB NOT NULL, PRIMARY KEY(tenant, list))""",
    "CREATE TABLE ann_assign(rid INTEGER PRIMARY KEY, list INTEGER NOT NULL)",
)

#: Schema 6: each list also holds its vectors' int8 codes (``fine``: the scales as float32, then the
#: codes, one row of ``dim`` bytes per vector). Indexes of older files lack them: they are dropped
#: and rebuilt in the background by the next search past the threshold (exact until then).
ANN_FINE_DDL: tuple[str, ...] = (
    "DELETE FROM ann_assign",
    "DELETE FROM ann_lists",
    "DELETE FROM ann_index",
    "ALTER TABLE ann_lists ADD COLUMN fine BLOB NOT NULL DEFAULT x''",
)

#: A tenant whose vector count reached this many times its count at the last build is rebuilt.
REBUILD_GROWTH = 4

#: Vectors added to a list after the build go to its *tail* (row ``tail_of(list)``), a small row rewritten
#: by each add; a tail of more than this many is merged into its list (one rewrite of the large row).
TAIL_MAX = 128


def tail_of(no: int) -> int:
    """The row number of list ``no``'s tail (negative: lists are numbered from 0)."""
    return -1 - no


def _popcount_table() -> npt.NDArray[np.uint8]:
    return np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


_POP = _popcount_table()


def codes_of(vectors: F32) -> U64:
    """Sign-bit codes: bit i set when component i is positive, padded to 64-bit words."""
    n, dim = vectors.shape
    words = max(1, -(-dim // 64))
    packed = np.zeros((n, words * 8), dtype=np.uint8)
    packed[:, : -(-dim // 8)] = np.packbits(vectors > 0, axis=1)
    return packed.view(np.uint64)


def hamming(codes: U64, q: U64) -> npt.NDArray[Any]:
    """Hamming distance of every row of ``codes`` (``(n, words)``) to ``q`` (one row)."""
    return hamming_columns(codes.T, q)


def hamming_columns(columns: U64, q: U64, *, overwrite: bool = False) -> npt.NDArray[Any]:
    """Hamming distance of every code to ``q``, codes given word by word: ``columns[w]`` is word w of each.

    Three passes over the ``(words, n)`` block (xor, bit count, a sum down the
    words) when ``columns`` is C-ordered (the cache keeps them so): a row-wise
    sum over 6 words is ten times slower. ``overwrite``: ``columns`` is a
    scratch copy that may hold the xor (one buffer of megabytes fewer).
    """
    words, n = columns.shape
    count = getattr(np, "bitwise_count", None)
    if count is None:  # numpy < 2
        out = np.zeros(n, dtype=np.uint16)
        x = scratch("xor", n, np.uint64)
        for w in range(words):
            np.bitwise_xor(columns[w], q[w], out=x)
            out += _POP[x.view(np.uint8).reshape(-1, 8)].sum(axis=1, dtype=np.uint16)
        return out
    x = columns if overwrite else scratch("xor", n, np.uint64, words=words)
    np.bitwise_xor(columns, q[:words, None], out=x)
    ones = scratch("ones", n, np.uint8, words=words)
    count(x, out=ones)
    return ones.sum(axis=0, dtype=np.uint16)  # type: ignore[no-any-return]


_SCRATCH = threading.local()


def scratch(name: str, n: int, dtype: Any, words: int = 0) -> Any:
    """A reusable buffer of this thread: ``n`` items (``(words, n)`` when ``words``), contents undefined.

    A fresh array of a few hundred kilobytes is mapped anew by the allocator
    and faulted in page by page at every search; these are reused.
    """
    key = (name, np.dtype(dtype).str, words)
    have = getattr(_SCRATCH, "buffers", None)
    if have is None:
        have = _SCRATCH.buffers = {}
    buf = have.get(key)
    if buf is None or buf.shape[-1] < n:
        buf = have[key] = np.empty((words, max(n, 1024)) if words else max(n, 1024), dtype=dtype)
    return buf[:, :n] if words else buf[:n]


def fine_of(vectors: F32) -> tuple[npt.NDArray[np.int8], F32]:
    """Int8 codes and their scales: ``vectors[i] ~= scales[i] * codes[i]``, each row scaled by its largest component.

    The rounding error of a component is at most half a step (``scale / 2``):
    the dot product of a unit vector's code with a unit query is within about
    1e-3 of the true cosine at 384-d, far closer than the sign codes get.
    """
    top = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), dtype=np.float32)
    scales = (top / 127).astype(np.float32)
    safe = np.where(scales > 0, scales, 1).astype(np.float32)
    codes = np.clip(np.rint(vectors / safe[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def fine_blob(codes: npt.NDArray[np.int8], scales: F32) -> bytes:
    """One list's int8 codes as stored: the scales (float32), then the codes row by row."""
    return np.ascontiguousarray(scales, dtype=np.float32).tobytes() + np.ascontiguousarray(codes).tobytes()


def fine_parts(blob: bytes, n: int) -> tuple[npt.NDArray[np.int8], F32]:
    """The (codes, scales) of ``n`` vectors from :func:`fine_blob`'s bytes."""
    if n == 0:
        return np.zeros((0, 0), dtype=np.int8), np.zeros(0, dtype=np.float32)
    scales = np.frombuffer(blob, dtype=np.float32, count=n)
    codes = np.frombuffer(blob, dtype=np.int8, offset=4 * n)
    return codes.reshape(n, len(codes) // n), scales


def mv(matrix: F32, q: F32) -> F32:
    """``matrix @ q`` on this thread: a BLAS ``gemv`` wakes its threads, milliseconds on a busy machine.

    ``vecdot`` (numpy >= 2) runs one single-threaded BLAS dot per row, about
    three times faster than ``einsum``'s loop; int8 rows are cast in buffered
    chunks on the way.
    """
    vecdot = getattr(np, "vecdot", None)
    if vecdot is not None:
        return vecdot(matrix, q)  # type: ignore[no-any-return]
    return np.einsum("ij,j->i", matrix, q, dtype=np.float32, casting="unsafe")  # type: ignore[no-any-return]


def nearest(distance: npt.NDArray[Any], m: int) -> npt.NDArray[np.int64]:
    """Positions of ``m`` smallest small non-negative integers (Hamming distances), ties by position; in position order.

    A histogram of the distances gives the cut-off (twice as fast as
    ``argpartition`` on 50k), then one pass keeps everything up to it and drops
    the last positions at the cut-off beyond ``m``: no sort.
    """
    if m >= len(distance):
        return np.arange(len(distance))
    cumulative = np.cumsum(np.bincount(distance))
    cut = int(np.searchsorted(cumulative, m))
    keep = np.flatnonzero(distance <= cut)
    extra = len(keep) - m
    if extra > 0:
        at_cut = np.flatnonzero(distance[keep] == cut)
        keep = np.delete(keep, at_cut[len(at_cut) - extra :])
    return keep


def shortlist(columns: U64, qvec: F32, keep: int, *, overwrite: bool = False) -> npt.NDArray[np.int64]:
    """Positions of the ``keep`` codes nearest ``qvec`` by Hamming distance of the sign codes, in position order.

    ``columns``: the codes word by word (``(words, n)``, see :func:`hamming_columns`;
    ``overwrite``: a scratch copy this may overwrite).
    At 1M synthetic vectors the 1,600 nearest of 51k scanned held every one of
    the true top-10 (800: 99.6%): a cheap filter, ranked again by :func:`estimate`.
    """
    n = columns.shape[1]
    if n <= keep:
        return np.arange(n)
    return nearest(hamming_columns(columns, codes_of(qvec[None, :])[0], overwrite=overwrite), keep)


@dataclass(frozen=True)
class AnnParams:
    """When a tenant gets an index and how a search uses it."""

    threshold: int = 50_000  # vectors of one user before an index is built
    probe: float = 0.05  # share of the lists scanned (at least MIN_PROBE of them)
    shortlist: int = 1_024  # nearest sign codes scored by their int8 codes (at least 40 * k)
    rerank: int = 32  # best int8 estimates read and ranked exactly (at least 3 * k)


MIN_PROBE = 8
#: At least this many codes are scanned (all of them in a smaller index): few lists of a
#: small index would hold too few of the true neighbours when the vectors are not clustered.
MIN_SCAN = 16_384


def nlist_for(n: int) -> int:
    """Lists for ``n`` vectors: about sqrt(n) (1,000 at 1M), between 16 and 4,096."""
    return int(min(4096, max(16, round(math.sqrt(n)))))


# -- the process-wide cache ---------------------------------------------------------


class NotCached(Exception):
    """What a search needs is not in RAM (or out of date) and the caller asked not to read it from the file."""


@dataclass
class _List:
    gen: int  # the tenant generation of the snapshot it was last read or checked in
    v: int
    rids: I64
    codes: U64  # word by word: (words, n), C-ordered (see hamming_columns)
    rows: npt.NDArray[np.uint8]  # (n, dim + 12): each vector's int8 code, scale (float32) and rid (int64)

    @property
    def nbytes(self) -> int:
        return int(self.rids.nbytes + self.codes.nbytes + self.rows.nbytes)


_NO_RIDS = np.zeros(0, dtype=np.int64)
_NO_CODES = np.zeros((1, 0), dtype=np.uint64)
_NO_ROWS = np.zeros((0, 12), dtype=np.uint8)


def packed_rows(rids: I64, fine: npt.NDArray[np.int8], scales: F32) -> npt.NDArray[np.uint8]:
    """One row per vector: its int8 code, its scale and its rid side by side, so that one gather gets all three."""
    n = len(rids)
    dim = fine.shape[1] if n else 0
    out = np.empty((n, dim + 12), dtype=np.uint8)
    out[:, :dim] = fine.view(np.uint8)
    out[:, dim : dim + 4] = np.ascontiguousarray(scales, dtype=np.float32).view(np.uint8).reshape(n, 4)
    out[:, dim + 4 :] = np.ascontiguousarray(rids, dtype=np.int64).view(np.uint8).reshape(n, 8)
    return out


@dataclass
class AnnCache:
    """Centroids and lists of one file, shared by every store of this process open on it."""

    max_bytes: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    centroids: dict[str, tuple[int, F32]] = field(default_factory=dict)
    lists: OrderedDict[tuple[str, int], _List] = field(default_factory=OrderedDict)
    nbytes: int = 0
    users: int = 0
    building: set[str] = field(default_factory=set)
    words: WordLists = field(default_factory=WordLists)  # the keyword ranking of large scopes (_keyword_large.py)
    #: The lists' segments shared with other processes on the file (``_shm.py``); None: this process's own copies.
    shared: SharedLists | None = None
    unshared: bool = False  # sharing was turned off (or could not start) for the file in this process

    def put(self, key: tuple[str, int], entry: _List) -> None:
        with self.lock:
            old = self.lists.get(key)
            if old is not None:
                if old.gen > entry.gen:
                    return  # a newer snapshot's copy stays
                self.nbytes -= old.nbytes
            self.lists[key] = entry
            self.lists.move_to_end(key)
            self.nbytes += entry.nbytes
            while self.nbytes > self.max_bytes and len(self.lists) > 1:
                _, dropped = self.lists.popitem(last=False)
                self.nbytes -= dropped.nbytes

    def has(self, tenant: str) -> bool:
        """Whether centroids of ``tenant`` are cached (perhaps of an older build)."""
        with self.lock:
            return tenant in self.centroids

    def forget(self, tenant: str) -> None:
        with self.lock:
            self.centroids.pop(tenant, None)
            for key in [key for key in self.lists if key[0] == tenant]:
                self.nbytes -= self.lists.pop(key).nbytes

    def clear(self) -> None:
        with self.lock:
            self.centroids.clear()
            self.lists.clear()
            self.nbytes = 0
            shared, self.shared = self.shared, None
        self.words.clear()
        if shared is not None:
            shared.close()

    def unshare(self) -> None:
        """Stop sharing lists with other processes (those mapped stay valid until replaced)."""
        with self.lock:
            shared, self.shared = self.shared, None
            self.unshared = True
        if shared is not None:
            shared.close()


# -- search -----------------------------------------------------------------------------


def centroids_of(conn: Conn, cache: AnnCache, tenant: str, *, load: bool = True) -> tuple[int, F32, int] | None:
    """(version, centroids, vectors at build) of a tenant's index, or None when it has none.

    ``load=False``: centroids not cached (or of another build) raise :class:`NotCached`.
    """
    row = conn.execute("SELECT version, nlist, dim, built FROM ann_index WHERE tenant = ?", (tenant,)).fetchone()
    if row is None:
        return None
    version, nlist, dim, built = int(row[0]), int(row[1]), int(row[2]), int(row[3])
    with cache.lock:
        hit = cache.centroids.get(tenant)
    if hit is not None and hit[0] == version:
        return version, hit[1], built
    if not load:
        raise NotCached(tenant)
    blob = conn.execute("SELECT centroids FROM ann_index WHERE tenant = ?", (tenant,)).fetchone()[0]
    matrix = np.frombuffer(blob, dtype=np.float32).reshape(nlist, dim)
    old: list[tuple[int, int]] = []
    with cache.lock:
        # Another version of the lists belongs to another build: drop them.
        if hit is not None:
            for key in [key for key in cache.lists if key[0] == tenant]:
                entry = cache.lists.pop(key)
                cache.nbytes -= entry.nbytes
                if entry.v >= 0 and hit[0] < version:
                    old.append((key[1], entry.v))
        cache.centroids[tenant] = (version, matrix)
        shared = cache.shared
    if shared is not None:
        for no, v in old:  # their segments are stale: no current name is theirs
            shared.unlink(tenant, no, v)
    return version, matrix, built


def _lists(
    conn: Conn, cache: AnnCache, tenant: str, gen: int, wanted: Sequence[int], load: bool = True, dim: int = 0
) -> list[_List]:
    """The probed lists, from the cache when current in this snapshot, else mapped from another process's
    segment (``cache.shared``; ``dim``: the index's dimension, 0: never) or read from the file.

    ``load=False``: a list not cached as of this snapshot raises :class:`NotCached`.
    """
    out: dict[int, _List] = {}
    check: list[int] = []
    with cache.lock:
        get, touch = cache.lists.get, cache.lists.move_to_end
        for no in wanted:
            key = (tenant, no)
            entry = get(key)
            if entry is not None and entry.gen == gen:
                touch(key)
                out[no] = entry
            else:
                check.append(no)
    if check and not load:
        raise NotCached(tenant)
    if check:
        marks = ",".join("?" * len(check))
        versions = dict(
            conn.execute(f"SELECT list, v FROM ann_lists WHERE tenant = ? AND list IN ({marks})", (tenant, *check))
        )
        stale: list[int] = []
        absent: list[int] = []
        replaced: list[tuple[int, int]] = []
        with cache.lock:
            for no in check:
                entry = cache.lists.get((tenant, no))
                if entry is not None and entry.v == versions.get(no, -1):
                    if gen > entry.gen:
                        entry.gen = gen
                    out[no] = entry
                elif no in versions:
                    stale.append(no)
                    if entry is not None and 0 <= entry.v < versions[no]:
                        replaced.append((no, entry.v))
                else:
                    absent.append(no)
            shared = cache.shared
        for no in absent:  # a tail not written yet: remembered as empty, so that a cached search needs no read
            entry = _List(gen=gen, v=-1, rids=_NO_RIDS, codes=_NO_CODES, rows=_NO_ROWS)
            cache.put((tenant, no), entry)
            out[no] = entry
        if shared is not None:
            for no, v in replaced:  # a newer version is in the file: the old one's segment goes
                shared.unlink(tenant, no, v)
            if stale and dim:
                # Another process may have decoded these versions already: map its segments.
                marks = ",".join("?" * len(stale))
                for no, rids in conn.execute(
                    f"SELECT list, rids FROM ann_lists WHERE tenant = ? AND list IN ({marks})", (tenant, *stale)
                ).fetchall():
                    parts = shared.attach(tenant, int(no), int(versions[no]), rids, dim)
                    if parts is not None:
                        entry = _List(gen, int(versions[no]), *parts)
                        cache.put((tenant, int(no)), entry)
                        out[int(no)] = entry
                stale = [no for no in stale if no not in out]
        if stale:
            marks = ",".join("?" * len(stale))
            for no, v, rids, codes, fine in conn.execute(
                f"SELECT list, v, rids, codes, fine FROM ann_lists WHERE tenant = ? AND list IN ({marks})",
                (tenant, *stale),
            ):
                n = len(rids) // 8
                rid_array = np.frombuffer(rids, dtype=np.int64)
                entry = _List(
                    gen=gen,
                    v=int(v),
                    rids=rid_array,
                    codes=np.ascontiguousarray(np.frombuffer(codes, dtype=np.uint64).reshape(n, -1).T)
                    if n
                    else np.zeros((1, 0), dtype=np.uint64),
                    rows=packed_rows(rid_array, *fine_parts(fine, n)),
                )
                if shared is not None and n:
                    # Published inside this read transaction: an erasure's purge (after its checkpoint,
                    # which waits for older snapshots) always comes after it.
                    parts = shared.publish(tenant, int(no), int(v), entry.rids, entry.codes, entry.rows)
                    if parts is not None:
                        entry = _List(gen, int(v), *parts)
                cache.put((tenant, int(no)), entry)
                out[int(no)] = entry
    return [out[no] for no in wanted if no in out]


def search(
    conn: Conn,
    cache: AnnCache,
    params: AnnParams,
    qvec: F32,
    scope: Any,
    k: int,
    filters: Cond,
    now: int,
    gen: int,
    *,
    load: bool = True,
    found: tuple[int, F32, int] | None = None,
) -> list[tuple[int, float]] | None:
    """The ``k`` best (rid, cosine) of ``scope`` through its user's index; None when there is no index.

    May return fewer than ``k`` when filters, a narrower scope or expiry left
    too few of the shortlisted candidates: the caller then scans exactly.
    ``load=False``: only with the centroids and probed lists cached as of this
    snapshot, else :class:`NotCached` (the re-ranked vectors are always read).
    ``found``: what :func:`centroids_of` returned in this snapshot (read here when None).
    """
    tenant = tenant_token(scope.user_id)
    if found is None:
        found = centroids_of(conn, cache, tenant, load=load)
    if found is None:
        return None
    _, centroids, built = found
    nlist = len(centroids)
    share = max(params.probe, MIN_SCAN / max(built, 1))
    nprobe = min(nlist, max(MIN_PROBE, math.ceil(nlist * share)))
    cscores = mv(centroids, qvec)
    probe = np.argpartition(-cscores, nprobe - 1)[:nprobe] if nprobe < nlist else np.arange(nlist)
    wanted = [int(x) for x in probe]
    wanted += [tail_of(no) for no in wanted]
    dim = centroids.shape[1]
    lists = [entry for entry in _lists(conn, cache, tenant, gen, wanted, load, dim) if len(entry.rids)]
    if not lists:
        return []
    if len(lists) == 1:
        codes, copied = lists[0].codes, False
    else:  # into a reused buffer: the concatenation is a few megabytes at 1M
        total = sum(len(entry.rids) for entry in lists)
        codes, copied = scratch("codes", total, np.uint64, words=lists[0].codes.shape[0]), True
        at = 0
        for entry in lists:
            end = at + len(entry.rids)
            codes[:, at:end] = entry.codes
            at = end
    near = shortlist(codes, qvec, max(params.shortlist, 40 * k), overwrite=copied)
    rids, scores = estimate(lists, near, qvec)
    order = np.argsort(-scores, kind="stable")
    return rerank(conn, qvec, rids[order], scope, k, filters, now, max(params.rerank, 3 * k))


def estimate(lists: Sequence[_List], near: npt.NDArray[np.int64], qvec: F32) -> tuple[I64, F32]:
    """(rids, estimated cosines) of the shortlisted positions ``near`` (sorted) of the concatenated ``lists``.

    One gather per list (code, scale and rid are one row: :func:`packed_rows`),
    then one product of the int8 codes with the query over all of them.
    """
    sizes = np.fromiter((len(entry.rids) for entry in lists), dtype=np.int64, count=len(lists))
    starts = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    bounds = np.searchsorted(near, starts).tolist()
    local = near - np.repeat(starts[:-1], np.diff(bounds))
    width = lists[0].rows.shape[1]
    # Gathered straight into one reused buffer (no concatenation); the positions are in range: no bounds check.
    rows = scratch("rows", len(near) * width, np.uint8).reshape(len(near), width)
    for i, entry in enumerate(lists):
        a, b = bounds[i], bounds[i + 1]
        if b > a:
            entry.rows.take(local[a:b], axis=0, out=rows[a:b], mode="clip")
    dim = width - 12
    scales = rows[:, dim : dim + 4].copy().view(np.float32).ravel()  # copies: ``rows`` is reused
    rids = rows[:, dim + 4 :].copy().view(np.int64).ravel()
    return rids, mv(rows[:, :dim].view(np.int8), qvec) * scales


def rerank(
    conn: Conn, qvec: F32, rids: I64, scope: Any, k: int, filters: Cond, now: int, want: int
) -> list[tuple[int, float]]:
    """Exact cosines of the first ``want`` of ``rids`` (best estimate first) that are live, in ``scope`` and
    match ``filters``; the best ``k`` of them.

    One statement per batch reads the records (rowid lookups: scope, expiry,
    filters) and the vectors of those that pass; when fewer than ``want``
    passed, the next batch is twice as large, until the candidates run out.
    """
    where, params = scope_sql(scope)
    fsql, fparams = filter_sql(filters)
    found: list[int] = []
    blobs: list[bytes] = []
    at, step = 0, want
    while len(found) < want and at < len(rids):
        chunk = rids[at : at + step].tolist()
        at, step = at + len(chunk), 2 * step
        # NOT INDEXED: rowid lookups only; the planner would otherwise walk the user's whole index
        # (records_user_time) for ``user_id IS ?``, a million rows at 1M, without statistics.
        for rid, vec in conn.execute(
            f"SELECT r.rid, v.vec FROM records r NOT INDEXED JOIN vectors v ON v.rid = r.rid "
            f"WHERE r.rid IN ({','.join('?' * len(chunk))}) "
            f"AND {where} AND (r.expires_at IS NULL OR r.expires_at > ?){fsql}",
            [*chunk, *params, now, *fparams],
        ):
            found.append(int(rid))
            blobs.append(vec)
    if not found:
        return []
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), -1)
    scores = mv(matrix, qvec)
    order = np.argsort(-scores, kind="stable")[:k]
    return [(found[i], float(scores[i])) for i in order.tolist()]


# -- writes (inside the caller's write transaction) -----------------------------------------


def indexed(conn: Conn, cache: AnnCache, tenants: Iterable[str]) -> dict[str, F32]:
    """The centroids of those tenants that have an index (from the cache while current)."""
    wanted = sorted(set(tenants))
    if not wanted:
        return {}
    marks = ",".join("?" * len(wanted))
    have = [str(r[0]) for r in conn.execute(f"SELECT tenant FROM ann_index WHERE tenant IN ({marks})", wanted)]
    out: dict[str, F32] = {}
    for tenant in have:
        found = centroids_of(conn, cache, tenant)
        if found is not None:
            out[tenant] = found[1]
    return out


def _stamp(conn: Conn) -> int:
    """A value no list version had before: the file's generation counter, advanced."""
    return next_generation(conn)


def _rewrite(
    conn: Conn, stamp: int, tenant: str, no: int, drop: set[int] | None = None, add: Parts | None = None
) -> Parts | None:
    """Rewrite row ``no`` without the rids in ``drop`` and with ``add``; return what it holds now (None: no row)."""
    row = conn.execute("SELECT rids, codes, fine FROM ann_lists WHERE tenant = ? AND list = ?", (tenant, no)).fetchone()
    if row is None:
        return None
    rids = np.frombuffer(row[0], dtype=np.int64)
    n = len(rids)
    codes = np.frombuffer(row[1], dtype=np.uint64).reshape(n, -1) if n else np.zeros((0, 1), dtype=np.uint64)
    fine, scales = fine_parts(row[2], n)
    if drop and n:
        keep = ~np.isin(rids, np.fromiter(drop, dtype=np.int64, count=len(drop)))
        rids, codes, fine, scales = rids[keep], codes[keep], fine[keep], scales[keep]
    if add is not None and len(add[0]):
        if len(rids):
            old = (rids, codes, fine, scales)
            rids, codes, fine, scales = (np.concatenate([a, b]) for a, b in zip(old, add, strict=True))
        else:
            rids, codes, fine, scales = add
    conn.execute(
        "UPDATE ann_lists SET v = ?, rids = ?, codes = ?, fine = ? WHERE tenant = ? AND list = ?",
        (
            stamp,
            rids.tobytes(),
            np.ascontiguousarray(codes).tobytes() if len(rids) else b"",
            fine_blob(fine, scales) if len(rids) else b"",
            tenant,
            no,
        ),
    )
    return rids, codes, fine, scales


def index_add(conn: Conn, cache: AnnCache, tenants: Sequence[str], rids: Sequence[int], vectors: F32) -> bool:
    """Assign new vectors (``tenants[i]``'s record ``rids[i]``) to their users' indexes: to their lists' tails.

    True when some user had an index (the file's generation was advanced for its version: see ``_stamp``).

    A tail is a small row (a list's own row is about 440 KB at 1M: rewriting it
    per add would cost that much I/O each time); once a tail holds more than
    :data:`TAIL_MAX` vectors it is merged into its list, and ``ann_assign``
    follows the vectors from the tail's row number to the list's.
    """
    cents = indexed(conn, cache, tenants)
    if not cents:
        return False
    by_tenant: dict[str, list[int]] = {}
    for i, tenant in enumerate(tenants):
        if tenant in cents:
            by_tenant.setdefault(tenant, []).append(i)
    stamp = _stamp(conn)
    for tenant, rows in by_tenant.items():
        at = np.asarray(rows, dtype=np.int64)
        vecs = vectors[at]
        lists = np.argmax(vecs @ cents[tenant].T, axis=1)
        codes = codes_of(vecs)
        fine, scales = fine_of(vecs)
        new_rids = np.asarray([rids[i] for i in rows], dtype=np.int64)
        assign: list[tuple[int, int]] = []
        for no in np.unique(lists).tolist():
            mask = lists == no
            tail = tail_of(no)
            conn.execute(
                "INSERT OR IGNORE INTO ann_lists(tenant, list, v, rids, codes, fine) VALUES (?, ?, ?, x'', x'', x'')",
                (tenant, tail, stamp),
            )
            held = _rewrite(conn, stamp, tenant, tail, add=(new_rids[mask], codes[mask], fine[mask], scales[mask]))
            if held is not None and len(held[0]) > TAIL_MAX and _rewrite(conn, stamp, tenant, no, add=held):
                conn.execute("DELETE FROM ann_lists WHERE tenant = ? AND list = ?", (tenant, tail))
                assign += [(rid, no) for rid in held[0].tolist()]
            else:
                assign += [(rid, tail) for rid in new_rids[mask].tolist()]
        conn.executemany("INSERT OR REPLACE INTO ann_assign(rid, list) VALUES (?, ?)", assign)
    return True


def drop_rids(conn: Conn, rows: Sequence[tuple[int, str | None]]) -> None:
    """Take these (rid, user) out of their users' indexes: their lists are rewritten without them."""
    if not rows or conn.execute("SELECT 1 FROM ann_index LIMIT 1").fetchone() is None:
        return
    tenant_of = {int(rid): tenant_token(user) for rid, user in rows}
    rids = list(tenant_of)
    touched: dict[tuple[str, int], set[int]] = {}
    for at in range(0, len(rids), 500):
        chunk = rids[at : at + 500]
        for rid, no in conn.execute(
            f"SELECT rid, list FROM ann_assign WHERE rid IN ({','.join('?' * len(chunk))})", chunk
        ):
            touched.setdefault((tenant_of[int(rid)], int(no)), set()).add(int(rid))
    if not touched:
        return
    stamp = _stamp(conn)
    for (tenant, no), gone in touched.items():
        _rewrite(conn, stamp, tenant, no, drop=gone)
    conn.executemany("DELETE FROM ann_assign WHERE rid = ?", [(rid,) for rid in rids])


def drop_index(conn: Conn, tenant: str) -> None:
    """Remove a tenant's index (its rows' assignments too)."""
    for (blob,) in conn.execute("SELECT rids FROM ann_lists WHERE tenant = ?", (tenant,)).fetchall():
        rids = np.frombuffer(blob, dtype=np.int64).tolist()
        conn.executemany("DELETE FROM ann_assign WHERE rid = ?", [(rid,) for rid in rids])
    conn.execute("DELETE FROM ann_lists WHERE tenant = ?", (tenant,))
    conn.execute("DELETE FROM ann_index WHERE tenant = ?", (tenant,))


# -- building ------------------------------------------------------------------------------


def kmeans(
    sample: F32, nlist: int, iterations: int = 10, seed: int = 0, stop: Callable[[], bool] = lambda: False
) -> F32:
    """Spherical k-means: unit centroids maximising the summed cosine of the sample to its nearest."""
    rng = np.random.default_rng(seed)
    centroids = sample[rng.choice(len(sample), nlist, replace=False)].copy()
    for _ in range(iterations):
        if stop():
            break
        assign = _nearest(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, sample)
        counts = np.bincount(assign, minlength=nlist)
        empty = counts == 0
        if empty.any():  # re-seed empty lists with random sample points
            sums[empty] = sample[rng.choice(len(sample), int(empty.sum()), replace=False)]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
    return np.ascontiguousarray(centroids, dtype=np.float32)


def _nearest(
    vectors: F32, centroids: F32, chunk: int = 16_384, stop: Callable[[], bool] = lambda: False
) -> npt.NDArray[np.int64]:
    out = np.zeros(len(vectors), dtype=np.int64)
    for at in range(0, len(vectors), chunk):
        if stop():
            break
        out[at : at + chunk] = np.argmax(vectors[at : at + chunk] @ centroids.T, axis=1)
    return out


def _chunks(conn: Conn, user_id: str | None, dim: int, size: int = 16_384) -> Iterator[tuple[I64, F32]]:
    """The user's (rids, vectors) in rid order, ``size`` at a time: never all of them in RAM."""
    cursor = conn.execute(
        "SELECT v.rid, v.vec FROM records r JOIN vectors v ON v.rid = r.rid WHERE r.user_id IS ? ORDER BY v.rid",
        (user_id,),
    )
    while rows := cursor.fetchmany(size):
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        yield np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), matrix


def _sample(conn: Conn, rids: I64, dim: int) -> F32:
    out = []
    for at in range(0, len(rids), 500):
        chunk = rids[at : at + 500].tolist()
        rows = conn.execute(f"SELECT vec FROM vectors WHERE rid IN ({','.join('?' * len(chunk))})", chunk).fetchall()
        out.append(np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), dim))
    return np.concatenate(out) if out else np.zeros((0, dim), dtype=np.float32)


def build_index(
    read: Callable[[Callable[[Conn], Any]], Any],
    write: Callable[[Callable[[Conn], Any]], Any],
    user_id: str | None,
    dim: int,
    *,
    stop: Callable[[], bool] = lambda: False,
    seed: int = 0,
) -> int:
    """Build (or rebuild) the index of one user; return how many vectors it holds (0: not built).

    The heavy part runs on one read snapshot, outside any write lock: k-means on
    a sample, then every vector streamed in chunks, assigned to its list and
    turned into its codes (RAM: about 450 bytes per vector at 384-d, a
    quarter of the vectors themselves). One short write transaction then stores it and catches up with
    what changed meanwhile (new, updated and deleted records). ``stop()`` is
    polled between chunks: a closing store abandons the build.
    """
    tenant = tenant_token(user_id)
    rng = np.random.default_rng(seed)

    def snapshot(conn: Conn) -> tuple[int, I64, npt.NDArray[np.int64], U64, npt.NDArray[np.int8], F32, F32] | None:
        row = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant,)).fetchone()
        every = np.fromiter(
            (
                r[0]
                for r in conn.execute(
                    "SELECT v.rid FROM records r JOIN vectors v ON v.rid = r.rid WHERE r.user_id IS ?", (user_id,)
                )
            ),
            dtype=np.int64,
        )
        if not len(every):
            return None
        nlist = min(nlist_for(len(every)), len(every))
        size = min(len(every), max(40 * nlist, 20_000))
        picked = np.sort(rng.choice(every, size, replace=False)) if size < len(every) else np.sort(every)
        centroids = kmeans(_sample(conn, picked, dim), nlist, seed=seed, stop=stop)
        rid_parts, list_parts, code_parts, fine_parts_, scale_parts = [], [], [], [], []
        for rids, matrix in _chunks(conn, user_id, dim):
            if stop():
                return None
            rid_parts.append(rids)
            list_parts.append(_nearest(matrix, centroids))
            code_parts.append(codes_of(matrix))
            fine, scales = fine_of(matrix)
            fine_parts_.append(fine)
            scale_parts.append(scales)
        gen = -1 if row is None else int(row[0])
        return (
            gen,
            np.concatenate(rid_parts),
            np.concatenate(list_parts),
            np.concatenate(code_parts),
            np.concatenate(fine_parts_),
            np.concatenate(scale_parts),
            centroids,
        )

    built = read(snapshot)
    if built is None or stop():
        return 0
    gen, rids, lists, codes, fine, scales, centroids = built
    nlist = len(centroids)
    snap_rids = rids

    def store(conn: Conn) -> int:
        nonlocal rids, lists, codes, fine, scales
        now_gen = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant,)).fetchone()
        drop_index(conn, tenant)
        if now_gen is None:
            return 0  # the user was erased meanwhile
        if int(now_gen[0]) != gen:
            # Writes happened since the snapshot: keep only live rids, and recompute the records added
            # or updated since (their rids are new, or their codes changed), streaming the vectors.
            position = dict(zip(snap_rids.tolist(), range(len(snap_rids)), strict=True))
            live_parts, fresh_rids, fresh_lists, fresh_codes, fresh_fine, fresh_scales = [], [], [], [], [], []
            for live, matrix in _chunks(conn, user_id, dim):
                live_parts.append(live)
                new_codes = codes_of(matrix)
                pos = np.fromiter((position.get(r, -1) for r in live.tolist()), dtype=np.int64, count=len(live))
                changed = pos < 0
                seen = ~changed
                if seen.any():
                    changed[seen] = np.any(new_codes[seen] != codes[pos[seen]], axis=1)
                if changed.any():
                    fresh_rids.append(live[changed])
                    fresh_lists.append(_nearest(matrix[changed], centroids))
                    fresh_codes.append(new_codes[changed])
                    new_fine, new_scales = fine_of(matrix[changed])
                    fresh_fine.append(new_fine)
                    fresh_scales.append(new_scales)
            del position
            live_all = np.concatenate(live_parts) if live_parts else np.zeros(0, dtype=np.int64)
            fresh = np.concatenate(fresh_rids) if fresh_rids else np.zeros(0, dtype=np.int64)
            stay = np.isin(snap_rids, live_all) & ~np.isin(snap_rids, fresh)
            rids = np.concatenate([snap_rids[stay], fresh])
            lists = np.concatenate([lists[stay], *fresh_lists])
            codes = np.concatenate([codes[stay], *fresh_codes])
            fine = np.concatenate([fine[stay], *fresh_fine])
            scales = np.concatenate([scales[stay], *fresh_scales])
        version = next_generation(conn)
        conn.execute(
            "INSERT INTO ann_index(tenant, nlist, dim, centroids, built, version) VALUES (?, ?, ?, ?, ?, ?)",
            (tenant, nlist, dim, centroids.tobytes(), len(rids), version),
        )
        order = np.argsort(lists, kind="stable")
        bounds = np.searchsorted(lists[order], np.arange(nlist + 1))

        def rows() -> Iterator[tuple[Any, ...]]:
            for no in range(nlist):
                at = order[bounds[no] : bounds[no + 1]]
                yield (
                    tenant,
                    no,
                    version,
                    rids[at].tobytes(),
                    np.ascontiguousarray(codes[at]).tobytes(),
                    fine_blob(fine[at], scales[at]) if len(at) else b"",
                )

        conn.executemany("INSERT INTO ann_lists(tenant, list, v, rids, codes, fine) VALUES (?, ?, ?, ?, ?, ?)", rows())
        conn.executemany(
            "INSERT OR REPLACE INTO ann_assign(rid, list) VALUES (?, ?)",
            zip(rids.tolist(), lists.tolist(), strict=True),
        )
        # Every process's cached lists of this tenant belong to the old build now.
        conn.execute("UPDATE generations SET gen = ? WHERE tenant = ?", (version, tenant))
        return len(rids)

    return int(write(store))
