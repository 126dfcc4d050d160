"""Attack tests (session 14 review): the fast paths' hits equal the SQL path's on awkward texts and writes.

Texts with NUL, the KELVIN SIGN (lower-cases to ASCII ``k``), U+0130, combining marks, Greek sigma,
digits, underscores, empty and long texts; a one-scope user (contextual keys, neighbours and links
from the timeline's positions) and a mixed one (sessions, agents, expiry); writes by this store and by
another between searches; deletes, updates and erasures while the timelines and dictionaries are kept.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _search
from memoryport.adapters.sqlite._timeline import Timelines

from .support import bow_vectors

DIM = 64
VOCAB = [
    "tea",
    "Tea",
    "TEA",
    "k",
    "K",
    "\u212a",
    "\u212aelvin",
    "kelvin",
    "\u0130stanbul",
    "istanbul",
    "i",
    "cafe\u0301",
    "café",
    "cafe",
    "ΟΔΟΣ",
    "οδος",
    "σ",
    "x_y",
    "x",
    "y",
    "2024",
    "²",
    "a",
    "b",
    "river",
    "lamp",
    "ﬁsh",
    "fish",
    "straße",
    "STRASSE",
    "-",
    "...",
    "ǅ",
    "dž",
]
QUERIES = [
    "tea kelvin",
    "K lamp",
    "\u212a",
    "istanbul i",
    "café cafe",
    "οδος σ",
    "x y 2024",
    "a b",
    "fish",
    "dž straße",
]


ASCII = [word for word in VOCAB if word.isascii()]


def _text(rng: random.Random, vocab: list[str]) -> str:
    if rng.random() < 0.05:
        return "-"
    sep = rng.choice([" ", " ", ", ", "\t", "\n", "_"])
    text = sep.join(rng.choices(vocab, k=rng.randint(1, 8)))
    return text * 40 if rng.random() < 0.02 else text


def _batch(rng: random.Random, n: int, start: float) -> list[MemoryRecord]:
    now = utcnow()
    out = []
    for i in range(n):
        user = rng.choice(["one", "mixed", "ascii"])
        scope = (
            MemoryScope(user_id=user, session_id="s", agent_id="bot")
            if user != "mixed"
            else MemoryScope(
                user_id="mixed", session_id=rng.choice([None, "s1", "s2"]), agent_id=rng.choice([None, "bot"])
            )
        )
        # minutes apart, some across the 30-minute session gap, some tied
        age = start - rng.choice([i * 60.0, i * 60.0, i * 60.0 + 1800.0, 0.0])
        out.append(
            MemoryRecord(
                scope=scope,
                text=_text(rng, ASCII if user == "ascii" else VOCAB),
                created_at=now - timedelta(seconds=max(age, 1.0)),
                expires_at=now + timedelta(days=1) if user == "mixed" and i % 5 == 0 else None,
            )
        )
    return out


SCOPES = [
    MemoryScope(user_id="ascii"),
    MemoryScope(user_id="ascii", agent_id="bot"),
    MemoryScope(user_id="one"),
    MemoryScope(user_id="one", session_id="s"),
    MemoryScope(user_id="one", session_id="other"),
    MemoryScope(user_id="mixed"),
    MemoryScope(user_id="mixed", session_id="s1"),
    MemoryScope(user_id="mixed", agent_id="bot"),
]


@pytest.mark.parametrize("embedder", [False, True], ids=["keyword", "hybrid"])
@pytest.mark.parametrize("seed", [1, 2])
def test_fast_paths_equal_the_sql_path_on_awkward_texts(
    tmp_path: Any, embedder: bool, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    path = str(tmp_path / "m.db")
    bow = CallableEmbedder(lambda texts: bow_vectors(texts, DIM), dim=DIM, name="bow") if embedder else None
    memory = SQLiteMemory(path, embedder=bow, previous_mode="all", previous_weight=0.3)
    memory.add_sync(_batch(rng, 300, 400_000.0))
    real_of, real_current, real_context = Timelines.of, Timelines.current, _search.context_in
    answered = [0]

    def context(*args: Any, **kwargs: Any) -> Any:
        found = real_context(*args, **kwargs)
        answered[0] += found is not None
        return found

    monkeypatch.setattr(_search, "context_in", context)

    def searches() -> list[list[tuple[str, float, str]]]:
        out = []
        for scope in SCOPES:
            for q in QUERIES:
                hits = memory.search_sync(q, scope=scope, k=8)
                assert all(scope.covers(h.record.scope) for h in hits)
                out.append([(str(h.record.id), h.score, h.signal) for h in hits])
        return out

    def both() -> list[list[tuple[str, float, str]]]:
        monkeypatch.setattr(Timelines, "of", real_of)
        monkeypatch.setattr(Timelines, "current", real_current)
        for _ in range(4):
            searches()  # builds timelines, buys the word indexes
        answered[0] = 0
        warm = searches()
        assert answered[0] > 0
        monkeypatch.setattr(Timelines, "of", lambda self, conn, user: None)
        monkeypatch.setattr(Timelines, "current", lambda self, conn, user: None)
        cold = searches()
        for w, c, (scope, q) in zip(warm, cold, [(s, q) for s in SCOPES for q in QUERIES], strict=True):
            assert w == c, (scope, q)
        monkeypatch.setattr(Timelines, "of", real_of)
        monkeypatch.setattr(Timelines, "current", real_current)
        return warm

    both()
    # this store's own adds (the timelines and dictionaries extended), after the last records
    memory.add_sync(_batch(rng, 20, 0.0))
    both()
    # another store's write between searches
    other = SQLiteMemory(path, embedder=bow)
    other.add_sync(_batch(rng, 15, 0.0))
    both()
    memory.add_sync(_batch(rng, 10, -100.0))
    other.add_sync(_batch(rng, 5, -200.0))
    other.close()
    both()
    # delete, update and erase while everything is kept: the gone never shows, its text is not found
    one = MemoryScope(user_id="one")
    hit = memory.search_sync("fish", scope=one, k=1)
    if hit:
        memory.delete_sync([str(hit[0].record.id)], scope=one)
        assert all(str(hit[0].record.id) not in [h[0] for h in hits] for hits in both())
    hit = memory.search_sync("tea", scope=one, k=1)
    if hit:
        memory.update_sync([MemoryUpdate(id=str(hit[0].record.id), text="zebra \u212a")], scope=one)
        both()
        assert str(memory.search_sync("zebra", scope=one, k=1)[0].record.id) == str(hit[0].record.id)
    # a session erased by this store, then a record deleted and another updated by a second store (another
    # process's writes: this store's kept timelines and dictionaries hold the old texts)
    s1 = MemoryScope(user_id="mixed", session_id="s1")
    erased = {str(h.record.id) for q in QUERIES for h in memory.search_sync(q, scope=s1, k=50)}
    assert erased
    memory.delete_sync(scope=s1)
    for hits in both():
        assert not erased & {h[0] for h in hits}
    other = SQLiteMemory(path, embedder=bow)
    gone = memory.search_sync("kelvin", scope=one, k=1)
    if gone:
        other.delete_sync([str(gone[0].record.id)], scope=one)
    changed = memory.search_sync("lamp", scope=one, k=1)
    if changed:
        other.update_sync([MemoryUpdate(id=str(changed[0].record.id), text="okapi")], scope=one)
    other.close()
    for hits in both():
        assert not gone or str(gone[0].record.id) not in [h[0] for h in hits]
    if changed:
        assert str(memory.search_sync("okapi", scope=one, k=1)[0].record.id) == str(changed[0].record.id)
        assert str(changed[0].record.id) not in [str(h.record.id) for h in memory.search_sync("lamp", scope=one)]
    both()
    memory.close()
