"""memoryport against its peers (mem0 local, LangGraph's SqliteStore, Chroma, LanceDB, sqlite-vec, FAISS), one run.

Run from the repository root (``pip install -e ".[dev,bench]"``)::

    python -m benchmarks.compare --sizes 1000 10000 100000 --out docs/benchmarks-compare.md --plots docs/img
    python -m benchmarks.compare --quick          # tiny sizes, checks that the harness runs (< 1 min)

Systems, all given the same precomputed 384-d vectors (no model runs while storage is timed):

- memoryport ``SQLiteMemory`` in keyword, vector and hybrid mode, through the public API (the guard);
- mem0 local: ``mem0.Memory`` with qdrant in memory, ``infer=False``, an ``EmbeddingBase`` returning the
  precomputed vectors; its history database runs with ``synchronous=OFF`` (generous to mem0);
- sqlite-vec: a ``vec0`` table (cosine, the text as an auxiliary column), plain SQL;
- FAISS ``IndexFlatIP`` over the unit vectors (exact cosine), texts in a Python list;
- LangGraph's ``SqliteStore`` (``langgraph-checkpoint-sqlite``) with its vector index (sqlite-vec), WAL and
  ``synchronous=NORMAL`` like memoryport, ``put`` / ``batch`` / ``search(namespace, query=...)``;
- Chroma ``PersistentClient`` (cosine HNSW, approximate), the user as a ``where`` filter, telemetry off;
- LanceDB embedded on disk, exact (flat) cosine search with the user as a prefilter, no index built.

Each peer is optional: when its package is missing the run says so, with its install line
(``pip install "memoryport[bench,bench-peers,sqlite-new]"`` installs them all; none pulls torch).

Per size it times (a) loading the records in bulk, (b) adding one more record per call and
(c) searching (k=10) with the same queries. Adds and searches are interleaved system by system,
query by query, in a rotating order, so that the ratios share the machine's noise. mem0's
public ``add()`` costs ~15 ms per record, so above ``--mem0-public-max`` records its store is
pre-filled through its own ``vector_store.insert()`` with the payload ``_create_memory`` writes;
the timed calls are always the public ``add()`` / ``search()``.

``LocalEmbedder`` (all-MiniLM-L6-v2 on numpy) is timed apart on the same texts: add its
per-query time to each search figure for end-to-end latency with a local model.
"""

# ruff: noqa: SIM905  (word lists read better as one string each)

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# Before numpy loads: OpenBLAS's idle workers otherwise spin for a while after every call and
# take the second core from whatever is timed next (performance probe, 2-core machine).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # Chroma (its Settings say so too)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "MEM0_DIR" not in os.environ:  # mem0's history database; removed when the process ends
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="memoryport-compare-mem0-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], ignore_errors=True)

import argparse
import asyncio
import hashlib
import json
import logging
import platform
import random
import re
import shutil
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.sqlite_bench import LookupEmbedder, remove, scratch, table, write
from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import load_driver

DIM = 384
K = 10
USER = "bench"
BULK_BATCH = 1_000
Vectors = np.ndarray[Any, np.dtype[np.float32]]

# -- data: realistic sentences, deterministic ------------------------------------------------

