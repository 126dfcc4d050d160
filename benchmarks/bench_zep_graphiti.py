"""What the Zep and Graphiti adapters add on top of their SDKs, measured side by side.

Graphiti: GuardedMemory[GraphitiStore] against the same Graphiti calls made directly (bulk write of
one episode + fact per text, hybrid fact search), on in-memory Kuzu with the hash embedder
of benchmarks/graphiti_kuzu.py. Zep: GuardedMemory[ZepStore] against the same SDK calls made directly, over the
in-process fake of the v4 API in benchmarks/zep_fake.py (so this is client-side overhead only: no network,
no server work). Methods are interleaved per round; medians of per-round medians.

    .venv/bin/python benchmarks/bench_zep_graphiti.py [--n 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
from graphiti_core.search.search_config import EdgeReranker, EdgeSearchConfig, EdgeSearchMethod, SearchConfig
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk

from memoryport import MemoryRecord, MemoryScope
from memoryport.adapters.graphiti import GraphitiMemory
from memoryport.adapters.zep import ZepMemory

try:
    from benchmarks.graphiti_kuzu import DIM, RaisingLLM, kuzu_graphiti
    from benchmarks.zep_fake import FakeZep, async_client
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from graphiti_kuzu import DIM, RaisingLLM, kuzu_graphiti  # type: ignore[no-redef]
    from zep_fake import FakeZep, async_client  # type: ignore[no-redef]


async def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


async def graphiti_round(n: int) -> dict[str, float]:
    texts = [f"note {i} about {DIM} things tok{uuid.uuid4().hex[:6]}" for i in range(n)]
    out: dict[str, float] = {}
    # adapter
    memory = GraphitiMemory(await kuzu_graphiti(RaisingLLM()))
    scope = MemoryScope(user_id="bench")
    t0 = time.perf_counter()
    await memory.add([MemoryRecord(scope=scope, text=t) for t in texts])
    out["graphiti add / text (adapter)"] = (time.perf_counter() - t0) * 1000 / n
    out["graphiti search (adapter)"] = await timed(lambda: memory.search("note things", scope=scope, k=10), 20)
    out["graphiti export (adapter)"] = await timed(lambda: memory.export(scope), 5)
    # the same writes and search, straight through graphiti_core
    g = await kuzu_graphiti(RaisingLLM())
    group = "bench"
    user = EntityNode(uuid=str(uuid.uuid4()), name="user", group_id=group, labels=["Entity"], summary="")
    vectors = await g.embedder.create_batch(texts)
    eps, mentions, facts = [], [], []
    t0 = time.perf_counter()
    for text, vector in zip(texts, vectors, strict=True):
        ep = EpisodicNode(
            name=text[:8],
            group_id=group,
            source=EpisodeType.text,
            source_description="b",
            content=text,
            created_at=user.created_at,
            valid_at=user.created_at,
        )
        edge = EntityEdge(
            group_id=group,
            source_node_uuid=user.uuid,
            target_node_uuid=user.uuid,
            created_at=user.created_at,
            name="MEMORY",
            fact=text,
            fact_embedding=vector,
            episodes=[ep.uuid],
        )
        eps.append(ep)
        facts.append(edge)
        mentions.append(
            EpisodicEdge(
                source_node_uuid=ep.uuid, target_node_uuid=user.uuid, group_id=group, created_at=user.created_at
            )
        )
    await add_nodes_and_edges_bulk(g.driver, eps, mentions, [user], facts, g.embedder)
    out["graphiti add / text (raw SDK)"] = (time.perf_counter() - t0) * 1000 / n
    # The adapter's search, spelled out with graphiti_core: facts only, BM25 + cosine fused by RRF.
    config = SearchConfig(
        edge_config=EdgeSearchConfig(
            search_methods=[EdgeSearchMethod.bm25, EdgeSearchMethod.cosine_similarity], reranker=EdgeReranker.rrf
        ),
        limit=10,
    )
    out["graphiti search (raw SDK)"] = await timed(
        lambda: g.search_("note things", config=config, group_ids=[group]), 20
    )
    out["graphiti export (raw SDK)"] = await timed(lambda: EpisodicNode.get_by_group_ids(g.driver, [group]), 5)
    return out


async def zep_round(n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    fake = FakeZep(steps=1)
    memory = ZepMemory(async_client(fake), poll_interval=0)
    scope = MemoryScope(user_id="bench")
    records = [MemoryRecord(scope=scope, text=f"note {i} about things") for i in range(n)]
    t0 = time.perf_counter()
    await memory.add(records)
    out["zep add / text, wait=True (adapter)"] = (time.perf_counter() - t0) * 1000 / n
    out["zep search (adapter)"] = await timed(lambda: memory.search("note things", scope=scope, k=10), 50)
    out["zep export (adapter)"] = await timed(lambda: memory.export(scope), 5)
    client = async_client(fake)
    user = (await client.user.create(user_id=f"raw-{uuid.uuid4()}")).uuid_
    t0 = time.perf_counter()
    for r in records:
        res = await client.graph.episode.add(user, data=r.text, type="text")
        await client.task.get(res.task.uuid_)
    out["zep add / text, wait=True (raw SDK)"] = (time.perf_counter() - t0) * 1000 / n

    async def raw_search() -> None:
        # The first page holds the top 10, as the adapter reads it.
        pager = await client.graph.search_episodes(user, query="note things", page_size=10)
        assert pager.items is not None and len(pager.items) == 10

    async def raw_export() -> None:
        pager = await client.graph.episode.list(user, page_size=100)
        [e async for e in pager]

    out["zep search (raw SDK)"] = await timed(raw_search, 50)
    out["zep export (raw SDK)"] = await timed(raw_export, 5)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    for _ in range(args.rounds):
        rounds.append({**await graphiti_round(args.n), **await zep_round(args.n)})
    medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(f"n={args.n} records per store, {args.rounds} rounds, ms (median of round medians)\n")
    print("| operation | adapter | raw SDK | ratio |\n|---|---|---|---|")
    for key in medians:
        if key.endswith("(adapter)"):
            base = key.replace("(adapter)", "(raw SDK)")
            a, b = medians[key], medians[base]
            print(f"| {key.removesuffix(' (adapter)')} | {a:.2f} | {b:.2f} | {a / b:.2f}x |")


if __name__ == "__main__":
    asyncio.run(main())
