"""What the file commands share: opening a SQLite memory file, scopes from flags, JSON output."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidInput, MemoryportError
from .._records import MemoryRecord, MemoryScope

if TYPE_CHECKING:
    from .._embedding import EmbeddingPort
    from .._guard import GuardedMemory

__all__ = [
    "CliError",
    "add_db_argument",
    "add_scope_arguments",
    "open_memory",
    "parse_pairs",
    "record_json",
    "scope_from_args",
]


class CliError(Exception):
    """A user mistake: printed as one line on stderr, exit status 2."""


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """``--db PATH`` (also read from ``MEMORYPORT_DB``)."""
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=os.environ.get("MEMORYPORT_DB"),
        help="the SQLite memory file (default: $MEMORYPORT_DB)",
    )


def add_scope_arguments(parser: argparse.ArgumentParser, *, required_user: bool = False) -> None:
    """``--user``, ``--session`` and ``--agent``."""
    parser.add_argument("--user", metavar="ID", required=required_user, help="the end user's id")
    parser.add_argument("--session", metavar="ID", help="a session (chat) id")
    parser.add_argument("--agent", metavar="ID", help="an agent id")


def scope_from_args(args: argparse.Namespace) -> MemoryScope:
    """The scope the flags name; at least one id is required."""
    if args.user is None and args.session is None and args.agent is None:
        raise CliError("name whose memory this is: --user ID (and optionally --session / --agent)")
    for flag, value in (("--user", args.user), ("--session", args.session), ("--agent", args.agent)):
        if value is not None and not value.strip():
            example = {"--user": "ann", "--session": "chat-1", "--agent": "coder"}[flag]
            raise CliError(f"{flag} needs an id, e.g. {flag} {example} (leave {flag} out to not set it)")
    try:
        return MemoryScope(user_id=args.user, session_id=args.session, agent_id=args.agent)
    except InvalidInput as exc:
        raise CliError(
            str(exc)
            .replace("scope.user_id", "--user")
            .replace("scope.session_id", "--session")
            .replace("scope.agent_id", "--agent")
        ) from None


def parse_pairs(pairs: list[str] | None, flag: str) -> dict[str, Any]:
    """``key=value`` flags as a dict; values that read as JSON scalars become numbers/booleans."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"{flag} takes KEY=VALUE, got {pair!r}")
        parsed: Any = value
        if value in ("true", "false", "null") or value.lstrip("-").replace(".", "", 1).isdigit():
            parsed = json.loads(value)
        out[key] = parsed
    return out


def _db_path(args: argparse.Namespace, *, create: bool) -> Path:
    if not args.db:
        raise CliError("which memory file? pass --db PATH (or set MEMORYPORT_DB)")
    path = Path(args.db).expanduser()
    if path.is_dir():
        raise CliError(f"{path} is a directory; --db takes a file")
    if not create and not path.exists():
        raise CliError(f"no memory file at {path} (it is created by the first `memoryport add --db {path} ...`)")
    if create and not path.parent.exists():
        raise CliError(f"the folder {path.parent} does not exist")
    return path


def open_memory(args: argparse.Namespace, *, create: bool = False) -> GuardedMemory:
    """The SQLite memory the flags point at (``--db``, ``--embed``, ``--retention-days``)."""
    path = _db_path(args, create=create)
    from memoryport.adapters.sqlite import SQLiteMemory

    embedder: EmbeddingPort | None = None
    if getattr(args, "embed", False):
        import memoryport

        try:
            embedder = memoryport.LocalEmbedder()
        except (AttributeError, ImportError) as exc:
            raise CliError(f"--embed needs the local embedder: {exc}") from None
    retention = getattr(args, "retention_days", None)
    try:
        memory: GuardedMemory = SQLiteMemory(path, embedder=embedder, retention_days=retention)
    except (MemoryportError, OSError):
        raise
    except Exception as exc:
        # e.g. sqlite3.DatabaseError for a file that is not a database: a user mistake here.
        raise CliError(f"cannot open {path} as a memory file ({type(exc).__name__}: {exc})") from None
    return memory


def record_json(record: MemoryRecord) -> dict[str, Any]:
    """A record as a JSON object (times in ISO 8601, UTC)."""
    return record.model_dump(mode="json")


def write_line(obj: Any) -> None:
    """One JSON object on one line of stdout."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
