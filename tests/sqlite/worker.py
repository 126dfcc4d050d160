"""Child processes of the SQLite tests (run as a script: `python worker.py COMMAND ...`)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import traceback

import numpy as np

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, SQLiteMemory


def constant_embedder() -> CallableEmbedder:
    return CallableEmbedder(lambda texts: np.ones((len(texts), 8)), dim=8, name="constant-8")


def concurrent(path: str, driver: str, proc: int, batches: int, size: int) -> int:
    """Two threads, each on its own event loop, adding batches and searching the same file."""
    memory = SQLiteMemory(path, driver=driver)
    errors: list[str] = []

    def thread(t: int) -> None:
        async def run() -> None:
            scope = MemoryScope(user_id=f"user{(proc + t) % 3}", session_id=f"p{proc}t{t}")
            for b in range(batches):
                records = [
                    MemoryRecord(
                        scope=scope,
                        text=f"record p{proc} t{t} b{b} r{i} shared words",
                        metadata={"p": proc, "t": t, "b": b, "i": i},
                    )
                    for i in range(size)
                ]
                await memory.add(records)
                await memory.search("shared words", scope=MemoryScope(user_id=scope.user_id), k=5)
                await memory.search("", scope=scope, k=3)

        try:
            asyncio.run(run())
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    memory.close()
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


def crash(path: str, driver: str, start: int, size: int) -> int:
    """Add batches forever, printing each committed batch number; the parent kills us."""
    memory = SQLiteMemory(path, driver=driver)
    scope = MemoryScope(user_id="crash")
    b = start
    while True:
        memory.add_sync(
            [
                MemoryRecord(scope=scope, text=f"batch {b} record {i} " + "filler " * 20, metadata={"batch": b})
                for i in range(size)
            ]
        )
        print(f"committed {b}", flush=True)
        b += 1


def add_one(path: str, driver: str, user: str, text: str, embed: str) -> int:
    memory = SQLiteMemory(path, embedder=constant_embedder() if embed == "1" else None, driver=driver)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id=user), text=text)])
    memory.close()
    return 0


def add_and_die(path: str, driver: str, user: str, text: str, embed: str) -> int:
    """Add one record (``embed``: "bow" for the tests' bag-of-words embedder), print its id, and SIGKILL ourselves
    at once: no close, no checkpoint, nothing after ``add`` returned (an application crash)."""
    import os
    import signal

    from support import bow_embedder

    memory = SQLiteMemory(path, embedder=bow_embedder() if embed == "bow" else None, driver=driver)
    [record_id] = memory.add_sync([MemoryRecord(scope=MemoryScope(user_id=user), text=text)])
    print(record_id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    return 1


def erase_and_die(path: str, driver: str, user: str, stop: str) -> int:
    """Erase a user, then SIGKILL ourselves at ``stop``: right after the commit, or after the VACUUM."""
    import os
    import signal

    from memoryport.adapters.sqlite import _erasure

    def die(*_: object) -> bool:
        os.kill(os.getpid(), signal.SIGKILL)
        return False

    if stop == "after-commit":
        _erasure.finish_erasure = die  # type: ignore[assignment]
    else:  # after-vacuum: the checkpoint that would copy the rebuilt pages never runs
        _erasure.checkpoint_wal = die  # type: ignore[assignment]
    memory = SQLiteMemory(path, driver=driver)
    memory.delete_sync(scope=MemoryScope(user_id=user))
    return 0


def as_other_user(path: str, driver: str) -> int:
    """Open, search and add as an unprivileged user (root drops to nobody); print what happened as JSON."""
    import json
    import os
    import tempfile

    # Everything this needs is imported (and a file opened) before dropping root:
    # nobody may not read this Python's standard library.
    warm = SQLiteMemory(os.path.join(tempfile.mkdtemp(), "warm.db"), driver=driver)
    warm.add_sync([MemoryRecord(scope=MemoryScope(user_id="x"), text="warm tea")])
    warm.search_sync("tea", scope=MemoryScope(user_id="x"))
    warm.close()
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    out: dict[str, str | list[str]] = {}
    try:
        memory = SQLiteMemory(path, driver=driver)
    except Exception as exc:
        out["open"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out))
        return 0
    out["open"] = "ok"
    out["search"] = [h.record.text for h in memory.search_sync("tea", scope=MemoryScope(user_id="ann"))]
    for name, call in [
        ("add", lambda: memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="more tea")])),
        ("delete", lambda: memory.delete_sync(scope=MemoryScope(user_id="ann"))),
    ]:
        try:
            call()
            out[name] = "ok"
        except Exception as exc:
            out[name] = f"{type(exc).__name__}: {exc}"
    memory.close()
    print(json.dumps(out))
    return 0


def delete_user(path: str, driver: str, user: str, embed: str) -> int:
    memory = SQLiteMemory(path, embedder=constant_embedder() if embed == "1" else None, driver=driver)
    memory.delete_sync(scope=MemoryScope(user_id=user))
    memory.close()
    return 0


def clustered(texts: list[str]) -> np.ndarray:
    """'c<k> ...' lies near centre k of 12, with noise seeded by the text (the index tests' vectors)."""
    import hashlib

    centres = np.random.default_rng(5).standard_normal((12, 64)).astype(np.float32)
    out = np.empty((len(texts), 64), dtype=np.float32)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        centre = int(text.split()[0][1:]) % 12 if text.startswith("c") else seed % 12
        out[i] = centres[centre] + 0.9 * np.random.default_rng(seed).standard_normal(64).astype(np.float32)
    return out


def ann_memory(path: str, driver: str, **options: object) -> SQLiteMemory:
    embedder = CallableEmbedder(clustered, dim=64, name="clustered-64")
    return SQLiteMemory(path, embedder, search_mode="vector", ann_threshold=100, driver=driver, **options)  # type: ignore[arg-type]


def ann(path: str, driver: str, ops: str) -> int:
    """Run ``ops`` (JSON: ["search", query] / ["add", text] / ["delete", id]) on user "ann"'s indexed file;
    print JSON: each search's (id, score) hits, then how many lists were attached and published."""
    import json

    memory = ann_memory(path, driver)
    scope = MemoryScope(user_id="ann")
    out: list[object] = []
    for op, arg in json.loads(ops):
        if op == "search":
            out.append([[h.record.id, h.score] for h in memory.search_sync(arg, scope=scope, k=10)])
        elif op == "add":
            out.append(memory.add_sync([MemoryRecord(scope=scope, text=arg)])[0])
        elif op == "delete":
            out.append(memory.delete_sync(ids=[arg], scope=scope))
        elif op == "update":  # [id, text]: re-embedded, moved to its new list's tail
            from memoryport import MemoryUpdate

            out.append(len(memory.update_sync([MemoryUpdate(id=arg[0], text=arg[1])], scope=scope)))
        elif op == "erase":
            out.append(memory.delete_sync(scope=scope))
        elif op == "reembed":  # the same vectors again: the index is dropped, rebuilt on demand
            from memoryport.adapters.sqlite import reembed_file_sync

            out.append(reembed_file_sync(path, CallableEmbedder(clustered, dim=64, name="clustered-64"), driver=driver))
        elif op == "die":  # killed: nothing closed, segments left behind
            os._exit(0)
    shared = memory.store.ann.shared
    counts = {"shared": shared is not None}
    if shared is not None:
        counts.update(attached=shared.attached, published=shared.published)
    memory.close()
    print(json.dumps({"results": out, **counts}))
    return 0


def logging_memory(path: str, driver: str, embed: str, durability: str = "normal") -> SQLiteMemory:
    """A ``write_behind`` store whose drain thread never drains on its own (only reads and writes drain)."""
    from support import bow_embedder

    from memoryport.adapters.sqlite import _store

    _store.DRAIN_DELAY = 3600.0
    _store.DRAIN_ROWS = 10**9
    return SQLiteMemory(
        path,
        embedder=bow_embedder() if embed == "bow" else None,
        driver=driver,
        write_behind=True,
        durability=durability,
    )


def log_and_die(path: str, driver: str, user: str, text: str, embed: str, durability: str) -> int:
    """Add one record with ``write_behind`` (left in the log), print its id, and SIGKILL ourselves at once."""
    import os
    import signal

    memory = logging_memory(path, driver, embed, durability)
    [record_id] = memory.add_sync([MemoryRecord(scope=MemoryScope(user_id=user), text=text)])
    print(record_id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    return 1


def log_and_wait(path: str, driver: str, user: str, text: str, embed: str) -> int:
    """Add one record with ``write_behind`` (left in the log), print its id, wait for a line on stdin, close."""
    memory = logging_memory(path, driver, embed)
    [record_id] = memory.add_sync([MemoryRecord(scope=MemoryScope(user_id=user), text=text)])
    print(record_id, flush=True)
    sys.stdin.readline()
    memory.close()
    return 0


def log_many(path: str, driver: str, proc: str, n: str, ids: str) -> int:
    """Add ``n`` records one by one with ``write_behind`` (default drain), each with its id ``{ids}{i}`` (shared
    by the processes when ``ids`` is the same: one of them must get the duplicate error); print the outcomes."""
    import json

    from memoryport import InvalidInput

    memory = SQLiteMemory(path, driver=driver, write_behind=True)
    scope = MemoryScope(user_id="many")
    added, refused = 0, 0
    for i in range(int(n)):
        record = MemoryRecord(scope=scope, text=f"proc {proc} record {i} shared words", id=f"{ids}{i}")
        try:
            memory.add_sync([record])
            added += 1
        except InvalidInput:
            refused += 1
    memory.close()
    print(json.dumps({"added": added, "refused": refused}))
    return 0


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "log_and_die":
        sys.exit(log_and_die(*args))
    if command == "log_and_wait":
        sys.exit(log_and_wait(*args))
    if command == "log_many":
        sys.exit(log_many(*args))
    if command == "concurrent":
        sys.exit(concurrent(args[0], args[1], int(args[2]), int(args[3]), int(args[4])))
    if command == "crash":
        sys.exit(crash(args[0], args[1], int(args[2]), int(args[3])))
    if command == "add":
        sys.exit(add_one(*args))
    if command == "add_and_die":
        sys.exit(add_and_die(*args))
    if command == "erase_and_die":
        sys.exit(erase_and_die(*args))
    if command == "as_other_user":
        sys.exit(as_other_user(*args))
    if command == "delete_user":
        sys.exit(delete_user(*args))
    if command == "ann":
        sys.exit(ann(*args))
    sys.exit(f"unknown command {command}")
