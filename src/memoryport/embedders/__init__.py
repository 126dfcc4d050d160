"""Embedders (and rerankers) for memoryport, each behind an optional extra, imported lazily.

* :class:`LocalEmbedder` (extra ``local``): BERT-family sentence embeddings with numpy, no torch.
* :class:`OpenAIEmbedder` (extra ``openai``): any OpenAI-compatible ``/v1/embeddings`` endpoint.
* :class:`SentenceTransformerEmbedder` (extra ``sentence-transformers``).
* :class:`CrossEncoderReranker` (extra ``sentence-transformers``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memoryport.embedders' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
