"""Import optional dependencies with a clear error naming the install line."""

from __future__ import annotations

import importlib
from types import ModuleType

from ._errors import MissingExtra

__all__ = ["require"]


def require(module: str, *, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtra` with ``pip install "memoryport[extra]"``.

    Example:
        >>> mem0 = require("mem0", extra="mem0", feature="Mem0Memory", package="mem0ai")  # doctest: +SKIP
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(extra, package=package or module.split(".")[0], feature=feature) from exc
