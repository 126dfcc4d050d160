"""The docs example runner itself: parsing rules, markers, failures that point at the page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .blocks import DocsError, parse

RUNNER = Path(__file__).resolve().parent / "run_page.py"


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


def run(path: Path, work: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RUNNER), str(path), str(work)], capture_output=True, text=True, timeout=60
    )


def test_kinds_lines_and_indented_blocks(tmp_path: Path) -> None:
    blocks = parse(
        page(
            tmp_path,
            "# T\n\n```python\nx = 1\n```\n\n```py\n# helper.py\nY = 2\n```\n\n"
            '!!! note\n    ```python title="in an admonition"\n    z = x + 1\n    ```\n\n'
            "<!-- skip: needs OPENAI_API_KEY -->\n\n```python\nimport openai\n```\n\n"
            "```bash\necho not python\n```\n\n````markdown\n```python\nnot = a block\n```\n````\n",
        )
    )
    assert [(b.kind, b.line) for b in blocks] == [("run", 4), ("file", 8), ("run", 14), ("skip", 20)]
    assert blocks[1].filename == "helper.py"
    assert blocks[2].code == "z = x + 1\n"
    assert blocks[3].reason == "needs OPENAI_API_KEY"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- skip -->\n```python\nx = 1\n```\n", "needs a reason"),
        ("<!-- skip: -->\n```python\nx = 1\n```\n", "needs a reason"),
        ("<!-- skip: later -->\nSome prose.\n\n```python\nx = 1\n```\n", "not followed by a Python block"),
        ("<!-- skip: shell -->\n```bash\nls\n```\n", "before a bash block"),
        ("text\n<!-- skip: nothing after -->\n", "not followed by a Python block"),
        ("```python\nx = 1\n", "never closed"),
    ],
)
def test_bad_pages_are_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DocsError, match=message):
        parse(page(tmp_path, text))


def test_blocks_share_a_namespace_and_import_file_blocks(tmp_path: Path) -> None:
    path = page(
        tmp_path,
        "```python\n# greet.py\ndef hello():\n    return 'hi'\n```\n\n"
        "```python\nfrom greet import hello\nword = hello()\n```\n\n"
        "```python\nimport os\nassert word == 'hi'\nopen('out.txt', 'w').write(word)\n```\n",
    )
    proc = run(path, tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "work" / "out.txt").read_text() == "hi"
    assert '"run": 2, "file": 1, "skip": 0' in proc.stdout


def test_a_failing_block_names_the_page_line(tmp_path: Path) -> None:
    path = page(tmp_path, "# T\n\n```python\nx = 1\n```\n\nProse.\n\n```python\n\nassert x == 2, 'x is not 2'\n```\n")
    proc = run(path, tmp_path / "work")
    assert proc.returncode == 1
    assert "the block at line 10 failed: AssertionError: x is not 2" in proc.stderr
    assert 'line 11' in proc.stderr  # the traceback points at the page's own line


def test_top_level_await_fails_with_the_hint(tmp_path: Path) -> None:
    path = page(tmp_path, "```python\nimport asyncio\nawait asyncio.sleep(0)\n```\n")
    proc = run(path, tmp_path / "work")
    assert proc.returncode == 1
    assert "asyncio.run(main())" in proc.stderr


def test_a_file_block_that_fails_when_run_fails_the_page(tmp_path: Path) -> None:
    path = page(tmp_path, "```python\n# app.py\nraise RuntimeError('app broke')\n```\n")
    proc = run(path, tmp_path / "work")
    assert proc.returncode == 1 and "app broke" in proc.stderr
