"""``memoryport import``: import a folder of documents as knowledge into a SQLite file or a PostgreSQL schema."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from .._errors import UsageError
from . import _common
from ._common import CliError

if TYPE_CHECKING:
    from .._guard import GuardedMemory

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport import handbook/ --db memory.db --user ann             Markdown, text, HTML, PDF (extra: pdf)
  memoryport import handbook/ --db memory.db --user ann --embed     ... with vectors from the local model
  memoryport import notes.md --db memory.db --user ann --collection notes
  memoryport import handbook/ --db memory.db --user ann --json      the report as one JSON object
  memoryport import handbook/ --dsn postgresql://app@db/app --user ann     into PostgreSQL (extra: postgres)
Run it again after editing the folder: changed files are re-indexed, deleted files' chunks removed,
unchanged files left alone. Recall knowledge with: memoryport search ... --filter kind=knowledge
"""


class _Bar:
    """A one-line progress bar on stderr (only when stderr is a terminal, or forced)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def __call__(self, done: int, total: int, path: str) -> None:
        if not self.enabled or total < 2:
            return
        width = 30
        filled = width * done // total
        name = path if len(path) <= 40 else "…" + path[-39:]
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name:<40}")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _open(args: argparse.Namespace) -> GuardedMemory:
    """The SQLite file of ``--db``, or the PostgreSQL schema of ``--dsn`` (or of a ``--db postgresql://...``)."""
    from ..server._backend import is_dsn

    dsn = args.dsn
    if args.db and is_dsn(args.db):
        if dsn:
            raise CliError("give --db PATH or --dsn postgresql://..., not both")
        dsn, args.db = args.db, None
    if not dsn:
        return _common.open_memory(args, create=True)
    if args.db:
        raise CliError("give --db PATH or --dsn postgresql://..., not both")
    if not is_dsn(dsn):
        raise CliError(f"--dsn takes a PostgreSQL URL such as postgresql://app@db/app, not {dsn!r}")
    try:
        from memoryport.adapters.postgres import PostgresMemory
    except ImportError as exc:
        raise CliError(f"--dsn needs the PostgreSQL extra: {exc}") from None
    embedder = None
    if args.embed:
        import memoryport

        try:
            embedder = memoryport.LocalEmbedder()
        except (AttributeError, ImportError) as exc:
            raise CliError(f"--embed needs the local embedder: {exc}") from None
    try:
        return PostgresMemory(dsn, embedder=embedder, schema=args.schema, pool_size=2)
    except UsageError as exc:
        raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """Import the folder and print the report; exit 1 when some files failed."""
    from memoryport.knowledge import ChunkOptions, ImportReport, import_knowledge

    scope = _common.scope_from_args(args)
    try:
        options = ChunkOptions(max_chars=args.max_chars, overlap=args.overlap)
    except ValueError as exc:
        raise CliError(str(exc).replace("max_chars", "--max-chars").replace("overlap", "--overlap")) from None
    memory = _open(args)
    bar = _Bar(args.progress or (args.progress is None and sys.stderr.isatty()))

    async def go() -> ImportReport:
        try:
            return await import_knowledge(
                memory, args.path, scope=scope, collection=args.collection, options=options, progress=bar
            )
        finally:
            bar.close()
            await memory.aclose()

    report = asyncio.run(go())
    if args.json:
        _common.write_line(
            {
                "collection": report.collection,
                "added": report.added,
                "changed": report.changed,
                "removed": report.removed,
                "unchanged": report.unchanged,
                "empty": report.empty,
                "failed": [{"path": p, "reason": r} for p, r in report.failed],
                "chunks_added": report.chunks_added,
                "chunks_updated": report.chunks_updated,
                "chunks_removed": report.chunks_removed,
                "seconds": round(report.seconds, 3),
            }
        )
    else:
        for label, paths in (("added", report.added), ("changed", report.changed), ("removed", report.removed)):
            for p in paths:
                print(f"{label:9} {p}")
        for p in report.empty:
            print(f"{'empty':9} {p}")
        print(f"collection {json.dumps(report.collection)}: {report.summary()}")
    for p, reason in report.failed:
        print(f"memoryport import: skipped {p}: {reason}", file=sys.stderr)
    return 1 if report.failed else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import`` to the command line."""
    p = sub.add_parser(
        "import",
        help="import a folder of documents as knowledge",
        description=(
            "Import Markdown, text, HTML and PDF files (recursively; hidden files and symlinks skipped) into a "
            "SQLite memory file (--db) or a PostgreSQL schema (--dsn) as knowledge chunks of the given user. "
            "Re-running re-indexes only what changed. "
            "Exits 1 when some files could not be read (they are listed on stderr and skipped)."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    p.add_argument(
        "--dsn",
        metavar="URL",
        default=None,
        help="a PostgreSQL database instead of a file: postgresql://USER@HOST/DB (extra: postgres)",
    )
    p.add_argument("--schema", default="memoryport", help="with --dsn: the PostgreSQL schema (default: memoryport)")
    _common.add_scope_arguments(p)
    p.add_argument("--collection", metavar="NAME", help="name of the imported set (default: the folder's name)")
    p.add_argument("--max-chars", metavar="N", type=int, default=1500, help="longest chunk in characters (1500)")
    p.add_argument(
        "--overlap", metavar="N", type=int, default=150, help="characters shared by pieces of an over-long paragraph"
    )
    p.add_argument("--embed", action="store_true", help="embed with the local model (extra: local)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    p.add_argument("path", metavar="PATH", help="a folder or one file")
    p.set_defaults(run=run)
