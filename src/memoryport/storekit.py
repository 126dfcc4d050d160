"""What every store needs and should not write again: the built-in adapters use exactly these.

- :func:`ids_of` / :func:`id_of`: the ids of records the guard hands a store
  (always set; no ``assert`` needed, none stripped by ``python -O``);
- :func:`duplicate_id`: the one error for an id that is already stored;
- :func:`recent`: the empty-query listing (newest first, one score convention);
- :func:`chunks`: a long list in pieces (SQL parameter limits, SDK page sizes);
- :class:`Undo`: undo-on-failure, so a batch is all or nothing on stores
  without transactions;
- :func:`parse_time`: a time read back from an SDK, as aware UTC;
- :func:`embed_unit`: a batch embedded as unit-length float32 rows (what a
  store that ranks by cosine keeps), every embedder failure an ``EmbeddingError``.

Argument checks and ranking are in :mod:`memoryport.ranking` and the guard;
see ``docs/write-an-adapter.md``.

Example:
    >>> list(chunks([1, 2, 3, 4, 5], 2))
    [[1, 2], [3, 4], [5]]
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ._embedding import EmbeddingPort, check_matrix
from ._errors import EmbeddingError, InvalidInput, UsageError
from ._port import SearchResults
from ._records import MemoryHit, MemoryRecord
from ._time import parse_time

__all__ = [
    "CHUNK",
    "Undo",
    "blocking_embed",
    "chunks",
    "duplicate_id",
    "embed_unit",
    "embed_unit_blocking",
    "id_of",
    "ids_of",
    "parse_time",
    "recent",
]

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

logger = logging.getLogger("memoryport")
T = TypeVar("T")

CHUNK = 500
"""The default piece size of :func:`chunks`: under SQLite's and most drivers' bound-parameter limits."""


def chunks(items: Iterable[T], size: int = CHUNK) -> Iterator[list[T]]:
    """``items`` in lists of at most ``size``, in order.

    Example:
        >>> [len(c) for c in chunks(range(1200))]
        [500, 500, 200]
    """
    if size < 1:
        raise ValueError("size must be at least 1")
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def id_of(record: MemoryRecord) -> str:
    """The record's id, which the guard always sets before a store sees the record.

    Raises :class:`UsageError` (not an ``assert``) when it is missing: the store
    was called without the guard.

    Example:
        >>> from memoryport import MemoryRecord, MemoryScope
        >>> id_of(MemoryRecord(id="a1", scope=MemoryScope(user_id="ann"), text="tea"))
        'a1'
    """
    if record.id is None:
        raise UsageError("a record without an id reached the store: call it through GuardedMemory")
    return record.id


def ids_of(records: Sequence[MemoryRecord]) -> list[str]:
    """The ids of a batch, in order (see :func:`id_of`).

    Example:
        >>> ids_of([])
        []
    """
    return [id_of(r) for r in records]


def duplicate_id(index: int) -> InvalidInput:
    """The error for ``records[index]`` whose id the store already holds (raise it; nothing may be written).

    Example:
        >>> str(duplicate_id(3))
        'records[3].id is already stored; ids must be unique'
    """
    field = f"records[{index}].id"
    return InvalidInput(f"{field} is already stored; ids must be unique", field=field)


def recent(records: Iterable[MemoryRecord], k: int) -> SearchResults:
    """The empty-query answer: the ``k`` newest records, newest first.

    Scores are ``1 / (1 + rank)`` (1.0, 0.5, 0.33, ...), signal and mode
    ``"recent"``, the same on every store; ties keep the input order.

    Example:
        >>> recent([], 5).mode
        'recent'
    """
    newest = sorted(records, key=lambda r: r.created_at, reverse=True)[:k]
    return SearchResults(
        [MemoryHit(record=r, score=1.0 / (1 + i), signal="recent") for i, r in enumerate(newest)], mode="recent"
    )


class Undo:
    """Undo-on-failure for a store without transactions: register how to undo each step as it succeeds.

    If the ``async with`` block raises, every registered undo runs, newest
    first, and the error propagates; an undo that fails is logged (its type
    only, naming ``backend``) and the others still run. On success nothing is
    undone.

    Args:
        backend: names the store in the WARNING of a failed undo.

    Example:
        >>> import asyncio
        >>> stored = []
        >>> async def add_two():
        ...     async with Undo("demo") as undo:
        ...         stored.append("a")
        ...         undo.push(lambda: _remove(stored, "a"))
        ...         raise ConnectionError("lost the second write")
        >>> async def _remove(rows, item):
        ...     rows.remove(item)
        >>> try:
        ...     asyncio.run(add_two())
        ... except ConnectionError:
        ...     pass
        >>> stored
        []
    """

    def __init__(self, backend: str) -> None:
        self._backend = backend
        self._steps: list[Callable[[], Awaitable[object]]] = []

    def push(self, step: Callable[[], Awaitable[object]]) -> None:
        """Register how to undo what just succeeded."""
        self._steps.append(step)

    async def __aenter__(self) -> Undo:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self._steps.clear()
            return
        while self._steps:
            step = self._steps.pop()
            try:
                await step()
            except Exception as undo_exc:
                logger.warning(
                    "%s: undoing a failed write failed: %s", self._backend, type(undo_exc).__name__
                )


async def embed_unit(embedder: EmbeddingPort, texts: list[str]) -> npt.NDArray[np.float32]:
    """``texts`` embedded as unit-length float32 rows (a zero row stays zero), C-contiguous.

    Any failure of the embedder, a wrong shape or a non-finite value becomes
    :class:`~memoryport.EmbeddingError` naming the embedder (never a text).

    Example:
        >>> import asyncio, numpy as np
        >>> from memoryport import CallableEmbedder
        >>> twice = CallableEmbedder(lambda texts: np.full((len(texts), 2), 3.0), dim=2, name="flat")
        >>> [round(float(x), 3) for x in asyncio.run(embed_unit(twice, ["a"]))[0]]
        [0.707, 0.707]
    """
    try:
        rows: Any = await embedder.embed(texts)
    except EmbeddingError:
        raise
    except Exception as exc:
        raise _failed(embedder, exc) from exc
    return _unit_rows(embedder, rows, len(texts))


def _failed(embedder: EmbeddingPort, exc: BaseException) -> EmbeddingError:
    """What :func:`embed_unit` and :func:`embed_unit_blocking` raise for an embedder's own failure."""
    return EmbeddingError(
        f"embedder {embedder.name!r} failed: {type(exc).__name__}", backend=embedder.name, operation="embed"
    )


