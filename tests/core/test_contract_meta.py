"""The suite's own bookkeeping: every test is listed, documented and async."""

from __future__ import annotations

import inspect

from memoryport.contracts import BASE_TESTS, CONTRACT_TESTS, MemoryContract


def test_every_contract_test_is_listed() -> None:
    methods = {name for name in dir(MemoryContract) if name.startswith("test_")}
    assert methods == set(CONTRACT_TESTS)
    assert set(BASE_TESTS) <= set(CONTRACT_TESTS)


def test_every_contract_test_says_what_to_check_when_it_fails() -> None:
    for name in CONTRACT_TESTS:
        method = getattr(MemoryContract, name)
        assert inspect.iscoroutinefunction(method), name
        doc = inspect.getdoc(method) or ""
        assert "Troubleshooting:" in doc, f"{name} has no Troubleshooting section"


def test_documented_table_matches_the_suite() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "contract-suite.md").read_text()
    for name, capability in CONTRACT_TESTS.items():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"{name} is missing from docs/contract-suite.md"
        assert ("base" if name in BASE_TESTS else "optional") in row, name
        if capability is not None:
            assert f"`{capability.value}`" in row, name
