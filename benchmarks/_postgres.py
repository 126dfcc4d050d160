"""A PostgreSQL for the benchmarks: ``--dsn`` (an ordinary role's DSN), else pgserver in a temporary folder.

pgserver (the dev extra) bundles PostgreSQL 16 and pgvector; started as root it
runs the server as a user of its own. The benchmark connects as an ordinary
role, as an application should (a superuser would skip row-level security).
"""

from __future__ import annotations

import secrets
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROLE = "memoryport_bench"


@dataclass
class Postgres:
    dsn: str  # the ordinary role's
    admin_dsn: str | None = None
    handle: Any = None

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cleanup()


def _with_user(dsn: str, user: str, db: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.split("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{user}@{host}", "/" + db, parts.query, parts.fragment))


def start(dsn: str | None = None, pgdata: str | None = None, settings: dict[str, str] | None = None) -> Postgres:
    """Use ``dsn`` as given, or start pgserver and make a role and a database with pgvector.

    ``pgdata``: keep the server's data there (reused by the next run, which
    finds the same database); else a temporary folder deleted at the end.
    ``settings``: server settings (``ALTER SYSTEM``), applied by a restart.
    """
    if dsn:
        return Postgres(dsn=dsn)
    import pgserver
    import psycopg

    def server() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if pgdata is None:
                return pgserver.get_server(tempfile.mkdtemp(prefix="memoryport-bench-pg-"), cleanup_mode="delete")
            return pgserver.get_server(pgdata, cleanup_mode="stop")

    handle = server()
    admin = str(handle.get_uri())
    if settings:
        with psycopg.connect(admin, autocommit=True) as conn:
            changed = False
            for key, value in settings.items():
                current = conn.execute("SELECT current_setting(%s)", (key,)).fetchone()
                conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
                changed = changed or current is None or str(current[0]) != value
        if changed and pgdata is not None:
            handle.cleanup()  # stop; the next get_server starts it with the new settings
            handle = server()
            admin = str(handle.get_uri())
        elif changed:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("SELECT pg_reload_conf()")
    db = "memoryport_bench" if pgdata is not None else "memoryport_bench_" + secrets.token_hex(3)
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {ROLE} LOGIN")
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone() is None:
            conn.execute(f"CREATE DATABASE {db} OWNER {ROLE}")
    admin_db = _with_user(admin, urlsplit(admin).username or "postgres", db)
    with psycopg.connect(admin_db, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return Postgres(dsn=_with_user(admin, ROLE, db), admin_dsn=admin_db, handle=handle)
