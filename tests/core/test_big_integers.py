"""An integer past Python's int-to-text limit is invalid input naming the field, never a bare ValueError."""

from __future__ import annotations

import sys

import pytest

from memoryport import GuardedMemory, InvalidInput, MemoryRecord, MemoryScope

from .dictstore import DictStore

ANN = MemoryScope(user_id="ann")
HUGE = 10 ** (sys.get_int_max_str_digits() + 1)


@pytest.mark.parametrize("value", [HUGE, -HUGE], ids=["positive", "negative"])
def test_in_metadata(value: int) -> None:
    with pytest.raises(InvalidInput, match="value of 'n'") as info:
        MemoryRecord(scope=ANN, text="x", metadata={"n": value})
    assert info.value.field == "record.metadata"
    assert not isinstance(info.value.__cause__, ValueError) or isinstance(info.value.__cause__, InvalidInput)


def test_in_a_filter() -> None:
    memory = GuardedMemory(DictStore())
    with pytest.raises(InvalidInput, match=r"filters?\W+'?n'?") as info:
        memory.search_sync("", scope=ANN, filters={"n": HUGE})
    assert info.value.field is not None and info.value.field.startswith("filters")


def test_large_but_writable_integers_still_round_trip() -> None:
    memory = GuardedMemory(DictStore())
    big = 2**80
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="x", metadata={"n": big})])
    record = memory.get_sync(rid, scope=ANN)
    assert record is not None and record.metadata == {"n": big}
    assert [h.record.id for h in memory.search_sync("", scope=ANN, filters={"n": big})] == [rid]