NAMES = (
    "Alice|Bruno|Chen|Dana|Elif|Farid|Grace|Hugo|Ines|Jonas|Kemal|Lena|Mateo|Nadia|Oscar|Priya|Quinn|Rosa|"
    "Sami|Tara|Umar|Vera|Wen|Ximena|Yusuf|Zoe|Aaron|Bianca|Carlos|Deepa|Emil|Fatima|Gustav|Hana|Ivan|"
    "Julia|Kofi|Lucia|Marco|Nora"
).split("|")
COMPANIONS = (
    "her sister|his brother|a colleague|their neighbour|an old friend|her mother|his father|the kids|"
    "her partner|his roommate|a friend from school|the team|her aunt|his grandmother|a new friend"
).split("|")
PLACES = (
    "Lisbon|Kyoto|the Alps|Berlin|a small village near Porto|Toronto|the coast|Oaxaca|Edinburgh|Nairobi|"
    "the lake district|Seoul|Marrakesh|Vancouver|the old town|Istanbul|Patagonia|Copenhagen|Hanoi|Sicily"
).split("|")
WHEN = (
    "last weekend|yesterday|last summer|two weeks ago|on Friday evening|over the holidays|in March|"
    "this morning|last year|on her birthday|after work|during the long weekend"
).split("|")
ACTIVITIES = (
    "hiking|camping|sailing|skiing|cycling|surfing|kayaking|birdwatching|climbing|running a half marathon"
).split("|")
PETS = "dog|cat|rabbit|parrot|tortoise|hamster|puppy|kitten".split("|")
PET_NAMES = "Biscuit|Luna|Pepper|Mochi|Rex|Olive|Ziggy|Clover|Pixel|Nugget".split("|")
INSTRUMENTS = "guitar|piano|violin|drums|cello|ukulele|saxophone|flute".split("|")
REASONS = (
    "it helps with stress|a friend plays in a band|she wants to join a choir|it was a childhood dream|"
    "the neighbours asked for lessons|he wants to play at the wedding"
).split("|")
FOODS = "ramen|paella|tacos|dumplings|pizza|curry|sushi|falafel|pastries|soup".split("|")
VERDICTS = "amazing|too salty|worth the wait|disappointing|better than last time|surprisingly cheap".split("|")
JOBS = "nurse|data analyst|teacher|architect|chef|software engineer|photographer|accountant|carpenter".split("|")
ORGS = "hospital|startup|public library|bakery|design studio|school|museum|bank|bike shop".split("|")
TOPICS = (
    "climate change|ancient Rome|mushroom foraging|the history of jazz|machine learning|urban gardening|"
    "the deep sea|chess openings|stoic philosophy|bird migration"
).split("|")
FEELINGS = "exhausted|proud|nervous|relieved|inspired|homesick|grateful|frustrated".split("|")
EVENTS = (
    "the job interview|the marathon|moving house|the exam|the first day at the new job|the surgery|"
    "the family reunion|the concert"
).split("|")
DRINKS = "green tea|black coffee|oat milk lattes|hot chocolate|sparkling water|chai".split("|")

# (statement, question) pairs over the same slots: a query asks about one stored record.
TEMPLATES = (
    ("{name} went {activity} in {place} with {companion} {when}.", "Where did {name} go {activity}?"),
    ("{name} adopted a {pet} named {pet_name} {when}.", "What is the name of {name}'s {pet}?"),
    ("{name} is learning to play the {instrument} because {reason}.", "Why is {name} learning the {instrument}?"),
    ("{name} said the {food} at the market in {place} was {verdict}.", "What did {name} think of the {food}?"),
    ("{name} started a new job as a {job} at a {org} in {place} {when}.", "Where does {name} work as a {job}?"),
    ("{name} is reading a book about {topic} that {companion} recommended.", "What book is {name} reading?"),
    ("{name} felt {feeling} after {event} {when}.", "How did {name} feel after {event}?"),
    ("{name} prefers {drink} in the morning and never drinks it after noon.", "What does {name} drink?"),
    ("{name} plans to visit {place} next spring to see {companion}.", "When is {name} going to {place}?"),
    ("{name} cooked {food} for {companion} {when} and it was {verdict}.", "What did {name} cook for {companion}?"),
)
SLOTS = {
    "name": NAMES,
    "companion": COMPANIONS,
    "place": PLACES,
    "when": WHEN,
    "activity": ACTIVITIES,
    "pet": PETS,
    "pet_name": PET_NAMES,
    "instrument": INSTRUMENTS,
    "reason": REASONS,
    "food": FOODS,
    "verdict": VERDICTS,
    "job": JOBS,
    "org": ORGS,
    "topic": TOPICS,
    "feeling": FEELINGS,
    "event": EVENTS,
    "drink": DRINKS,
}


