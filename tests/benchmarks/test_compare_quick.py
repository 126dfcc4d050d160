"""The comparison harness runs end to end at tiny sizes (no timing is asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from benchmarks import compare

SIZES = (100, 300)


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.anyio
async def test_quick_run_covers_every_system_and_size(tmp_path: Path) -> None:
    out = tmp_path / "compare.md"
    text = await compare.main(
        ["--quick", "--dir", str(tmp_path / "scratch"), "--out", str(out), "--plots", str(tmp_path)]
    )
    assert out.read_text() == text
    for heading in ("Bulk load", "Add one record per call", "Search, k=10"):
        assert f"### {heading}" in text
    ran = ["memoryport", *(label for label, (_, module, _) in compare.OPTIONAL.items() if installed(module))]
    searched = [f"memoryport {mode}" for mode in compare.MODES] + ran[1:]
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]) for line in text.splitlines() if line.startswith("| ")}
    for n in SIZES:
        for label in {*ran, *searched}:
            assert (label, f"{n:,}") in rows, (label, n)
    for label, (_, module, _) in compare.OPTIONAL.items():
        if not installed(module):
            assert f"- {label}: skipped (" in text
    if installed("mem0"):
        assert "### Goal: memoryport ≥ 10x faster than mem0 local" in text
    if installed("matplotlib"):
        assert (tmp_path / "compare-search.png").stat().st_size > 0
        assert (tmp_path / "compare-add.png").stat().st_size > 0


def test_a_missing_package_skips_its_system_and_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now raises ImportError
    ok, skipped = compare.available(tmp_path)
    assert compare.Faiss.label not in ok
    assert "memoryport[bench]" in skipped[compare.Faiss.label]
