"""``page_size``: the SQLite page size of a file SQLiteMemory creates (issue 17, goal 2: bulk loads of vectors).

A new file gets the size asked (4 KiB by default); a file keeps the size it was
created with, so opening it with another explicit size is refused with a typed
error and nothing changed; a bad size is refused before anything is created.
What is stored does not depend on the size: a batch written from one BLOB
reads back as embedded, and searches find each record.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from memoryport import InvalidInput, MemoryRecord, MemoryScope, SQLiteMemory, UsageError
from memoryport.adapters.sqlite import SCHEMA_VERSION
from memoryport.adapters.sqlite._schema import PAGE_SIZE

from .support import bow_embedder, bow_vectors

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parent / "data"


def header_page_size(path: str) -> int:
    """The page size written in the file's header (bytes 16-17; 1 means 65,536)."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(18)[16:18], "big")
    return 65536 if size == 1 else size


@pytest.mark.parametrize("size", [None, 4096, 8192, 16384, 65536])
def test_a_new_file_gets_the_page_size_asked(db_path: str, driver: str, size: int | None) -> None:
    memory = SQLiteMemory(db_path, driver=driver, page_size=size)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="Ann likes plums")])
    assert memory.store.stats()["page_size"] == (size or PAGE_SIZE)
    memory.close()
    assert header_page_size(db_path) == (size or PAGE_SIZE)
    # Reopened without page_size (or with the same one): the file keeps its size and its records.
    for again in (None, size or PAGE_SIZE):
        reopened = SQLiteMemory(db_path, driver=driver, page_size=again)
        assert reopened.store.stats()["page_size"] == (size or PAGE_SIZE)
        assert [h.record.text for h in reopened.search_sync("plums", scope=MemoryScope(user_id="ann"))] == [
            "Ann likes plums"
        ]
        reopened.close()


def test_an_existing_file_with_other_pages_is_refused_and_untouched(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, page_size=16384)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="Ann likes plums")])
    memory.close()
    with open(db_path, "rb") as f:
        before = f.read()
    with pytest.raises(UsageError, match="pages of 16,384 bytes, not page_size=4,096"):
        SQLiteMemory(db_path, driver=driver, page_size=4096)
    with open(db_path, "rb") as f:
        assert f.read() == before
    assert header_page_size(db_path) == 16384


def test_a_file_of_an_older_schema_opens_with_its_own_page_size(tmp_path: Path, driver: str) -> None:
    """A schema-6 file (4 KiB pages) migrates with page_size=4096 given, and is refused with 16384 before any change."""
    path = str(tmp_path / "old.db")
    shutil.copy(DATA / "schema6.db", path)
    with pytest.raises(UsageError, match="not page_size=16,384"):
        SQLiteMemory(path, driver=driver, page_size=16384)
    memory = SQLiteMemory(path, driver=driver, page_size=4096)
    assert memory.store.stats()["schema_version"] == SCHEMA_VERSION
    memory.close()


@pytest.mark.parametrize("size", [0, 512, 1024, 2048, 5000, 131072, True, 16384.0, "16384"])
def test_a_bad_page_size_is_refused_before_anything_is_created(db_path: str, size: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        SQLiteMemory(db_path, page_size=size)  # type: ignore[arg-type]
    assert caught.value.field == "page_size"
    assert not os.path.exists(db_path)


@pytest.mark.parametrize("n", [1, 20, 1000], ids=["one", "rows-bound", "rows-from-sql"])
async def test_vectors_read_back_as_embedded_at_16k_pages(db_path: str, driver: str, n: int) -> None:
    memory = SQLiteMemory(db_path, driver=driver, embedder=bow_embedder(), page_size=16384)
    ann = MemoryScope(user_id="ann")
    texts = [f"ann note {i} zqann{i} about plums" for i in range(n)]
    ids = await memory.add([MemoryRecord(scope=ann, text=t) for t in texts])
    stored = memory.store.db.read(lambda conn: conn.execute("SELECT vec FROM vectors ORDER BY rid").fetchall())
    got = np.frombuffer(b"".join(row[0] for row in stored), dtype=np.float32).reshape(n, -1)
    want = bow_vectors(texts)
    want = want / np.maximum(np.linalg.norm(want, axis=1, keepdims=True), 1e-12)
    assert np.allclose(got, want, atol=1e-6)
    for i in {0, n // 2, n - 1}:
        hits = await memory.search(f"zqann{i}", scope=ann, k=1)
        assert hits and hits[0].record.id == ids[i]
    await memory.aclose()


def test_the_defaults_of_a_new_file_are_8_kib_pages_and_write_behind(db_path: str, driver: str) -> None:
    # Session 12's decision (docs/sqlite.md, "Page size" and "Write-behind"): stated here as numbers, so that
    # changing a default is a visible change of this test too.
    memory = SQLiteMemory(db_path, driver=driver)
    assert PAGE_SIZE == 8192 and memory.store.stats()["page_size"] == 8192
    assert memory.store.write_behind and memory.store._drainer is not None
    memory.close()
    assert header_page_size(db_path) == 8192
    plain = SQLiteMemory(db_path, driver=driver, write_behind=False)
    assert not plain.store.write_behind and plain.store._drainer is None
    plain.close()
