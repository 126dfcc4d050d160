"""The vector cache: each scope's unit vectors in RAM, kept current across processes by generations.

A scope's block is loaded from the file once and reused while no process has
written to its user since (``generations`` in the file says so); this process's
own adds are appended in place. :meth:`VectorCache.ranking_job` reads what a
ranking needs inside the caller's read transaction and returns the numpy part
to run anywhere.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryport._errors import BackendError
from memoryport._records import MemoryRecord, MemoryScope
from memoryport.storekit import embed_unit

from ._ann import AnnCache, NotCached
from ._rows import NEVER, Cond, Conn, ScopeKey, covers, expiry, filter_sql, scope_key, scope_sql, tenant_token
from ._shm import SharedLists

if TYPE_CHECKING:
    import numpy.typing as npt

    F32 = npt.NDArray[np.float32]
    I64 = npt.NDArray[np.int64]
else:
    F32 = I64 = Any

__all__ = [
    "F32",
    "INLINE_VECTORS",
    "Block",
    "NotCached",
    "Patch",
    "Ranking",
    "SPLIT_FROM",
    "VectorCache",
    "attach",
    "detach",
    "dot",
    "embed",
    "normalise",
    "rows_dot",
]

#: The largest scope whose vector search runs on the caller's thread (vectors
#: already in RAM; ``SQLiteStore._search_inline``): about 1-2 ms of numpy at
#: 384-d, less than a hop to a worker thread costs on a busy machine.
INLINE_VECTORS = 20_000

# Below this many floats, a loop on this thread (rows_dot) beats BLAS's gemv: a multi-threaded
# BLAS gemv waits for its threads to wake, 8-16 ms on a loaded 2-core machine,
# whatever the size (measured: docs/benchmarks-sqlite.md). Above it, BLAS threads pay off.
_BLAS_FROM = 64_000_000


#: From this many dimensions, numpy's ``vecdot`` (numpy >= 2: one single-threaded BLAS dot per row) beats
#: ``einsum``'s loop: 0.58-0.65x its time at 10k x 384-d, 0.5x at 1536-d; below, einsum is faster (2.6x at 24-d).
_VECDOT_FROM = 64
_vecdot: Callable[..., F32] | None = getattr(np, "vecdot", None)


def rows_dot(matrix: F32, q: F32, out: F32 | None = None) -> F32:
    """Each row of ``matrix`` times ``q`` on this thread, each row's sum its own (the same bits whatever rows
    come with it): ``vecdot`` from :data:`_VECDOT_FROM` dimensions, else ``einsum``.

    Example:
        >>> rows_dot(np.eye(2, dtype=np.float32), np.array([3, 4], dtype=np.float32)).tolist()
        [3.0, 4.0]
    """
    if _vecdot is not None and matrix.shape[1] >= _VECDOT_FROM:
        return _vecdot(matrix, q, out=out)
    return np.einsum("ij,j->i", matrix, q, out=out)


def dot(matrix: F32, q: F32) -> F32:
    """Each row of ``matrix`` times ``q``, by whichever of numpy's loops is faster at this size."""
    if matrix.size < _BLAS_FROM:
        return rows_dot(matrix, q)
    return matrix @ q


