"""Offline model clients for Graphiti and a real Graphiti on in-memory Kuzu.

The graph is real (Kuzu, in memory); only Graphiti's model clients are stand-ins:
a hashed bag-of-words embedder, a word-overlap cross-encoder, an LLM that fails
if it is ever asked (the zero-LLM path must not ask) and a scripted one for
extraction. Used by ``tests/adapters/test_graphiti.py`` and
``benchmarks/bench_zep_graphiti.py``.
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from typing import Any

from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client.client import LLMClient

DIM = 64
_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder(EmbedderClient):
    """A deterministic bag-of-words embedder: each word hashed into one of DIM buckets."""

    def __init__(self) -> None:
        self.calls = 0

    def vector(self, text: str) -> list[float]:
        v = [0.0] * DIM
        for word in _WORD.findall(text.lower()):
            v[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIM] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    async def create(self, input_data: Any) -> list[float]:
        self.calls += 1
        return self.vector(str(input_data))

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self.vector(t) for t in input_data_list]


class FailingEmbedder(HashEmbedder):
    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        raise RuntimeError("embedder down")


class TrivialCrossEncoder(CrossEncoderClient):
    """Ranks passages by the share of query words they contain."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        words = set(_WORD.findall(query.lower()))
        scored = [(p, len(words & set(_WORD.findall(p.lower()))) / (len(words) or 1)) for p in passages]
        return sorted(scored, key=lambda x: x[1], reverse=True)


class RaisingLLM(LLMClient):
    """Fails the test if Graphiti asks the LLM anything (the zero-LLM path must not)."""

    def __init__(self) -> None:
        super().__init__(None)
        self.calls: list[str] = []

    async def _generate_response(
        self, messages: Any, response_model: Any = None, *args: Any, **kw: Any
    ) -> dict[str, Any]:
        self.calls.append(getattr(response_model, "__name__", "?"))
        raise AssertionError(f"the LLM was called for {self.calls[-1]}")


def _minimal(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return _minimal(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return None
    kind = schema.get("type")
    if kind == "object":
        return {
            name: _minimal(sub, defs)
            for name, sub in schema.get("properties", {}).items()
            if name in schema.get("required", [])
        }
    return {"array": [], "string": "", "integer": 0, "number": 0.0, "boolean": False}.get(str(kind))


class ScriptedLLM(LLMClient):
    """Answers extraction from a script keyed by the current message; anything else minimally."""

    def __init__(self, script: dict[str, list[tuple[str, str, str, str]]]) -> None:
        super().__init__(None)
        self.script = script
        self.calls: list[str] = []
        self.prompts: list[tuple[str, str]] = []

    async def _generate_response(
        self, messages: Any, response_model: Any = None, *args: Any, **kw: Any
    ) -> dict[str, Any]:
        name = getattr(response_model, "__name__", "")
        self.calls.append(name)
        text = " ".join(str(m.content) for m in messages)
        self.prompts.append((name, text))
        # Node prompts put a text episode in <TEXT>, edge prompts in <CURRENT_MESSAGE>.
        match = re.search(r"<(TEXT|CURRENT MESSAGE|CURRENT_MESSAGE)>(.*?)</\1>", text, re.S)
        current = match.group(2) if match else ""
        edges = next((v for k, v in self.script.items() if k in current), [])
        if name == "ExtractedEntities":
            names = list(dict.fromkeys(n for e in edges for n in (e[0], e[1])))
            return {"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]}
        if name == "ExtractedEdges":
            return {
                "edges": [
                    {"source_entity_name": s, "target_entity_name": t, "relation_type": r, "fact": f}
                    for s, t, r, f in edges
                ]
            }
        if response_model is None:
            return {}
        schema = response_model.model_json_schema()
        return _minimal(schema, schema.get("$defs", {}))  # type: ignore[no-any-return]


async def kuzu_graphiti(llm: LLMClient, embedder: EmbedderClient | None = None) -> Graphiti:
    """Real Graphiti on in-memory Kuzu, with the two workarounds graphiti-core 0.31.2 needs."""
    from graphiti_core.driver.kuzu_driver import KuzuDriver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "The Kuzu backend is deprecated"
        driver = KuzuDriver(db=":memory:")
    driver._database = None  # workaround 1: Graphiti reads driver._database, which KuzuDriver never sets
    graphiti = Graphiti(
        graph_driver=driver,
        llm_client=llm,
        embedder=embedder or HashEmbedder(),
        cross_encoder=TrivialCrossEncoder(),
    )
    # workaround 2: KuzuDriver.build_indices_and_constraints is a no-op, so the FTS indexes never exist
    await driver.graph_ops.build_indices_and_constraints(driver)
    return graphiti
