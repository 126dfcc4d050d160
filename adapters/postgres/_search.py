"""Search once the query is embedded: recent listing, keyword/vector/hybrid ranking, conversational context.

Runs inside one read-only, repeatable-read transaction (the caller's), so every
statement of a search sees the same snapshot. Ranking itself (fusion, the
neighbour lift) is :mod:`memoryport.ranking`, shared with SQLite.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from memoryport import ranking
from memoryport._filters import Filters
from memoryport._port import SearchResults
from memoryport._records import MemoryHit, MemoryScope, utcnow

from ._keyword import keyword_ranking
from ._rows import COLUMNS, F32, Vector, record_from_row
from ._vectors import vector_ranking
from ._where import Sql, filter_sql, live_sql, range_sql, scope_sql

if TYPE_CHECKING:
    from psycopg import AsyncCursor

    from ._store import PostgresStore

__all__ = ["NEIGHBOUR_SCAN", "neighbours", "placed", "recent", "rows_by_rid", "search_hits", "sides", "with_previous"]

# How many of a user's records on each side of a candidate the neighbour lookup reads.
NEIGHBOUR_SCAN = 16

Span = tuple[datetime | None, datetime | None]


async def recent(
    store: PostgresStore, cur: AsyncCursor[Any], scope: MemoryScope, k: int, filters: Filters | None, span: Span
) -> list[MemoryHit]:
    """The scope's ``k`` newest live records (an empty query's answer)."""
    where = filter_sql(range_sql(live_sql(scope_sql(scope), utcnow(), store.retention), *span), filters)
    await cur.execute(
        f"SELECT {COLUMNS} FROM {store.quoted_schema}.records r WHERE {where.text} "
        "ORDER BY r.created_at DESC, r.rid DESC LIMIT %s",
        [*where.params, k],
    )
    rows = await cur.fetchall()
    return SearchResults(
        [MemoryHit(record=record_from_row(row), score=1.0 / (1 + i), signal="recent") for i, row in enumerate(rows)],
        mode="recent",
    )


async def search_hits(
    store: PostgresStore,
    cur: AsyncCursor[Any],
    query: str,
    qvec: F32 | None,
    mode: str,
    scope: MemoryScope,
    k: int,
    filters: Filters | None,
    span: Span = (None, None),
) -> list[MemoryHit]:
    """The ``k`` best hits by ``mode`` (``keyword``, ``vector``, ``hybrid``); keyword when ``qvec`` is None."""
    now = utcnow()
    limit = max(k, store.candidates)
    near: dict[int, list[tuple[int, int]]] = {}
    idf: dict[str, float] | None = {} if _keys_on(store) else None
    if qvec is None or mode == "keyword":
        keyword = await keyword_ranking(store, cur, query, scope, limit, filters, now, span, idf)
        if idf:
            near = await neighbours(store, cur, scope, [rid for rid, _ in keyword], filters, now, span)
            keyword = await _context(store, cur, keyword, near, idf, admit=False)
        scored = list(ranking.normalise(keyword).items())
        signal = "keyword"
    elif mode == "vector":
        scored = await vector_ranking(store, cur, qvec, scope, k, filters, now, span)
        signal = "vector"
    else:
        keyword = await keyword_ranking(store, cur, query, scope, limit, filters, now, span, idf)
        pool = limit * ranking.PREVIOUS_POOL if store.previous_weight else limit
        vector = await vector_ranking(store, cur, qvec, scope, pool, filters, now, span)
        if store.previous_weight:
            vector = (await with_previous(store, cur, scope, qvec, vector, filters, now, span))[:limit]
        if idf:
            # Every candidate's context counts, the vector side's too.
            rids = list(dict.fromkeys(rid for rid, _ in [*keyword, *vector]))
            near = await neighbours(store, cur, scope, rids, filters, now, span)
            keyword = (
                await _context(store, cur, keyword, near, idf, admit=store.context_key_admit, others=vector)
            )[:limit]
        scored = ranking.fuse(keyword, vector)
        signal = "hybrid"
    if signal == "vector":
        ranked = scored[:k]
    else:
        rest = [rid for rid, _ in scored if rid not in near]
        near.update(await neighbours(store, cur, scope, rest, filters, now, span))
        if _keys_on(store) and store.context_key_window > store.context_window:
            near = {rid: [(o, d) for o, d in found if d <= store.context_window] for rid, found in near.items()}
        ranked = ranking.spread_to_neighbours(
            scored, near, weight=store.context_weight, only_scored=signal == "keyword"
        )
        ranked = (await placed(store, cur, query, ranked))[:k]
    rows = await rows_by_rid(store, cur, [rid for rid, _ in ranked])
    return [
        MemoryHit(record=record_from_row(rows[rid]), score=score, signal=signal) for rid, score in ranked if rid in rows
    ]


def _keys_on(store: PostgresStore) -> bool:
    """Whether contextual keyword keys (:func:`ranking.context_keys`) are on."""
    return bool(store.context_key_weight) and store.context_key_window >= 1


async def _context(
    store: PostgresStore,
    cur: AsyncCursor[Any],
    keyword: list[tuple[int, float]],
    near: dict[int, list[tuple[int, int]]],
    idf: dict[str, float],
    *,
    admit: bool,
    others: Sequence[tuple[int, float]] = (),
) -> list[tuple[int, float]]:
    """``keyword`` with contextual keys (:func:`ranking.context_keys`): the texts and times of the
    candidates and their neighbours in one statement."""
    rids = list({*near, *(other for found in near.values() for other, _ in found)})
    if not rids:
        return keyword
    await cur.execute(
        f"SELECT r.rid, r.created_at, r.session_id, r.agent_id, r.text FROM {store.quoted_schema}.records r "
        "WHERE r.rid = ANY(%s)",
        (rids,),
    )
    when: dict[int, tuple[Hashable, datetime]] = {}
    texts: dict[int, str] = {}
    for rid, at, session, agent, text in await cur.fetchall():
        when[int(rid)] = ((session, agent), at)
        texts[int(rid)] = text
    return ranking.context_keys(
        keyword,
        near,
        texts,
        idf,
        weight=store.context_key_weight,
        window=store.context_key_window,
        when=when,
        gap=store.session_gap,
        admit=admit,
        others=[rid for rid, _ in others],
    )


async def with_previous(
    store: PostgresStore,
    cur: AsyncCursor[Any],
    scope: MemoryScope,
    qvec: F32,
    vector: list[tuple[int, float]],
    filters: Filters | None,
    now: datetime,
    span: Span = (None, None),
) -> list[tuple[int, float]]:
    """The vector candidates re-scored by their key mixed with their predecessor's (:func:`ranking.mix_previous`)."""
    if not vector:
        return vector
    before = await sides(store, cur, scope, [rid for rid, _ in vector], filters, now, span, window=1, after=False)
    pairs = [(rid, found[0][0]) for rid, (found, _) in before.items() if found]
    if not pairs:
        return vector
    s, vs, mode, n = store.quoted_schema, store.vector_schema, store.previous_mode, ranking.SPEAKER_PREFIX
    # For mode "replies", the speaker prefixes and the time between the two come in the same statement.
    extra = (
        ""
        if mode == "all"
        else f", substr(c.text, 1, {n}), substr(p.text, 1, {n}), extract(epoch FROM c.created_at - p.created_at)"
    )
    await cur.execute(
        f"SELECT x.c, 1.0 - (p.embedding OPERATOR({vs}.<=>) %b), 1.0 - (p.embedding OPERATOR({vs}.<=>) c.embedding)"
        f"{extra} FROM unnest(%s::bigint[], %s::bigint[]) AS x(c, p) JOIN {s}.records c ON c.rid = x.c "
        f"JOIN {s}.records p ON p.rid = x.p WHERE c.embedding IS NOT NULL AND p.embedding IS NOT NULL",
        [Vector(qvec), [c for c, _ in pairs], [p for _, p in pairs]],
    )
    parts = {
        int(rid): (float(to_query), float(to_record))
        for rid, to_query, to_record, *said in await cur.fetchall()
        if not said or ranking.mixes_previous(mode, said[0], said[1], float(said[2]), gap=store.session_gap)
    }
    return ranking.mix_previous(vector, parts, weight=store.previous_weight)


