"""Read a document into blocks along its own structure: headings and paragraphs.

Each reader returns a list of :class:`Block`: a heading (with its level) or a
paragraph-like block (a paragraph, a list item, a code block, a table row), with
the character offset where it starts in the file's extracted text and, for PDF,
its page. Chunking (``_chunk.py``) packs blocks into records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from .._extras import require

__all__ = ["SUFFIXES", "Block", "DocumentError", "read_document"]

SUFFIXES: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
"""File suffix (lower case) -> format. Other files are not imported (and not reported)."""


class DocumentError(Exception):
    """A file that cannot be read as its format (undecodable bytes, a corrupt PDF, ...)."""


@dataclass(frozen=True)
class Block:
    """One structural unit of a document.

    ``level`` is 1-6 for a heading and 0 for any other block; ``offset`` is the
    character offset of the block in the file's extracted text; ``page`` the
    1-based PDF page (None for other formats).
    """

    text: str
    level: int = 0
    offset: int = 0
    page: int | None = None


def _decode(data: bytes, path: Path) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})") from None
    if "\x00" in text:
        raise DocumentError("contains NUL characters (a binary file?)")
    return text.replace("\r\n", "\n").replace("\r", "\n")


_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+")


def _paragraphs(text: str, base: int = 0, page: int | None = None) -> list[Block]:
    """Blank-line separated paragraphs of plain text, whitespace inside kept."""
    blocks: list[Block] = []
    for m in re.finditer(r"\S(?:.*?\S)?(?=\n[ \t]*\n|\s*\Z)", text, re.S):
        blocks.append(Block(m.group(0), 0, base + m.start(), page))
    return blocks


def read_markdown(text: str) -> list[Block]:
    """Headings (ATX ``#`` and setext underlines), paragraphs, list items, fenced code kept whole."""
    blocks: list[Block] = []
    lines = text.split("\n")
    offsets: list[int] = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    para: list[str] = []
    para_start = 0

    def flush() -> None:
        if para:
            body = "\n".join(para).strip()
            if body:
                blocks.append(Block(body, 0, para_start))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker = fence.group(1)
            start = i
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(marker[0] * len(marker)):
                i += 1
            body = "\n".join(lines[start : min(i + 1, len(lines))]).strip()
            blocks.append(Block(body, 0, offsets[start]))
            i += 1
            continue
        atx = _ATX.match(line)
        if atx:
            flush()
            title = (atx.group(2) or "").strip()
            if title:
                blocks.append(Block(title, len(atx.group(1)), offsets[i]))
            i += 1
            continue
        if para and len(para) == 1 and _SETEXT.match(line) and not _ITEM.match(para[0]):
            title = para[0].strip()
            para.clear()
            blocks.append(Block(title, 1 if line.strip()[0] == "=" else 2, para_start))
            i += 1
            continue
        if not line.strip():
            flush()
        elif _ITEM.match(line) and para:
            flush()
            para_start = offsets[i]
            para.append(line)
        else:
            if not para:
                para_start = offsets[i]
            para.append(line)
        i += 1
    flush()
    return blocks


_BLOCK_TAGS = frozenset(
    [
        "p",
        "div",
        "li",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "pre",
        "blockquote",
        "table",
        "tr",
        "td",
        "th",
        "section",
        "article",
        "header",
        "footer",
        "aside",
        "nav",
        "main",
        "figure",
        "figcaption",
        "br",
        "hr",
        "form",
        "fieldset",
        "address",
        "details",
        "summary",
    ]
)
_SKIP_TAGS = frozenset({"script", "style", "template", "noscript", "head", "svg"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}


class _HTMLBlocks(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._buf: list[str] = []
        self._level = 0
        self._skip = 0
        self._pre = 0
        self._pos = 0

    def _flush(self) -> None:
        raw = "".join(self._buf)
        self._buf.clear()
        text = raw.strip("\n") if self._pre else " ".join(raw.split())
        if text.strip():
            self.blocks.append(Block(text, self._level, self._pos))
            self._pos += len(text) + 2

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag in _HEADINGS:
            self._flush()
            self._level = _HEADINGS[tag]
        elif tag in _BLOCK_TAGS:
            self._flush()
            if tag == "pre":
                self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in _HEADINGS:
            self._flush()
            self._level = 0
        elif tag in _BLOCK_TAGS:
            self._flush()
            if tag == "pre":
                self._pre = max(0, self._pre - 1)

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._buf.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def read_html(text: str) -> list[Block]:
    """Headings ``h1``-``h6`` and the text of block elements; scripts and styles skipped."""
    parser = _HTMLBlocks()
    parser.feed(text)
    parser.close()
    return parser.blocks


def read_pdf(data: bytes) -> list[Block]:
    """The text of each page (pypdf), split into paragraphs; the page recorded on each block."""
    pypdf = require("pypdf", extra="pdf", feature="Importing PDF files")
    import io

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise DocumentError("the PDF is encrypted")
        blocks: list[Block] = []
        base = 0
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").replace("\r\n", "\n").replace("\x00", "")
            blocks.extend(_paragraphs(text, base, number))
            base += len(text) + 2
    except DocumentError:
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, ValueError, KeyError...) on bad files
        raise DocumentError(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    return blocks


def read_document(path: Path, data: bytes) -> list[Block]:
    """The blocks of ``path`` (whose bytes are ``data``), by its suffix; DocumentError if unreadable."""
    kind = SUFFIXES[path.suffix.lower()]
    if kind == "pdf":
        return read_pdf(data)
    text = _decode(data, path)
    if kind == "markdown":
        return read_markdown(text)
    if kind == "html":
        return read_html(text)
    return _paragraphs(text)
