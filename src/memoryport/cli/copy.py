"""``memoryport copy``: move a scope's memories from one backend to another.

A backend is named by a SQLite file path (``memory.db``), a PostgreSQL DSN
(``postgresql://app@db/app``, with ``--schema``) or by ``module:factory``, a Python callable (no arguments) returning a
:class:`~memoryport.GuardedMemory` — for example the host's own function that
builds its ``Mem0Memory``. The current directory is importable, as with
``python -m``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import sys
from dataclasses import asdict
from typing import Any

__all__ = ["open_backend", "register", "run"]

_FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def open_backend(spec: str, *, create: bool, schema: str = "memoryport") -> Any:
    """The :class:`~memoryport.GuardedMemory` named by ``spec`` (a path, a PostgreSQL DSN or ``module:factory``)."""
    from memoryport import GuardedMemory

    from . import CliError

    if _FACTORY.fullmatch(spec) and not os.path.exists(spec):
        module_name, func_name = spec.split(":")
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise CliError(f"cannot import {module_name!r} for {spec!r}: {exc}") from exc
        factory = getattr(module, func_name, None)
        if not callable(factory):
            raise CliError(f"{spec!r}: {module_name} has no callable {func_name!r}")
        try:
            memory = factory()
        except Exception as exc:
            raise CliError(f"{spec!r} failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(memory, GuardedMemory):
            raise CliError(f"{spec!r} returned a {type(memory).__name__}, not a GuardedMemory")
        return memory
    if spec.startswith(("postgresql://", "postgres://")):
        try:
            from memoryport.adapters.postgres import PostgresMemory
        except ImportError as exc:
            raise CliError(str(exc)) from exc
        return PostgresMemory(spec, schema=schema)
    if not create and not os.path.exists(spec):
        raise CliError(f"no such file: {spec!r} (give a SQLite file, a postgresql:// DSN or module:factory)")
    try:
        from memoryport import SQLiteMemory
    except ImportError as exc:  # pragma: no cover - a build without the SQLite backend
        raise CliError("this build has no SQLite backend; name the backend as module:factory") from exc
    return SQLiteMemory(spec)


async def _copy(args: argparse.Namespace) -> dict[str, Any]:
    from memoryport import MemoryScope, copy_memories

    scope = MemoryScope(user_id=args.user, session_id=args.session, agent_id=args.agent)
    source = open_backend(args.source, create=False, schema=args.schema)
    try:
        target = open_backend(args.target, create=True, schema=args.schema)
        try:
            report = await copy_memories(source, target, scope, drop_unsupported=args.drop_unsupported)
        finally:
            await target.aclose()
    finally:
        await source.aclose()
    return asdict(report)


def run(args: argparse.Namespace) -> int:
    """Copy the scope; print a one-line summary (or the report as JSON)."""
    from . import CliError

    if not (args.user or args.session or args.agent):
        raise CliError("give the scope to copy: --user, and/or --session, --agent")
    if args.source == args.target or (
        os.path.exists(args.source) and os.path.exists(args.target) and os.path.samefile(args.source, args.target)
    ):
        raise CliError("source and target are the same; copying would duplicate every memory")
    report = asyncio.run(_copy(args))
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return 0
    line = f"copied {report['copied']} of {report['exported']} memories"
    dropped = [
        f"metadata of {report['dropped_metadata']}" if report["dropped_metadata"] else "",
        f"expiry of {report['dropped_expiry']}" if report["dropped_expiry"] else "",
    ]
    if any(dropped):
        line += " (dropped " + " and ".join(d for d in dropped if d) + ")"
    print(line)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``copy`` to the command line."""
    p = sub.add_parser(
        "copy",
        help="copy a scope's memories from one backend to another",
        description=(
            "Copy every live memory of a scope from SOURCE to TARGET, keeping texts, metadata and times "
            "(fresh ids). SOURCE and TARGET are SQLite files, postgresql:// DSNs or module:factory (a callable "
            "returning a GuardedMemory, e.g. your Mem0Memory). Nothing is written if the target cannot hold a record."
        ),
    )
    p.add_argument("source", help="SQLite file, postgresql:// DSN or module:factory to read from")
    p.add_argument(
        "target", help="SQLite file (created if missing), postgresql:// DSN or module:factory to write to"
    )
    p.add_argument("--user", help="user id of the scope")
    p.add_argument("--session", help="session id of the scope")
    p.add_argument("--agent", help="agent id of the scope")
    p.add_argument(
        "--drop-unsupported",
        action="store_true",
        help="copy records without the metadata/expiry the target cannot hold (reported)",
    )
    p.add_argument(
        "--schema",
        default="memoryport",
        help="the PostgreSQL schema when SOURCE or TARGET is a postgresql:// DSN (default: memoryport)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=run)
