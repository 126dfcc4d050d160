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
    #: test name -> the phases ("setup", "teardown") that raised: pytest reports each as an error.
    errors: dict[str, list[str]] = field(default_factory=dict)
    #: outcome -> how many reports pytest counts so (a failed call and a failed teardown are two).
    tally: dict[str, int] = field(default_factory=dict)


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
    """Record each phase's outcome, and count it the way pytest's own summary line does.

    A test's result is its call's outcome (or ``error`` when its setup failed);
    a failing setup or teardown is also listed as an error of that phase, and
    counted as one, as pytest counts it: a test that fails and then errors in
    teardown is "1 failed, 1 error" in both summaries.
    """
    found = _nodes.get(report.nodeid)
    if found is None:
        return
    store = _stores[found[0]]
    name = found[1]
    if hasattr(report, "wasxfail"):
        outcome = "xpassed" if report.passed else "xfailed"
        store.reasons[name] = str(report.wasxfail)
    elif report.failed:
        if report.when != "call":
            store.errors.setdefault(name, []).append(report.when)
            store.tally["error"] = store.tally.get("error", 0) + 1
            if report.when == "setup":
                store.results[name] = "error"
            return
        outcome = "failed"
    elif report.skipped:
        outcome = "skipped"
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            store.reasons[name] = str(longrepr[2]).removeprefix("Skipped: ")
    elif report.when == "call":
        outcome = "passed"
    else:
        return
    store.tally[outcome] = store.tally.get(outcome, 0) + 1
    store.results[name] = outcome


def summary_line(tally: dict[str, int]) -> str:
    """Counts worded and ordered as pytest's final line words them ("1 failed, 2 errors, 3 passed")."""
    order = ["failed", "passed", "skipped", "xfailed", "xpassed", "error"]
    parts = []
    for outcome in sorted(tally, key=lambda o: order.index(o) if o in order else len(order)):
        n = tally[outcome]
        parts.append(f"{n} {outcome}{'s' if outcome == 'error' and n != 1 else ''}")
    return ", ".join(parts)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print one table per store: its capabilities, then each contract test's result."""
    from ._suite import BASE_TESTS, CONTRACT_TESTS

    if not _stores:
        return
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", "memoryport contract suite")
    width = max(len(n) for n in CONTRACT_TESTS)
    total: dict[str, int] = {}
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
            errors = store.errors.get(name, [])
            symbol = "❌" if errors else _SYMBOL.get(outcome.split()[0], "?")
            if errors and outcome != "error":
                outcome += ", error in " + " and ".join(errors)
            write(f"  {symbol} {name:<{width}}  {needs:<15} {kind:<8} {outcome}{reason}")
        not_run = sum(1 for outcome in store.results.values() if outcome == "not run")
        write("  " + summary_line(store.tally) + (f", {not_run} not run" if not_run else ""))
        for outcome, n in store.tally.items():
            total[outcome] = total.get(outcome, 0) + n
    write(f"contract tests of all stores: {summary_line(total)}")
