"""What Mem0Memory costs on top of mem0 itself, side by side in one run.

Interleaves raw ``mem0.Memory`` calls and the same operations through
``Mem0Memory`` on one client (qdrant in memory, a deterministic hashed
bag-of-words embedder so that embedding time does not drown the difference),
and prints medians and their ratio. Run by hand::

    MEM0_TELEMETRY=False python benchmarks/mem0_adapter.py [--records 1000] [--rounds 60]

``--history-fsync`` keeps SQLite's default durability on mem0's history
database; by default it is on a temporary file with ``synchronous=OFF``, since
the fsync per write dominates everything else on a disk.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import hashlib
import os
import re
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
if "MEM0_DIR" not in os.environ:  # mem0's history database; removed when the process ends
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="memoryport-bench-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], ignore_errors=True)

import numpy as np

DIMS = 256


def build(history: Path, fsync: bool) -> Any:
    from mem0 import Memory
    from mem0.embeddings.base import EmbeddingBase
    from qdrant_client import QdrantClient

    class HashEmbedder(EmbeddingBase):  # type: ignore[misc]
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            v = np.zeros(DIMS)
            for w in re.findall(r"\w+", text.lower()):
                v[int(hashlib.blake2b(w.encode(), digest_size=8).hexdigest(), 16) % DIMS] += 1.0
            return [float(x) for x in v / (np.linalg.norm(v) or 1.0)]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        client = Memory.from_config(
            {
                "llm": {"provider": "openai", "config": {"api_key": "unused"}},
                "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": DIMS}},
                "vector_store": {
                    "provider": "qdrant",
                    "config": {
                        "collection_name": "bench",
                        "embedding_model_dims": DIMS,
                        "client": QdrantClient(":memory:"),
                    },
                },
                "history_db_path": str(history),
            }
        )
    client.embedding_model = HashEmbedder()
    if not fsync:
        client.db.connection.execute("PRAGMA synchronous=OFF")
    return client


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


async def timed_at(fn: Callable[[int], Awaitable[Any]], i: int) -> float:
    start = time.perf_counter()
    await fn(i)
    return (time.perf_counter() - start) * 1000


async def run(records: int, rounds: int, fsync: bool) -> None:
    from memoryport import Mem0Memory, MemoryRecord, MemoryScope

    with tempfile.TemporaryDirectory() as tmp:
        client = build(Path(tmp) / "history.db", fsync)
        memory = Mem0Memory(client)
        scope = MemoryScope(user_id="bench")
        await memory.add(
            [MemoryRecord(scope=scope, text=f"note {i} about topic {i % 97} and more") for i in range(records)]
        )

        async def raw(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(fn, *args, **kwargs)

        ops: dict[str, tuple[Callable[[int], Awaitable[Any]], Callable[[int], Awaitable[Any]]]] = {
            "add 1": (
                lambda i: raw(client.add, f"raw add {i}", user_id="bench", infer=False, metadata={"k": i}),
                lambda i: memory.add([MemoryRecord(scope=scope, text=f"port add {i}", metadata={"k": i})]),
            ),
            "search k=10": (
                lambda i: raw(client.search, f"topic {i % 97}", top_k=10, filters={"user_id": "bench"}, threshold=0.0),
                lambda i: memory.search(f"topic {i % 97}", scope=scope, k=10),
            ),
            f"export ({records:,}+)": (
                lambda i: raw(client.get_all, filters={"user_id": "bench"}, top_k=100_000),
                lambda i: memory.export(scope),
            ),
        }
        print(f"mem0 {records:,} records in scope, {rounds} rounds, history fsync={'on' if fsync else 'off'}")
        print(f"{'operation':<22}{'mem0 ms':>10}{'Mem0Memory ms':>15}{'ratio':>8}")
        for name, (plain, ported) in ops.items():
            a: list[float] = []
            b: list[float] = []
            for i in range(rounds):
                a.append(await timed_at(plain, i))
                b.append(await timed_at(ported, i))
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"{name:<22}{ma:>10.2f}{mb:>15.2f}{mb / ma:>8.2f}")
        erase_scope = MemoryScope(user_id="erase-me")
        await memory.add([MemoryRecord(scope=erase_scope, text=f"erase {i}") for i in range(200)])
        ms = await timed(lambda: memory.delete(scope=erase_scope))
        print(f"erase 200 records (incl. history rows): {ms:.0f} ms ({ms / 200:.2f} ms/record)")
        client.vector_store.client.close()
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--history-fsync", action="store_true")
    args = parser.parse_args()
    asyncio.run(run(args.records, args.rounds, args.history_fsync))


if __name__ == "__main__":
    main()
