"""docs/postgres.md's Python blocks need a server, so the docs test skips them: they run here, on the test server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .support import Server

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "postgres.md"


def test_the_pages_examples_run(pg: Server, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "docs"))
    try:
        from blocks import parse
    finally:
        sys.path.pop(0)
    blocks = [b for b in parse(PAGE) if b.kind == "skip" and "test_postgres_docs.py" in (b.reason or "")]
    assert len(blocks) >= 2
    outputs = []
    for block in blocks:
        proc = subprocess.run(
            [sys.executable, "-c", block.code],
            cwd=tmp_path,
            env={**os.environ, "DATABASE_URL": pg.app_dsn},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"docs/postgres.md:{block.line}\n{proc.stderr[-3000:]}"
        outputs.append(proc.stdout)
    assert outputs[0].splitlines() == ["['Ann drinks green tea']", "1"]
    assert outputs[1].splitlines() == ["1"]
