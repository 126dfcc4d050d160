"""The vector index of a large scope: IVF lists of sign-bit codes in the file, then an exact re-rank.

A user (tenant) with at least ``ann_threshold`` vectors gets an index, kept in
the same SQLite file as everything else:

- ``ann_index``: per tenant, the ``nlist`` centroids (spherical k-means on a
  sample of the tenant's vectors) and a version that changes on every rebuild;
- ``ann_lists``: per (tenant, list), the rids of the vectors nearest that
  centroid and their *sign-bit codes* (1 bit per dimension: 48 bytes for
  384-d), plus a version ``v`` bumped on every rewrite;
- ``ann_assign``: rid -> list, so a delete finds the list to rewrite.

A search ranks the centroids, scans the codes of the ``nprobe`` best lists by
Hamming distance (``bitwise_count`` over 64-bit words), re-scores the nearest
by the real-valued query's dot product with their signs (:func:`shortlist`),
reads the float32 vectors of the ``rerank`` best from the ``vectors`` table by
rid and ranks those exactly: the scores are true cosine similarities. The best
are then checked against ``records`` (expiry, filters, narrower scopes), a few
more than ``k`` at a time; when fewer than ``k`` survive, the caller falls back
to the exact scan.

Lists are read on demand and kept in a process-wide cache keyed by the file's
identity (device, inode and a random id written in the file), shared by every
store open on the file in this process; other processes share the file's pages
through SQLite's memory map. A cached list is reused while its tenant's
generation is unchanged, and otherwise re-validated by its version.

Writes keep the index exact in membership: an add assigns the new vectors to
their nearest centroid and rewrites those lists, a delete or erasure rewrites
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

from ._rows import Cond, Conn, filter_sql, scope_sql, tenant_token

if TYPE_CHECKING:
    import numpy.typing as npt

    F32 = npt.NDArray[np.float32]
    I64 = npt.NDArray[np.int64]
    U64 = npt.NDArray[np.uint64]
else:
    F32 = I64 = U64 = Any

__all__ = [
    "ANN_DDL",
    "REBUILD_GROWTH",
    "AnnCache",
    "AnnParams",
    "NotCached",
    "build_index",
    "centroids_of",
    "search",
    "shortlist",
    "codes_of",
    "drop_index",
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

#: A tenant whose vector count reached this many times its count at the last build is rebuilt.
REBUILD_GROWTH = 4


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


def hamming_columns(columns: U64, q: U64) -> npt.NDArray[Any]:
    """Hamming distance of every code to ``q``, codes given word by word: ``columns[w]`` is word w of each.

    One pass per 64-bit word over contiguous memory when ``columns`` is C-ordered
    (the cache keeps them so): a row-wise sum over 6 words is ten times slower.
    """
    out = np.zeros(columns.shape[1], dtype=np.uint16)
    count = getattr(np, "bitwise_count", None)
    for w in range(columns.shape[0]):
        x = columns[w] ^ q[w]
        if count is not None:
            out += count(x)
        else:  # numpy < 2
            out += _POP[x.view(np.uint8).reshape(-1, 8)].sum(axis=1, dtype=np.uint16)
    return out


_BITS_T = np.ascontiguousarray(np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).T, dtype=np.float32)
"""Bit k (MSB first) of each byte value: (8, 256)."""


def mv(matrix: F32, q: F32) -> F32:
    """``matrix @ q`` by numpy's own loop: a BLAS call wakes its threads, milliseconds on a busy machine."""
    return np.einsum("ij,j->i", matrix, q)  # type: ignore[no-any-return]


