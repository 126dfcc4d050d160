"""The runnable examples in the tools' docstrings give what they show."""

from __future__ import annotations

import doctest

import pytest

from memoryport.tools import _context, _pii


@pytest.mark.parametrize("module", [_pii, _context])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0
