"""The embedding port and a wrapper for any function that embeds texts."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from ._checks import check_int
from ._errors import EmbeddingError, InvalidInput
from ._events import report_usage

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = ["CallableEmbedder", "EmbeddingPort", "all_finite", "check_matrix"]


@runtime_checkable
class EmbeddingPort(Protocol):
    """Turns texts into vectors: a name, a dimension and an async batch ``embed``.

    ``embed(texts)`` returns a float32 array of shape ``(len(texts), dim)``.
    The name and dimension are recorded by stores so that a file is never
    searched with vectors from another model.
    """

    @property
    def name(self) -> str:
        """Identifies the model (and anything that changes its vectors)."""
        ...

    @property
    def dim(self) -> int:
        """The length of every vector."""
        ...

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """One float32 row per text."""
        ...


EmbedFn = Callable[[list[str]], Union[Any, Awaitable[Any]]]


def check_matrix(rows: Any, n: int, dim: int, name: str) -> Matrix:
    """Coerce ``rows`` to a C-contiguous float32 ``(n, dim)`` array of finite values, or raise."""
    import numpy as np

    try:
        matrix = np.ascontiguousarray(np.asarray(rows, dtype=np.float32))
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"embedder {name!r} returned something that is not an array of numbers",
            backend=name,
            operation="embed",
        ) from exc
    if matrix.shape != (n, dim):
        raise EmbeddingError(
            f"embedder {name!r} returned shape {matrix.shape}, expected {(n, dim)}",
            backend=name,
            operation="embed",
        )
    if not all_finite(matrix):
        raise EmbeddingError(f"embedder {name!r} returned NaN or infinity", backend=name, operation="embed")
    return matrix


def all_finite(matrix: Matrix) -> bool:
    """Whether every value of ``matrix`` is finite: ``np.isfinite(matrix).all()`` as one ufunc reduction.

    ``ndarray.all`` goes through numpy's Python wrappers: ~10 µs more per embedding when the CPU
    caches hold other work (a query's, on every search).
    """
    import numpy as np

    return bool(np.logical_and.reduce(np.isfinite(matrix), axis=None))


class CallableEmbedder:
    """An :class:`EmbeddingPort` over any function from a list of texts to rows.

    The function may be sync or async; its result is checked for shape and
    finiteness and converted to float32. Usage (number of texts) is reported
    to the event sink of the operation in progress.

    Args:
        fn: ``fn(texts) -> array-like of shape (len(texts), dim)``.
        dim: the vector length.
        name: identifies the model; stores record it.

    Example:
        >>> import numpy as np
        >>> emb = CallableEmbedder(lambda texts: np.ones((len(texts), 4)), dim=4, name="ones")
        >>> import asyncio; asyncio.run(emb.embed(["a", "b"])).shape
        (2, 4)
    """

    def __init__(self, fn: EmbedFn, *, dim: int, name: str) -> None:
        if not callable(fn):
            raise InvalidInput("fn must be callable", field="fn")
        check_int(dim, "dim")
        if not isinstance(name, str) or not name:
            raise InvalidInput("name must be a non-empty string", field="name")
        self._fn = fn
        self._dim = dim
        self._name = name

    @property
    def name(self) -> str:
        """The model's name as given."""
        return self._name

    @property
    def dim(self) -> int:
        """The vector length as given."""
        return self._dim

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``; raises :class:`EmbeddingError` if the function fails."""
        batch = list(texts)
        start = time.perf_counter()
        try:
            rows = self._fn(batch)
            if inspect.isawaitable(rows):
                rows = await rows
        except Exception as exc:
            raise EmbeddingError(
                f"embedder {self._name!r} failed: {type(exc).__name__}", backend=self._name, operation="embed"
            ) from exc
        matrix = check_matrix(rows, len(batch), self._dim, self._name)
        report_usage(self._name, texts=len(batch), latency_ms=(time.perf_counter() - start) * 1000)
        return matrix

    def __repr__(self) -> str:
        return f"CallableEmbedder(name={self._name!r}, dim={self._dim})"
