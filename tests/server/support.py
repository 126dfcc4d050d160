"""A real uvicorn server on an ephemeral 127.0.0.1 port, in a thread, stopped by itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from memoryport import GuardedMemory, SQLiteMemory
from memoryport.server import KeyStore, create_app


@dataclass
class Live:
    url: str
    server: uvicorn.Server
    keys: KeyStore
    db: Path
    secrets: dict[str, str]

    def client(self, who: str | None = None, **headers: str) -> httpx.Client:
        h = dict(headers)
        if who is not None:
            h["Authorization"] = f"Bearer {self.secrets[who]}"
        return httpx.Client(base_url=self.url, headers=h, timeout=30)


@contextmanager
def running(app: Any, *, graceful: float = 10.0) -> Iterator[tuple[str, uvicorn.Server]]:
    """Serve ``app`` on 127.0.0.1:<free port> until the block ends (then a graceful stop)."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        access_log=False,
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=graceful,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the test server did not stop"


@contextmanager
def live_server(
    tmp: Path, *, users: tuple[str, ...] = ("ann", "ben"), memory: GuardedMemory | None = None, **options: Any
) -> Iterator[Live]:
    """``memory`` (default: a SQLite file in ``tmp``) served with a key per user, an admin key and a revoked key."""
    keys = KeyStore(tmp / "memory.db.keys")
    secrets = {u: keys.create(user_id=u, label=u).secret for u in users}
    secrets["admin"] = keys.create(admin=True, label="ops").secret
    revoked = keys.create(user_id=users[0], label="old")
    keys.revoke(revoked.key.id)
    secrets["revoked"] = revoked.secret
    rate = options.pop("rate_per_minute", 100_000)
    served = memory if memory is not None else SQLiteMemory(tmp / "memory.db")
    app = create_app(served, keys, rate_per_minute=rate, **options)
    with running(app) as (url, server):
        yield Live(url, server, keys, tmp / "memory.db", secrets)