class Data:
    """Records, extra records for single adds, queries and their vectors; all from one seed.

    Vectors are a hashed bag of words (a fixed random vector per word, summed, plus noise,
    normalised): texts sharing words are near each other, so every system's top 10 is a real
    ranking that can be cross-checked. Exact search costs the same whatever the values are.
    """

    def __init__(self, records: int, extra: int, queries: int, seed: int = 7) -> None:
        rng = random.Random(seed)
        slots: list[dict[str, str]] = []
        texts: list[str] = []
        seen: set[str] = set()
        while len(texts) < records + extra:
            template = rng.randrange(len(TEMPLATES))
            values = {key: rng.choice(options) for key, options in SLOTS.items()}
            text = TEMPLATES[template][0].format(**values)
            if text in seen:  # unique texts: the lookup embedders map a text to one vector
                continue
            seen.add(text)
            slots.append({"template": str(template), **values})
            texts.append(text)
        self.texts = texts[:records]
        self.extra = texts[records:]
        self.queries = []
        for _ in range(queries):
            values = slots[rng.randrange(records)]
            self.queries.append(TEMPLATES[int(values["template"])][1].format(**values))
        vocab = sorted({w for t in (*texts, *self.queries) for w in words(t)})
        self.index = {w: i for i, w in enumerate(vocab)}
        np_rng = np.random.default_rng(seed)
        self.word_vectors = np_rng.standard_normal((len(vocab), DIM)).astype(np.float32)
        self.noise_rng = np_rng
        self.vectors = self.embed(self.texts)
        self.extra_vectors = self.embed(self.extra)
        self.query_vectors = self.embed(self.queries)

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for start in range(0, len(texts), 10_000):
            chunk = texts[start : start + 10_000]
            ids = [[self.index[w] for w in words(t)] for t in chunk]
            lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter((w for i in ids for w in i), dtype=np.int64, count=int(lengths.sum()))
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            out[start : start + len(chunk)] = np.add.reduceat(self.word_vectors[flat], starts, axis=0)
        out += 0.5 * self.noise_rng.standard_normal(out.shape).astype(np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return np.ascontiguousarray(out)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


# -- the systems ------------------------------------------------------------------------------
# Each offers: load(n) (bulk, the first n records), add_one(j) (extra record j, one call),
# search(q) (query q, k=10) and top(q) (texts of the top 10, for the cross-check).


class Memoryport:
    """SQLiteMemory through the guard; one file, three instances for the three search modes."""

    label = "memoryport"

    def __init__(self, data: Data, folder: Path, n: int) -> None:
        self.data = data
        self.embedder = LookupEmbedder()
        self.embedder.put(data.texts[:n], data.vectors[:n])
        self.embedder.put(data.extra, data.extra_vectors)
        self.embedder.put(data.queries, data.query_vectors)
        self.scope = MemoryScope(user_id=USER)
        self.path = folder / f"memoryport-{n}.db"
        self.modes = {mode: SQLiteMemory(self.path, embedder=self.embedder, search_mode=mode) for mode in MODES}
        self.writer = self.modes["hybrid"]
        self.extra = [MemoryRecord(scope=self.scope, text=t) for t in data.extra]

    async def load(self, n: int) -> None:
        batch = [MemoryRecord(scope=self.scope, text=t) for t in self.data.texts[:n]]
        start = time.perf_counter()
        for i in range(0, n, BULK_BATCH):
            await self.writer.add(batch[i : i + BULK_BATCH])
        self.load_seconds = time.perf_counter() - start

    async def add_one(self, j: int) -> None:
        await self.writer.add([self.extra[j]])

    def searcher(self, mode: str) -> Callable[[int], Awaitable[Any]]:
        memory = self.modes[mode]
        return lambda q: memory.search(self.data.queries[q], scope=self.scope, k=K)

    async def top(self, q: int) -> list[str]:
        return [h.record.text for h in await self.modes["vector"].search(self.data.queries[q], scope=self.scope, k=K)]

    async def close(self) -> None:
        for memory in self.modes.values():
            await memory.aclose()
        remove(self.path)


MODES = ("keyword", "vector", "hybrid")


class Mem0Local:
    """mem0.Memory, qdrant in memory, infer=False, the precomputed vectors through an EmbeddingBase."""

    label = "mem0 local (qdrant in memory)"

    def __init__(self, data: Data, folder: Path, n: int) -> None:
        from mem0 import Memory
        from mem0.embeddings.base import EmbeddingBase
        from qdrant_client import QdrantClient

        table_ = {t: v for t, v in zip(data.texts[:n], data.vectors[:n], strict=True)}
        table_.update(zip(data.extra, data.extra_vectors, strict=True))
        table_.update(zip(data.queries, data.query_vectors, strict=True))

        class Precomputed(EmbeddingBase):  # type: ignore[misc]
            def embed(self, text: str, memory_action: str | None = None) -> list[float]:
                return table_[text].tolist()  # type: ignore[no-any-return]

        for name in ("mem0", "qdrant_client", "httpx"):  # offline degradations are logged per call
            logging.getLogger(name).setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client = Memory.from_config(
                {
                    # Memory() builds its LLM client even with infer=False; it is never called.
                    "llm": {"provider": "openai", "config": {"api_key": "unused"}},
                    "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": DIM}},
                    "vector_store": {
                        "provider": "qdrant",
                        "config": {
                            "collection_name": "bench",
                            "embedding_model_dims": DIM,
                            "client": QdrantClient(":memory:"),
                        },
                    },
                    "history_db_path": str(folder / f"mem0-history-{n}.db"),
                }
            )
        self.client.embedding_model = Precomputed()
        # Generous to mem0: no fsync per history row (memoryport keeps synchronous=NORMAL in WAL).
        self.client.db.connection.execute("PRAGMA synchronous=OFF")
        self.data = data
        self.public_load = True

    async def load(self, n: int, public_max: int) -> None:
        texts = self.data.texts[:n]
        self.public_load = n <= public_max
        start = time.perf_counter()
        if self.public_load:
            for i in range(0, n, 100):
                self.client.add([{"role": "user", "content": t} for t in texts[i : i + 100]], user_id=USER, infer=False)
        else:
            self.prefill(texts, self.data.vectors[:n])
        self.load_seconds = time.perf_counter() - start

    def prefill(self, texts: Sequence[str], vectors: Vectors) -> None:
        """What add(infer=False) writes to the vector store, in batches (history rows are skipped)."""
        from mem0.utils.lemmatization import lemmatize_for_bm25

        for i in range(0, len(texts), BULK_BATCH):
            payloads, ids = [], []
            for t in texts[i : i + BULK_BATCH]:
                now = datetime.now(timezone.utc).isoformat()
                payloads.append(
                    {
                        "user_id": USER,
                        "role": "user",
                        "data": t,
                        "hash": hashlib.md5(t.encode()).hexdigest(),
                        "created_at": now,
                        "updated_at": now,
                        "text_lemmatized": lemmatize_for_bm25(t),
                    }
                )
                ids.append(str(uuid.uuid4()))
            self.client.vector_store.insert(vectors=vectors[i : i + BULK_BATCH].tolist(), ids=ids, payloads=payloads)

    def add_one(self, j: int) -> None:
        self.client.add(self.data.extra[j], user_id=USER, infer=False)

    def search(self, q: int) -> Any:
        return self.client.search(self.data.queries[q], top_k=K, filters={"user_id": USER}, threshold=0.0)

    async def top(self, q: int) -> list[str]:
        return [r["memory"] for r in self.search(q)["results"]]

    async def close(self) -> None:
        self.client.vector_store.client.close()
        self.client.close()


