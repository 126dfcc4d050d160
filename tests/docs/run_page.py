"""Run the Python examples of one docs page: ``python run_page.py PAGE WORKDIR``.

Run by tests/docs/test_examples.py in a fresh process per page, so that what a
page sets up (an OpenTelemetry SDK provider, logging, modules it writes and
imports) cannot leak into another page or into the test process. The working
directory is WORKDIR, which is also first on ``sys.path`` so blocks can import
the page's file blocks. Tracebacks name the page and its line numbers.

Exit status 0 when every block ran; 1 with the failing block's traceback.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from blocks import Block, parse

sys.path.pop(0)

_AWAIT_HINT = (
    "top-level await is not valid Python: put the code in `async def main(): ...` "
    "and end the block with `asyncio.run(main())`"
)


def _fail(page: Path, block: Block, exc: BaseException) -> int:
    print(f"\n{page}: the block at line {block.line} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if isinstance(exc, SyntaxError) and "await" in str(exc.msg):
        print(_AWAIT_HINT, file=sys.stderr)
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    return 1


def main(page_arg: str, workdir_arg: str) -> int:
    page = Path(page_arg).resolve()
    workdir = Path(workdir_arg).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    blocks = parse(page)
    namespace: dict[str, object] = {"__name__": "__main__"}
    files: list[tuple[Block, Path]] = []
    for block in blocks:
        if block.kind == "skip":
            continue
        if block.kind == "file":
            assert block.filename is not None
            target = workdir / block.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code, encoding="utf-8")
            files.append((block, target))
            continue
        # Padding keeps the page's line numbers, and the page's path as the file
        # name lets tracebacks quote the failing line of the page itself.
        source = "\n" * (block.line - 1) + block.code
        try:
            exec(compile(source, str(page), "exec"), namespace)
        except BaseException as exc:
            return _fail(page, block, exc)
    for block, target in files:
        if target.name.startswith("test_") or target.name == "conftest.py":
            continue  # pytest runs these; see test_examples.py
        try:
            runpy.run_path(str(target), run_name="__main__")
        except BaseException as exc:
            return _fail(page, block, exc)
    counts = {kind: sum(b.kind == kind for b in blocks) for kind in ("run", "file", "skip")}
    print(json.dumps({"page": str(page), **counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
