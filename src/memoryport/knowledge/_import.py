"""Import folders of documents as knowledge records, re-indexing only what changed."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import InvalidInput, UnsupportedCapability, UsageError
from .._guard import GuardedMemory
from .._port import Capability
from .._records import MemoryRecord, MemoryScope, MemoryUpdate, utcnow
from ._chunk import Chunk, ChunkOptions, chunk_blocks
from ._parse import SUFFIXES, DocumentError, read_document

__all__ = ["KNOWLEDGE_KIND", "ImportReport", "import_knowledge", "import_knowledge_sync"]

KNOWLEDGE_KIND = "knowledge"
"""The ``kind`` metadata of every imported chunk: ``filters={"kind": "knowledge"}`` recalls only
knowledge, ``filters={"kind": {"$ne": "knowledge"}}`` leaves it out."""

_NEEDED = (Capability.METADATA, Capability.EXPORT, Capability.DELETE)

Progress = Callable[[int, int, str], None]
"""``progress(done, total, path)``: called after each file (``path`` relative to the root)."""


@dataclass
class ImportReport:
    """What an import did, file by file (paths relative to the imported root, with ``/``).

    Attributes:
        added: files imported for the first time.
        changed: files whose SHA-256 changed (or whose chunks were incomplete), re-indexed.
        removed: files gone from the folder whose chunks were deleted.
        unchanged: files left untouched (same SHA-256, all chunks present).
        empty: files with no text (e.g. a scanned PDF); their old chunks, if any, were deleted.
        failed: ``(path, reason)`` for files that could not be read; skipped, their old chunks kept.
        chunks_added: new records written (each embedded once by a store with an embedder).
        chunks_updated: records of changed files whose text was unchanged: metadata updated, not re-embedded.
        chunks_removed: records deleted (removed files and vanished chunks of changed files).
        seconds: wall time of the import.

    Example:
        >>> ImportReport(added=["a.md"], chunks_added=3).files_touched
        1
    """

    collection: str = ""
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_removed: int = 0
    seconds: float = 0.0

    @property
    def files_touched(self) -> int:
        """Files whose records were written or deleted."""
        return len(self.added) + len(self.changed) + len(self.removed)

    def summary(self) -> str:
        """One line: the counts of files and chunks."""
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, "
            f"{len(self.unchanged)} unchanged, {len(self.empty)} empty, {len(self.failed)} failed files; "
            f"{self.chunks_added} chunks added, {self.chunks_updated} updated, {self.chunks_removed} removed "
            f"in {self.seconds:.2f}s"
        )


@dataclass
class _Existing:
    ids: list[str] = field(default_factory=list)
    texts: dict[str, list[str]] = field(default_factory=dict)  # text -> ids
    hashes: set[str] = field(default_factory=set)
    totals: set[int] = field(default_factory=set)

    def complete(self, sha: str) -> bool:
        return self.hashes == {sha} and self.totals == {len(self.ids)}


def _walk(root: Path) -> list[Path]:
    """Files under ``root`` with a known suffix; hidden files/folders and symlinks are skipped."""
    found: list[Path] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir():
                stack.append(entry)
            elif entry.is_file() and entry.suffix.lower() in SUFFIXES:
                found.append(entry)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _files(root: Path) -> tuple[Path, list[Path], str | None]:
    """The folder, the files to import, and the one file's name when ``root`` is a file."""
    root = root.expanduser()
    if not root.exists():
        raise InvalidInput(f"path {str(root)!r} does not exist", field="path")
    root = root.resolve()
    if root.is_file():
        if root.suffix.lower() not in SUFFIXES:
            raise InvalidInput(
                f"path {root.name!r} is not a known document ({', '.join(sorted(SUFFIXES))})", field="path"
            )
        return root.parent, [root], root.name
    if root.is_dir():
        return root, _walk(root), None
    raise InvalidInput(f"path {str(root)!r} is neither a file nor a folder", field="path")


def _sha(file: Path) -> tuple[bytes, str]:
    data = file.read_bytes()
    return data, hashlib.sha256(data).hexdigest()


def _chunks(file: Path, data: bytes, options: ChunkOptions) -> list[Chunk]:
    return chunk_blocks(read_document(file, data), options)


