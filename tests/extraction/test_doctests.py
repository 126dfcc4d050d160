"""The runnable examples in the extraction docstrings give what they show."""

from __future__ import annotations

import doctest

import pytest

from memoryport.extraction import _extractor, _types


@pytest.mark.parametrize("module", [_types, _extractor])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0
