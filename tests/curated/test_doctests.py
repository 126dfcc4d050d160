"""The runnable examples in curated memory's docstrings give what they show."""

from __future__ import annotations

import doctest

import pytest

from memoryport.curated import _keys, _memory, _policy, _types


@pytest.mark.parametrize("module", [_keys, _policy, _types, _memory])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0
