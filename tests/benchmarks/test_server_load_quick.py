"""The server load test runs end to end at a tiny size (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import server_load
from memoryport import MemoryRecord, MemoryScope, SQLiteMemory


def test_quick_run_has_no_errors_and_no_lost_writes(tmp_path: Path) -> None:
    out = tmp_path / "load.md"
    text = server_load.main(
        ["--clients", "3", "--requests", "60", "--seconds", "60", "--per-user", "5", "--out", str(out)]
    )
    assert out.read_text() == text
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    body = {r[0].strip(): [c.strip() for c in r[1:]] for r in rows[1:]}
    assert set(body) == {"HTTP (memoryport serve)", "in-process (GuardedMemory)"}
    for cells in body.values():
        requests, _, _, _, errors, lost = cells
        assert (requests, errors, lost) == ("60", "0", "0")


def test_lost_writes_are_counted(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    memory = SQLiteMemory(db)
    [kept] = memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="user0"), text="kept")])
    memory.close()
    tally = server_load.Tally(written={"user0": [kept, "f" * 32], "user1": ["e" * 32]})
    assert server_load.lost_writes(db, tally) == 2
