"""The runnable examples in the agent loop's docstrings give what they show."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from memoryport.loop import _context, _conversation, _hook, _scratch, _toolhistory

MODULES: list[ModuleType] = [_conversation, _toolhistory, _context, _hook, _scratch]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