class SqliteVec:
    """A vec0 table (cosine) with the text as an auxiliary column; WAL and synchronous=NORMAL like memoryport."""

    label = "sqlite-vec vec0"

    def __init__(self, data: Data, folder: Path, n: int) -> None:
        import sqlite_vec

        self.data = data
        self.path = folder / f"vec0-{n}.db"
        self.conn = vec0_connection(sqlite_vec, self.path)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute(
            f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}] distance_metric=cosine, +text text)"
        )
        self.conn.commit()
        self.next_rowid = 1

    async def load(self, n: int) -> None:
        start = time.perf_counter()
        for i in range(0, n, BULK_BATCH):
            rows = [
                (i + r + 1, self.data.vectors[i + r].tobytes(), t)
                for r, t in enumerate(self.data.texts[i : min(n, i + BULK_BATCH)])
            ]
            self.conn.executemany("INSERT INTO v(rowid, embedding, text) VALUES (?, ?, ?)", rows)
            self.conn.commit()
        self.load_seconds = time.perf_counter() - start
        self.next_rowid = n + 1

    def add_one(self, j: int) -> None:
        self.conn.execute(
            "INSERT INTO v(rowid, embedding, text) VALUES (?, ?, ?)",
            (self.next_rowid, self.data.extra_vectors[j].tobytes(), self.data.extra[j]),
        )
        self.conn.commit()
        self.next_rowid += 1

    def search(self, q: int) -> Any:
        return self.conn.execute(
            "SELECT rowid, distance, text FROM v WHERE embedding MATCH ? AND k = ?",
            (self.data.query_vectors[q].tobytes(), K),
        ).fetchall()

    async def top(self, q: int) -> list[str]:
        return [row[2] for row in self.search(q)]

    async def close(self) -> None:
        self.conn.close()
        remove(self.path)


def vec0_connection(sqlite_vec: Any, path: Path) -> Any:
    """A connection of the first SQLite driver here that can load extensions (the stdlib often cannot)."""
    errors = []
    for name in ("pysqlite3", "sqlean", "sqlite3"):
        try:
            _, module = load_driver(name)
            conn = module.connect(str(path))
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            return conn
        except Exception as exc:  # a driver missing or built without load_extension: try the next
            errors.append(f"{name}: {type(exc).__name__}")
    raise ImportError("no SQLite driver here can load extensions (" + ", ".join(errors) + ")")


class Faiss:
    """faiss IndexFlatIP over the unit vectors (exact cosine); texts in a Python list."""

    label = "FAISS IndexFlatIP"

    def __init__(self, data: Data, folder: Path, n: int) -> None:
        import faiss

        self.data = data
        self.index = faiss.IndexFlatIP(DIM)
        self.texts: list[str] = []

    async def load(self, n: int) -> None:
        start = time.perf_counter()
        self.index.add(self.data.vectors[:n])
        self.texts.extend(self.data.texts[:n])
        self.load_seconds = time.perf_counter() - start

    def add_one(self, j: int) -> None:
        self.index.add(self.data.extra_vectors[j : j + 1])
        self.texts.append(self.data.extra[j])

    def search(self, q: int) -> Any:
        return self.index.search(self.data.query_vectors[q : q + 1], K)

    async def top(self, q: int) -> list[str]:
        _, ids = self.search(q)
        return [self.texts[i] for i in ids[0] if i >= 0]

    async def close(self) -> None:
        self.index.reset()


