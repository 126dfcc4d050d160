"""``SentenceTransformerEmbedder``: a sentence-transformers model (torch) behind the embedding port."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._checks import check_int
from .._embedding import check_matrix
from .._errors import EmbeddingError, InvalidInput
from .._events import report_usage
from .._extras import require

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder:
    """Embeds with ``sentence_transformers.SentenceTransformer`` (extra ``sentence-transformers``).

    Use it when torch is installed anyway (for a GPU, or for models that
    :class:`~memoryport.LocalEmbedder` cannot run); for BERT-family models on
    a CPU, ``LocalEmbedder`` gives the same vectors without torch. The model
    loads on construction; encoding runs in a worker thread.

    Args:
        model: a model folder or hub id (the hub only when the host is online).
        device: ``"cpu"``, ``"cuda"``, ... (None lets sentence-transformers pick).
        batch_size: texts per forward pass.
        normalize: L2-normalise the vectors (models with a Normalize module already do).
        name: overrides the name recorded by stores (default ``sentence-transformers:<model>``).
        **model_kwargs: passed to ``SentenceTransformer``.

    Example:
        >>> emb = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")  # doctest: +SKIP
        >>> emb.dim   # doctest: +SKIP
        384
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        device: str | None = "cpu",
        batch_size: int = 32,
        normalize: bool = False,
        name: str | None = None,
        **model_kwargs: Any,
    ) -> None:
        st = require("sentence_transformers", extra="sentence-transformers",
                     feature="SentenceTransformerEmbedder", package="sentence-transformers")
        check_int(batch_size, "batch_size")
        label = os.fspath(model)
        self._model = st.SentenceTransformer(label, device=device, **model_kwargs)
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"the model {label!r} does not declare its embedding dimension", field="model")
        self._dim = dim
        self._batch_size = batch_size
        self._normalize = normalize
        base = label.rstrip("/\\").replace("\\", "/").split("/")[-1] if os.path.isdir(label) else label
        self._name = name or f"sentence-transformers:{base}{':norm' if normalize else ''}"
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``sentence-transformers:<model>`` unless given."""
        return self._name

    @property
    def dim(self) -> int:
        """The model's embedding dimension."""
        return self._dim

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in a worker thread; one float32 row per text.

        Raises:
            EmbeddingError: the model failed.
        """
        import numpy as np

        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidInput("texts must be a sequence of strings, not a single string", field="texts")
        batch = list(texts)
        if not batch:
            return np.zeros((0, self._dim), np.float32)
        start = time.perf_counter()
        try:
            rows = await asyncio.to_thread(self._encode, batch)
        except Exception as exc:
            raise EmbeddingError(f"embedder {self._name!r} failed: {type(exc).__name__}",
                                 backend=self._name, operation="embed") from exc
        matrix = check_matrix(rows, len(batch), self._dim, self._name)
        report_usage(self._name, texts=len(batch), latency_ms=(time.perf_counter() - start) * 1000)
        return matrix

    def _encode(self, batch: list[str]) -> Any:
        with self._lock:
            return self._model.encode(batch, batch_size=self._batch_size, convert_to_numpy=True,
                                      normalize_embeddings=self._normalize, show_progress_bar=False)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self._name!r}, dim={self._dim})"
