"""``CrossEncoderReranker``: a sentence-transformers cross-encoder behind :class:`~memoryport.RerankerPort`."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from .._checks import check_int
from .._errors import BackendError, InvalidInput
from .._events import report_usage
from .._extras import require
from .._rerank import check_scores

__all__ = ["CrossEncoderReranker"]


class CrossEncoderReranker:
    """Scores (query, text) pairs with a cross-encoder (extra ``sentence-transformers``).

    The model loads from a folder (or a hub id when the host is online), on
    construction; scoring runs in a worker thread. Give it to a store that
    accepts a reranker: the store then orders its fused candidates by these
    scores.

    Args:
        path: a cross-encoder model folder, such as a saved
            ``cross-encoder/ms-marco-MiniLM-L6-v2``.
        device: ``"cpu"``, ``"cuda"``, ... (None lets sentence-transformers pick).
        batch_size: pairs per forward pass.
        max_length: tokens per pair (the model's own limit by default).
        name: overrides the name (default ``cross-encoder:<folder name>``).

    Example:
        >>> rr = CrossEncoderReranker("/models/ms-marco-MiniLM-L6-v2")   # doctest: +SKIP
        >>> import asyncio
        >>> asyncio.run(rr.rerank("who likes tea?", ["Ann likes tea", "Ben runs"]))   # doctest: +SKIP
        [7.9, -11.2]
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str | None = "cpu",
        batch_size: int = 32,
        max_length: int | None = None,
        name: str | None = None,
    ) -> None:
        st = require("sentence_transformers", extra="sentence-transformers",
                     feature="CrossEncoderReranker", package="sentence-transformers")
        check_int(batch_size, "batch_size")
        label = os.fspath(path)
        self._model = st.CrossEncoder(label, device=device, max_length=max_length)
        self._batch_size = batch_size
        base = label.rstrip("/\\").replace("\\", "/").split("/")[-1] if os.path.isdir(label) else label
        self._name = name or f"cross-encoder:{base}"
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``cross-encoder:<model>`` unless given."""
        return self._name

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text (higher is more relevant), in the order of ``texts``.

        Raises:
            BackendError: the model failed.
        """
        if not isinstance(query, str):
            raise InvalidInput("query must be a string", field="query")
        batch = list(texts)
        if not batch:
            return []
        start = time.perf_counter()
        try:
            scores = await asyncio.to_thread(self._predict, query, batch)
        except Exception as exc:
            raise BackendError(f"reranker {self._name!r} failed: {type(exc).__name__}",
                               backend=self._name, operation="rerank") from exc
        values = check_scores(scores, len(batch), self._name)
        report_usage(self._name, texts=len(batch), latency_ms=(time.perf_counter() - start) * 1000,
                     event="rerank.used")
        return values

    def _predict(self, query: str, batch: list[str]) -> Any:
        with self._lock:
            scores = self._model.predict([(query, t) for t in batch], batch_size=self._batch_size,
                                         show_progress_bar=False, convert_to_numpy=True)
        return scores.reshape(len(batch), -1)[:, -1] if getattr(scores, "ndim", 1) > 1 else scores

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(name={self._name!r})"
