"""Which memory a server serves: the one place that turns ``--db`` into a memory."""

from __future__ import annotations

from pathlib import Path

from .._errors import UsageError
from .._guard import GuardedMemory

__all__ = ["is_dsn", "open_memory"]


def is_dsn(target: str) -> bool:
    """Whether ``target`` is a PostgreSQL DSN (``postgresql://...``) rather than a file path.

    Example:
        >>> is_dsn("postgresql://app@db/app"), is_dsn("memory.db")
        (True, False)
    """
    return target.startswith(("postgres://", "postgresql://"))


def open_memory(target: str, *, retention_days: float | None = None) -> GuardedMemory:
    """The memory ``target`` names: a PostgreSQL DSN, or a SQLite file path (created when missing).

    The one place that turns ``memoryport serve --db TARGET`` into a memory; a
    new kind of target is added here.

    Raises:
        UsageError: the target cannot be a memory (a directory, a missing folder).

    Example:
        >>> memory = open_memory("memory.db")                    # doctest: +SKIP
        >>> memory = open_memory("postgresql://app@db.internal/app")  # doctest: +SKIP
    """
    if is_dsn(target):
        from memoryport.adapters.postgres import PostgresMemory

        return PostgresMemory(target, retention_days=retention_days)
    path = Path(target).expanduser()
    if path.is_dir():
        raise UsageError(f"{path} is a directory; --db takes a file")
    if not path.parent.exists():
        raise UsageError(f"the folder {path.parent} does not exist")
    from memoryport.adapters.sqlite import SQLiteMemory

    return SQLiteMemory(path, retention_days=retention_days)
