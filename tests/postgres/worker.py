"""Child processes of the PostgreSQL tests (run as a script: `python worker.py COMMAND ...`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from memoryport import MemoryRecord, MemoryScope
from memoryport.adapters.postgres import PostgresMemory

USERS = 3


def user_of(proc: int, pool: int) -> str:
    return f"user{(proc + pool) % USERS}"


async def concurrent(dsn: str, schema: str, proc: int, batches: int, size: int) -> dict[str, Any]:
    """Two memories (two pools) in this process, each adding batches and searching while the others write."""
    memories = [PostgresMemory(dsn, schema=schema, pool_size=2) for _ in range(2)]
    foreign = 0  # records of another user returned by the store itself (before the guard)
    torn = 0  # batches seen partly

    async def run(pool: int) -> None:
        nonlocal foreign, torn
        memory = memories[pool]
        user = user_of(proc, pool)
        scope = MemoryScope(user_id=user, session_id=f"p{proc}t{pool}")
        for b in range(batches):
            records = [
                MemoryRecord(
                    scope=scope,
                    text=f"record p{proc} t{pool} b{b} r{i} shared words",
                    metadata={"p": proc, "t": pool, "b": b, "i": i},
                )
                for i in range(size)
            ]
            await memory.add(records)
            for other in range(USERS):
                mine = MemoryScope(user_id=f"user{other}")
                hits = await memory.store.search("shared words record", scope=mine, k=20, filters=None)
                foreign += sum(1 for h in hits if h.record.scope.user_id != mine.user_id)
                if other != (b + pool) % USERS:
                    continue  # one user's export per batch: the torn-batch check
                seen: dict[tuple[Any, ...], int] = {}
                for r in await memory.store.export(mine):
                    foreign += r.scope.user_id != mine.user_id
                    key = (r.metadata["p"], r.metadata["t"], r.metadata["b"])
                    seen[key] = seen.get(key, 0) + 1
                torn += sum(1 for n in seen.values() if n != size)

    try:
        await asyncio.gather(run(0), run(1))
    finally:
        for m in memories:
            await m.aclose()
    return {"foreign": foreign, "torn": torn}


async def hang(dsn: str, schema: str, user: str, size: int) -> None:
    """Write a batch and stop before its commit (the parent kills this process there)."""
    memory = PostgresMemory(dsn, schema=schema, pool_size=1)

    async def before_commit() -> None:
        print("READY", flush=True)
        await asyncio.sleep(120)

    memory.store._before_commit = before_commit  # type: ignore[attr-defined]
    scope = MemoryScope(user_id=user)
    await memory.add([MemoryRecord(scope=scope, text=f"half batch {i}") for i in range(size)])


def main(argv: list[str]) -> int:
    command = argv[0]
    if command == "concurrent":
        dsn, schema, proc, batches, size = argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5])
        result = asyncio.run(concurrent(dsn, schema, proc, batches, size))
        print(json.dumps(result), flush=True)
        return 0
    if command == "hang":
        asyncio.run(hang(argv[1], argv[2], argv[3], int(argv[4])))
        return 0
    print(f"unknown command {command}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
