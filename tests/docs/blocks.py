"""Find the Python examples of a docs page, and how each one is to be run.

The rules (also stated in docs/contributing-docs.md):

* Every fenced block whose language is ``python`` or ``py`` (any indentation,
  inside admonitions, tabs or list items too) is an example.
* A block whose first line is exactly ``# <name>.py`` is a **file**: it is
  written to that name in the page's working directory instead of being run
  where it stands. Later blocks can import it. Files named ``test_*.py`` (with
  any ``conftest.py``) are run by pytest in that directory after the page's
  blocks; every other file is run as ``__main__`` after the page's blocks.
* Any other block is **run**, in order, in one namespace per page.
* ``<!-- skip: reason -->`` on the line right before a block (blank lines
  allowed) leaves that block out. The reason is required, and a skip marker
  that is not followed by a Python block is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "DocsError", "parse"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_SKIP = re.compile(r"^\s*<!--\s*skip\b(?P<rest>.*?)-->\s*$")
_FILE = re.compile(r"^# (?P<name>[A-Za-z_][\w-]*(?:/[A-Za-z_][\w-]*)*\.py)\s*$")
_LANGUAGES = {"python", "py"}


class DocsError(ValueError):
    """A page breaks the rules above (a bad marker, an unclosed fence)."""


@dataclass(frozen=True)
class Block:
    """One Python example.

    Attributes:
        kind: ``"run"``, ``"file"`` or ``"skip"``.
        code: the dedented source.
        line: the line of the page on which the code starts (1-based).
        filename: the file name for ``kind == "file"``.
        reason: why it is skipped, for ``kind == "skip"``.
    """

    kind: str
    code: str
    line: int
    filename: str | None = None
    reason: str | None = None


def parse(path: Path) -> list[Block]:
    """The Python blocks of the page at ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending_skip: tuple[int, str] | None = None  # (line, reason) of a marker awaiting its block
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _SKIP.match(line)
        if marker:
            if pending_skip is not None:
                raise DocsError(f"{path.name}:{pending_skip[0]}: skip marker not followed by a Python block")
            reason = marker["rest"].strip()
            if not reason.startswith(":") or not reason[1:].strip():
                raise DocsError(f"{path.name}:{i + 1}: a skip marker needs a reason: <!-- skip: why -->")
            pending_skip = (i + 1, reason[1:].strip())
            i += 1
            continue
        opening = _FENCE.match(line)
        if not opening:
            if line.strip() and pending_skip is not None:
                raise DocsError(f"{path.name}:{pending_skip[0]}: skip marker not followed by a Python block")
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        language = opening["info"].strip().split(" ")[0].strip("{}.").lower()
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise DocsError(f"{path.name}:{i + 1}: a code fence is never closed")
        if language in _LANGUAGES:
            code = "\n".join(body) + "\n"
            first = body[0] if body else ""
            named = _FILE.match(first)
            if pending_skip is not None:
                blocks.append(Block("skip", code, i + 2, reason=pending_skip[1]))
            elif named:
                blocks.append(Block("file", code, i + 2, filename=named["name"]))
            else:
                blocks.append(Block("run", code, i + 2))
        elif pending_skip is not None:
            raise DocsError(f"{path.name}:{pending_skip[0]}: skip marker before a {language or 'plain'} block")
        pending_skip = None
        i = j + 1
    if pending_skip is not None:
        raise DocsError(f"{path.name}:{pending_skip[0]}: skip marker not followed by a Python block")
    return blocks
