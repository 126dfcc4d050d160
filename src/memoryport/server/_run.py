"""Run the app under uvicorn, with graceful shutdown and content-free logs."""

from __future__ import annotations

import logging
import sys

from .._extras import require
from .._guard import GuardedMemory
from ._keys import KeyStore

__all__ = ["serve"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def serve(
    memory: GuardedMemory,
    keys: KeyStore,
    *,
    host: str = "127.0.0.1",
    port: int = 8787,
    rate_per_minute: int = 600,
    max_body_bytes: int = 1_048_576,
    secure_cookies: bool = False,
    graceful_seconds: float = 30.0,
) -> None:
    """Serve ``memory`` over HTTP until SIGINT/SIGTERM; in-flight requests finish first.

    uvicorn's own access log is off (it would log query strings, which may hold
    search text); the app logs one JSON line per request on
    ``memoryport.server.access`` instead.

    Example:
        >>> serve(SQLiteMemory("memory.db"), KeyStore("memory.keys"))  # doctest: +SKIP
    """
    uvicorn = require("uvicorn", extra="server", feature="memoryport serve")
    from ._app import create_app

    app = create_app(
        memory, keys, rate_per_minute=rate_per_minute, max_body_bytes=max_body_bytes, secure_cookies=secure_cookies
    )
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if host not in _LOOPBACK:
        logging.getLogger("memoryport.server").warning(
            "listening on %s: put a TLS-terminating reverse proxy in front; this server speaks plain HTTP", host
        )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_config=None,
        timeout_graceful_shutdown=graceful_seconds,
        server_header=False,
        proxy_headers=False,
        lifespan="on",
    )
    uvicorn.Server(config).run()
