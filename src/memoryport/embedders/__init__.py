"""Embedders (and rerankers) for memoryport, each behind an optional extra, imported lazily.

* :class:`LocalEmbedder` (extra ``local``): BERT-family sentence embeddings with numpy, no torch.
* :class:`OpenAIEmbedder` (extra ``openai``): any OpenAI-compatible ``/v1/embeddings`` endpoint.
* :class:`SentenceTransformerEmbedder` (extra ``sentence-transformers``).
* :class:`CrossEncoderReranker` (extra ``sentence-transformers``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import lazy_exports

if TYPE_CHECKING:
    from .local import LocalEmbedder
    from .openai import OpenAIEmbedder
    from .rerank import CrossEncoderReranker
    from .sentence_transformers import SentenceTransformerEmbedder

_LAZY = {
    "LocalEmbedder": "memoryport.embedders.local",
    "OpenAIEmbedder": "memoryport.embedders.openai",
    "SentenceTransformerEmbedder": "memoryport.embedders.sentence_transformers",
    "CrossEncoderReranker": "memoryport.embedders.rerank",
}

__all__ = ["CrossEncoderReranker", "LocalEmbedder", "OpenAIEmbedder", "SentenceTransformerEmbedder"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
