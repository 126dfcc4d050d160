"""``memoryport serve`` and ``memoryport keys``: the HTTP API and dashboard, and who may use them."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from .._errors import InvalidInput, UsageError
from ..server._backend import is_dsn
from . import _common
from ._common import CliError

__all__ = ["register", "register_keys", "run", "run_keys"]

EXAMPLES = """examples:
  memoryport keys create --db memory.db --user ann       # prints Ann's key once
  memoryport serve --db memory.db                        # http://127.0.0.1:8787, dashboard at /ui/
  memoryport serve --db memory.db --port 9000 --rate-per-minute 120
  memoryport serve --db postgresql://app@db.internal/app --keys /etc/memoryport/keys
"""

KEY_EXAMPLES = """examples:
  memoryport keys create --db memory.db --user ann --label "ann's laptop"
  memoryport keys create --db memory.db --admin --label ops
  memoryport keys list --db memory.db
  memoryport keys revoke --db memory.db 3f9c0a1b2d4e
"""


def keys_path(args: argparse.Namespace) -> Path:
    """``--keys``, else ``$MEMORYPORT_KEYS``, else the memory file's name plus ``.keys``."""
    if args.keys:
        return Path(args.keys).expanduser()
    if not args.db:
        raise CliError("which keys file? pass --keys PATH or --db PATH (the keys live in PATH.keys)")
    if is_dsn(args.db):
        raise CliError("with a PostgreSQL --db, name the keys file: --keys PATH (or set MEMORYPORT_KEYS)")
    return Path(args.db).expanduser().with_name(Path(args.db).name + ".keys")


def _without_password(target: str) -> str:
    """``target`` fit to print: a DSN's password masked."""
    if not is_dsn(target):
        return target
    parts = urlsplit(target)
    if parts.password is None:
        return target
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _add_keys_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keys",
        metavar="PATH",
        default=os.environ.get("MEMORYPORT_KEYS"),
        help="the API keys file (default: $MEMORYPORT_KEYS, else the --db file's name plus .keys)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve the memory file until interrupted."""
    from ..server import KeyStore, open_memory, serve

    if not args.db:
        raise CliError("which memory? pass --db PATH or --db postgresql://... (or set MEMORYPORT_DB)")
    keys = KeyStore(keys_path(args))
    if not keys.list():
        print(
            f"note: no API keys in {keys.path} yet; add one: memoryport keys create --keys {keys.path} --user ID"
        )
    memory = open_memory(args.db, retention_days=args.retention_days)
    shown = _without_password(args.db)
    print(f"memoryport serving {shown} on http://{args.host}:{args.port} (dashboard at /ui/; Ctrl-C stops)")
    serve(
        memory,
        keys,
        host=args.host,
        port=args.port,
        rate_per_minute=args.rate_per_minute,
        max_body_bytes=args.max_body_bytes,
        secure_cookies=args.secure_cookies,
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve`` to the command line."""
    p = sub.add_parser(
        "serve",
        help="serve a memory over HTTP (API + dashboard)",
        description=(
            "Serve the memory over HTTP: a JSON API (OpenAPI at /openapi.json) and a dashboard at /ui/. "
            "API keys decide whose memory each request touches. Needs the server extra."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--db",
        metavar="PATH_OR_DSN",
        default=os.environ.get("MEMORYPORT_DB"),
        help="the SQLite memory file, or a PostgreSQL DSN postgresql://... (default: $MEMORYPORT_DB)",
    )
    _add_keys_argument(p)
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8787, help="the port (default: 8787)")
    p.add_argument("--rate-per-minute", type=int, default=600, help="each key's request budget (default: 600)")
    p.add_argument("--max-body-bytes", type=int, default=1_048_576, help="larger bodies get 413 (default: 1 MiB)")
    p.add_argument("--retention-days", type=float, default=None, help="hide memories older than this")
    p.add_argument(
        "--secure-cookies", action="store_true", help="mark the dashboard cookie Secure (behind a TLS proxy)"
    )
    p.set_defaults(run=run)


def run_keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys."""
    from ..server import KeyStore

    if args.keys_command is None:
        raise CliError("say what to do: keys create, keys list or keys revoke")
    path = keys_path(args)
    if args.keys_command != "create" and not path.exists():
        raise CliError(f"no keys file at {path} (create a key first: memoryport keys create ...)")
    try:
        keys = KeyStore(path)
    except UsageError as exc:
        raise CliError(str(exc)) from None
    try:
        if args.keys_command == "create":
            if args.admin == (args.user is not None):
                raise CliError("a key is for one user (--user ID) or an admin key (--admin), not both or neither")
            try:
                new = keys.create(
                    user_id=args.user, admin=args.admin, label=args.label or "", rate_per_minute=args.rate_per_minute
                )
            except InvalidInput as exc:
                raise CliError(str(exc).replace("scope.user_id", "--user")) from None
            who = "admin (any user, logged)" if new.key.admin else f"user {new.key.user_id}"
            print(new.secret)
            print(f"key {new.key.id} for {who}: the secret above is shown only now; store it safely", file=sys.stderr)
        elif args.keys_command == "list":
            for key in keys.list(include_revoked=args.all):
                row = {
                    "id": key.id,
                    "user": key.user_id,
                    "admin": key.admin,
                    "label": key.label,
                    "rate_per_minute": key.rate_per_minute,
                    "created_at": key.created_at,
                    "revoked_at": key.revoked_at,
                }
                print(json.dumps(row, ensure_ascii=False))
        else:
            if not keys.revoke(args.key_id):
                raise CliError(f"no active key with id {args.key_id!r} in {path}")
            print(f"revoked key {args.key_id}")
    finally:
        keys.close()
    return 0


def register_keys(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``keys`` (create, list, revoke) to the command line."""
    p = sub.add_parser(
        "keys",
        help="create, list and revoke API keys for `memoryport serve`",
        description="API keys for the HTTP server. Only a hash of each key is stored; a new key is shown once.",
        epilog=KEY_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    keys_sub = p.add_subparsers(dest="keys_command", metavar="ACTION")
    create = keys_sub.add_parser("create", help="a new key for one user, or an admin key")
    list_ = keys_sub.add_parser("list", help="the keys (ids, users; never secrets) as JSON lines")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id")
    for q in (create, list_, revoke):
        _common.add_db_argument(q)
        _add_keys_argument(q)
    create.add_argument("--user", metavar="ID", help="the user this key acts for")
    create.add_argument("--admin", action="store_true", help="an admin key: may act for any user (logged)")
    create.add_argument("--label", help="a note to tell keys apart")
    create.add_argument("--rate-per-minute", type=int, default=None, help="this key's own request budget")
    list_.add_argument("--all", action="store_true", help="include revoked keys")
    revoke.add_argument("key_id", metavar="KEY_ID", help="the key's id (as `keys list` shows it)")
    p.set_defaults(run=run_keys)
