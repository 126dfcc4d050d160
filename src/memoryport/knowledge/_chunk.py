"""Pack a document's blocks into chunks along its structure."""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import InvalidInput
from ._parse import Block

__all__ = ["Chunk", "ChunkOptions", "chunk_blocks"]

_SECTION_CHARS = 200


@dataclass(frozen=True)
class ChunkOptions:
    """How documents are cut into chunks.

    A heading always starts a new chunk; paragraphs (list items, code blocks,
    table rows) are packed whole into a chunk up to ``max_chars``; a heading with
    no text of its own travels with the next section's first chunk. Only a single
    block longer than ``max_chars`` is cut inside (and a PDF page ends a chunk): at a sentence end, else at a
    space, else hard, and consecutive pieces of that block share up to
    ``overlap`` characters (starting at a word). Chunks never overlap across
    paragraphs or headings, which are the document's own boundaries.

    Attributes:
        max_chars: the longest chunk, in characters (100 to ``Limits.max_text_chars``).
        overlap: characters repeated between pieces of one over-long block (``0 <= overlap <= max_chars // 2``).

    Example:
        >>> ChunkOptions(max_chars=800, overlap=80).max_chars
        800
    """

    max_chars: int = 1_500
    overlap: int = 150

    def __post_init__(self) -> None:
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars < 100:
            raise InvalidInput(f"max_chars is {self.max_chars!r}; it takes an int >= 100", field="max_chars")
        if (
            isinstance(self.overlap, bool)
            or not isinstance(self.overlap, int)
            or not 0 <= self.overlap <= self.max_chars // 2
        ):
            raise InvalidInput(
                f"overlap is {self.overlap!r}; it takes an int from 0 to max_chars // 2 ({self.max_chars // 2})",
                field="overlap",
            )


@dataclass(frozen=True)
class Chunk:
    """One chunk: its text, the heading path above it, where it starts, and its PDF page."""

    text: str
    section: str
    offset: int
    page: int | None


def _split_long(text: str, limit: int, overlap: int) -> list[tuple[str, int]]:
    """Pieces of ``text`` of at most ``limit`` characters with their offsets, sharing ``overlap``."""
    pieces: list[tuple[str, int]] = []
    start = 0
    n = len(text)
    while start < n:
        if n - start <= limit:
            pieces.append((text[start:].strip(), start))
            break
        window = text[start : start + limit]
        floor = limit // 2
        cut = -1
        for sep in ("\n", ". ", "! ", "? ", "; "):
            at = window.rfind(sep, floor)
            if at >= 0:
                cut = max(cut, at + len(sep))
        if cut < 0:
            at = max(window.rfind(" ", floor), window.rfind("\t", floor))
            cut = at + 1 if at >= 0 else limit
        pieces.append((window[:cut].strip(), start))
        nxt = start + cut
        if overlap:
            back = max(start + 1, nxt - overlap)
            space = text.find(" ", back, nxt)
            back = space + 1 if space >= 0 else back
            nxt = max(start + 1, min(nxt, back))
        start = nxt
        while start < n and text[start].isspace():
            start += 1
    return [(p, o) for p, o in pieces if p]


def chunk_blocks(blocks: list[Block], options: ChunkOptions) -> list[Chunk]:
    """The chunks of a document's blocks (see :class:`ChunkOptions` for the rules)."""
    limit = options.max_chars
    chunks: list[Chunk] = []
    stack: list[tuple[int, str]] = []
    parts: list[str] = []
    size = 0
    has_body = False
    section = ""
    offset = 0
    page: int | None = None

    def crumb() -> str:
        path = " > ".join(title for _, title in stack)
        return path if len(path) <= _SECTION_CHARS else path[: _SECTION_CHARS - 1] + "…"

    def flush() -> None:
        nonlocal size, has_body
        if parts:
            chunks.append(Chunk("\n\n".join(parts), section, offset, page))
        parts.clear()
        size = 0
        has_body = False

    def start(block: Block) -> None:
        nonlocal section, offset, page
        if not parts:
            section, offset, page = crumb(), block.offset, block.page

    for block in blocks:
        if block.level:
            if has_body:
                flush()
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, block.text))
            heading = "#" * block.level + " " + block.text
            if parts and size + 2 + len(heading) > limit:
                flush()
            start(block)
            section = crumb()
            parts.append(heading)
            size += len(heading) + (2 if size else 0)
            continue
        if has_body and block.page != page:
            flush()  # a chunk never spans PDF pages, so its page is exact
        need = len(block.text) + (2 if size else 0)
        if size + need <= limit:
            start(block)
            parts.append(block.text)
            size += need
            has_body = True
            continue
        if has_body:
            flush()
        pieces = _split_long(block.text, limit, options.overlap)
        first, first_at = pieces[0]
        if size and size + 2 + len(first) > limit:
            flush()
        for i, (piece, at) in enumerate(pieces):
            if i:
                flush()
            start(Block(piece, 0, block.offset + at, block.page))
            parts.append(piece)
            size += len(piece) + (2 if size else 0)
            has_body = True
        del first, first_at
    flush()
    return chunks
