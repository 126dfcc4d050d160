"""The layout tells the architecture: read every import (AST) and hold the layers apart.

- the core (``src/memoryport``) knows no backend: it imports no adapter, except
  the declared composition roots below;
- no adapter imports another adapter (shared parts live in the core);
- nothing outside ``adapters/`` imports a third-party SDK at module top (only
  the core's own dependencies), so ``import memoryport`` stays light;
- product code (core and adapters) never imports the contract suite;
- no module reaches into another module's private names (``_name``), except
  the few listed with their reason.

Each rule is checked on the real tree and, so that it cannot pass vacuously,
on a small planted violation.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Where each folder lands in the installed package (pyproject's package-dir).
TREES = {"src/memoryport": "memoryport", "adapters": "memoryport.adapters", "contracts": "memoryport.contracts"}

# The core may name an adapter only here, each for a reason.
ADAPTER_IMPORTS_ALLOWED = {
    "memoryport": "the package face: lazy re-exports of SQLiteMemory, Mem0Memory, ... (resolved on first use)",
    "memoryport.cli": "the command line is the composition root: it opens the SQLite file it works on",
    "memoryport.server._backend": "`memoryport serve` is a composition root: it opens the SQLite file it serves",
}

# What the core may import at module top besides the standard library and itself:
# the distribution's own dependencies (typing_extensions comes with pydantic).
CORE_DEPENDENCIES = {"pydantic", "pydantic_core", "numpy", "aiosqlite", "opentelemetry", "typing_extensions"}

# Modules outside adapters/ that are adapters of another kind: each is imported
# only when its extra is wanted (lazily, from its package's face) and subclasses
# or decorates its framework's types at module top, so it imports that framework there.
OWN_EXTRA: dict[str, set[str]] = {
    "memoryport.contracts": {"pytest", "_pytest", "anyio", "hypothesis"},  # extra "contracts", an opt-in plugin
    "memoryport.integrations.langchain": {"langchain_core"},  # extra "langchain"
    "memoryport.integrations.langgraph": {"langgraph"},  # extra "langgraph"
    "memoryport.integrations.openai_agents": {"agents"},  # extra "openai-agents"
    "memoryport.integrations.pydantic_ai": {"pydantic_ai"},  # extra "pydantic-ai"
    "memoryport.server._app": {"starlette"},  # extra "server"
    "memoryport.server._dashboard": {"starlette"},  # extra "server"
}

# (module, private name of another package's module) -> why it may use it.
_TOOLS_PLUMBING = (
    "the curated tools reuse the plumbing of memoryport.tools until the tools become a class "
    "with a public registration (issue 11, item 4)"
)
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    ("memoryport.cli.mcp", "_sdk"): "`memoryport mcp` checks the mcp SDK (one line, before opening the file) "
    "with the very check the tools' MCP server uses; tools._mcp owns it",
    ("memoryport.curated._tools", "_arguments_error"): _TOOLS_PLUMBING,
    ("memoryport.curated._tools", "_maybe_await"): _TOOLS_PLUMBING,
    ("memoryport.curated._tools", "_Relay"): _TOOLS_PLUMBING,
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (absolute)
    names: tuple[str, ...]  # names taken from it (``from target import a, b``)
    top: bool  # at module top (runs on import), not in a function or under TYPE_CHECKING
    line: int


def module_name(path: Path) -> str:
    for folder, package in TREES.items():
        base = ROOT / folder
        if path.is_relative_to(base):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    raise ValueError(path)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(source: str, module: str, is_package: bool) -> Iterator[Import]:
    """Every import in ``source`` (``import``, ``from``, ``importlib.import_module("...")``)."""
    package = module if is_package else module.rpartition(".")[0]

    def resolve(level: int, name: str | None) -> str:
        if level == 0:
            return name or ""
        base = package.split(".")
        base = base[: len(base) - (level - 1)]
        return ".".join([*base, name] if name else base)

    def walk(node: ast.AST, top: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            child_top = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and _is_type_checking(child):
                child_top = False
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, (), top, child.lineno)
            elif isinstance(child, ast.ImportFrom):
                target = resolve(child.level, child.module)
                names = tuple(a.name for a in child.names)
                yield Import(module, target, names, top, child.lineno)
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, (ast.Attribute, ast.Name))
                and (child.func.attr if isinstance(child.func, ast.Attribute) else child.func.id) == "import_module"
                and child.args
                and isinstance(child.args[0], ast.Constant)
                and isinstance(child.args[0].value, str)
            ):
                yield Import(module, child.args[0].value, (), top, child.lineno)
            yield from walk(child, child_top)

    yield from walk(ast.parse(source), True)


def product_modules() -> Iterator[tuple[str, Path]]:
    for folder in TREES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield module_name(path), path


def all_imports() -> list[Import]:
    out: list[Import] = []
    for module, path in product_modules():
        out.extend(imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"))
    return out


def _adapter_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["memoryport", "adapters"] else None


def _in_core(module: str) -> bool:
    return module == "memoryport" or (
        module.startswith("memoryport.")
        and not module.startswith(("memoryport.adapters", "memoryport.contracts"))
    )


def _allowed_adapter_import(module: str) -> bool:
    # "memoryport" itself covers only the package face, not every module below it.
    return module == "memoryport" or any(
        module == root or module.startswith(root + ".") for root in ADAPTER_IMPORTS_ALLOWED if root != "memoryport"
    )


def _expand(imports: list[Import]) -> Iterator[Import]:
    """``from memoryport.adapters import mem0`` imports the module ``memoryport.adapters.mem0``."""
    for imp in imports:
        if imp.target == "memoryport.adapters" and imp.names:
            for name in imp.names:
                yield Import(imp.module, f"{imp.target}.{name}", (), imp.top, imp.line)
        else:
            yield imp


def _is_module(dotted: str) -> bool:
    for folder, package in TREES.items():
        if dotted == package or dotted.startswith(package + "."):
            rest = dotted[len(package) :].lstrip(".").split(".") if dotted != package else []
            base = ROOT / folder / Path(*rest) if rest else ROOT / folder
            if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
                return True
    return False


def violations(imports: list[Import]) -> list[str]:
    """Every broken rule, one line each: ``module:line what``."""
    out: list[str] = []
    stdlib = set(sys.stdlib_module_names)
    for imp in _expand(imports):
        where = f"{imp.module}:{imp.line}"
        target_adapter = _adapter_of(imp.target)
        if _in_core(imp.module) and target_adapter is not None and not _allowed_adapter_import(imp.module):
            out.append(f"{where} the core imports the adapter {imp.target}")
        own = _adapter_of(imp.module)
        if own is not None and target_adapter is not None and target_adapter != own:
            out.append(f"{where} adapter {own!r} imports adapter {target_adapter!r} ({imp.target})")
        if (
            imp.target.startswith("memoryport.contracts")
            and not imp.module.startswith("memoryport.contracts")
        ):
            out.append(f"{where} product code imports the contract suite ({imp.target})")
        top_package = imp.target.split(".")[0]
        if imp.top and own is None and top_package not in stdlib and top_package != "memoryport":
            allowed = set(CORE_DEPENDENCIES)
            for root, extra in OWN_EXTRA.items():
                if imp.module == root or imp.module.startswith(root + "."):
                    allowed |= extra
            if top_package not in allowed:
                out.append(f"{where} imports the SDK {imp.target!r} at module top (import it where it is used)")
    return out


def private_uses(imports: list[Import]) -> list[str]:
    """``from other_module import _private`` across packages.

    A private *module* (``from . import _common``, ``from ._guard import GuardedMemory``)
    is a package's own internals and fine, and so are private names shared by the
    modules of one subpackage (``adapters.sqlite._update`` using ``_store``'s
    helpers): a subpackage is one job split into files. The core's top-level
    modules are each their own unit, and reaching into *another* package's
    private names is not fine either.
    """
    out: list[str] = []
    for imp in imports:
        if not imp.target.startswith("memoryport"):
            continue
        for name in imp.names:
            if _is_module(f"{imp.target}.{name}"):
                continue
            parent = imp.module.rpartition(".")[0]
            if parent != "memoryport" and imp.target.rpartition(".")[0] == parent:
                continue  # a sibling module of the same subpackage
            if name.startswith("_") and not name.startswith("__") and (imp.module, name) not in PRIVATE_ALLOWED:
                out.append(f"{imp.module}:{imp.line} takes the private {name} from {imp.target}")
    return out


def test_the_layers_hold() -> None:
    found = violations(all_imports())
    assert not found, "layering broken:\n" + "\n".join(found)


def test_no_module_reaches_into_another_modules_privates() -> None:
    found = private_uses(all_imports())
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_allowed_privates_are_still_used() -> None:
    """An exception that nothing needs any more is removed, so the list stays honest."""
    used = {(imp.module, name) for imp in all_imports() for name in imp.names}
    assert set(PRIVATE_ALLOWED) <= used


# -- the rules catch what they must (each planted violation is reported) ---------------

PLANTED = [
    ("memoryport._guard", "from memoryport.adapters.sqlite import SQLiteStore", "the core imports the adapter"),
    ("memoryport._guard", "def f():\n    from .adapters import mem0", "the core imports the adapter"),
    ("memoryport.tools._tools", "import importlib\nimportlib.import_module('memoryport.adapters.zep')", "the core"),
    ("memoryport.adapters.mem0", "from .sqlite import SQLiteStore", "adapter 'mem0' imports adapter 'sqlite'"),
    ("memoryport.adapters.sqlite._store", "from ..callable import CallableStore", "imports adapter 'callable'"),
    ("memoryport._copy", "import mem0", "imports the SDK"),
    ("memoryport.tools._mcp", "from mcp.server import Server", "imports the SDK"),
    ("memoryport._guard", "from memoryport.contracts import MemoryContract", "imports the contract suite"),
    ("memoryport.adapters.zep", "from memoryport.contracts._suite import BASE_TESTS", "imports the contract suite"),
]

ALLOWED = [
    ("memoryport.adapters.mem0", "import mem0"),  # adapters own their SDK
    ("memoryport._copy", "def f():\n    import mem0"),  # inside a function: runs when used
    ("memoryport._copy", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mem0"),
    ("memoryport.cli.add", "from memoryport.adapters.sqlite import SQLiteMemory"),  # the composition root
    ("memoryport.adapters.sqlite._store", "from ._fts import match_expression"),  # its own adapter
    ("memoryport.contracts._suite", "import pytest"),
]


@pytest.mark.parametrize(("module", "source", "expected"), PLANTED)
def test_a_planted_violation_is_reported(module: str, source: str, expected: str) -> None:
    found = violations(list(imports_of(source, module, is_package=False)))
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(("module", "source"), ALLOWED)
def test_what_the_layers_allow_is_not_reported(module: str, source: str) -> None:
    assert violations(list(imports_of(source, module, is_package=False))) == []


def test_a_planted_private_use_is_reported() -> None:
    found = private_uses(list(imports_of("from memoryport._records import _utc, MemoryRecord", "memoryport.x", False)))
    assert found == ["memoryport.x:1 takes the private _utc from memoryport._records"]
    assert private_uses(list(imports_of("from ..cli import _common", "memoryport.server.x", False))) == []
    sibling = "from ._store import _us"
    assert private_uses(list(imports_of(sibling, "memoryport.adapters.sqlite._update", False))) == []
    found = private_uses(list(imports_of("from ..tools._tools import _Relay", "memoryport.curated.x", False)))
    assert found == ["memoryport.curated.x:1 takes the private _Relay from memoryport.tools._tools"]


def benchmark_test_imports(source: str) -> list[str]:
    """Imports of test modules (and sys.path entries into tests/) in a benchmark's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [n for n in names if n == "tests" or n.startswith(("tests.", "test_", "conftest"))]
        func = node.func if isinstance(node, ast.Call) else None
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("insert", "append")
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == "path"
            and isinstance(func.value.value, ast.Name)
            and func.value.value.id == "sys"
            and any(isinstance(c, ast.Constant) and c.value in ("tests", "tests/") for c in ast.walk(node))
        ):
            found.append("sys.path into tests/")
    return found


def test_benchmarks_import_no_test_modules() -> None:
    """Benchmarks stand on their own: shared doubles live in benchmarks/, and tests import them from there."""
    offenders = {
        path.name: hits
        for path in sorted((ROOT / "benchmarks").glob("*.py"))
        if (hits := benchmark_test_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    "source",
    [
        "import test_zep as tz",
        "from tests.adapters.test_zep import FakeZep",
        'sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "adapters"))',
    ],
)
def test_a_benchmark_importing_a_test_module_is_reported(source: str) -> None:
    assert benchmark_test_imports(source)
