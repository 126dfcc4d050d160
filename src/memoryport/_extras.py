"""Import optional dependencies with a clear error naming the install line."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ._errors import MissingExtra

__all__ = ["lazy_exports", "require"]


def require(module: str, *, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtra` with ``pip install "memoryport[extra]"``.

    Example:
        >>> mem0 = require("mem0", extra="mem0", feature="Mem0Memory", package="mem0ai")  # doctest: +SKIP
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(extra, package=package or module.split(".")[0], feature=feature) from exc


def lazy_exports(
    module: str, names: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose ``names`` are imported on first use.

    ``names`` maps an attribute to the module that defines it; the value is
    cached in ``namespace`` (the package's ``globals()``) once imported.

    Example:
        >>> __getattr__, __dir__ = lazy_exports(__name__, {"X": "pkg.x"}, globals())  # doctest: +SKIP
    """

    def __getattr__(name: str) -> Any:
        source = names.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
