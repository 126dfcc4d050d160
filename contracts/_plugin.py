"""The pytest hooks of the contract suite: the summary table at the end of the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from memoryport._guard import GuardedMemory
from memoryport._port import Capability

__all__ = ["note_capabilities", "pytest_collection_finish", "pytest_runtest_logreport", "pytest_terminal_summary"]

_SYMBOL = {"passed": "✅", "failed": "❌", "error": "❌", "skipped": "⊘", "xfailed": "✖", "xpassed": "❌"}


@dataclass
class _Store:
    """What the run learnt about one MemoryContract subclass."""

    backend: str = "?"
    capabilities: frozenset[Capability] | None = None
    results: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)


_stores: dict[str, _Store] = {}
_nodes: dict[str, tuple[str, str]] = {}  # test nodeid -> (class nodeid, test name)


def _class_of(item: Any) -> tuple[str, str] | None:
    from ._suite import CONTRACT_TESTS, MemoryContract

    cls = getattr(item, "cls", None)
    name = getattr(item, "originalname", None) or getattr(item, "name", "")
    if cls is None or not issubclass(cls, MemoryContract) or name not in CONTRACT_TESTS:
        return None
    # A parametrised class (e.g. one store per driver) is one table per parameter set.
    callspec = getattr(item, "callspec", None)
    suffix = f"[{callspec.id}]" if callspec is not None and callspec.id else ""
    return item.parent.nodeid + suffix, name


def note_capabilities(item: Any, memory: GuardedMemory) -> None:
    """Remember the backend and capabilities of the store a contract test ran on."""
    found = _class_of(item)
    if found is not None:
        store = _stores.setdefault(found[0], _Store())
        store.backend = memory.backend
        store.capabilities = memory.capabilities


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note every selected contract test, so that tests erroring in setup still show."""
    for item in session.items:
        found = _class_of(item)
        if found is not None:
            _nodes[item.nodeid] = found
            _stores.setdefault(found[0], _Store()).results.setdefault(found[1], "not run")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Fold each phase's outcome into the test's result (a failing phase wins)."""
    found = _nodes.get(report.nodeid)
    if found is None:
        return
    store = _stores[found[0]]
    name = found[1]
    current = store.results.get(name, "not run")
    if hasattr(report, "wasxfail"):
        outcome = "xpassed" if report.passed else "xfailed"
        store.reasons[name] = str(report.wasxfail)
    elif report.failed:
        outcome = "failed" if report.when == "call" else "error"
    elif report.skipped:
        outcome = "skipped"
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            store.reasons[name] = str(longrepr[2]).removeprefix("Skipped: ")
    elif report.when == "call":
        outcome = "passed"
    else:
        return
    if current in {"failed", "error", "xpassed"}:
        return
    store.results[name] = outcome


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print one table per store: its capabilities, then each contract test's result."""
    from ._suite import BASE_TESTS, CONTRACT_TESTS

    if not _stores:
        return
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", "memoryport contract suite")
    width = max(len(n) for n in CONTRACT_TESTS)
    for nodeid, store in sorted(_stores.items()):
        write(f"{nodeid}  (backend {store.backend!r})")
        if store.capabilities is not None:
            caps = "  ".join(f"{'✅' if c in store.capabilities else '⊘'} {c.value}" for c in Capability)
            write(f"  capabilities: {caps}")
        for name, capability in CONTRACT_TESTS.items():
            if name not in store.results:
                continue
            outcome = store.results[name]
            needs = capability.value if capability is not None else "-"
            kind = "base" if name in BASE_TESTS else "optional"
            if (
                capability is not None
                and store.capabilities is not None
                and capability not in store.capabilities
                and outcome == "passed"
            ):
                outcome = "passed (undeclared: refusal checked)"
            reason = f"  ({store.reasons[name]})" if name in store.reasons else ""
            symbol = _SYMBOL.get(outcome.split()[0], "?")
            write(f"  {symbol} {name:<{width}}  {needs:<15} {kind:<8} {outcome}{reason}")
        counts: dict[str, int] = {}
        for outcome in store.results.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        write("  " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())))