async def placed(
    store: PostgresStore, cur: AsyncCursor[Any], query: str, ranked: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """``ranked`` with sessions holding a strong match lifted (:func:`ranking.session_boost`), then the
    records written on the date the query names (:func:`ranking.date_boost`), then the turns of a speaker
    the query names (:func:`ranking.speaker_boost`), then, for a query asking when, the records that
    mention a time (:func:`ranking.time_boost`), then the longer records (:func:`ranking.length_boost`)."""
    span = ranking.query_dates(query) if store.date_weight else None
    if (
        span is None
        and not store.session_weight
        and not store.speaker_weight
        and not store.time_weight
        and not store.length_weight
    ) or not ranked:
        return ranked
    # Texts: whole for a question asking when, else only the start that holds a speaker prefix.
    timed = bool(store.time_weight) and ranking.asks_when(query)
    text = ", r.text" if timed else f", substr(r.text, 1, {ranking.SPEAKER_PREFIX})" if store.speaker_weight else ""
    # The length prior needs each text's length in characters (char_length: code points, as Python's len).
    await cur.execute(
        f"SELECT r.rid, r.created_at, r.session_id, r.agent_id, char_length(r.text){text} "
        f"FROM {store.quoted_schema}.records r WHERE r.rid = ANY(%s)",
        ([rid for rid, _ in ranked],),
    )
    when: dict[int, tuple[Hashable, datetime]] = {}
    texts: dict[int, str] = {}
    lengths: dict[int, int] = {}
    for rid, at, session, agent, length, *said in await cur.fetchall():
        when[int(rid)] = ((session, agent), at.astimezone(timezone.utc))
        lengths[int(rid)] = int(length)
        if said:
            texts[int(rid)] = said[0]
    if store.session_weight:
        ranked = ranking.session_boost(ranked, when, weight=store.session_weight, gap=store.session_gap)
    if span is not None:
        ranked = ranking.date_boost(ranked, {rid: at for rid, (_, at) in when.items()}, span, weight=store.date_weight)
    if store.speaker_weight:
        ranked = ranking.speaker_boost(ranked, texts, query, weight=store.speaker_weight)
    if timed:
        ranked = ranking.time_boost(ranked, texts, query, weight=store.time_weight)
    if store.length_weight:
        ranked = ranking.length_boost(ranked, lengths, weight=store.length_weight, pivot=store.length_pivot)
    return ranked


async def neighbours(
    store: PostgresStore,
    cur: AsyncCursor[Any],
    scope: MemoryScope,
    rids: Sequence[int],
    filters: Filters | None,
    now: datetime,
    span: Span = (None, None),
) -> dict[int, list[tuple[int, int]]]:
    """rid -> (rid, distance) of the live records of its exact scope written just before and after it.

    As far as the wider of the neighbour lift's window and contextual keys' reaches.
    """
    weight, window = store.context_weight, store.context_window if store.context_weight else 0
    if _keys_on(store):
        weight, window = max(weight, store.context_key_weight), max(window, store.context_key_window)
    if not rids or not weight or window < 1:
        return {}
    found = await sides(store, cur, scope, rids, filters, now, span, window=window)
    return {rid: [pair for side in both for pair in side] for rid, both in found.items()}


async def sides(
    store: PostgresStore,
    cur: AsyncCursor[Any],
    scope: MemoryScope,
    rids: Sequence[int],
    filters: Filters | None,
    now: datetime,
    span: Span = (None, None),
    *,
    window: int,
    after: bool = True,
) -> dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """rid -> ((rid, distance) before it, nearest first; the same after it, empty unless ``after``)."""
    if not rids:
        return {}
    s = store.quoted_schema
    user = "n.user_id IS NULL" if scope.user_id is None else "n.user_id = %s"
    user_params = [] if scope.user_id is None else [scope.user_id]
    cond = filter_sql(range_sql(live_sql(Sql(), now, store.retention, "w"), *span, "w"), filters, "w")

    def side(op: str, order: str) -> tuple[str, list[Any]]:
        # The user's nearest records on this side (index range scan), then
        # those of the same session and agent, alive and matching the filters.
        text = (
            f"ARRAY(SELECT w.rid FROM (SELECT n.* FROM {s}.records n WHERE {user} "
            f"AND (n.created_at, n.rid) {op} (c.created_at, c.rid) "
            f"ORDER BY n.created_at {order}, n.rid {order} LIMIT {NEIGHBOUR_SCAN}) w "
            "WHERE w.session_id IS NOT DISTINCT FROM c.session_id AND w.agent_id IS NOT DISTINCT FROM c.agent_id "
            f"AND {cond.text} ORDER BY w.created_at {order}, w.rid {order} LIMIT {int(window)})"
        )
        return text, [*user_params, *cond.params]

    before, bparams = side("<", "DESC")
    later, aparams = side(">", "ASC") if after else ("NULL::bigint[]", [])
    await cur.execute(
        f"SELECT c.rid, {before}, {later} FROM {s}.records c WHERE c.rid = ANY(%s)",
        [*bparams, *aparams, list(rids)],
    )
    out: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
    for rid, b, a in await cur.fetchall():
        out[int(rid)] = (
            [(int(x), d) for d, x in enumerate(b or [], 1)],
            [(int(x), d) for d, x in enumerate(a or [], 1)],
        )
    return out


async def rows_by_rid(store: PostgresStore, cur: AsyncCursor[Any], rids: Sequence[int]) -> dict[int, Sequence[Any]]:
    """rid -> the row of :data:`COLUMNS` for those of ``rids`` the transaction sees."""
    if not rids:
        return {}
    await cur.execute(
        f"SELECT r.rid, {COLUMNS} FROM {store.quoted_schema}.records r WHERE r.rid = ANY(%s)",
        (list(rids),),
    )
    return {int(row[0]): row[1:] for row in await cur.fetchall()}
