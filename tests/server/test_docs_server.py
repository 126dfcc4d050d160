"""docs/server.md's Python client example, run against a live server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import parse

from .support import live_server

PAGE = Path(__file__).parents[2] / "docs" / "server.md"


def test_the_python_client_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [block] = [b for b in parse(PAGE) if b.kind == "skip" and "import httpx" in b.code]
    with live_server(tmp_path) as live:
        code = block.code.replace('"http://127.0.0.1:8787"', repr(live.url)).replace(
            '"mpk_..."', repr(live.secrets["ann"])
        )
        assert code != block.code
        exec(compile(code, str(PAGE), "exec"), {"__name__": "docs_server"})
    assert capsys.readouterr().out.strip() == "Ann drinks green tea"
