"""Erasure under workloads that split and merge pages: no erased byte survives anywhere in the files.

SQLite's ``secure_delete`` zeroes a deleted cell, but when a page is rebalanced
the bytes of cells that moved away stay in the page's unused gap (between the
cell-pointer array and the cell content area). A workload of batches of varying
size and length with deletions in between produces such pages; this test runs
random ones (many seeds) and greps the raw bytes of the database, ``-wal`` and
``-shm`` for every erased text, metadata value, FTS5 term and the erased user's id:
after every round of deletes and of text updates, and at the end (user erased,
``purge()``, ``close()``).

With the vector index forced on (``index``), the sign-bit and int8 codes of every erased
text's vector must be gone from the files too (the index's lists are rewritten
without it), and the index itself with the erased user.

``MEMORYPORT_ERASURE_SEEDS=200`` runs more seeds than the default.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import re
from datetime import timedelta

import numpy as np
import pytest

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite._ann import codes_of, fine_of
from memoryport.storekit import embed_unit

from .support import bow_embedder, raw_bytes


def random_vectors(texts: list[str]) -> np.ndarray:
    """One random 128-d vector per text: their 16-byte sign codes are unique, so they can be grepped for."""
    seeds = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") for t in texts]
    return np.stack([np.random.default_rng(s).standard_normal(128).astype(np.float32) for s in seeds])


def codes(text: str) -> list[tuple[bytes, bytes]]:
    """The index's codes of ``text``'s vector (its sign code and its int8 code), each as its two halves.

    A code may straddle two overflow pages of its list; one of its halves is
    then still contiguous in the file.
    """
    embedder = CallableEmbedder(random_vectors, dim=128, name="random-128")
    v = asyncio.run(embed_unit(embedder, [text]))  # the unit vector, as the store keeps it
    out = []
    for whole in (codes_of(v).tobytes(), fine_of(v)[0].tobytes()):
        half = len(whole) // 2
        out.append((whole[:half], whole[half:]))
    return out


def any_code(text: str, data: bytes) -> bool:
    return any(part in data for halves in codes(text) for part in halves)


def every_code(text: str, data: bytes) -> bool:
    return all(first in data or second in data for first, second in codes(text))


SEEDS = int(os.environ.get("MEMORYPORT_ERASURE_SEEDS", "3"))
WORDS = [
    "tea",
    "coffee",
    "garden",
    "river",
    "walk",
    "music",
    "piano",
    "friend",
    "city",
    "train",
    "morning",
    "evening",
    "book",
    "letter",
    "sister",
]


MARKER_TAIL = re.compile(rb"[0-9a-f]{7,16}x[0-9]+7")


def found(data: bytes, markers: list[str]) -> list[str]:
    """The markers whose text, or tail, is in ``data``.

    FTS5 stores terms prefix-compressed: a marker's tail is what its term leaves
    in the index. Markers are found by one scan (a search per marker is quadratic).
    """
    tails = {m[-14:] for m in (t.decode() for t in MARKER_TAIL.findall(data)) if len(m) >= 14}
    return [m for m in markers if (m[-14:] in tails if m.startswith("mk") else m.encode() in data)]


class Workload:
    """Two users' records with unique markers in text, metadata and FTS5 terms; deletions in between."""

    def __init__(self, memory: SQLiteMemory, rng: random.Random) -> None:
        self.memory, self.rng = memory, rng
        self.serial = 0
        self.users = [f"usr{rng.getrandbits(40):x}q{n}" for n in range(2)]
        self.live: dict[str, list[tuple[str, list[str]]]] = {u: [] for u in self.users}  # id -> markers
        self.erased: list[str] = []  # deleted or overwritten: gone once the call returns
        self.aged: list[str] = []  # expired or retained out: gone by a later write or purge()

    def marker(self) -> str:
        self.serial += 1
        # Letters and digits in one token; a final digit keeps the porter stemmer off it.
        return f"mk{self.rng.getrandbits(64):016x}x{self.serial}7"

    def record(self, user: str, *, aged: str | None = None) -> tuple[MemoryRecord, list[str]]:
        text_marker, meta_marker = self.marker(), self.marker()
        # Mostly short texts (many cells per page), some long ones (overflow pages).
        n = self.rng.randint(1, 30) if self.rng.random() < 0.9 else self.rng.randint(100, 600)
        words = " ".join(self.rng.choice(WORDS) for _ in range(n))
        text = f"{user} said {text_marker} " + words
        now = utcnow()
        created, expires = now, None
        if aged == "expired":
            created, expires = now - timedelta(hours=2), now - timedelta(hours=1)
        elif aged == "retained":
            created = now - timedelta(days=40)
        record = MemoryRecord(
            scope=MemoryScope(user_id=user, session_id=f"s{self.rng.randint(0, 3)}"),
            text=text,
            metadata={"note": meta_marker, "n": self.rng.randint(0, 10**6)},
            created_at=created,
            expires_at=expires,
        )
        return record, [text_marker, meta_marker]

    def batch(self) -> None:
        users = [self.rng.choice(self.users) for _ in range(self.rng.randint(1, 300))]
        pairs = [self.record(user) for user in users]
        # A few records that expire or age out: the next writes and purge() erase them.
        aged = [
            self.record(self.rng.choice(self.users), aged=self.rng.choice(["expired", "retained"]))
            for _ in range(self.rng.randint(0, 3))
        ]
        ids = self.memory.add_sync([r for r, _ in pairs + aged])
        for user, rid, (_, markers) in zip(users, ids, pairs, strict=False):
            self.live[user].append((rid, markers))
        self.aged += [m for _, ms in aged for m in ms]

    def delete_some(self) -> None:
        for user in self.users:
            live = self.live[user]
            doomed = self.rng.sample(range(len(live)), min(len(live), self.rng.randint(10, 60)))
            if not doomed:
                continue
            ids = [live[i][0] for i in doomed]
            assert self.memory.delete_sync(ids, scope=MemoryScope(user_id=user)) == len(ids)
            self.erased += [m for i in doomed for m in live[i][1]]
            keep = set(range(len(live))) - set(doomed)
            self.live[user] = [live[i] for i in sorted(keep)]

    def update_some(self) -> None:
        """A new text for a few records: the old text is erased as on a delete."""
        for user in self.users:
            live = self.live[user]
            changed = self.rng.sample(range(len(live)), min(len(live), self.rng.randint(0, 8)))
            if not changed:
                continue
            updates = []
            for i in changed:
                rid, (text_marker, meta_marker) = live[i]
                fresh = self.marker()
                words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 60)))
                updates.append(MemoryUpdate(id=rid, text=f"{user} now says {fresh} {words}"))
                self.erased.append(text_marker)
                live[i] = (rid, [fresh, meta_marker])
            assert self.memory.update_sync(updates, scope=MemoryScope(user_id=user)) == [u.id for u in updates]


