"""Writes ``schema6.db`` and ``schema6-vectors.db``: files of schema version 6, for the migration tests.

Made once with memoryport at main ``f539569`` (schema 6, before the file's
generation and record count moved from ``meta`` into ``generations``); kept
as they were written, so that the tests open files of the old code, not ones
rebuilt by the new. Run from the repository root at that commit::

    python tests/sqlite/data/make_schema6.py tests/sqlite/data
"""

from __future__ import annotations

import os
import sqlite3
import sys
from datetime import datetime, timezone

from memoryport import MemoryRecord, MemoryScope, MemoryUpdate
from memoryport.adapters.sqlite import SQLiteMemory

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.sqlite.support import bow_embedder

ANN, BEN = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
LATER = datetime(2100, 1, 1, tzinfo=timezone.utc)


def fill(memory: SQLiteMemory) -> None:  # type: ignore[valid-type]
    ids = memory.add_sync(
        [MemoryRecord(scope=ANN, text=f"ann note {i}: green tea with lemon number {i}") for i in range(12)]
        + [MemoryRecord(scope=BEN, text=f"ben note {i}: coffee by the river bank {i}") for i in range(9)]
        + [
            MemoryRecord(scope=ANN, text="ann keeps a piano in the hall", metadata={"room": "hall", "n": 3}),
            MemoryRecord(scope=BEN, text="ben waters the garden at dusk", expires_at=LATER),
        ]
    )
    memory.delete_sync(ids[:2], scope=ANN)  # words and rows removed, the generation moved on
    memory.update_sync([MemoryUpdate(id=ids[12], text="ann note 12 rewritten: jasmine tea")], scope=ANN)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="cy", session_id="s1"), text="cy drinks mint tea")])


def main(folder: str) -> None:
    for name, embedder in (("schema6.db", None), ("schema6-vectors.db", bow_embedder())):
        path = os.path.join(folder, name)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        # Python's own sqlite3 (SQLite 3.40 here): a file FTS5 secure-delete wrote is unreadable to older SQLite.
        memory = SQLiteMemory(path, embedder=embedder, driver="sqlite3")
        fill(memory)
        memory.close()
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = DELETE")  # one file, no -wal beside it
        conn.execute("VACUUM")
        conn.close()
        print(name, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main(sys.argv[1])