def normalise(matrix: F32) -> F32:
    """Rows scaled to unit length (a zero row stays zero), contiguous float32."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32)


embed = embed_unit  # the core's: a batch as unit-length float32 rows, failures as EmbeddingError


#: From this many floats (rows x dimension) a hybrid search splits the product in two parts, one per
#: numpy thread, beside its keyword half (``_search._hybrid``); below, one part (at 10k x 384-d the
#: product takes ~1.5 ms, no longer than the keyword half). At and above ``_BLAS_FROM`` BLAS has threads.
SPLIT_FROM = 8_000_000


class Ranking:
    """The pure numpy rest of a vector ranking (:meth:`VectorCache.ranking_job`): call it for the best ``limit``.

    Or run its :meth:`products` first, each on any thread (they fill the scores, rows apart),
    then call it: the same scores to the bit (each row's product is its own sum, whatever the
    rows around it), so the same ranking.

    Example:
        >>> import numpy as np
        >>> m = np.eye(3, dtype=np.float32)
        >>> job = Ranking(np.arange(3), m, np.full(3, 2**62), m[1], 2, 0, None)
        >>> [part() for part in job.products(2)] and job()
        [(1, 1.0), (0, 0.0)]
    """

    def __init__(
        self,
        rids: I64,
        matrix: F32,
        expires: I64,
        qvec: F32,
        limit: int,
        now: int,
        allowed: I64 | None,
        soonest: int | None = None,
    ):
        self.rids, self.matrix, self.expires, self.qvec = rids, matrix, expires, qvec
        self.limit, self.now, self.allowed = limit, now, allowed
        #: At most the least of ``expires`` (None: unknown): above ``now``, no row can have expired.
        self.soonest = soonest
        self.scores: F32 | None = None

    @property
    def size(self) -> int:
        """How many floats the product reads."""
        return int(self.matrix.size)

    def products(self, parts: int) -> list[Callable[[], None]]:
        """The product split into ``parts`` row ranges (einsum only: below ``_BLAS_FROM``), to run before the call.

        One part is the whole product, alone: the call then only ranks its scores (another thread can do the
        product, which holds the GIL only to start and to end, while the caller's thread goes on)."""
        rows = len(self.rids)
        if parts < 1 or rows < parts or self.size >= _BLAS_FROM:
            return []
        scores: F32 = np.empty(rows, dtype=np.float32)
        self.scores = scores
        bounds = [rows * i // parts for i in range(parts + 1)]
        matrix, qvec = self.matrix, self.qvec

        def part(start: int, end: int) -> Callable[[], None]:
            def run() -> None:
                rows_dot(matrix[start:end], qvec, out=scores[start:end])

            return run

        return [part(bounds[i], bounds[i + 1]) for i in range(parts)]

    def __call__(self) -> list[tuple[int, float]]:
        rids, expires, now, allowed = self.rids, self.expires, self.now, self.allowed
        if not len(rids):
            return []
        scores = self.scores if self.scores is not None else dot(self.matrix, self.qvec)
        n_dead = 0
        if allowed is not None or self.soonest is None or self.soonest <= now:
            dead = expires <= now
            if allowed is not None:
                dead |= ~np.isin(rids, allowed)
            # One C count for both questions (ndarray.any and .sum go through numpy's Python wrappers).
            n_dead = int(np.count_nonzero(dead))
            if n_dead:
                scores = np.where(dead, -np.inf, scores)
        n = min(self.limit, len(rids) - n_dead)
        if n <= 0:
            return []
        top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        # tolist: Python ints and floats at once (the same values as int() and float() of each element).
        return list(zip(rids[top].tolist(), scores[top].tolist(), strict=True))


class Block:
    """One scope's vectors in RAM, valid while its tenant's generation is ``gen``.

    The arrays have spare capacity so that appending a batch after a write is
    amortised O(batch), not a copy of the whole scope. Read through :meth:`view`
    (under the cache lock): the first ``n`` rows of the three buffers.
    """

    def __init__(self, gen: int, rids: I64, matrix: F32, expires: I64) -> None:
        self.gen = gen
        self._rids, self._matrix, self._expires = rids, matrix, expires
        self.n = len(rids)
        self._rows: dict[int, int] | None = None  # rid -> row, built on first use (see VectorCache.rows)
        #: At most the least expiry of the rows (lowered by every append and patch): a search at a time
        #: before it skips the expiry mask (``Ranking``).
        self.soonest = int(expires.min()) if len(expires) else NEVER

    def view(self) -> tuple[I64, F32, I64]:
        n = self.n
        return self._rids[:n], self._matrix[:n], self._expires[:n]

    def append(self, rids: I64, matrix: F32, expires: I64) -> None:
        n, m = self.n, len(rids)
        if n + m > len(self._rids):
            capacity = max(2 * len(self._rids), n + m, 64)
            grown_rids = np.empty(capacity, dtype=np.int64)
            grown_matrix = np.empty((capacity, self._matrix.shape[1]), dtype=np.float32)
            grown_expires = np.empty(capacity, dtype=np.int64)
            grown_rids[:n], grown_matrix[:n], grown_expires[:n] = self.view()
            self._rids, self._matrix, self._expires = grown_rids, grown_matrix, grown_expires
        self._rids[n : n + m] = rids
        self._matrix[n : n + m] = matrix
        self._expires[n : n + m] = expires
        self.n = n + m
        if m:
            self.soonest = min(self.soonest, int(expires.min()))
        if self._rows is not None:
            self._rows.update((int(rid), n + i) for i, rid in enumerate(rids.tolist()))

    def rows(self) -> tuple[F32, dict[int, int]]:
        """The matrix and rid -> row (under the cache lock; the map is built once, then kept up to date)."""
        rids, matrix, _ = self.view()
        if self._rows is None:
            self._rows = {rid: i for i, rid in enumerate(rids.tolist())}
        return matrix, self._rows

    @property
    def nbytes(self) -> int:
        return int(self._rids.nbytes + self._matrix.nbytes + self._expires.nbytes)


@dataclass
class Patch:
    """What an update changed in one record, for the vectors cached in RAM."""

    rid: int
    scope: MemoryScope
    vector: F32 | None
    expires: int | None  # None: unchanged


_FILES: dict[tuple[Any, ...], tuple[VectorCache, AnnCache, list[int]]] = {}
_FILES_LOCK = threading.Lock()


def attach(
    key: tuple[Any, ...] | None, dim: int, cache_bytes: int, *, share: bool | None = None
) -> tuple[VectorCache, AnnCache]:
    """The caches of one file, shared by every store of this process open on it (``key``: its identity).

    ``key`` None (the file's identity is unknown): caches of the caller's own.
    Each :func:`attach` is paired with a :func:`detach`; the last frees them.
    ``share``: True, the index's decoded lists are shared with other processes
    through tmpfs (``_shm.py``) when it can be used; False, they are not (one
    store of the process asking not to turns it off for the file in this
    process); None, no opinion (a store without an index).
    """
    if key is None:
        return VectorCache(dim, cache_bytes), AnnCache(cache_bytes)
    full = (*key, dim)
    with _FILES_LOCK:
        found = _FILES.get(full)
        if found is None:
            found = _FILES[full] = (VectorCache(dim, cache_bytes), AnnCache(cache_bytes), [0])
        vectors, ann, users = found
        if share is False:
            ann.unshare()
        elif share and ann.shared is None and not ann.unshared:
            try:
                ann.shared = SharedLists(key)
            except OSError:
                ann.unshared = True  # not Linux, no tmpfs, denied: this process keeps its own copies
        vectors.cache_bytes = max(vectors.cache_bytes, cache_bytes)
        ann.max_bytes = max(ann.max_bytes, cache_bytes)
        users[0] += 1
        return vectors, ann


def detach(key: tuple[Any, ...] | None, dim: int) -> None:
    """One store fewer on the file ``key``; the last one's leaving frees the caches."""
    if key is None:
        return
    full = (*key, dim)
    with _FILES_LOCK:
        found = _FILES.get(full)
        if found is None:
            return
        found[2][0] -= 1
        if found[2][0] <= 0:
            del _FILES[full]
            found[0].clear()
            found[1].clear()


class VectorCache:
    """Blocks of vectors per scope, least recently used dropped beyond ``cache_bytes``."""

    def __init__(self, dim: int, cache_bytes: int) -> None:
        self.dim = dim
        self.cache_bytes = cache_bytes
        self.lock = threading.Lock()
        self._blocks: OrderedDict[ScopeKey, Block] = OrderedDict()

    def clear(self) -> None:
        """Forget every block."""
        with self.lock:
            self._blocks.clear()

    def cached_size(self, scope: MemoryScope) -> int | None:
        """How many vectors of ``scope`` are in RAM (perhaps out of date), or None when none are."""
        with self.lock:
            block = self._blocks.get(scope_key(scope))
            return None if block is None else block.n

    def current(self, scope: MemoryScope) -> tuple[int, I64, F32, I64, int] | None:
        """The generation ``scope``'s vectors in RAM were current at, their view and soonest expiry; or None.

        Current in the file only while its tenant's generation is still that one: the caller checks.
        """
        with self.lock:
            block = self._blocks.get(scope_key(scope))
            if block is None:
                return None
            self._blocks.move_to_end(scope_key(scope))
            return (block.gen, *block.view(), block.soonest)

    def block(self, conn: Conn, scope: MemoryScope, *, load: bool = True) -> Block:
        """This scope's vectors, from RAM while no process has written to its tenant since.

        With ``load=False`` a block that is absent or out of date raises
        :class:`NotCached` instead of being read from the file.
        """
        key = scope_key(scope)
        row = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant_token(scope.user_id),)).fetchone()
        gen = -1 if row is None else int(row[0])
        with self.lock:
            block = self._blocks.get(key)
            if block is not None and block.gen == gen:
                self._blocks.move_to_end(key)
                return block
        if not load:
            raise NotCached(scope.kind)
        where, params = scope_sql(scope)
        cursor = conn.execute(
            f"SELECT r.rid, coalesce(r.expires_at, {NEVER}), v.vec FROM records r JOIN vectors v ON v.rid = r.rid "
            f"WHERE {where}",
            params,
        )
        dim = self.dim
        # In chunks: holding every row's bytes at once doubles the peak memory of a 1M-vector load.
        rids: list[I64] = []
        expires: list[I64] = []
        matrices: list[F32] = []
        while rows := cursor.fetchmany(16_384):
            chunk = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
            if chunk.size != len(rows) * dim:
                raise BackendError(
                    f"stored vectors do not have the embedder's dimension {dim}; re-embed the file",
                    backend="sqlite",
                    operation="search",
                )
            matrices.append(chunk.reshape(len(rows), dim))
            rids.append(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)))
            expires.append(np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows)))
        block = Block(
            gen=gen,
            rids=np.concatenate(rids) if rids else np.zeros(0, dtype=np.int64),
            matrix=np.concatenate(matrices) if matrices else np.zeros((0, dim), dtype=np.float32),
            expires=np.concatenate(expires) if expires else np.zeros(0, dtype=np.int64),
        )
        with self.lock:
            self._blocks[key] = block
            self._blocks.move_to_end(key)
            total = sum(b.nbytes for b in self._blocks.values())
            while total > self.cache_bytes and len(self._blocks) > 1:
                _, dropped = self._blocks.popitem(last=False)
                total -= dropped.nbytes
        return block

    def rows(self, block: Block) -> tuple[F32, dict[int, int]]:
        """``block``'s matrix and rid -> row (later appends add rows beyond this matrix: rids of a later snapshot)."""
        with self.lock:
            return block.rows()

    def ranking_job(
        self,
        conn: Conn,
        qvec: F32,
        scope: MemoryScope,
        limit: int,
        filters: Cond,
        now: int,
        *,
        load: bool = True,
    ) -> Ranking:
        """Read what the vector ranking needs (in this snapshot); return the pure numpy rest.

        ``load=False``: only from vectors already in RAM and current (else :class:`NotCached`).
        """
        block = self.block(conn, scope, load=load)
        with self.lock:
            rids, matrix, expires = block.view()
            soonest = block.soonest
        allowed: I64 | None = None
        if filters and len(rids):
            where, params = scope_sql(scope)
            fsql, fparams = filter_sql(filters)
            allowed = np.fromiter(
                (r[0] for r in conn.execute(f"SELECT r.rid FROM records r WHERE {where}{fsql}", params + fparams)),
                dtype=np.int64,
            )

        return Ranking(rids, matrix, expires, qvec, limit, now, allowed, soonest)

    def extend(
        self,
        records: Sequence[MemoryRecord],
        vectors: F32 | None,
        base: int,
        gen: int,
        old: Mapping[str, int],
        erased: bool,
    ) -> None:
        """Append our own batch to cached scopes that were current just before it (saves a reload)."""
        with self.lock:
            for key, block in list(self._blocks.items()):
                tenant = tenant_token(key[0])
                if tenant not in old:
                    continue
                if erased or vectors is None or block.gen != old[tenant]:
                    del self._blocks[key]
                    continue
                mine = [i for i, r in enumerate(records) if covers(key, r)]
                if mine:
                    block.append(
                        np.asarray([base + i for i in mine], dtype=np.int64),
                        vectors[mine],
                        np.asarray([expiry(records[i]) for i in mine], dtype=np.int64),
                    )
                block.gen = gen

    def patch(self, patches: Sequence[Patch], gen: int, old: Mapping[str, int]) -> None:
        """Patch changed vectors and expiries into cached scopes that were current just before the update."""
        with self.lock:
            for key, block in list(self._blocks.items()):
                tenant = tenant_token(key[0])
                if tenant not in old:
                    continue
                if block.gen != old[tenant]:
                    del self._blocks[key]
                    continue
                query = MemoryScope.model_construct(user_id=key[0], session_id=key[1], agent_id=key[2])
                rids, matrix, expires = block.view()
                for patch in patches:
                    if not query.covers(patch.scope):
                        continue
                    at = np.flatnonzero(rids == patch.rid)
                    if patch.vector is not None and not len(at):
                        del self._blocks[key]  # a record the block lacks (added by another process): reload
                        break
                    if patch.vector is not None:
                        matrix[at] = patch.vector
                    if patch.expires is not None:
                        expires[at] = patch.expires
                        block.soonest = min(block.soonest, patch.expires)
                else:
                    block.gen = gen
