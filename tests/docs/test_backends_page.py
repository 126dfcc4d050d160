"""The capability matrix of docs/backends.md says what the code declares.

Each column is compared with the capabilities of that backend in its fullest
configuration (SQLite with an embedder, CallableMemory given every function);
SDK adapters are read from their module's ``_CAPABILITIES``. A backend whose
module is not in this tree yet is skipped, by name.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from memoryport import CallableEmbedder, CallableMemory, Capability

PAGE = Path(__file__).resolve().parents[2] / "docs" / "backends.md"


def matrix() -> dict[str, set[str]]:
    section = PAGE.read_text().split("## Capability matrix", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[0] == "capability"
    declared: dict[str, set[str]] = {name: set() for name in header[1:]}
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        names = [name.strip(" `") for name in cells[0].split(",")]
        for backend, cell in zip(header[1:], cells[1:], strict=True):
            assert cell.startswith(("✅", "—")), f"{names} / {backend}: a cell starts with ✅ or —, not {cell!r}"
            if cell.startswith("✅"):
                declared[backend].update(names)
    return declared


def test_the_matrix_lists_every_capability_once() -> None:
    section = PAGE.read_text().split("## Capability matrix", 1)[1].split("\n## ", 1)[0]
    listed = [line.split("|")[1].strip(" `") for line in section.splitlines() if line.startswith("| `")]
    assert sorted(listed) == sorted(c.value for c in Capability)


def _sqlite(tmp_path: Path) -> frozenset[Capability]:
    try:
        sqlite = importlib.import_module("memoryport.adapters.sqlite")
    except ModuleNotFoundError as exc:
        if exc.name != "memoryport.adapters.sqlite":
            raise
        pytest.skip("memoryport.adapters.sqlite is not in this tree yet")
    embedder = CallableEmbedder(lambda texts: np.ones((len(texts), 4), dtype=np.float32), dim=4, name="ones")
    memory = sqlite.SQLiteMemory(tmp_path / "m.db", embedder=embedder)
    try:
        return frozenset(memory.capabilities)
    finally:
        memory.close()


def _callable(tmp_path: Path) -> frozenset[Capability]:
    def fn(**kwargs: object) -> None:
        return None

    memory = CallableMemory(add=fn, search=fn, get=fn, delete=fn, export=fn, purge=fn, update=fn, count=fn)
    return frozenset(memory.capabilities)


def _module(name: str) -> frozenset[Capability]:
    module_name = f"memoryport.adapters.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        pytest.skip(f"{module_name} is not in this tree yet")
    caps = getattr(module, "_CAPABILITIES", None)
    assert caps is not None, f"{module_name} has no _CAPABILITIES: update this test to read its capabilities"
    return frozenset(Capability(c) for c in caps)


def _postgres() -> frozenset[Capability]:
    try:
        postgres = importlib.import_module("memoryport.adapters.postgres")
    except ModuleNotFoundError as exc:
        if exc.name != "memoryport.adapters.postgres":
            raise
        pytest.skip("memoryport.adapters.postgres is not in this tree yet")
    embedder = CallableEmbedder(lambda texts: np.ones((len(texts), 4), dtype=np.float32), dim=4, name="ones")
    # No connection is made before first use: the capabilities are known at construction.
    return frozenset(postgres.PostgresStore("postgresql://nobody@127.0.0.1:1/none", embedder=embedder).capabilities)


@pytest.mark.parametrize("backend", ["SQLite", "PostgreSQL", "Callable", "Mem0", "Zep", "Graphiti"])
def test_matrix_matches_the_code(backend: str, tmp_path: Path) -> None:
    if backend == "SQLite":
        actual = _sqlite(tmp_path)
    elif backend == "PostgreSQL":
        actual = _postgres()
    elif backend == "Callable":
        actual = _callable(tmp_path)
    else:
        actual = _module(backend.lower())
    assert matrix()[backend] == {c.value for c in actual}