def run(
    db_path: str,
    driver: str,
    seed: int,
    *,
    use_fts5: bool,
    with_embedder: bool,
    index: bool = False,
    page_size: int | None = None,
) -> tuple[list[str], list[str]]:
    """Run one random workload; return (erased markers still in the files, live markers missing)."""
    rng = random.Random(seed)
    embedder = CallableEmbedder(random_vectors, dim=128, name="random-128") if index else bow_embedder()
    memory = SQLiteMemory(
        db_path,
        embedder=embedder if with_embedder else None,
        retention_days=30,
        driver=driver,
        use_fts5=use_fts5,
        ann_threshold=1 if index else None,
        page_size=page_size,
    )
    work = Workload(memory, rng)
    texts: dict[str, str] = {}  # text marker -> text, for the codes of the index
    survivors: list[str] = []

    def codes_left() -> list[str]:
        data = raw_bytes(db_path)
        return [f"code of {m}" for m in work.erased + work.aged if m in texts and any_code(texts[m], data)]

    for round_no in range(rng.randint(3, 6)):
        work.batch()
        if index:
            texts.update({r.text.split()[2]: r.text for r in memory.export_sync(MemoryScope(user_id=work.users[0]))})
            texts.update({r.text.split()[2]: r.text for r in memory.export_sync(MemoryScope(user_id=work.users[1]))})
            if round_no == 0:
                for user in work.users:  # the index is built once; later writes maintain it
                    asyncio.run(memory.store.build_index(MemoryScope(user_id=user)))
        work.delete_some()
        survivors += found(raw_bytes(db_path), work.erased)  # right after the deletes
        work.update_some()
        survivors += found(raw_bytes(db_path), work.erased)  # right after the updates
        if index:
            survivors += codes_left()
    gone, kept = work.users
    erased = work.erased + work.aged + [m for _, ms in work.live[gone] for m in ms] + [gone]
    assert memory.delete_sync(scope=MemoryScope(user_id=gone)) >= len(work.live[gone])  # + its aged ones
    memory.purge_sync()
    survivors += found(raw_bytes(db_path), erased)
    if index:
        work.erased = [m for m in erased if m in texts]
        survivors += codes_left()
    memory.close()
    survivors += found(raw_bytes(db_path), erased)
    survivors = sorted(set(survivors))
    alive = [m for _, ms in work.live[kept] for m in ms]
    missing = sorted(set(alive) - set(found(raw_bytes(db_path), alive)))
    if index:  # the live user's codes are still there: the check sees them
        data = raw_bytes(db_path)
        missing += [f"code of {m}" for m in alive if m in texts and not every_code(texts[m], data)]
    return survivors, missing


@pytest.mark.parametrize("use_fts5", [True, False], ids=["fts5", "like"])
@pytest.mark.parametrize("with_embedder", [False, True], ids=["keyword", "embedder"])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_no_erased_byte_survives_page_rebalancing(
    tmp_path: object, driver: str, seed: int, use_fts5: bool, with_embedder: bool
) -> None:
    db_path = os.path.join(str(tmp_path), "memory.db")
    survivors, missing = run(db_path, driver, seed, use_fts5=use_fts5, with_embedder=with_embedder)
    assert missing == []  # the check sees what is there
    assert survivors == [], f"{len(survivors)} erased markers still in the files: {survivors[:5]}"


@pytest.mark.parametrize("seed", range(SEEDS))
def test_no_erased_vector_code_survives_in_the_index(tmp_path: object, driver: str, seed: int) -> None:
    db_path = os.path.join(str(tmp_path), "memory.db")
    survivors, missing = run(db_path, driver, seed, use_fts5=True, with_embedder=True, index=True)
    assert missing == []
    assert survivors == [], f"{len(survivors)} erased markers or codes still in the files: {survivors[:5]}"


@pytest.mark.parametrize("index", [False, True], ids=["exact", "index"])
@pytest.mark.parametrize("seed", range(min(SEEDS, 4)))
def test_no_erased_byte_survives_in_a_file_of_16k_pages(tmp_path: object, driver: str, seed: int, index: bool) -> None:
    """The same workloads in a file created with ``page_size=16384`` (ten vectors a page instead of two)."""
    db_path = os.path.join(str(tmp_path), "memory.db")
    survivors, missing = run(db_path, driver, seed, use_fts5=True, with_embedder=True, index=index, page_size=16384)
    with open(db_path, "rb") as f:
        assert int.from_bytes(f.read(18)[16:18], "big") == 16384  # the file's header: 16 KiB pages
    assert missing == []
    assert survivors == [], f"{len(survivors)} erased markers or codes still in the files: {survivors[:5]}"
