"""The reranker port: scores a query against candidate texts, after retrieval has fused its rankings."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, Union, runtime_checkable

from ._errors import BackendError, InvalidInput
from ._events import report_usage

__all__ = ["CallableReranker", "RerankerPort", "check_scores"]


@runtime_checkable
class RerankerPort(Protocol):
    """Scores how well each text answers a query; higher is better.

    A store that is given a reranker asks its first-stage search (keyword,
    vector, fused) for more candidates than requested, then orders them by
    these scores. ``rerank`` returns one finite float per text, in the order
    of ``texts``.
    """

    @property
    def name(self) -> str:
        """Identifies the reranking model."""
        ...

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in order."""
        ...


RerankFn = Callable[[str, list[str]], Union[Sequence[float], Awaitable[Sequence[float]], Any]]


def check_scores(scores: Any, n: int, name: str) -> list[float]:
    """Coerce ``scores`` to ``n`` finite floats, or raise :class:`BackendError`."""
    try:
        values = [float(s) for s in scores]
    except (TypeError, ValueError) as exc:
        raise BackendError(f"reranker {name!r} returned something that is not a list of numbers",
                           backend=name, operation="rerank") from exc
    if len(values) != n:
        raise BackendError(f"reranker {name!r} returned {len(values)} scores for {n} texts",
                           backend=name, operation="rerank")
    if not all(math.isfinite(v) for v in values):
        raise BackendError(f"reranker {name!r} returned NaN or infinity", backend=name, operation="rerank")
    return values


class CallableReranker:
    """A :class:`RerankerPort` over any function ``fn(query, texts) -> scores`` (sync or async).

    Args:
        fn: returns one number per text, higher is better.
        name: identifies the model.

    Example:
        >>> import asyncio
        >>> overlap = lambda q, texts: [len(set(q.split()) & set(t.split())) for t in texts]
        >>> rr = CallableReranker(overlap, name="overlap")
        >>> asyncio.run(rr.rerank("green tea", ["black tea", "green tea", "coffee"]))
        [1.0, 2.0, 0.0]
    """

    def __init__(self, fn: RerankFn, *, name: str) -> None:
        if not callable(fn):
            raise InvalidInput("fn must be callable", field="fn")
        if not isinstance(name, str) or not name:
            raise InvalidInput("name must be a non-empty string", field="name")
        self._fn = fn
        self._name = name

    @property
    def name(self) -> str:
        """The name as given."""
        return self._name

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """Score ``texts`` against ``query``; raises :class:`BackendError` if the function fails."""
        batch = list(texts)
        if not batch:
            return []
        start = time.perf_counter()
        try:
            scores = self._fn(query, batch)
            if inspect.isawaitable(scores):
                scores = await scores
        except Exception as exc:
            raise BackendError(f"reranker {self._name!r} failed: {type(exc).__name__}",
                               backend=self._name, operation="rerank") from exc
        values = check_scores(scores, len(batch), self._name)
        report_usage(
            self._name, texts=len(batch), latency_ms=(time.perf_counter() - start) * 1000, event="rerank.used"
        )
        return values

    def __repr__(self) -> str:
        return f"CallableReranker(name={self._name!r})"