class LangGraphSqlite:
    """LangGraph's ``SqliteStore`` with its vector index (sqlite-vec), WAL and synchronous=NORMAL like memoryport."""

    label = "LangGraph SqliteStore"

    def __init__(self, data: Data, folder: Path, n: int) -> None:
        from langgraph.store.sqlite import SqliteStore

        table_ = {t: v for t, v in zip(data.texts[:n], data.vectors[:n], strict=True)}
        table_.update(zip(data.extra, data.extra_vectors, strict=True))
        table_.update(zip(data.queries, data.query_vectors, strict=True))

        def embed(texts: list[str]) -> list[list[float]]:
            # SqliteStore may hand over the whole value as JSON rather than the field.
            return [table_[t if t in table_ else json.loads(t)["text"]].tolist() for t in texts]

        self.data = data
        self.path = folder / f"langgraph-{n}.db"
        # The stdlib sqlite3 here cannot load sqlite-vec: the first driver that can (pysqlite3 here).
        import sqlite_vec

        self.conn = vec0_connection(sqlite_vec, self.path)
        self.conn.isolation_level = None
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.store = SqliteStore(self.conn, index={"dims": DIM, "embed": embed, "fields": ["text"]})
        self.store.setup()
        self.namespace = (USER,)

    async def load(self, n: int) -> None:
        from langgraph.store.base import PutOp

        start = time.perf_counter()
        for i in range(0, n, BULK_BATCH):
            self.store.batch(
                [PutOp(self.namespace, f"r{j}", {"text": self.data.texts[j]}) for j in range(i, min(n, i + BULK_BATCH))]
            )
        self.load_seconds = time.perf_counter() - start

    def add_one(self, j: int) -> None:
        self.store.put(self.namespace, f"x{j}", {"text": self.data.extra[j]})

    def search(self, q: int) -> Any:
        return self.store.search(self.namespace, query=self.data.queries[q], limit=K)

    async def top(self, q: int) -> list[str]:
        return [item.value["text"] for item in self.search(q)]

    async def close(self) -> None:
        self.conn.close()
        remove(self.path)


class Chroma:
    """Chroma ``PersistentClient`` (cosine HNSW, approximate), the user as a metadata filter; telemetry off."""

    label = "Chroma (user filter)"

    def __init__(self, data: Data, folder: Path, n: int) -> None:
        import chromadb
        from chromadb.config import Settings

        self.data = data
        self.folder = folder / f"chroma-{n}"
        self.client = chromadb.PersistentClient(str(self.folder), settings=Settings(anonymized_telemetry=False))
        self.collection = self.client.create_collection(
            "bench", metadata={"hnsw:space": "cosine"}, embedding_function=None
        )
        self.where = {"user_id": USER}

    async def load(self, n: int) -> None:
        start = time.perf_counter()
        for i in range(0, n, BULK_BATCH):
            end = min(n, i + BULK_BATCH)
            self.collection.add(
                ids=[f"r{j}" for j in range(i, end)],
                embeddings=self.data.vectors[i:end],
                documents=self.data.texts[i:end],
                metadatas=[self.where] * (end - i),
            )
        self.load_seconds = time.perf_counter() - start

    def add_one(self, j: int) -> None:
        self.collection.add(
            ids=[f"x{j}"],
            embeddings=self.data.extra_vectors[j : j + 1],
            documents=[self.data.extra[j]],
            metadatas=[self.where],
        )

    def search(self, q: int) -> Any:
        return self.collection.query(
            query_embeddings=self.data.query_vectors[q : q + 1], n_results=K, where=self.where
        )

    async def top(self, q: int) -> list[str]:
        return list(self.search(q)["documents"][0])

    async def close(self) -> None:
        try:
            self.client.delete_collection("bench")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


