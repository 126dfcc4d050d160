"""``memoryport demo``: a scripted conversation on the embedded default."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    """Run the demo (to be replaced by the full show of the tools issue)."""
    from memoryport import CallableMemory, MemoryRecord, MemoryScope

    rows: dict[str, MemoryRecord] = {}

    def add(records: list[MemoryRecord]) -> None:
        rows.update({r.id: r for r in records if r.id})

    def search(query: str, scope: MemoryScope, k: int, filters: object) -> list[MemoryRecord]:
        words = set(query.lower().split())
        found = [r for r in rows.values() if scope.covers(r.scope) and words & set(r.text.lower().split())]
        return found[:k]

    memory = CallableMemory(add=add, search=search)
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    memory.add_sync([MemoryRecord(scope=ann, text="Ann drinks green tea")])
    memory.add_sync([MemoryRecord(scope=ben, text="Ben drinks black coffee")])
    for who, scope in (("ann", ann), ("ben", ben)):
        hits = memory.search_sync("drinks", scope=scope)
        print(f"{who} recalls: {[h.record.text for h in hits]}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo`` to the command line."""
    p = sub.add_parser("demo", help="a scripted two-user conversation, offline")
    p.set_defaults(run=run)