def _metadata(collection: str, source: str, sha: str, fmt: str, index: int, total: int, chunk: Chunk) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "kind": KNOWLEDGE_KIND,
        "collection": collection,
        "source": source,
        "sha256": sha,
        "format": fmt,
        "chunk": index,
        "chunks": total,
        "offset": chunk.offset,
    }
    if chunk.section:
        meta["section"] = chunk.section
    if chunk.page is not None:
        meta["page"] = chunk.page
    return meta


async def import_knowledge(
    memory: GuardedMemory,
    path: str | Path,
    *,
    scope: MemoryScope,
    collection: str | None = None,
    options: ChunkOptions | None = None,
    progress: Progress | None = None,
    batch_size: int = 256,
) -> ImportReport:
    """Import a folder (or one file) of Markdown, text, HTML and PDF documents into ``scope``.

    Each chunk becomes an ordinary record in ``scope`` with metadata ``kind="knowledge"``,
    ``collection``, ``source`` (the path relative to the folder), ``chunk``/``chunks``
    (its position), ``offset`` (characters into the file's text), ``page`` (PDF),
    ``section`` (the headings above it), ``format`` and ``sha256`` (of the file).
    Running it again on the same folder and collection mirrors the folder:
    files whose SHA-256 changed are re-indexed (chunks whose text did not change
    keep their record and are not re-embedded), chunks of deleted files are
    deleted, unchanged files are not touched. A file that cannot be read is
    reported in ``failed`` and skipped; its earlier chunks stay.

    The scope comes from the host, never from the files. Needs a store with
    ``metadata``, ``export`` and ``delete`` (and uses ``update`` where present);
    others raise :class:`~memoryport.UnsupportedCapability` before anything is read.

    Args:
        memory: the guarded memory to write to.
        path: a folder (walked recursively; hidden entries and symlinks skipped) or one file.
        scope: whose knowledge this is; chunks are stored with exactly this scope.
        collection: names the imported set (default: the folder's name); re-importing
            a collection deletes chunks of files no longer in the folder, so give two
            folders of the same name different collections.
        options: chunk sizes (:class:`ChunkOptions`).
        progress: ``progress(done, total, path)`` after each file.
        batch_size: chunks per ``add`` call (1 to ``Limits.max_batch``).

    Example:
        >>> report = await import_knowledge(memory, "docs/", scope=MemoryScope(user_id="ann"))  # doctest: +SKIP
        >>> report.summary()  # doctest: +SKIP
        '12 added, 0 changed, 0 removed, 0 unchanged, 0 empty, 0 failed files; 57 chunks added, ...'
    """
    began = time.perf_counter()
    if not isinstance(memory, GuardedMemory):
        raise UsageError("import_knowledge() takes a GuardedMemory (e.g. SQLiteMemory(...) or GuardedMemory(store))")
    if not isinstance(scope, MemoryScope):
        raise UsageError("import_knowledge() needs scope=MemoryScope(user_id=...) from the host")
    for cap in _NEEDED:
        if cap not in memory.capabilities:
            raise UnsupportedCapability(
                f"importing knowledge needs the {cap.value!r} capability, which the {memory.backend!r} backend "
                "does not have",
                capability=cap.value,
                backend=memory.backend,
            )
    opts = options or ChunkOptions()
    if opts.max_chars > memory.limits.max_text_chars:
        raise InvalidInput(
            f"max_chars is {opts.max_chars:,}; this memory's limit is {memory.limits.max_text_chars:,} "
            "(Limits.max_text_chars)",
            field="max_chars",
        )
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= memory.limits.max_batch
    ):
        raise InvalidInput(f"batch_size takes an int from 1 to {memory.limits.max_batch:,}", field="batch_size")
    root, files, single = await asyncio.to_thread(_files, Path(path))
    name = collection if collection is not None else (root.name or "default")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise InvalidInput("collection takes a non-empty name of at most 200 characters", field="collection")
    if any(f.suffix.lower() == ".pdf" for f in files):
        from .._extras import require

        require("pypdf", extra="pdf", feature="Importing PDF files")

    report = ImportReport(collection=name)
    existing: dict[str, _Existing] = {}
    for record in await memory.export(scope):
        meta = record.metadata
        if (
            record.scope != scope
            or meta.get("kind") != KNOWLEDGE_KIND
            or meta.get("collection") != name
            or not isinstance(meta.get("source"), str)
            or record.id is None
        ):
            continue
        entry = existing.setdefault(str(meta["source"]), _Existing())
        entry.ids.append(record.id)
        entry.texts.setdefault(record.text, []).append(record.id)
        entry.hashes.add(str(meta.get("sha256")))
        total = meta.get("chunks")
        entry.totals.add(total if isinstance(total, int) else -1)

    can_update = Capability.UPDATE in memory.capabilities
    pending: list[MemoryRecord] = []
    updates: list[MemoryUpdate] = []
    doomed: list[str] = []

    async def flush(*, final: bool = False) -> None:
        # New chunks first, then metadata, then what vanished (deletes once, at the end: on
        # SQLite each erasing call also scrubs the file). An interrupted run leaves chunks with
        # mixed hashes or extra chunks, which the next run sees as changed and repairs.
        while pending:
            batch = pending[:batch_size]
            await memory.add(batch)
            report.chunks_added += len(batch)
            del pending[:batch_size]
        while updates:
            batch_u = updates[: memory.limits.max_batch]
            report.chunks_updated += len(await memory.update(batch_u, scope=scope))
            del updates[: memory.limits.max_batch]
        if final or len(doomed) >= memory.limits.max_ids:
            while doomed:
                ids = doomed[: memory.limits.max_ids]
                report.chunks_removed += await memory.delete(ids, scope=scope)
                del doomed[: memory.limits.max_ids]

    seen: set[str] = set()
    total_files = len(files)
    for done, file in enumerate(files, start=1):
        source = file.relative_to(root).as_posix()
        seen.add(source)
        old = existing.get(source)
        try:
            data, sha = await asyncio.to_thread(_sha, file)
        except OSError as exc:
            report.failed.append((source, f"cannot read ({type(exc).__name__}: {exc.strerror or exc})"))
            if progress:
                progress(done, total_files, source)
            continue
        if old is not None and old.complete(sha):
            report.unchanged.append(source)
            if progress:
                progress(done, total_files, source)
            continue
        try:
            chunks = await asyncio.to_thread(_chunks, file, data, opts)
        except DocumentError as exc:
            report.failed.append((source, str(exc)))
            if progress:
                progress(done, total_files, source)
            continue
        fmt = SUFFIXES[file.suffix.lower()]
        now = utcnow()
        metas = [_metadata(name, source, sha, fmt, i, len(chunks), c) for i, c in enumerate(chunks)]
        if not chunks:
            report.empty.append(source)
            if old is not None:
                doomed.extend(old.ids)
        elif old is None or not can_update:
            (report.added if old is None else report.changed).append(source)
            pending.extend(
                MemoryRecord(scope=scope, text=c.text, metadata=m, created_at=now)
                for c, m in zip(chunks, metas, strict=True)
            )
            if old is not None:
                doomed.extend(old.ids)
        else:
            report.changed.append(source)
            for chunk, meta in zip(chunks, metas, strict=True):
                reuse = old.texts.get(chunk.text)
                if reuse:
                    updates.append(MemoryUpdate(id=reuse.pop(), metadata=meta))
                else:
                    pending.append(MemoryRecord(scope=scope, text=chunk.text, metadata=meta, created_at=now))
            doomed.extend(i for ids in old.texts.values() for i in ids)
        if len(pending) >= batch_size or len(updates) >= batch_size:
            await flush()
        if progress:
            progress(done, total_files, source)

    gone = [s for s in sorted(existing) if s not in seen and (single is None or s == single)]
    for source in gone:
        doomed.extend(existing[source].ids)
        report.removed.append(source)
    await flush(final=True)
    report.seconds = time.perf_counter() - began
    return report


def import_knowledge_sync(
    memory: GuardedMemory,
    path: str | Path,
    *,
    scope: MemoryScope,
    collection: str | None = None,
    options: ChunkOptions | None = None,
    progress: Progress | None = None,
    batch_size: int = 256,
) -> ImportReport:
    """The blocking twin of :func:`import_knowledge` (not from inside a running event loop).

    Example:
        >>> import_knowledge_sync(memory, "docs/", scope=MemoryScope(user_id="ann")).summary()  # doctest: +SKIP
        '12 added, ...'
    """
    from .._sync import run_sync

    return run_sync(
        import_knowledge(
            memory,
            path,
            scope=scope,
            collection=collection,
            options=options,
            progress=progress,
            batch_size=batch_size,
        ),
        method="import_knowledge",
        owner="",
    )
