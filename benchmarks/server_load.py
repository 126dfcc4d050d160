"""Load test of ``memoryport serve``: N concurrent clients on loopback against SQLite.

Each client is one user with its own API key and connection, and runs a 90/10
mix of recall (``POST /v1/search``) and remember (``POST /v1/memories``) until
the run's request budget or time limit is spent (both bounded). The server is a
real ``memoryport serve`` process on 127.0.0.1; it stops at the end. Then every
id a remember returned is looked up (0 lost writes), and the same mix is run
in-process against the library (``memory.search`` / ``memory.add``, the same
concurrency on one event loop) for the ratio.

Prints a Markdown table: requests/s, median and p99 latency, errors, lost writes.

Run:  .venv/bin/python -m benchmarks.server_load [--clients 16] [--requests 4000] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memoryport import MemoryRecord, MemoryScope
from memoryport.adapters.sqlite import SQLiteMemory
from memoryport.server import KeyStore

WORDS = [
    "tea",
    "coffee",
    "lisbon",
    "oslo",
    "trip",
    "dinner",
    "vegetarian",
    "marathon",
    "piano",
    "garden",
    "cat",
    "dog",
    "sister",
    "brother",
    "meeting",
    "budget",
    "report",
    "window",
    "seat",
    "train",
    "flight",
    "hotel",
    "museum",
    "jazz",
    "novel",
]


def fact(rng: random.Random, i: int) -> str:
    w = rng.sample(WORDS, 6)
    return f"Note {i}: likes {w[0]} and {w[1]}, planning {w[2]} with {w[3]}, mentions {w[4]} {w[5]}"


@dataclass
class Tally:
    """What one way of calling measured."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    written: dict[str, list[str]] = field(default_factory=dict)  # user -> ids returned by remember
    seconds: float = 0.0

    def row(self, way: str) -> dict[str, float | str]:
        ms = sorted(x * 1000 for x in self.latencies)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else float("nan")
        return {
            "way": way,
            "requests": len(ms) + self.errors,
            "rps": len(ms) / self.seconds if self.seconds else 0.0,
            "median_ms": statistics.median(ms) if ms else float("nan"),
            "p99_ms": p99,
            "errors": self.errors,
        }


def seed(path: Path, users: list[str], per_user: int) -> None:
    """``per_user`` memories for each user, in one SQLite file."""
    rng = random.Random(7)
    memory = SQLiteMemory(path)
    try:
        for user in users:
            scope = MemoryScope(user_id=user)
            memory.add_sync([MemoryRecord(scope=scope, text=fact(rng, i)) for i in range(per_user)])
    finally:
        memory.close()


async def drive(
    clients: int,
    budget: int,
    seconds: float,
    call: Callable[[int, bool, str], Awaitable[str | None]],
) -> Tally:
    """Run the 90/10 mix on ``clients`` tasks until ``budget`` requests or ``seconds`` are spent."""
    tally = Tally()
    left = [budget]
    deadline = time.perf_counter() + seconds

    async def client(n: int) -> None:
        rng = random.Random(1000 + n)
        while left[0] > 0 and time.perf_counter() < deadline:
            left[0] -= 1
            write = rng.random() < 0.10
            text = f"Load note of client {n}: {rng.choice(WORDS)} {rng.choice(WORDS)} {rng.getrandbits(40):x}"
            query = " ".join(rng.sample(WORDS, 2))
            start = time.perf_counter()
            try:
                got = await call(n, write, text if write else query)
            except Exception:  # counted, never hidden: the table shows errors
                tally.errors += 1
                continue
            tally.latencies.append(time.perf_counter() - start)
            if write and got is not None:
                tally.written.setdefault(f"user{n}", []).append(got)

    start = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    tally.seconds = time.perf_counter() - start
    return tally


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def over_http(db: Path, keys_file: Path, secrets: list[str], clients: int, budget: int, seconds: float) -> Tally:
    """Start ``memoryport serve`` on a free loopback port, run the mix against it, stop it."""
    port = free_port()
    log = db.with_suffix(".log")
    command = [sys.executable, "-m", "memoryport.cli", "serve", "--db", str(db), "--keys", str(keys_file)]
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [*command, "--port", str(port), "--rate-per-minute", "10000000"], stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        return asyncio.run(_clients(f"http://127.0.0.1:{port}", proc, log, secrets, clients, budget, seconds))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


