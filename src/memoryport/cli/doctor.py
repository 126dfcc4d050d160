"""``memoryport doctor``: Python, SQLite and which extras are installed."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sqlite3
import sys

__all__ = ["register", "report"]

# extra -> distributions it brings (all of them must be there for the extra to work)
EXTRAS: dict[str, tuple[str, ...]] = {
    "mem0": ("mem0ai",),
    "zep": ("zep-cloud",),
    "graphiti": ("graphiti-core", "kuzu"),
    "local": ("tokenizers", "safetensors", "huggingface-hub"),
    "openai": ("httpx",),
    "sentence-transformers": ("sentence-transformers", "torch"),
    "mcp": ("mcp",),
    "pdf": ("pypdf",),
    "postgres": ("psycopg", "psycopg-pool"),
    "server": ("starlette", "uvicorn"),
    "langgraph": ("langgraph",),
    "langchain": ("langchain-core",),
    "pydantic-ai": ("pydantic-ai-slim",),
    "openai-agents": ("openai-agents",),
    "contracts": ("pytest", "anyio", "hypothesis"),
    "sqlite (newer SQLite)": ("sqlean.py", "pysqlite3-binary"),
}

# Extras served by any one of their distributions.
ANY_OF = {"sqlite (newer SQLite)"}


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
        missing = [d for d in dists if _version(d) is None]
        if not found:
            status = "not installed"
        elif missing and extra not in ANY_OF:
            status = f"incomplete: missing {', '.join(missing)} (have {', '.join(found)})"
        else:
            status = ", ".join(found)
        lines.append(f"  {extra:<22} {status}")
    lines.append(f"default model (LocalEmbedder()): {_default_model()}")
    return "\n".join(lines)


def _default_model() -> str:
    from memoryport.embedders.local import INSTALL_MODEL, default_model_path

    try:
        path = default_model_path()
    except Exception as exc:  # a broken package install is reported, not raised
        return f"unreadable ({type(exc).__name__}); reinstall with: {INSTALL_MODEL}"
    if path is None:
        return f"not installed; install with: {INSTALL_MODEL}"
    return f"all-MiniLM-L6-v2 at {path}"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor`` to the command line."""
    p = sub.add_parser("doctor", help="show versions, SQLite features and installed extras")
    p.set_defaults(run=lambda args: print(report()))
