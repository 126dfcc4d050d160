"""Which memory a server serves: the one place that turns ``--db`` into a memory."""

from __future__ import annotations

from pathlib import Path

from .._errors import UsageError
from .._guard import GuardedMemory

__all__ = ["open_memory"]


def open_memory(target: str, *, retention_days: float | None = None) -> GuardedMemory:
    """The memory ``target`` names: a SQLite file path (created when missing).

    This is the single place a new kind of target (a PostgreSQL DSN) is added.

    Raises:
        UsageError: the target cannot be a memory (a directory, a missing folder).

    Example:
        >>> memory = open_memory("memory.db")                    # doctest: +SKIP
    """
    if target.startswith(("postgres://", "postgresql://")):
        raise UsageError("a PostgreSQL DSN is not supported by this version of `memoryport serve`; pass a SQLite path")
    path = Path(target).expanduser()
    if path.is_dir():
        raise UsageError(f"{path} is a directory; --db takes a file")
    if not path.parent.exists():
        raise UsageError(f"the folder {path.parent} does not exist")
    from memoryport.adapters.sqlite import SQLiteMemory

    return SQLiteMemory(path, retention_days=retention_days)
