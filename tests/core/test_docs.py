"""The Python blocks of docs/concepts.md and docs/contract-suite.md run as shown."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)


def test_concepts_blocks_run_in_order() -> None:
    blocks = python_blocks("concepts.md")
    assert len(blocks) >= 8
    namespace: dict[str, object] = {"__name__": "concepts_md"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"concepts.md[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            pytest.fail(f"block {i} of concepts.md failed: {type(exc).__name__}: {exc}\n{block}")


def test_contract_suite_page_runs_as_a_store_owners_project(tmp_path: Path) -> None:
    files = {}
    for block in python_blocks("contract-suite.md"):
        first = block.splitlines()[0]
        assert re.fullmatch(r"# [\w]+\.py", first), f"every block names its file: {first!r}"
        files[first[2:]] = block
    assert {"my_store.py", "test_my_store.py", "conftest.py", "test_opt_out.py"} <= set(files)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=out.xml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    outcomes: dict[str, dict[str, int]] = {}
    for case in ElementTree.parse(tmp_path / "out.xml").iter("testcase"):
        cls = case.get("classname", "").split(".")[-1]
        kind = next((c.get("type") or c.tag for c in case), "passed")
        bucket = outcomes.setdefault(cls, {})
        bucket[kind] = bucket.get(kind, 0) + 1
    assert outcomes["TestMyStore"] == {"passed": 23, "pytest.skip": 1}
    assert outcomes["TestSettlingStore"] == {"passed": 23, "pytest.skip": 1}
    assert outcomes["TestStringlyStore"] == {"passed": 21, "pytest.skip": 1, "pytest.xfail": 2}
    assert "memoryport contract suite" in proc.stdout
    assert "✖ test_metadata_round_trips" in proc.stdout
