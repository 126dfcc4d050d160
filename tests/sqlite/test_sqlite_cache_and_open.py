"""The in-RAM vector block grows in place: appends are amortised, views stay consistent."""

from __future__ import annotations

import numpy as np

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite._vectors import Block as _Block


def test_block_append_grows_and_keeps_rows() -> None:
    block = _Block(0, np.arange(3, dtype=np.int64), np.eye(3, 4, dtype=np.float32), np.zeros(3, dtype=np.int64))
    before = block.view()
    capacities = set()
    for i in range(200):
        block.append(
            np.asarray([100 + i], dtype=np.int64), np.full((1, 4), i, dtype=np.float32), np.asarray([i], dtype=np.int64)
        )
        capacities.add(block.nbytes)
    rids, matrix, expires = block.view()
    assert len(rids) == len(matrix) == len(expires) == 203
    assert rids[:3].tolist() == [0, 1, 2] and rids[-1] == 299
    assert matrix[-1].tolist() == [199.0] * 4 and expires[-1] == 199
    assert len(capacities) <= 4  # doubling: a handful of reallocations, not one per append
    assert before[0].tolist() == [0, 1, 2]  # an earlier view is untouched by later appends


def test_adds_after_a_search_are_found_by_the_next_search(tmp_path: object) -> None:
    def onehot(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, int(text.split()[-1])] = 1.0  # "note i" -> axis i: no two texts collide
        return out

    memory = SQLiteMemory(
        f"{tmp_path}/v.db", embedder=CallableEmbedder(onehot, dim=64, name="onehot"), search_mode="vector"
    )
    ann = MemoryScope(user_id="ann")
    texts = [f"note {i}" for i in range(40)]
    memory.add_sync([MemoryRecord(scope=ann, text=texts[0])])
    assert memory.search_sync(texts[0], scope=ann, k=1)[0].record.text == texts[0]  # loads the cache
    for text in texts[1:]:
        memory.add_sync([MemoryRecord(scope=ann, text=text)])  # appended to the cached block
    for text in (texts[1], texts[20], texts[-1]):
        assert memory.search_sync(text, scope=ann, k=1)[0].record.text == text
    memory.close()


def test_a_file_that_is_not_a_database_is_a_usage_error(tmp_path: object) -> None:
    import pytest

    from memoryport import UsageError

    path = f"{tmp_path}/notes.txt"
    with open(path, "wb") as f:
        f.write(b"this is not a database, just some text " * 20)
    with pytest.raises(UsageError, match="cannot be opened as a memoryport SQLite file"):
        SQLiteMemory(path)
    with open(path, "rb") as f:
        assert f.read().startswith(b"this is not a database")  # left untouched