async def _clients(
    base: str, proc: subprocess.Popen[bytes], log: Path, secrets: list[str], clients: int, budget: int, seconds: float
) -> Tally:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as probe:
        while True:
            try:
                if (await probe.get(f"{base}/readyz")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start; see {log}")
            await asyncio.sleep(0.1)
    sessions = [
        httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {s}"},
            timeout=60,
            limits=httpx.Limits(max_connections=1),
        )
        for s in secrets
    ]
    try:

        async def call(n: int, write: bool, text: str) -> str | None:
            api = sessions[n]
            if write:
                r = await api.post("/v1/memories", json={"memories": [{"text": text}]})
                r.raise_for_status()
                return str(r.json()["ids"][0])
            r = await api.post("/v1/search", json={"query": text, "k": 5})
            r.raise_for_status()
            return None

        return await drive(clients, budget, seconds, call)
    finally:
        for s in sessions:
            await s.aclose()


async def in_process(db: Path, clients: int, budget: int, seconds: float) -> Tally:
    async with SQLiteMemory(db) as memory:

        async def call(n: int, write: bool, text: str) -> str | None:
            scope = MemoryScope(user_id=f"user{n}")
            if write:
                return (await memory.add([MemoryRecord(scope=scope, text=text)]))[0]
            await memory.search(text, scope=scope, k=5)
            return None

        return await drive(clients, budget, seconds, call)


def lost_writes(db: Path, tally: Tally) -> int:
    """Ids a remember acknowledged that are not in the file afterwards."""
    memory = SQLiteMemory(db)
    try:
        lost = 0
        for user, ids in tally.written.items():
            stored = {r.id for r in memory.export_sync(MemoryScope(user_id=user))}
            lost += sum(1 for i in ids if i not in stored)
        return lost
    finally:
        memory.close()


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (one user and key each)")
    parser.add_argument("--requests", type=int, default=4000, help="requests per way, in all (the budget)")
    parser.add_argument("--seconds", type=float, default=60.0, help="time limit per way")
    parser.add_argument("--per-user", type=int, default=500, help="memories seeded per user")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 256 and 1 <= args.requests <= 200_000 and 0 < args.seconds <= 600):
        parser.error("keep the run bounded: 1-256 clients, 1-200000 requests, at most 600 s")
    tmp = Path(tempfile.mkdtemp(prefix="memoryport-load-"))
    try:
        users = [f"user{n}" for n in range(args.clients)]
        seeded = tmp / "seed.db"
        seed(seeded, users, args.per_user)
        http_db, lib_db = tmp / "http.db", tmp / "lib.db"
        for target in (http_db, lib_db):
            shutil.copy(seeded, target)
        keys = KeyStore(tmp / "keys")
        secrets = [keys.create(user_id=u).secret for u in users]
        keys.close()

        http = over_http(http_db, tmp / "keys", secrets, args.clients, args.requests, args.seconds)
        lib = asyncio.run(in_process(lib_db, args.clients, args.requests, args.seconds))
        rows = [
            {**http.row("HTTP (memoryport serve)"), "lost": lost_writes(http_db, http)},
            {**lib.row("in-process (GuardedMemory)"), "lost": lost_writes(lib_db, lib)},
        ]
        ratio = rows[0]["rps"] / rows[1]["rps"] if rows[1]["rps"] else float("nan")  # type: ignore[operator]
        lines = [
            f"{args.clients} clients, 90% recall / 10% remember, {args.per_user} memories per user seeded, "
            f"budget {args.requests} requests or {args.seconds:g} s per way; Python {sys.version.split()[0]}, "
            f"{os.cpu_count()} CPUs.",
            "",
            "| way | requests | requests/s | median ms | p99 ms | errors | lost writes |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            lines.append(
                f"| {r['way']} | {r['requests']} | {r['rps']:.0f} | {r['median_ms']:.2f} | {r['p99_ms']:.2f} "
                f"| {r['errors']} | {r['lost']} |"
            )
        lines += ["", f"HTTP throughput is {ratio:.2f}× the in-process throughput ({1 / ratio:.1f}× slower)."]
        text = "\n".join(lines) + "\n"
        print(text)
        if args.out:
            args.out.write_text(text)
        return text
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
