"""Files that cannot be written, cannot be read, or were tampered with: typed errors naming the path.

Permissions are real: as root (which ignores file modes) the child process drops to
``nobody`` before touching the file; as any other user it runs as that user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory, UsageError
from memoryport.adapters.sqlite import load_driver

from .support import WORKER, bow_embedder, python

ANN = MemoryScope(user_id="ann")
ROOT = os.name == "posix" and os.geteuid() == 0

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@pytest.fixture
def folder() -> Iterator[str]:
    # Not under pytest's tmp_path: its parents are 0700, so `nobody` could not even reach the file.
    path = tempfile.mkdtemp(prefix="memoryport-perm-")
    yield path
    os.chmod(path, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def make_file(path: str, driver: str) -> None:
    memory = SQLiteMemory(path, driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="Ann drinks tea")])
    memory.close()


def as_other_user(path: str, driver: str) -> dict[str, object]:
    child = subprocess.run(
        [python(), str(WORKER), "as_other_user", path, driver], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    return dict(json.loads(child.stdout.strip().splitlines()[-1]))


def test_a_new_file_in_a_read_only_folder_is_a_usage_error(folder: str, driver: str) -> None:
    os.chmod(folder, 0o755 if ROOT else 0o555)
    path = os.path.join(folder, "memory.db")
    out = as_other_user(path, driver)
    assert str(out["open"]).startswith("UsageError: cannot create the SQLite file " + path), out
    assert "may not write in its folder" in str(out["open"])


@pytest.mark.parametrize("case", ["read-only folder", "read-only file", "read-only file and folder"])
def test_a_file_that_cannot_be_written_opens_for_reading(folder: str, driver: str, case: str) -> None:
    path = os.path.join(folder, "memory.db")
    make_file(path, driver)
    file_mode, folder_mode = {
        "read-only folder": (0o666, 0o755 if ROOT else 0o555),
        "read-only file": (0o444, 0o777 if ROOT else 0o755),
        "read-only file and folder": (0o444, 0o755 if ROOT else 0o555),
    }[case]
    os.chmod(path, file_mode)
    os.chmod(folder, folder_mode)
    out = as_other_user(path, driver)
    assert out["open"] == "ok", out
    assert out["search"] == ["Ann drinks tea"]
    for op in ("add", "delete"):
        message = str(out[op])
        assert message.startswith(f"UsageError: {path} is open read-only ("), out
        assert f"{op} needs write access" in message
    expected = "is not writable" if case == "read-only folder" else "the file is not writable by this user"
    assert expected in str(out["add"])


def test_a_file_of_another_user_that_cannot_be_read_is_a_usage_error(folder: str, driver: str) -> None:
    path = os.path.join(folder, "memory.db")
    make_file(path, driver)
    os.chmod(path, 0o600 if ROOT else 0o000)
    os.chmod(folder, 0o755)
    out = as_other_user(path, driver)
    assert out["open"] == f"UsageError: cannot read the SQLite file {path}: permission denied (owned by another user?)"


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("DELETE FROM meta WHERE key = 'schema_version'", "meta.schema_version is missing"),
        ("UPDATE meta SET value = NULL WHERE key = 'schema_version'", "meta.schema_version is missing"),
        ("UPDATE meta SET value = 'one' WHERE key = 'schema_version'", "meta.schema_version is 'one', not an integer"),
        ("UPDATE meta SET value = 1.5 WHERE key = 'schema_version'", "meta.schema_version is '1.5', not an integer"),
        ("UPDATE meta SET value = x'00ff' WHERE key = 'schema_version'", "meta.schema_version is"),
        ("UPDATE meta SET value = 'lucene' WHERE key = 'keyword_index'", "meta.keyword_index is 'lucene'"),
        ("UPDATE meta SET value = 'wide' WHERE key = 'embedder_dim'", "meta.embedder_dim is 'wide', not an integer"),
    ],
)
def test_a_tampered_meta_table_is_a_usage_error_naming_the_file(
    db_path: str, driver: str, statement: str, says: str
) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text="Ann drinks tea")])
    memory.close()
    conn = load_driver(driver)[1].connect(db_path)
    conn.execute(statement)
    conn.commit()
    conn.close()
    with pytest.raises(UsageError) as caught:
        SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    assert str(caught.value).startswith(db_path + ": ")
    assert says in str(caught.value)


def test_a_second_sqlite_library_on_an_open_file_is_a_usage_error(folder: str) -> None:
    # Two copies of SQLite in one process do not see each other's POSIX locks:
    # the second re-initialises the -shm index the first has mapped (SIGBUS).
    from memoryport.adapters.sqlite import available_drivers

    others = [name for name in available_drivers() if name != "sqlite3"]
    if not others:
        pytest.skip("only Python's own sqlite3 is installed: pip install pysqlite3-binary")
    path = os.path.join(folder, "two.db")
    first = SQLiteMemory(path, driver="sqlite3")
    first.add_sync([MemoryRecord(scope=MemoryScope(user_id="u"), text="kept")])
    with pytest.raises(UsageError, match="another SQLite library"):
        SQLiteMemory(path, driver=others[0])
    same = SQLiteMemory(path, driver="sqlite3")  # the same library: shared caches, no conflict
    assert same.count_sync(MemoryScope(user_id="u")) == 1
    same.close()
    first.close()
    second = SQLiteMemory(path, driver=others[0])  # once the first library let go, the other may open it
    assert [r.text for r in second.export_sync(MemoryScope(user_id="u"))] == ["kept"]
    second.close()


@pytest.mark.parametrize("case", ["read-only folder", "read-only file"])
def test_a_read_only_opener_sees_a_killed_writers_logged_add_once_a_writer_opened(
    folder: str, driver: str, case: str
) -> None:
    # The default store logs small adds (write_behind): killed before its drain, the writer leaves the record
    # in the log only. A read-only opener cannot drain: it sees nothing of it (and fails in nothing) until a
    # process that can write opens the file (docs/sqlite.md, "Write-behind").
    path = os.path.join(folder, "memory.db")
    make_file(path, driver)
    child = subprocess.run(
        [python(), str(WORKER), "log_and_die", path, driver, "ann", "Ann drinks more tea", "none", "normal"],
        capture_output=True,
        text=True,
    )
    assert child.returncode == -9, child.stderr
    file_mode, folder_mode = {
        "read-only folder": (0o666, 0o755 if ROOT else 0o555),
        "read-only file": (0o444, 0o777 if ROOT else 0o755),
    }[case]
    for suffix in ("", "-wal", "-shm"):  # the killed writer left its -wal and -shm (0600, its own)
        if os.path.exists(path + suffix):
            os.chmod(path + suffix, file_mode if suffix == "" else 0o644)
    os.chmod(folder, folder_mode)
    out = as_other_user(path, driver)
    assert out["open"] == "ok", out
    assert out["search"] == ["Ann drinks tea"], out
    os.chmod(folder, 0o700)
    writer = SQLiteMemory(path, driver=driver)  # drains the log at open
    writer.close()
    os.chmod(folder, folder_mode)
    os.chmod(path, file_mode)
    out = as_other_user(path, driver)
    assert out["open"] == "ok", out
    assert sorted(out["search"]) == ["Ann drinks more tea", "Ann drinks tea"], out  # type: ignore[arg-type]