def byte_table(qvec: F32) -> F32:
    """Per code byte j and value b: the sum of the query's components 8j..8j+7 whose bit is set in b."""
    dim = len(qvec)
    padded = np.zeros(-(-dim // 64) * 64, dtype=np.float32)
    padded[:dim] = qvec
    out: F32 = padded.reshape(-1, 8) @ _BITS_T  # (bytes, 256); small enough for one BLAS thread: 10 us
    return out


def nearest(distance: npt.NDArray[Any], m: int) -> npt.NDArray[np.int64]:
    """Positions of ``m`` smallest small non-negative integers (Hamming distances), ties by position.

    A histogram of the distances gives the cut-off: twice as fast as ``argpartition`` on 50k.
    """
    cumulative = np.cumsum(np.bincount(distance))
    cut = int(np.searchsorted(cumulative, m))
    below = np.flatnonzero(distance < cut)
    return np.concatenate([below, np.flatnonzero(distance == cut)[: m - len(below)]])


#: The Hamming stage keeps this many times the candidates of the asymmetric stage (measured at 1M: 4 and 8
#: give the same recall; the candidates it passes on cost a 48-entry table gather each).
WIDE = 4


def shortlist(columns: U64, qvec: F32, keep: int) -> npt.NDArray[np.int64]:
    """Positions of the ``keep`` codes most similar to ``qvec``, by two cheap estimates.

    ``columns``: the codes word by word (``(words, n)``, see :func:`hamming_columns`).
    First the Hamming distance between sign codes (48 bytes per 384-d vector);
    then, for the ``WIDE`` x ``keep`` nearest by it, the dot product of the
    real-valued query with each vector's signs (an asymmetric estimate, far
    closer to the cosine), whose best ``keep`` are returned.
    """
    n = columns.shape[1]
    if n <= keep:
        return np.arange(n)
    wide = min(n, WIDE * keep)
    near = nearest(hamming_columns(columns, codes_of(qvec[None, :])[0]), wide) if wide < n else np.arange(n)
    table = byte_table(qvec)
    raw = np.ascontiguousarray(columns[:, near].T).view(np.uint8)  # (wide, bytes)
    offsets = (np.arange(raw.shape[1]) * 256).astype(np.intp)
    est = table.ravel()[raw.astype(np.intp) + offsets].sum(axis=1)
    return near[np.argpartition(-est, keep - 1)[:keep]]


@dataclass(frozen=True)
class AnnParams:
    """When a tenant gets an index and how a search uses it."""

    threshold: int = 50_000  # vectors of one user before an index is built
    probe: float = 0.05  # share of the lists scanned (at least MIN_PROBE of them)
    rerank: int = 400  # vectors re-ranked exactly (at least 8 * k)


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

    @property
    def nbytes(self) -> int:
        return int(self.rids.nbytes + self.codes.nbytes)


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
    with cache.lock:
        # Another version of the lists belongs to another build: drop them.
        if hit is not None:
            for key in [key for key in cache.lists if key[0] == tenant]:
                cache.nbytes -= cache.lists.pop(key).nbytes
        cache.centroids[tenant] = (version, matrix)
    return version, matrix, built


def _lists(conn: Conn, cache: AnnCache, tenant: str, gen: int, wanted: Sequence[int], load: bool = True) -> list[_List]:
    """The probed lists, from the cache when current in this snapshot, else read from the file.

    ``load=False``: a list not cached as of this snapshot raises :class:`NotCached`.
    """
    out: dict[int, _List] = {}
    check: list[int] = []
    with cache.lock:
        for no in wanted:
            entry = cache.lists.get((tenant, no))
            if entry is not None and entry.gen == gen:
                cache.lists.move_to_end((tenant, no))
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
        with cache.lock:
            for no in check:
                entry = cache.lists.get((tenant, no))
                if entry is not None and no in versions and entry.v == versions[no]:
                    if gen > entry.gen:
                        entry.gen = gen
                    out[no] = entry
                elif no in versions:
                    stale.append(no)
        if stale:
            marks = ",".join("?" * len(stale))
            for no, v, rids, codes in conn.execute(
                f"SELECT list, v, rids, codes FROM ann_lists WHERE tenant = ? AND list IN ({marks})", (tenant, *stale)
            ):
                entry = _List(
                    gen=gen,
                    v=int(v),
                    rids=np.frombuffer(rids, dtype=np.int64),
                    codes=np.ascontiguousarray(np.frombuffer(codes, dtype=np.uint64).reshape(len(rids) // 8, -1).T)
                    if rids
                    else np.zeros((1, 0), dtype=np.uint64),
                )
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
) -> list[tuple[int, float]] | None:
    """The ``k`` best (rid, cosine) of ``scope`` through its user's index; None when there is no index.

    May return fewer than ``k`` when filters, a narrower scope or expiry left
    too few of the re-ranked candidates: the caller then scans exactly.
    ``load=False``: only with the centroids and probed lists cached as of this
    snapshot, else :class:`NotCached` (the re-ranked vectors are always read).
    """
    tenant = tenant_token(scope.user_id)
    found = centroids_of(conn, cache, tenant, load=load)
    if found is None:
        return None
    _, centroids, built = found
    nlist = len(centroids)
    share = max(params.probe, MIN_SCAN / max(built, 1))
    nprobe = min(nlist, max(MIN_PROBE, math.ceil(nlist * share)))
    cscores = mv(centroids, qvec)
    probe = np.argpartition(-cscores, nprobe - 1)[:nprobe] if nprobe < nlist else np.arange(nlist)
    lists = _lists(conn, cache, tenant, gen, [int(x) for x in probe], load)
    if not lists:
        return []
    rids = np.concatenate([entry.rids for entry in lists])
    if not len(rids):
        return []
    codes = np.concatenate([entry.codes for entry in lists], axis=1)
    best = rids[shortlist(codes, qvec, max(params.rerank, 8 * k))]
    return rerank(conn, qvec, best, scope, k, filters, now)


def rerank(conn: Conn, qvec: F32, rids: I64, scope: Any, k: int, filters: Cond, now: int) -> list[tuple[int, float]]:
    """Exact cosine of the candidates that are live, in ``scope`` and match ``filters``; the best ``k``.

    The vectors are read by rid alone (one B-tree descent each) and ranked; only
    then are the best checked against the records (scope, expiry, filters), a
    few more than ``k`` at a time, until ``k`` pass or none are left.
    """
    ordered = np.unique(rids)  # rid order: neighbouring pages of the vectors table
    if not len(ordered):
        return []
    rows = conn.execute(
        f"SELECT rid, vec FROM vectors WHERE rid IN ({','.join('?' * len(ordered))})", ordered.tolist()
    ).fetchall()
    if not rows:
        return []
    found = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = mv(matrix, qvec)
    order = np.argsort(-scores, kind="stable")
    where, params = scope_sql(scope)
    fsql, fparams = filter_sql(filters)
    out: list[tuple[int, float]] = []
    at, step = 0, 2 * k
    while len(out) < k and at < len(order):
        chunk = order[at : at + step]
        at, step = at + len(chunk), 2 * step
        # NOT INDEXED: rowid lookups only; the planner would otherwise walk the user's whole index
        # (records_user_time) for ``user_id IS ?``, a million rows at 1M, without statistics.
        live = {
            int(r[0])
            for r in conn.execute(
                f"SELECT r.rid FROM records r NOT INDEXED WHERE r.rid IN ({','.join('?' * len(chunk))}) "
                f"AND {where} AND (r.expires_at IS NULL OR r.expires_at > ?){fsql}",
                [*found[chunk].tolist(), *params, now, *fparams],
            )
        }
        out += [(int(found[i]), float(scores[i])) for i in chunk if int(found[i]) in live]
    return out[:k]


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
    return int(conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation' RETURNING value").fetchone()[0])


def _rewrite(
    conn: Conn,
    stamp: int,
    tenant: str,
    no: int,
    drop: set[int] | None = None,
    add_rids: I64 | None = None,
    add_codes: U64 | None = None,
) -> None:
    row = conn.execute("SELECT rids, codes FROM ann_lists WHERE tenant = ? AND list = ?", (tenant, no)).fetchone()
    if row is None:
        return
    rids = np.frombuffer(row[0], dtype=np.int64)
    codes = np.frombuffer(row[1], dtype=np.uint64).reshape(len(rids), -1) if len(rids) else None
    if drop:
        keep = ~np.isin(rids, np.fromiter(drop, dtype=np.int64, count=len(drop)))
        rids = rids[keep]
        codes = codes[keep] if codes is not None else None
    if add_rids is not None and add_codes is not None and len(add_rids):
        rids = np.concatenate([rids, add_rids])
        codes = add_codes if codes is None or not len(codes) else np.concatenate([codes, add_codes])
    conn.execute(
        "UPDATE ann_lists SET v = ?, rids = ?, codes = ? WHERE tenant = ? AND list = ?",
        (stamp, rids.tobytes(), b"" if codes is None else np.ascontiguousarray(codes).tobytes(), tenant, no),
    )


def index_add(conn: Conn, cache: AnnCache, tenants: Sequence[str], rids: Sequence[int], vectors: F32) -> None:
    """Assign new vectors (``tenants[i]``'s record ``rids[i]``) to the lists of their users' indexes."""
    cents = indexed(conn, cache, tenants)
    if not cents:
        return
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
        new_rids = np.asarray([rids[i] for i in rows], dtype=np.int64)
        for no in np.unique(lists):
            mask = lists == no
            _rewrite(conn, stamp, tenant, int(no), add_rids=new_rids[mask], add_codes=codes[mask])
        conn.executemany(
            "INSERT OR REPLACE INTO ann_assign(rid, list) VALUES (?, ?)",
            list(zip(new_rids.tolist(), lists.tolist(), strict=True)),
        )


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
    turned into its code (RAM: about 60 bytes per vector, never the vectors
    themselves). One short write transaction then stores it and catches up with
    what changed meanwhile (new, updated and deleted records). ``stop()`` is
    polled between chunks: a closing store abandons the build.
    """
    tenant = tenant_token(user_id)
    rng = np.random.default_rng(seed)

    def snapshot(conn: Conn) -> tuple[int, I64, npt.NDArray[np.int64], U64, F32] | None:
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
        rid_parts, list_parts, code_parts = [], [], []
        for rids, matrix in _chunks(conn, user_id, dim):
            if stop():
                return None
            rid_parts.append(rids)
            list_parts.append(_nearest(matrix, centroids))
            code_parts.append(codes_of(matrix))
        gen = -1 if row is None else int(row[0])
        return gen, np.concatenate(rid_parts), np.concatenate(list_parts), np.concatenate(code_parts), centroids

    built = read(snapshot)
    if built is None or stop():
        return 0
    gen, rids, lists, codes, centroids = built
    nlist = len(centroids)
    snap_rids = rids

    def store(conn: Conn) -> int:
        nonlocal rids, lists, codes
        now_gen = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant,)).fetchone()
        drop_index(conn, tenant)
        if now_gen is None:
            return 0  # the user was erased meanwhile
        if int(now_gen[0]) != gen:
            # Writes happened since the snapshot: keep only live rids, and recompute the records added
            # or updated since (their rids are new, or their codes changed), streaming the vectors.
            position = dict(zip(snap_rids.tolist(), range(len(snap_rids)), strict=True))
            live_parts, fresh_rids, fresh_lists, fresh_codes = [], [], [], []
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
            del position
            live_all = np.concatenate(live_parts) if live_parts else np.zeros(0, dtype=np.int64)
            fresh = np.concatenate(fresh_rids) if fresh_rids else np.zeros(0, dtype=np.int64)
            stay = np.isin(snap_rids, live_all) & ~np.isin(snap_rids, fresh)
            rids = np.concatenate([snap_rids[stay], fresh])
            lists = np.concatenate([lists[stay], *fresh_lists])
            codes = np.concatenate([codes[stay], *fresh_codes])
        version = int(
            conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation' RETURNING value").fetchone()[0]
        )
        conn.execute(
            "INSERT INTO ann_index(tenant, nlist, dim, centroids, built, version) VALUES (?, ?, ?, ?, ?, ?)",
            (tenant, nlist, dim, centroids.tobytes(), len(rids), version),
        )
        order = np.argsort(lists, kind="stable")
        bounds = np.searchsorted(lists[order], np.arange(nlist + 1))
        conn.executemany(
            "INSERT INTO ann_lists(tenant, list, v, rids, codes) VALUES (?, ?, ?, ?, ?)",
            (
                (
                    tenant,
                    no,
                    version,
                    rids[order[bounds[no] : bounds[no + 1]]].tobytes(),
                    np.ascontiguousarray(codes[order[bounds[no] : bounds[no + 1]]]).tobytes(),
                )
                for no in range(nlist)
            ),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO ann_assign(rid, list) VALUES (?, ?)",
            zip(rids.tolist(), lists.tolist(), strict=True),
        )
        # Every process's cached lists of this tenant belong to the old build now.
        conn.execute("UPDATE generations SET gen = ? WHERE tenant = ?", (version, tenant))
        return len(rids)

    return int(write(store))
