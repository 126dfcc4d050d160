"""Helpers of the SQLite backend's tests: drivers, a deterministic embedder, the worker script."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope
from memoryport.ranking import query_terms

HERE = Path(__file__).parent
WORKER = HERE / "worker.py"

# Python's own sqlite3 (3.40 here: FTS5 'optimize' erasure) and a newer SQLite
# from the pysqlite3-binary wheel (FTS5 secure-delete). CI installs both via the dev extra.
DRIVERS = ["sqlite3", "pysqlite3"]


def timeline_records(
    rng: random.Random,
    n: int,
    words: Sequence[str],
    start: datetime,
    *,
    sessions: int,
    agents: int,
    mortal: bool,
    other: Sequence[str] = (),
) -> list[MemoryRecord]:
    """``n`` records of user ``ann`` in time order (gaps of 0 s to 2 h, ties included), from ``sessions``
    session ids and ``agents`` agent ids; ``mortal``: every fifth expires in ten years. With ``other``, each
    text starts with a speaker (``Ann:``, ``Ben:`` or none), and a quarter hold only ``other``'s words."""
    out = []
    at = start
    for i in range(n):
        at += timedelta(seconds=rng.choice([0, 1, 60, 7200]))
        speaker, pool = "", words
        if other:
            speaker = rng.choice(["Ann: ", "Ben: ", ""])  # replies: previous_mode mixes a turn with another speaker's
            if rng.random() < 0.25:
                speaker, pool = "", other
        out.append(
            MemoryRecord(
                scope=MemoryScope(
                    user_id="ann",
                    session_id=rng.choice(["s1", "s2", "s3"][:sessions]),
                    agent_id=rng.choice(["bot", None][:agents]),
                ),
                text=speaker + " ".join(rng.choices(pool, k=rng.randint(1, 8))),
                created_at=at,
                expires_at=start + timedelta(days=3650) if mortal and i % 5 == 0 else None,
                metadata={"n": i % 3},
            )
        )
    return out


def bow_vectors(texts: list[str], dim: int = 64) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Hashed bag of words: deterministic, and texts sharing words are similar."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in query_terms(text, stopwords=frozenset()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            out[i, h % dim] += 1.0 if (h >> 32) & 1 else -1.0
        out[i, -1] += 0.01  # never the zero vector
    return out


def bow_embedder(dim: int = 64, name: str = "bow-64") -> CallableEmbedder:
    return CallableEmbedder(lambda texts: bow_vectors(texts, dim), dim=dim, name=name)


def hits_of(memory: Any, scope: Any, queries: list[str]) -> list[list[tuple[str, float, str]]]:
    """Each query's hits (id, score, signal) at k=8, without filters and with ``{"n": 1}``: what a search path
    must answer the same as another."""
    out = []
    for q in queries:
        for kwargs in ({}, {"filters": {"n": 1}}):
            hits = memory.search_sync(q, scope=scope, k=8, **kwargs)
            out.append([(str(h.record.id), h.score, h.signal) for h in hits])
    return out


def statements_hits(
    monkeypatch: Any, memory: Any, scope: Any, queries: list[str]
) -> list[list[tuple[str, float, str]]]:
    """:func:`hits_of` through the statements' path: no timeline (``Timelines.of`` and ``.current`` answer None,
    as for a search on the caller's thread), restored after."""
    from memoryport.adapters.sqlite._timeline import Timelines

    with monkeypatch.context() as patch:
        patch.setattr(Timelines, "of", lambda self, conn, user: None)
        patch.setattr(Timelines, "current", lambda self, conn, user: None)
        return hits_of(memory, scope, queries)


def python() -> str:
    return sys.executable


def raw_bytes(path: str) -> bytes:
    """Every byte of a SQLite file and its -wal, -shm and -journal (what an erased text must be absent from)."""
    out = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            with open(path + suffix, "rb") as f:
                out += f.read()
    return out


@contextlib.contextmanager
def logging_child(db_path: str, driver: str, embed: str, text: str = "ann cracks a walnut") -> Iterator[str]:
    """A process that added one record of user ``ann`` with write_behind (still in its log: its id) and stays
    open until the block ends (then it closes, and must exit cleanly)."""
    child = subprocess.Popen(
        [python(), str(WORKER), "log_and_wait", db_path, driver, "ann", text, embed],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    rid = child.stdout.readline().strip()
    try:
        yield rid
    finally:
        _, err = child.communicate("\n", timeout=60)
        assert child.returncode == 0, err
