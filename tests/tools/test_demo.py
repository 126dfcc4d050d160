"""`memoryport demo` runs offline and shows every step."""

from __future__ import annotations

import sys

import pytest

from memoryport.cli import main


def demo_output(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["demo", "--no-color"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out


def check_story(out: str) -> None:
    for heading in ["Ann, chat 1", "Ben, chat 1", "Ann, chat 2", "Isolation", "Forget", "Export", "Erase"]:
        assert f"── {heading}" in out
    assert out.count('"remembered": true') == 3
    assert "error refused: the text contains a payment card number" in out
    assert "error invalid_arguments: unexpected argument 'user_id'" in out
    assert out.count('"forgotten": false') == 2 and out.count('"forgotten": true') == 1
    assert "Ann is vegetarian" in out.split("── Export")[1]
    assert "Lisbon" not in out.split("── Export")[1].split("── Erase")[0]
    assert "erased 1 memory of user=ben" in out
    assert "4111" not in out.split("── Ann, chat 2")[1]


def test_demo_on_sqlite(capsys: pytest.CaptureFixture[str]) -> None:
    out = demo_output(capsys)
    assert "memory: SQLite file" in out
    assert "search: keyword search only" in out or "search: hybrid search" in out
    assert "$ memoryport erase --db" in out
    check_story(out)


def test_demo_without_the_sqlite_backend_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes the import raise ImportError, as if the backend were missing.
    monkeypatch.setitem(sys.modules, "memoryport.adapters.sqlite", None)
    out = demo_output(capsys)
    assert "InMemoryStore (SQLite backend not installed)" in out
    check_story(out)
