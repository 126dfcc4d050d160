"""The model port: chat messages in, one JSON object out.

:class:`ModelPort` is what extraction, consolidation and reconciliation (and
the entity graph's fact extraction) call. Two implementations ship:

* :class:`CallableModel` wraps any function (sync or async): the scripted
  model of tests, or a bridge to any SDK;
* :class:`~memoryport.models.openai.OpenAIModel` speaks the OpenAI-compatible
  ``/v1/chat/completions`` API over httpx (extra ``openai``): OpenAI, Ollama,
  llama.cpp's server, vLLM, LiteLLM.

Failures raise :class:`~memoryport.ModelError` with a ``reason``
(``timeout``, ``connect``, ``http``, ``malformed``, ``refused``, ``error``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ModelError
from .._extras import lazy_exports
from ._port import CallableModel, JSONObject, Message, ModelPort, check_messages, parse_json_object

if TYPE_CHECKING:
    from .openai import OpenAIModel

_LAZY = {"OpenAIModel": "memoryport.models.openai"}

__all__ = [
    "CallableModel",
    "JSONObject",
    "Message",
    "ModelError",
    "ModelPort",
    "OpenAIModel",
    "check_messages",
    "parse_json_object",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