def blocking_embed(embedder: EmbeddingPort) -> Callable[[list[str]], Any] | None:
    """The embedder's blocking ``embed_sync(texts)``, when it has one (:class:`~memoryport.LocalEmbedder`), else None.

    A store may run it in a thread of its own and hand the vector on from that
    thread (see :func:`embed_unit_blocking`), instead of awaiting :meth:`embed`
    on the event loop: one thread hop less between the embedding and its use.

    Example:
        >>> from memoryport import CallableEmbedder
        >>> blocking_embed(CallableEmbedder(lambda texts: [[1.0]] * len(texts), dim=1, name="one")) is None
        True
    """
    method = getattr(embedder, "embed_sync", None)
    return method if callable(method) else None


def embed_unit_blocking(embedder: EmbeddingPort, embed_sync: Callable[[list[str]], Any], texts: list[str]) -> Any:
    """:func:`embed_unit` in the calling thread, through ``embed_sync`` (from :func:`blocking_embed`).

    The same rows and the same errors: any failure, a wrong shape or a
    non-finite value becomes :class:`~memoryport.EmbeddingError`.

    Example:
        >>> from memoryport import CallableEmbedder
        >>> flat = CallableEmbedder(lambda texts: [[3.0, 3.0]] * len(texts), dim=2, name="flat")
        >>> [round(float(x), 3) for x in embed_unit_blocking(flat, lambda texts: [[3.0, 3.0]], ["a"])[0]]
        [0.707, 0.707]
    """
    try:
        rows: Any = embed_sync(texts)
    except EmbeddingError:
        raise
    except Exception as exc:
        raise _failed(embedder, exc) from exc
    return _unit_rows(embedder, rows, len(texts))


def _unit_rows(embedder: EmbeddingPort, rows: Any, n: int) -> npt.NDArray[np.float32]:
    import math

    import numpy as np

    dim = int(embedder.dim)
    if type(rows) is np.ndarray and rows.dtype == np.float32 and rows.shape == (n, dim) and rows.flags.c_contiguous:
        # Already what check_matrix makes (a native float32 C-contiguous (n, dim) array): only its
        # finiteness to check, from the sums of squares the norms need anyway. A NaN or an infinity in
        # a row makes its sum NaN or +inf, and so their maximum (np.maximum keeps NaN; it never
        # overflows). A finite maximum proves every value finite; a non-finite one may be an overflow
        # of finite values (|x| > 1.8e19), so then every value is checked by check_matrix, with its error.
        matrix = rows
        sums = np.add.reduce(matrix * matrix, axis=1, keepdims=True)
        if n and not math.isfinite(np.maximum.reduce(sums, axis=None)):
            matrix = check_matrix(rows, n, dim, embedder.name)
    else:
        matrix = check_matrix(rows, n, dim, embedder.name)
        sums = np.add.reduce(matrix * matrix, axis=1, keepdims=True)
    # What np.linalg.norm(matrix, axis=1, keepdims=True) computes for real rows, bit for bit, without
    # its argument handling: ~45 µs of a query's embedding when the CPU caches hold other work.
    norms = np.sqrt(sums)
    # Finite without a second check: only finite rows get here, a norm is at least 1e-12 here and at
    # least each |x| of its row (+inf when the squares overflow), so each x / norm is at most about 1
    # in size (0 over an infinite norm): never NaN nor infinite.
    return np.ascontiguousarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32)
