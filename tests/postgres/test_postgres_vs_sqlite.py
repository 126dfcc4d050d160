"""The same records and queries on SQLite and PostgreSQL rank alike: the ranking code is shared."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.postgres import PostgresMemory

from .support import Server, bow_embedder, fresh_schema

pytestmark = pytest.mark.anyio

WORDS = [
    "apple", "harbour", "violin", "granite", "meadow", "lantern", "pepper", "glacier", "saddle", "orchid",
    "compass", "thunder", "biscuit", "falcon", "marble", "velvet", "canyon", "ember", "willow", "quartz",
]  # fmt: skip


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
async def test_top_results_agree(pg: Server, tmp_path: Path, mode: str) -> None:
    rng = random.Random(7)
    ann = MemoryScope(user_id="ann")
    texts = [" ".join(rng.sample(WORDS, 4)) + f" note{i}" for i in range(120)]
    embedder = bow_embedder()
    sqlite = SQLiteMemory(tmp_path / "m.db", embedder=embedder, search_mode=mode)
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), search_mode=mode)
    try:
        for memory in (sqlite, postgres):
            await memory.add([MemoryRecord(scope=ann, text=t) for t in texts])
        same_first = overlap = 0
        queries = [" ".join(rng.sample(WORDS, 2)) for _ in range(20)] + [texts[i] for i in range(0, 120, 12)]
        for query in queries:
            a = [h.record.text for h in await sqlite.search(query, scope=ann, k=5)]
            b = [h.record.text for h in await postgres.search(query, scope=ann, k=5)]
            same_first += a[0] == b[0]
            overlap += len(set(a) & set(b))
        # Ties among equally scored records may break differently (row order); the rankings agree.
        assert same_first >= 0.8 * len(queries), (mode, same_first)
        assert overlap >= 0.8 * 5 * len(queries), (mode, overlap)
    finally:
        await sqlite.aclose()
        await postgres.aclose()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_a_date_in_the_query_lifts_the_same_records(pg: Server, tmp_path: Path, mode: str) -> None:
    from datetime import datetime, timedelta, timezone

    ann = MemoryScope(user_id="ann")
    start = datetime(2023, 1, 15, 9, tzinfo=timezone.utc)
    # one record a month, each with the same words: only the date tells them apart
    records = [(f"ann hiked the {w} trail", start + timedelta(days=30 * i)) for i, w in enumerate(WORDS[:12])]
    embedder = bow_embedder()
    sqlite = SQLiteMemory(tmp_path / "d.db", embedder=embedder, search_mode=mode)
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), search_mode=mode)
    try:
        for memory in (sqlite, postgres):
            await memory.add([MemoryRecord(scope=ann, text=t, created_at=at) for t, at in records])
        for query, expected in [("where did ann hike in June 2023?", records[5][0]),
                                ("ann hiked on 16 March, 2023", records[2][0])]:
            for memory in (sqlite, postgres):
                hits = await memory.search(query, scope=ann, k=3)
                assert hits[0].record.text == expected, (memory, query, [h.record.text for h in hits])
    finally:
        await sqlite.aclose()
        await postgres.aclose()


TRIP_VECTORS = {
    "holiday destinations": [1.0, 0.0, 0.0, 0.0],
    "Ben: Did you go anywhere nice?": [1.0, 0.0, 0.0, 0.0],
    "Ann: Yes, twice!": [0.0, 1.0, 0.0, 0.0],
    "Ben: The weather is nice.": [0.5, 0.0, 0.866, 0.0],
}


@pytest.mark.parametrize(("weight", "mode"), [(0.6, "replies"), (0.6, "all"), (0.0, "replies")])
async def test_previous_turn_mixing_ranks_alike(pg: Server, tmp_path: Path, weight: float, mode: str) -> None:
    from datetime import datetime, timedelta, timezone

    from memoryport import CallableEmbedder

    embedder = CallableEmbedder(
        lambda texts: [TRIP_VECTORS.get(t, [0.0, 0.0, 0.0, 1.0]) for t in texts], dim=4, name="trip"
    )
    ann, other = MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ann", session_id="s2")
    t0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    talk = [(ann, "Ben: Did you go anywhere nice?"), (other, "Ben: Mine too."), (ann, "Ann: Yes, twice!"),
            (ann, "Ben: The weather is nice."), (ann, "Ann: My cat sleeps all day.")]  # fmt: skip
    options = {"previous_weight": weight, "previous_mode": mode, "context_weight": 0.0, "session_weight": 0.0}
    sqlite = SQLiteMemory(tmp_path / "p.db", embedder=embedder, **options)  # type: ignore[arg-type]
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), **options)  # type: ignore[arg-type]
    try:
        records = [MemoryRecord(scope=s, text=t, created_at=t0 + timedelta(seconds=i)) for i, (s, t) in enumerate(talk)]
        for memory in (sqlite, postgres):
            await memory.add(records)
        ranked = []
        for memory in (sqlite, postgres):
            hits = await memory.search("holiday destinations", scope=MemoryScope(user_id="ann"), k=5)
            ranked.append([(h.record.text, round(h.score, 4)) for h in hits])
        assert ranked[0] == ranked[1]
        order = [text for text, _ in ranked[0]]
        reply_first = order.index("Ann: Yes, twice!") < order.index("Ben: The weather is nice.")
        assert reply_first is (weight > 0)
    finally:
        await sqlite.aclose()
        await postgres.aclose()


async def test_replies_only_mixing_ranks_alike(pg: Server, tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    from memoryport import CallableEmbedder

    bare = {text.split(": ", 1)[-1]: vec for text, vec in TRIP_VECTORS.items()}
    embedder = CallableEmbedder(
        lambda texts: [bare.get(t.split(": ", 1)[-1], [0.0, 0.0, 0.0, 1.0]) for t in texts], dim=4, name="bare"
    )
    ann = MemoryScope(user_id="ann")
    t0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    # A reply, a line after its own speaker's, lines without prefixes, each pair hours after the last.
    talk = [("Ben: Did you go anywhere nice?", 0), ("Ben: Yes, twice!", 1), ("Did you go anywhere nice?", 7200),
            ("Yes, twice!", 7201), ("Ben: Did you go anywhere nice?", 18_000), ("Ann: Yes, twice!", 18_001),
            ("Ben: The weather is nice.", 32_400)]  # fmt: skip
    records = [MemoryRecord(scope=ann, text=t, created_at=t0 + timedelta(seconds=s)) for t, s in talk]
    orders = {}
    for mode in ("replies", "all"):
        options = {
            "previous_weight": 0.6,
            "previous_mode": mode,
            "context_weight": 0.0,
            "session_weight": 0.0,
            "length_weight": 0.0,
        }
        sqlite = SQLiteMemory(tmp_path / f"{mode}.db", embedder=embedder, **options)  # type: ignore[arg-type]
        postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), **options)  # type: ignore[arg-type]
        try:
            ranked = []
            for memory in (sqlite, postgres):
                await memory.add(records)
                hits = await memory.search("holiday destinations", scope=ann, k=7)
                ranked.append([(h.record.text, round(h.score, 4)) for h in hits])
            assert ranked[0] == ranked[1], mode
            orders[mode] = [text for text, _ in ranked[0]]
        finally:
            await sqlite.aclose()
            await postgres.aclose()
    weather = "Ben: The weather is nice."
    # Only the reply is lifted above the weather by default; every answer with mode "all".
    assert [t for t in orders["replies"][: orders["replies"].index(weather)] if "twice" in t] == ["Ann: Yes, twice!"]
    assert {t for t in orders["all"][: orders["all"].index(weather)] if "twice" in t} == {
        "Ann: Yes, twice!", "Ben: Yes, twice!", "Yes, twice!"
    }  # fmt: skip


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_the_session_lift_ranks_alike(pg: Server, tmp_path: Path, mode: str) -> None:
    from datetime import datetime, timedelta, timezone

    ann = MemoryScope(user_id="ann")
    t0 = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    # The same text twice: only the session (the Lisbon match's, or one three days later) tells them apart.
    days = [("ann flew to lisbon for the weekend", 0, "trip"), ("the food was good", 3 * 86_400, "later"),
            ("the food was good", 60, "same"), ("a long day of rain", 5 * 86_400, "rain")]  # fmt: skip
    embedder = bow_embedder()
    options = {"session_weight": 0.3, "context_weight": 0.0, "context_key_weight": 0.0, "search_mode": mode}
    sqlite = SQLiteMemory(tmp_path / "s.db", embedder=embedder, **options)  # type: ignore[arg-type]
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), **options)  # type: ignore[arg-type]
    try:
        for memory in (sqlite, postgres):
            records = [
                MemoryRecord(scope=ann, text=t, metadata={"tag": tag}, created_at=t0 + timedelta(seconds=s))
                for t, s, tag in days
            ]
            await memory.add(records)
            hits = await memory.search("lisbon food", scope=ann, k=3)
            assert [h.record.metadata["tag"] for h in hits] == ["trip", "same", "later"], (memory, hits)
    finally:
        await sqlite.aclose()
        await postgres.aclose()


# Each lift alone: the same words in both turns (speaker: only the speaker the query names tells them
# apart; time: only the time named does, for a question asking when).
LIFTS = {
    "speaker": (
        {"speaker_weight": 0.3},
        [
            ("Gina: Jon, the fair was great", "gina"),
            ("Jon: Gina, the fair was great", "jon"),
            ("Nate: rain all day", "nate"),
        ],
        "What did Jon think of the fair?",
        ["jon", "gina"],
    ),
    "time": (
        {"time_weight": 0.3},
        [("the fair was great fun", "fun"), ("the fair was great friday", "friday"), ("rain all day", "rain")],
        "When was the fair?",
        ["friday", "fun"],
    ),
}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("lift", sorted(LIFTS))
async def test_the_speaker_and_time_lifts_rank_alike(pg: Server, tmp_path: Path, mode: str, lift: str) -> None:
    ann = MemoryScope(user_id="ann")
    weight, turns, query, expected = LIFTS[lift]
    embedder = bow_embedder()
    options = {**weight, "session_weight": 0.0, "context_weight": 0.0, "search_mode": mode}
    sqlite = SQLiteMemory(tmp_path / "s.db", embedder=embedder, **options)  # type: ignore[arg-type]
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), **options)  # type: ignore[arg-type]
    try:
        for memory in (sqlite, postgres):
            await memory.add([MemoryRecord(scope=ann, text=t, metadata={"tag": tag}) for t, tag in turns])
            hits = await memory.search(query, scope=ann, k=2)
            assert [h.record.metadata["tag"] for h in hits] == expected, (memory, hits)
    finally:
        await sqlite.aclose()
        await postgres.aclose()


def _context_scenario(case: str) -> tuple[list[MemoryRecord], dict[str, Any]]:
    """As tests/sqlite/test_sqlite_context_keys.py: X beats Y only if the lender before X lends it "beta"."""
    from datetime import timedelta

    from memoryport._records import utcnow

    base = utcnow() - timedelta(hours=3)
    at = [base + timedelta(minutes=m) for m in range(7)]
    ann = MemoryScope(user_id="ann")
    lender: dict[str, Any] = {"scope": ann, "text": "beta", "metadata": {"kind": "note"}, "created_at": at[1]}
    search: dict[str, Any] = {"filters": {"kind": "note"}}
    if case == "other user":
        lender["scope"] = MemoryScope(user_id="bob")
    elif case == "other session scope":
        lender["scope"] = MemoryScope(user_id="ann", session_id="s2")
    elif case == "expired":
        lender["expires_at"] = utcnow() - timedelta(minutes=1)
    elif case == "filtered out":
        lender["metadata"] = {"kind": "other"}
    elif case == "outside the time range":
        search["since"] = at[1] + timedelta(seconds=30)
    elif case == "another session (a pause)":
        lender["created_at"] = at[1] - timedelta(hours=2)
    note = {"kind": "note"}
    records = [
        MemoryRecord(**lender),
        MemoryRecord(scope=ann, text="alpha note here", metadata={**note, "tag": "X"}, created_at=at[2]),
        *(MemoryRecord(scope=ann, text=f"filler {w}", metadata=note, created_at=at[3 + i])
          for i, w in enumerate(["one", "two", "three"])),
        MemoryRecord(scope=ann, text="alpha note", metadata={**note, "tag": "Y"}, created_at=at[6]),
    ]  # fmt: skip
    return records, search


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(
    "case",
    ["lends", "other user", "other session scope", "expired", "filtered out", "outside the time range",
     "another session (a pause)"],
)  # fmt: skip
async def test_contextual_keys_rank_alike_and_never_cross_scope_or_filters(
    pg: Server, tmp_path: Path, mode: str, case: str
) -> None:
    ann = MemoryScope(user_id="ann")
    embedder = bow_embedder()
    options: dict[str, Any] = {"search_mode": mode, "context_weight": 0.0, "session_weight": 0.0,
                               "speaker_weight": 0.0, "time_weight": 0.0}  # fmt: skip
    sqlite = SQLiteMemory(tmp_path / "c.db", embedder=embedder, **options)
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), **options)
    try:
        records, search = _context_scenario(case)
        for memory in (sqlite, postgres):
            await memory.add(records)
            hits = await memory.search("alpha beta", scope=ann, k=10, **search)
            order = [h.record.metadata["tag"] for h in hits if "tag" in h.record.metadata]
            assert order == (["X", "Y"] if case == "lends" else ["Y", "X"]), (memory, case, hits)
    finally:
        await sqlite.aclose()
        await postgres.aclose()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_contextual_keys_agree_on_a_conversation(pg: Server, tmp_path: Path, mode: str) -> None:
    from datetime import datetime, timedelta, timezone

    rng = random.Random(11)
    ann = MemoryScope(user_id="ann")
    start = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
    # sessions of 12 turns a day apart, turns a minute apart
    records = [
        MemoryRecord(scope=ann, text=" ".join(rng.sample(WORDS, 3)) + f" turn{i}",
                     created_at=start + timedelta(days=i // 12, minutes=i % 12))
        for i in range(96)
    ]  # fmt: skip
    embedder = bow_embedder()
    on: dict[str, Any] = {"search_mode": mode, "speaker_weight": 0.0, "time_weight": 0.0}
    sqlite = SQLiteMemory(tmp_path / "a.db", embedder=embedder, **on)
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), **on)
    sqlite_off = SQLiteMemory(tmp_path / "a.db", embedder=embedder, context_key_weight=0.0, **on)
    try:
        for memory in (sqlite, postgres):
            await memory.add(records)
        same_first = overlap = changed = 0
        queries = [" ".join(rng.sample(WORDS, 2)) for _ in range(20)]
        for query in queries:
            a = [h.record.text for h in await sqlite.search(query, scope=ann, k=5)]
            b = [h.record.text for h in await postgres.search(query, scope=ann, k=5)]
            c = [h.record.text for h in await sqlite_off.search(query, scope=ann, k=5)]
            same_first += a[0] == b[0]
            overlap += len(set(a) & set(b))
            changed += a != c
        assert changed, "contextual keys changed no ranking: the test shows nothing"
        assert same_first >= 0.8 * len(queries), (mode, same_first)
        assert overlap >= 0.8 * 5 * len(queries), (mode, overlap)
    finally:
        for memory in (sqlite, postgres, sqlite_off):
            await memory.aclose()


# The length prior alone (ranking.length_boost): every other step off.
ONLY_LENGTH: dict[str, Any] = {
    "context_weight": 0.0,
    "session_weight": 0.0,
    "speaker_weight": 0.0,
    "time_weight": 0.0,
    "context_key_weight": 0.0,
    "date_weight": 0.0,
    "previous_weight": 0.0,
}


async def test_the_length_prior_adds_the_same_on_both_stores(pg: Server, tmp_path: Path) -> None:
    """Lengths are characters on both (char_length and len): accents, CJK and emoji count one each."""
    from memoryport import CallableEmbedder

    flat = CallableEmbedder(lambda texts: [[1.0, 0.0] for _ in texts], dim=2, name="flat")
    ann = MemoryScope(user_id="ann")
    texts = ["a", "Zoë: ça va très bien", "東京に行きました" * 5, "🎉🎉 party " * 9, "plain ascii " * 40]
    options = {**ONLY_LENGTH, "length_weight": 0.5, "length_pivot": 120}
    sqlite = SQLiteMemory(tmp_path / "n.db", embedder=flat, **options)
    postgres = PostgresMemory(pg.app_dsn, embedder=flat, schema=fresh_schema(), **options)
    try:
        scored = []
        for memory in (sqlite, postgres):
            await memory.add([MemoryRecord(scope=ann, text=t) for t in texts])
            # no query word anywhere: every record is a vector candidate of equal cosine, told apart by length only
            hits = await memory.search("qqq", scope=ann, k=10)
            scored.append({h.record.text: h.score for h in hits})
        assert scored[0] == pytest.approx(scored[1])
        base = scored[0]["a"] - 0.5 * 1 / 120
        for text in texts:
            assert scored[0][text] == pytest.approx(base + 0.5 * min(1.0, len(text) / 120)), text
    finally:
        await sqlite.aclose()
        await postgres.aclose()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("case", ["control", "other user", "expired", "filtered out"])
async def test_the_length_prior_ranks_alike_and_never_lifts_a_hidden_record(
    pg: Server, tmp_path: Path, mode: str, case: str
) -> None:
    from datetime import timedelta

    from memoryport import CallableEmbedder
    from memoryport._records import utcnow

    ann = MemoryScope(user_id="ann")
    long = "Ann: we went to the lake house and I spent both mornings painting the water from the porch " * 3
    embedder = CallableEmbedder(
        lambda texts: [[1.0, 0.0] if "porch" in t or t == "painting lake" else [0.0, 1.0] for t in texts],
        dim=2,
        name="meaning",
    )
    start = utcnow() - timedelta(days=1)
    talk = [("short", "Ben: painting the lake, nice"), ("long", long), ("lake", "Ben: the lake again")]
    talk += [(f"other{i}", f"Ben: {w} all day") for i, w in enumerate(["rain", "work", "chess", "soup", "jazz"])]
    records = [
        MemoryRecord(scope=ann, text=t, metadata={"tag": tag, "kind": "note"}, created_at=start + timedelta(minutes=i))
        for i, (tag, t) in enumerate(talk)
    ]
    hidden: dict[str, Any] = {
        "scope": ann,
        "text": long + " painting lake",
        "metadata": {"tag": "hidden", "kind": "note"},
        "created_at": start - timedelta(minutes=5),
    }
    if case == "other user":
        hidden["scope"] = MemoryScope(user_id="bob")
    elif case == "expired":
        hidden["expires_at"] = utcnow() - timedelta(minutes=1)
    elif case == "filtered out":
        hidden["metadata"] = {"tag": "hidden", "kind": "other"}
    options = {**ONLY_LENGTH, "search_mode": mode, "length_weight": 1.0}
    sqlite = SQLiteMemory(tmp_path / "h.db", embedder=embedder, **options)
    postgres = PostgresMemory(pg.app_dsn, embedder=embedder, schema=fresh_schema(), **options)
    try:
        orders = []
        for memory in (sqlite, postgres):
            await memory.add([MemoryRecord(**hidden), *records])
            hits = await memory.search("painting lake", scope=ann, k=10, filters={"kind": "note"})
            orders.append([h.record.metadata["tag"] for h in hits])
        assert ("hidden" in orders[0]) is ("hidden" in orders[1]) is (case == "control"), orders
        # the keyword sides score differently (BM25 against ts_rank): the same three lead, lifted alike
        assert set(orders[0][:3]) == set(orders[1][:3]), orders
    finally:
        await sqlite.aclose()
        await postgres.aclose()
