"""Helpers of the PostgreSQL tests: a server for the session, roles, fresh schemas."""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

APP_ROLE = "memoryport_app"


@dataclass
class Server:
    """A PostgreSQL for the tests: an admin DSN and an ordinary (non-superuser) role's DSN."""

    admin_dsn: str
    app_dsn: str
    handle: Any = None  # the pgserver object, when the tests started the server


def with_user(dsn: str, user: str, dbname: str | None = None) -> str:
    """``dsn`` (a URI) with another user name (and database)."""
    parts = urlsplit(dsn)
    netloc = parts.netloc
    host = netloc.split("@", 1)[1] if "@" in netloc else netloc
    path = parts.path if dbname is None else "/" + dbname
    return urlunsplit((parts.scheme, f"{user}@{host}", path, parts.query, parts.fragment))


def start_server() -> Server:
    """A server from ``MEMORYPORT_PG_DSN`` (a superuser's DSN), else pgserver in a temporary folder."""
    import psycopg

    handle = None
    admin = os.environ.get("MEMORYPORT_PG_DSN")
    if not admin:
        import pgserver  # the dev extra installs it

        handle = pgserver.get_server(tempfile.mkdtemp(prefix="memoryport-pg-"), cleanup_mode="delete")
        admin = str(handle.get_uri())
    db = "memoryport_test_" + secrets.token_hex(4)
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone()
        if row is None:
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"CREATE DATABASE {db} OWNER {APP_ROLE}")
    admin_db = with_user(admin, urlsplit(admin).username or "postgres", db)
    with psycopg.connect(admin_db, autocommit=True) as conn:
        # pgvector is not a trusted extension: an administrator creates it once per database.
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return Server(admin_dsn=admin_db, app_dsn=with_user(admin, APP_ROLE, db), handle=handle)


def stop_server(server: Server) -> None:
    if server.handle is not None:
        server.handle.cleanup()


def fresh_schema() -> str:
    return "mp_" + secrets.token_hex(5)


def bow_vectors(texts: list[str], dim: int = 64) -> Any:
    """Hashed bag of words: deterministic, and texts sharing words are similar."""
    import hashlib
    import re

    import numpy as np

    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in dict.fromkeys(w.lower() for w in re.findall(r"[^\W_]+", text)):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            out[i, h % dim] += 1.0 if (h >> 32) & 1 else -1.0
        out[i, -1] += 0.01  # never the zero vector
    return out


def bow_embedder(dim: int = 64, name: str = "bow-64") -> Any:
    from memoryport import CallableEmbedder

    return CallableEmbedder(lambda texts: bow_vectors(texts, dim), dim=dim, name=name)