class LanceDB:
    """LanceDB (embedded, on disk), exact (flat) cosine search with the user as a prefilter; no index built."""

    label = "LanceDB (flat)"

    def __init__(self, data: Data, folder: Path, n: int) -> None:
        import lancedb
        import pyarrow as pa

        self.pa = pa
        self.data = data
        self.folder = folder / f"lancedb-{n}"
        self.db = lancedb.connect(str(self.folder))
        self.schema = pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field("user_id", pa.string()),
                pa.field("text", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), DIM)),
            ]
        )
        self.table = self.db.create_table("bench", schema=self.schema)

    def _batch(self, ids: Sequence[str], texts: Sequence[str], vectors: Vectors) -> Any:
        pa = self.pa
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
        return pa.table(
            {
                "id": pa.array(ids, pa.string()),
                "user_id": pa.array([USER] * len(ids), pa.string()),
                "text": pa.array(texts, pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(flat, DIM),
            },
            schema=self.schema,
        )

    async def load(self, n: int) -> None:
        start = time.perf_counter()
        for i in range(0, n, BULK_BATCH):
            end = min(n, i + BULK_BATCH)
            ids = [f"r{j}" for j in range(i, end)]
            self.table.add(self._batch(ids, self.data.texts[i:end], self.data.vectors[i:end]))
        self.load_seconds = time.perf_counter() - start

    def add_one(self, j: int) -> None:
        self.table.add(self._batch([f"x{j}"], [self.data.extra[j]], self.data.extra_vectors[j : j + 1]))

    def search(self, q: int) -> Any:
        return (
            self.table.search(self.data.query_vectors[q])
            .metric("cosine")
            .where(f"user_id = '{USER}'", prefilter=True)
            .limit(K)
            .to_arrow()
        )

    async def top(self, q: int) -> list[str]:
        return [str(t) for t in self.search(q).column("text").to_pylist()]

    async def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


OPTIONAL: dict[str, tuple[type[Any], str, str]] = {
    # label: (class, module to import, how to install)
    Mem0Local.label: (Mem0Local, "mem0", 'pip install "memoryport[mem0]" (mem0ai, qdrant-client)'),
    SqliteVec.label: (
        SqliteVec,
        "sqlite_vec",
        'pip install "memoryport[bench,sqlite-new]" (sqlite-vec, pysqlite3-binary)',
    ),
    Faiss.label: (Faiss, "faiss", 'pip install "memoryport[bench]" (faiss-cpu)'),
    LangGraphSqlite.label: (
        LangGraphSqlite,
        "langgraph.store.sqlite",
        'pip install "memoryport[bench-peers,sqlite-new]" (langgraph-checkpoint-sqlite, sqlite-vec, pysqlite3-binary)',
    ),
    Chroma.label: (Chroma, "chromadb", 'pip install "memoryport[bench-peers]" (chromadb)'),
    LanceDB.label: (LanceDB, "lancedb", 'pip install "memoryport[bench-peers]" (lancedb)'),
}


def available(folder: Path) -> tuple[list[str], dict[str, str]]:
    """The optional systems that can run here, and why each other one cannot."""
    import importlib

    ok, skipped = [], {}
    for label, (cls, module, install) in OPTIONAL.items():
        try:
            importlib.import_module(module)
            if cls in (SqliteVec, LangGraphSqlite):
                vec0_connection(importlib.import_module("sqlite_vec"), folder / "probe-vec0.db").close()
                remove(folder / "probe-vec0.db")
            ok.append(label)
        except ImportError as exc:
            skipped[label] = f"{exc}; {install}"
    return ok, skipped


# -- timing ------------------------------------------------------------------------------------


async def call(fn: Callable[[int], Any], i: int) -> None:
    result = fn(i)
    if asyncio.iscoroutine(result):
        await result


async def interleaved(
    methods: dict[str, Callable[[int], Any]], indices: Sequence[int], warm: Sequence[int]
) -> dict[str, list[float]]:
    """Time every method on index i, rotating their order per round; ``warm`` indices run untimed first."""
    names = list(methods)
    for name in names:
        for i in warm:
            await call(methods[name], i)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r, i in enumerate(indices):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            await call(methods[name], i)
            times[name].append(time.perf_counter() - start)
    return times


def med(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def p95(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, -(-len(ordered) * 95 // 100) - 1)] * 1000


# -- one size ------------------------------------------------------------------------------------


async def bench_size(
    data: Data, n: int, args: argparse.Namespace, systems: list[str], folder: Path, results: dict[str, Any]
) -> None:
    mp = Memoryport(data, folder, n)
    others: dict[str, Any] = {}
    try:
        for label in systems:
            others[label] = OPTIONAL[label][0](data, folder, n)
        # (a) bulk load, each system in turn (one load each: a load is many operations already).
        await mp.load(n)
        for system in others.values():
            if isinstance(system, Mem0Local):
                await system.load(n, args.mem0_public_max)
            else:
                await system.load(n)
        load = {mp.label: (mp.load_seconds, True)}
        load.update({label: (s.load_seconds, getattr(s, "public_load", True)) for label, s in others.items()})
        results["load"][n] = load

        # (c) search first, at exactly n records; every system on query i before query i+1.
        methods: dict[str, Callable[[int], Any]] = {f"{mp.label} {m}": mp.searcher(m) for m in MODES}
        methods.update({label: s.search for label, s in others.items()})
        queries = list(range(len(data.queries)))
        warm = queries[: min(3, len(queries))]
        times = await interleaved(methods, queries, warm)
        # Cross-check: the exact vector systems should agree on the top 10 (FAISS is the reference).
        agree: dict[str, float] = {}
        if Faiss.label in others:
            checked = queries[:5]
            ref = {q: set(await others[Faiss.label].top(q)) for q in checked}
            vector_systems = {f"{mp.label} vector": mp, **{k: v for k, v in others.items() if k != Faiss.label}}
            for label, system in vector_systems.items():
                overlaps = [len(set(await system.top(q)) & ref[q]) / K for q in checked]
                agree[label] = statistics.mean(overlaps)
        results["search"][n] = (times, agree)

        # (b) one record per call, on top of the n records.
        adders: dict[str, Callable[[int], Any]] = {mp.label: mp.add_one}
        adders.update({label: s.add_one for label, s in others.items()})
        per = args.adds
        # Each system gets its own extra records (the same texts for all), so none adds a duplicate.
        warm_adds = list(range(per, per + 3))
        results["add"][n] = await interleaved(adders, list(range(per)), warm_adds)
    finally:
        await mp.close()
        for system in others.values():
            await system.close()


# -- embedding time, apart -------------------------------------------------------------------------


async def bench_embedding(data: Data, rounds: int, batch_texts: int) -> list[list[Any]] | str:
    try:
        from memoryport.embedders.local import LocalEmbedder

        embedder = LocalEmbedder()
    except Exception as exc:  # the model package or its extra is missing: report, do not fail
        return f"LocalEmbedder skipped: {type(exc).__name__}: {exc}"
    queries = data.queries[:rounds]
    texts = data.texts[:batch_texts]
    await embedder.embed(queries[:2])  # warm
    single = []
    for q in queries:
        start = time.perf_counter()
        await embedder.embed([q])
        single.append(time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(0, len(texts), 32):
        await embedder.embed(texts[i : i + 32])
    bulk = time.perf_counter() - start
    return [
        ["one query (batch 1)", len(queries), med(single), p95(single), 1 / statistics.median(single)],
        ["records, batches of 32", len(texts), 1000 * bulk / len(texts), "–", len(texts) / bulk],
    ]


# -- report ------------------------------------------------------------------------------------------


def report(
    results: dict[str, Any], sizes: Sequence[int], systems: list[str], skipped: dict[str, str], args: argparse.Namespace
) -> str:
    out: list[str] = []
    mp = Memoryport.label
    all_labels = [mp, *systems]

    rows = []
    for n in sizes:
        load = results["load"][n]
        base = load[mp][0]
        for label in all_labels:
            seconds, public = load[label]
            if public:
                rows.append([label, n, n / seconds, seconds, seconds / base])
            else:
                rows.append([label, n, "not timed: pre-filled via vector_store.insert()", seconds, "–"])
    out.append("### Bulk load (records/s; public API, batches of 1,000; x memoryport = its time / memoryport's)\n")
    out.append(table(["system", "records", "records/s", "seconds", "x memoryport"], rows))

    rows = []
    for n in sizes:
        times = results["add"][n]
        base = med(times[mp])
        rows += [[label, n, med(times[label]), p95(times[label]), med(times[label]) / base] for label in all_labels]
    out.append(
        f"\n### Add one record per call on top of N records (ms; {args.adds} interleaved calls per system; "
        "x memoryport = median / memoryport's)\n"
    )
    out.append(table(["system", "N", "median ms", "p95 ms", "x memoryport"], rows))

    rows = []
    for n in sizes:
        times, agree = results["search"][n]
        hybrid, vector = med(times[f"{mp} hybrid"]), med(times[f"{mp} vector"])
        for label, t in times.items():
            cross = agree.get(label)
            rows.append(
                [label, n, med(t), p95(t), med(t) / hybrid, med(t) / vector, "–" if cross is None else f"{cross:.2f}"]
            )
    out.append(
        f"\n### Search, k={K}, one user holding every record ({len(results['queries'])} interleaved queries; "
        "x = median / memoryport's median in that mode)\n"
    )
    out.append(
        table(
            ["system", "N", "median ms", "p95 ms", "x memoryport hybrid", "x memoryport vector", "top-10 = FAISS"], rows
        )
    )

    m0 = Mem0Local.label
    if m0 in systems:
        rows = []
        for n in sizes:
            add = results["add"][n]
            times, _ = results["search"][n]
            a = med(add[m0]) / med(add[mp])
            s_h = med(times[m0]) / med(times[f"{mp} hybrid"])
            s_v = med(times[m0]) / med(times[f"{mp} vector"])
            met = "yes" if min(a, s_h) >= 10 else "no"
            rows.append([n, f"{a:.1f}x", f"{s_h:.1f}x", f"{s_v:.1f}x", met])
        out.append("\n### Goal: memoryport ≥ 10x faster than mem0 local at add and at search (storage only)\n")
        out.append(
            table(
                ["N", "add: mem0 / memoryport", "search: mem0 / hybrid", "search: mem0 / vector", "≥ 10x at both"], rows
            )
        )

    emb = results.get("embedding")
    if isinstance(emb, list):
        out.append("\n### LocalEmbedder (all-MiniLM-L6-v2, numpy), same texts, timed apart\n")
        out.append(table(["what", "texts", "ms per text (median)", "p95 ms", "texts/s"], emb))
    elif emb:
        out.append(f"\n{emb}")
    if skipped:
        out.append("\n### Skipped\n")
        out += [f"- {label}: skipped ({why})" for label, why in skipped.items()]
    return "\n".join(out) + "\n"


# One colour per system in both plots; memoryport's modes share a hue, its add takes the hybrid one.
COLOURS = {
    "memoryport keyword": ("#9ecae1", "s"),
    "memoryport vector": ("#3182bd", "^"),
    "memoryport hybrid": ("#08519c", "o"),
    "memoryport": ("#08519c", "o"),
    "mem0 local (qdrant in memory)": ("#d62728", "o"),
    "sqlite-vec vec0": ("#2ca02c", "o"),
    "FAISS IndexFlatIP": ("#7f7f7f", "o"),
}


def plots(results: dict[str, Any], sizes: Sequence[int], systems: list[str], folder: Path) -> list[Path] | str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 'plots skipped: matplotlib is missing; pip install "memoryport[bench]"'
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, title in (("search", f"search latency (k={K}, median)"), ("add", "add one record (median)")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        labels = list(results[kind][sizes[0]][0] if kind == "search" else results[kind][sizes[0]])
        for label in labels:
            series = results[kind]
            ys = [med((series[n][0] if kind == "search" else series[n])[label]) for n in sizes]
            style = COLOURS.get(label, ("black", "o"))
            ax.plot(sizes, ys, color=style[0], marker=style[1], label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("records in the store")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = folder / f"compare-{kind}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# -- main ----------------------------------------------------------------------------------------------


async def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=40, help="search rounds per size")
    parser.add_argument("--adds", type=int, default=40, help="single-record add rounds per size")
    parser.add_argument("--mem0-public-max", type=int, default=100_000, help="larger mem0 stores are pre-filled")
    parser.add_argument("--embed-texts", type=int, default=256, help="texts for the LocalEmbedder timing (0: skip)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that the harness runs")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", default=None, help="also write the report to this Markdown file")
    parser.add_argument("--plots", default=None, help="write compare-search.png and compare-add.png here")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.adds, args.embed_texts = [100, 300], 4, 4, 8
    sizes = sorted(args.sizes)
    folder = scratch(args.dir)
    command = "python -m benchmarks.compare " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        systems, skipped = available(folder)
        data = Data(max(sizes), args.adds + 3, args.queries)
        results: dict[str, Any] = {"load": {}, "add": {}, "search": {}, "queries": data.queries}
        for n in sizes:
            print(f"size {n:,} ...", file=sys.stderr, flush=True)
            await bench_size(data, n, args, systems, folder, results)
        if args.embed_texts:
            results["embedding"] = await bench_embedding(data, min(args.queries, 40), args.embed_texts)
        probe = SQLiteMemory(folder / "probe.db")
        probe_sqlite = f"{probe.store.stats()['sqlite_version']} ({probe.store.driver_name})"
        head = (
            f"Command: `{command}`\n\n"
            f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}, memoryport SQLite {probe_sqlite}, "
            f"{versions()}; OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}, "
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, load average at the end "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}.\n"
        )
        await probe.aclose()
        text = head + "\n" + report(results, sizes, systems, skipped, args)
        if args.plots:
            written = plots(results, sizes, systems, Path(args.plots))
            text += (
                "\n" + (written if isinstance(written, str) else "Plots: " + ", ".join(str(p) for p in written)) + "\n"
            )
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(text)
    if args.out:
        write(args.out, text)
    return text


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in ("mem0ai", "qdrant-client", "sqlite-vec", "faiss-cpu", "pysqlite3-binary"):
        try:
            found.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


if __name__ == "__main__":
    asyncio.run(main())
