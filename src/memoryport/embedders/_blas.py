"""Optional control of numpy's OpenBLAS thread count, through ctypes, for the length of a forward pass.

numpy's OpenBLAS splits every matrix product over all cores. For the dozen
rows of a question that costs more than it gains: the calling thread spins
until the other core's half is done, and on a machine whose other core is busy
(the keyword half of a hybrid search, another process) each of the 24 products
of a MiniLM forward pass waits for a time slice. :func:`blas_threads` sets the
count for a block of code and restores it afterwards.

Only OpenBLAS built with pthreads is driven (the library numpy loaded, found in
``/proc/self/maps`` on Linux, else among numpy's bundled libraries): any other
BLAS, a build without the symbols, or anything unexpected leaves the count
alone, silently. The count is process-wide in OpenBLAS (its ``_local`` setter
is too), so overlapping blocks share it: the first saves the count, the last
restores it, and a product run by another thread meanwhile uses the smaller
count (slower, never wrong: the arithmetic of a product does not depend on it).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["blas_threads", "openblas"]


class _OpenBLAS:
    """The setter and getter of one OpenBLAS library."""

    def __init__(self, setter: Callable[[int], None], getter: Callable[[], int]) -> None:
        self.set = setter
        self.get = getter


_found: list[_OpenBLAS | None] = []
_find_lock = threading.Lock()
_state_lock = threading.Lock()
_active = 0
_saved = 0


def _candidates() -> list[str]:
    """Paths of the OpenBLAS libraries numpy loaded (Linux) or bundles (elsewhere)."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if path.startswith("/") and "openblas" in os.path.basename(path).lower() and path not in paths:
                    paths.append(path)
        return paths
    except OSError:
        pass
    numpy = sys.modules.get("numpy")
    init = getattr(numpy, "__file__", None)
    if not isinstance(init, str):
        return paths
    root = os.path.dirname(os.path.abspath(init))
    for folder in (os.path.join(root, ".dylibs"), root + ".libs", os.path.join(root, ".libs")):
        paths.extend(sorted(glob.glob(os.path.join(folder, "*openblas*"))))
    return paths


def _load(path: str) -> _OpenBLAS | None:
    mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_NOW", 0)  # never load a second copy on Linux
    try:
        lib = ctypes.CDLL(path, mode=mode) if mode else ctypes.CDLL(path)
    except OSError:
        return None
    for prefix in ("scipy_", ""):
        for suffix in ("64_", "_64", ""):
            try:
                setter = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}")
                getter = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}")
                parallel = getattr(lib, f"{prefix}openblas_get_parallel{suffix}")
            except AttributeError:
                continue
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            parallel.argtypes, parallel.restype = [], ctypes.c_int
            if parallel() != 1:  # 0: sequential build, nothing to limit; 2: OpenMP, whose count is per thread
                return None
            return _OpenBLAS(setter, getter)
    return None


def openblas() -> _OpenBLAS | None:
    """numpy's OpenBLAS (pthreads build) when it can be driven, else None; looked up once.

    Example:
        >>> lib = openblas()
        >>> lib is None or lib.get() >= 1
        True
    """
    with _find_lock:
        if not _found:
            found: _OpenBLAS | None = None
            try:
                import numpy  # noqa: F401  (the library must be loaded to be found)

                for path in _candidates():
                    found = _load(path)
                    if found is not None:
                        count = found.get()
                        found.set(count)  # a no-op that proves the setter works
                        if found.get() != count:
                            found = None
                        break
            except Exception:  # any surprise: leave the BLAS alone
                found = None
            _found.append(found)
        return _found[0]


@contextmanager
def blas_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` OpenBLAS threads (None, or no drivable OpenBLAS: unchanged).

    Example:
        >>> import numpy as np
        >>> with blas_threads(1):
        ...     product = np.ones((13, 384), np.float32) @ np.ones((384, 384), np.float32)
        >>> float(product[0, 0])
        384.0
    """
    global _active, _saved
    lib = openblas() if count is not None else None
    if lib is None or count is None:
        yield
        return
    with _state_lock:
        if _active == 0:
            _saved = lib.get()
        _active += 1
        if lib.get() != count:
            lib.set(count)
    try:
        yield
    finally:
        with _state_lock:
            _active -= 1
            if _active == 0 and lib.get() != _saved:
                lib.set(_saved)
