"""The memoryport contract suite: an opt-in pytest plugin a store owner runs on their store.

Subclass :class:`MemoryContract` and override its ``memory`` fixture; add
``pytest_plugins = ["memoryport.contracts"]`` to your top-level ``conftest.py``
for the summary table of capabilities and results at the end of the run.
Nothing is loaded into pytest unless you ask: there is no entry point.

Example:
    ::

        import pytest
        from memoryport import GuardedMemory
        from memoryport.contracts import MemoryContract

        class TestMyStore(MemoryContract):
            @pytest.fixture
            async def memory(self):
                m = GuardedMemory(MyStore())
                yield m
                await m.aclose()
"""

from __future__ import annotations

from memoryport._errors import MissingExtra

try:
    import pytest
except ImportError as exc:  # pragma: no cover - the contracts extra brings pytest
    raise MissingExtra("contracts", package="pytest", feature="memoryport.contracts") from exc

# Before the suite is imported, so its plain asserts explain themselves.
pytest.register_assert_rewrite("memoryport.contracts._suite")

from ._plugin import (  # noqa: E402
    pytest_collection_finish,
    pytest_runtest_logreport,
    pytest_terminal_summary,
)
from ._suite import BASE_TESTS, CONTRACT_TESTS, MemoryContract  # noqa: E402

__all__ = [
    "BASE_TESTS",
    "CONTRACT_TESTS",
    "MemoryContract",
    "pytest_collection_finish",
    "pytest_runtest_logreport",
    "pytest_terminal_summary",
]
