"""Every Python example in docs/ (and the README) runs, page by page, so the docs cannot rot.

For each ``docs/**/*.md`` page and README.md, ``run_page.py`` runs its ``python`` blocks in a
fresh process, in order, in one namespace, in a temporary working directory
(with ``HOME`` pointing there too, so nothing lands in the real home). Blocks
whose first line is ``# <name>.py`` are files: written there, and if the page
writes ``test_*.py`` files, pytest then runs them in that directory and must
pass. ``<!-- skip: reason -->`` before a block leaves it out; the reason is
required. Async examples end with ``asyncio.run(main())``: top-level ``await``
is not valid Python and fails with a hint. The rules in full:
docs/contributing-docs.md (and tests/docs/blocks.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from .blocks import DocsError, parse

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUNNER = Path(__file__).resolve().parent / "run_page.py"
# The README is the first page most people read: its example runs too.
PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]

# Pages whose file blocks form a pytest project: what that run must report,
# per test class (a count per outcome), and lines its output must contain.
PYTEST_OUTCOMES: dict[str, dict[str, dict[str, int]]] = {
    "contract-suite.md": {
        "TestMyStore": {"passed": 36, "pytest.skip": 3},
        "TestSettlingStore": {"passed": 36, "pytest.skip": 3},
        "TestStringlyStore": {"passed": 33, "pytest.skip": 3, "pytest.xfail": 3},
    },
    "write-an-adapter.md": {
        "TestJsonlStore": {"passed": 36, "pytest.skip": 3},
    },
}
# Modules that pages use but that reach main on other branches. Until a module is
# in the tree, its pages are skipped, naming it; once it is, they run. Remove an
# entry when its module has landed (it must not hide a page for good).
PAGE_NEEDS: dict[str, list[str]] = {}
PYTEST_OUTPUT: dict[str, list[str]] = {
    "contract-suite.md": ["memoryport contract suite", "✖ test_metadata_round_trips"],
    "write-an-adapter.md": ["memoryport contract suite", "(backend 'jsonl')"],
}


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Temporary folders a page makes (tempfile.mkdtemp) land under pytest's tmp_path,
    # which pytest prunes, instead of piling up in the system's /tmp run after run.
    scratch = home / "tmp"
    scratch.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(scratch),
        MEM0_TELEMETRY="False",
        MEM0_DIR=str(home / ".mem0"),
        GRAPHITI_TELEMETRY_ENABLED="false",
        HF_HUB_OFFLINE="1",
        LANGSMITH_TRACING="false",
        OPENAI_AGENTS_DISABLE_TRACING="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("PYTHONPATH", None)
    return env


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _outcomes(junit: Path) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        cls = case.get("classname", "").split(".")[-1]
        kind = next((c.get("type") or c.tag for c in case if c.tag != "properties"), "passed")
        bucket = found.setdefault(cls, {})
        bucket[kind] = bucket.get(kind, 0) + 1
    return found


def _name(page: Path) -> str:
    return str(page.relative_to(DOCS)) if DOCS in page.parents else page.name


@pytest.mark.parametrize("page", PAGES, ids=[_name(p) for p in PAGES])
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    name = _name(page)
    try:
        blocks = parse(page)
    except DocsError as exc:
        pytest.fail(str(exc))
    if not any(b.kind != "skip" for b in blocks):
        assert name not in PYTEST_OUTCOMES, f"{name} was expected to hold a pytest project"
        return
    missing = [m for m in PAGE_NEEDS.get(name, []) if not _present(m)]
    if missing:
        pytest.skip(f"{name} needs {', '.join(missing)}, not in this tree yet")
    work, home = tmp_path / "work", tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(page), str(work)],
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(home),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"{name}: an example failed\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["run"] + summary["file"] == sum(b.kind != "skip" for b in blocks)

    test_files = [b for b in blocks if b.kind == "file" and Path(b.filename or "").name.startswith("test_")]
    if not test_files:
        assert name not in PYTEST_OUTCOMES, f"{name} was expected to hold test files"
        return
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit.xml"],
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(home),
        cwd=work,
    )
    assert run.returncode == 0, f"{name}: the page's tests failed\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    if name in PYTEST_OUTCOMES:
        assert _outcomes(work / "junit.xml") == PYTEST_OUTCOMES[name]
    for expected in PYTEST_OUTPUT.get(name, []):
        assert expected in run.stdout, f"{name}: {expected!r} missing from the pytest output"


@pytest.mark.parametrize("name", ["quickstart.md", "README.md"])
def test_first_pages_run_twice_in_one_folder(name: str, tmp_path: Path) -> None:
    """A newcomer runs the quickstart again in the same folder: it must work the second time too."""
    page = ROOT / name if name == "README.md" else DOCS / name
    work, home = tmp_path / "work", tmp_path / "home"
    home.mkdir()
    for attempt in (1, 2):
        proc = subprocess.run(
            [sys.executable, str(RUNNER), str(page), str(work)],
            capture_output=True,
            text=True,
            timeout=240,
            env=_env(home),
            cwd=tmp_path,
        )
        assert proc.returncode == 0, f"{name}, run {attempt}\n{proc.stderr[-4000:]}"


def test_pages_with_expectations_exist() -> None:
    # A renamed page must not silently drop its checks.
    names = {_name(p) for p in PAGES}
    for name in {*PYTEST_OUTCOMES, *PYTEST_OUTPUT, *PAGE_NEEDS}:
        assert name in names, name
