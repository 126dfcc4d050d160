"""Which SQLite library to use: Python's own ``sqlite3``, or a newer one from a wheel."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from memoryport._errors import MissingExtra, UsageError

__all__ = ["DRIVERS", "available_drivers", "load_driver", "version_tuple"]

# name -> module exposing the DB-API of the standard ``sqlite3``.
DRIVERS: dict[str, str] = {
    "sqlite3": "sqlite3",
    "pysqlite3": "pysqlite3.dbapi2",
    "sqlean": "sqlean",
}
_PACKAGES = {"pysqlite3": "pysqlite3-binary", "sqlean": "sqlean.py"}


def version_tuple(module: ModuleType) -> tuple[int, ...]:
    """The SQLite library version of a driver, e.g. ``(3, 51, 1)``."""
    return tuple(int(p) for p in str(module.sqlite_version).split("."))


def _try(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(DRIVERS[name])
    except ImportError:
        return None


def available_drivers() -> list[str]:
    """The driver names importable here, Python's own first.

    Example:
        >>> "sqlite3" in available_drivers()
        True
    """
    return [name for name in DRIVERS if _try(name) is not None]


def load_driver(name: str | None = None) -> tuple[str, ModuleType]:
    """Pick a driver: ``name``, else ``$MEMORYPORT_SQLITE_DRIVER``, else the newest installed.

    ``"auto"`` (the default) prefers the newest SQLite among Python's own
    ``sqlite3`` and the wheels ``pysqlite3-binary`` and ``sqlean.py``: newer
    SQLite has FTS5 secure-delete (3.42+), which erases words from the index at
    once instead of by an index merge.

    Example:
        >>> load_driver("sqlite3")[0]
        'sqlite3'
    """
    wanted = name or os.environ.get("MEMORYPORT_SQLITE_DRIVER") or "auto"
    if wanted == "auto":
        best: tuple[str, ModuleType] | None = None
        for candidate in DRIVERS:
            module = _try(candidate)
            if module is not None and (best is None or version_tuple(module) > version_tuple(best[1])):
                best = (candidate, module)
        assert best is not None  # the standard library always has sqlite3
        return best
    if wanted not in DRIVERS:
        raise UsageError(f"unknown SQLite driver {wanted!r}; choose one of auto, {', '.join(DRIVERS)}")
    module = _try(wanted)
    if module is None:
        raise MissingExtra("sqlite-new", package=_PACKAGES.get(wanted, wanted), feature=f"the {wanted} SQLite driver")
    return wanted, module
