"""Search once the query is embedded: recent listing, keyword/vector/hybrid ranking, conversational context.

Runs inside one read transaction (the caller's), so every statement of a search
sees the same snapshot. Ranking itself (fusion, the neighbour lift) is
:mod:`memoryport.ranking`.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import operator
import threading
import time
from collections.abc import Callable, Hashable, ItemsView, Iterator, Mapping, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Union, cast

import numpy as np

from memoryport import ranking
from memoryport._port import SearchResults
from memoryport._records import MemoryHit, MemoryScope, utcnow
from memoryport.storekit import chunks

from . import _ann
from ._keyword import keyword_ranking
from ._rows import (
    COLUMNS,
    Cond,
    Conn,
    ScopeKey,
    built,
    dt,
    filter_sql,
    record_from_row,
    scope_sql,
    tenant_token,
    us,
)
from ._timeline import Timeline, close_in, context_in, near_in, sides_in, text_shape
from ._vectors import F32, INLINE_VECTORS, SPLIT_FROM, NotCached, Ranking

if TYPE_CHECKING:
    from ._store import SQLiteStore

__all__ = [
    "INLINE_KEYWORD",
    "NEIGHBOUR_SCAN",
    "Times",
    "neighbours",
    "placed",
    "recent",
    "rows_by_rid",
    "search_hits",
    "sides",
    "vector_at_once",
    "with_previous",
]

_FIRST = operator.itemgetter(0)  # the rid of a (rid, score) pair
_WIDE = 8  # placed: a ranking longer than this many times k is read lazily (see placed)
_TEXT = operator.itemgetter(3)  # the text of a Times entry

# How many of a user's records on each side of a candidate the neighbour lookup reads.
NEIGHBOUR_SCAN = 16

#: The largest user (records in its timeline) whose keyword search may run on the caller's thread
#: (``SQLiteStore._keyword_inline``): ~0.5-1 ms at 10,000 records, growing with the postings ranked.
INLINE_KEYWORD = 20_000

#: rid -> (created_at in stored microseconds, session_id, agent_id, text): what the session, date,
#: speaker and time steps need of each ranked record, filled in by the neighbour lookup, which reads
#: those rows anyway (a neighbour shares its candidate's session and agent), so that they cost no
#: statement of their own.
Times = dict[int, tuple[int, Union[str, None], Union[str, None], str]]


def recent(conn: Conn, scope: MemoryScope, k: int, filters: Cond) -> list[MemoryHit]:
    where, params = scope_sql(scope)
    fsql, fparams = filter_sql(filters)
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM records r WHERE {where} AND (r.expires_at IS NULL OR r.expires_at > ?){fsql} "
        f"ORDER BY r.created_at DESC, r.rid DESC LIMIT {int(k)}",
        [*params, us(utcnow()), *fparams],
    ).fetchall()
    return SearchResults(
        [MemoryHit(record=record_from_row(row), score=1.0 / (1 + i), signal="recent") for i, row in enumerate(rows)],
        mode="recent",
    )


def search_hits(
    store: SQLiteStore,
    conn: Conn,
    query: str,
    qvec: F32 | None,
    mode: str,
    scope: MemoryScope,
    k: int,
    filters: Cond,
    *,
    load: bool = True,
    pending: Future[F32 | None] | None = None,
) -> list[MemoryHit]:
    """The ``k`` best hits by ``mode`` (``keyword``, ``vector``, ``hybrid``); keyword when ``qvec`` is None.

    ``load=False``: vector mode from vectors already in RAM; keyword mode from the user's timeline
    and word index in RAM, both current in this snapshot as they are (nothing built, read or appended),
    for a user of at most :data:`INLINE_KEYWORD` records; hybrid mode (with ``qvec``) from both; else
    :class:`~._vectors.NotCached`, raised before any work is handed to another thread.
    ``pending`` (hybrid, ``qvec`` None): the query's vector, still being embedded. Everything that
    does not need it (the keyword half, its candidates' neighbours and times) runs first, then this
    waits for it, in the same read transaction; a result of None (the embedder failed) ranks by
    keywords alone, as ``mode="keyword"`` would.
    """
    now = us(utcnow())
    limit = max(k, store.candidates)
    times: Times = {}
    # The user's records in time order, in RAM (see _timeline.py), when current in this snapshot.
    line = None
    if mode != "vector":
        line = store.timelines.of(conn, scope.user_id) if load else store.timelines.current(conn, scope.user_id)
    if (
        mode != "vector"
        and not load
        and (
            line is None
            or len(line.rids) > INLINE_KEYWORD
            or not store.ann.words.users.current(scope.user_id, line.gen)
        )
    ):
        raise NotCached(scope.kind)
    if mode == "keyword" or (qvec is None and pending is None):
        idf: dict[str, float] | None = {} if _keys_on(store) else None
        keyword = keyword_ranking(
            conn, store.keyword_index, query, scope, limit, filters, now, idf, line, store.ann.words
        )
        rids = [rid for rid, _ in keyword]
        plain = not filter_sql(filters)[0]
        # Without filters a timeline holding every candidate answers the neighbour lookup (sides_in); then
        # the Times of the candidates and their neighbours are read from it only when asked (contextual keys
        # ask only when their positions cannot answer; placed reads its candidates' from the timeline itself).
        unread = line is not None and plain and all(map(line.at.__contains__, rids))
        # Contextual keys read every candidate's neighbours; the lift alone needs links among them only.
        near = _near(store, conn, rids, filters, now, None if unread else times, among=not idf, line=line)
        if idf:
            seen = _Unread(line, near, times) if unread and line is not None else times
            keyword = _context(
                store, keyword, near, cast("Times", seen), idf, admit=False, line=line, plain=plain,
                user=scope.user_id,
            )  # fmt: skip
        scored = list(ranking.normalise(keyword).items())
        signal = "keyword"
    elif mode == "vector":
        # Pure cosine similarity: the scores keep their meaning, no neighbours.
        assert qvec is not None  # mode "vector" comes with a vector (the line above took the rest)
        scored = vector_job(store, conn, qvec, scope, k, filters, now, load=load)()
        signal = "vector"
        near = {}
    else:
        scored, near, signal = _hybrid(
            store, conn, query, qvec, pending, scope, limit, filters, now, times, line, load=load
        )
    if signal == "vector":
        ranked = scored
    else:
        # Keyword search re-ranks its own matches only: every hit still contains a query word.
        ranked = ranking.spread_to_neighbours(
            scored, _lift_near(store, near), weight=store.context_weight, only_scored=signal == "keyword"
        )
        ranked = placed(conn, query, ranked, store, times, k, line=line)[:k]
    return _hits(ranked, rows_by_rid(conn, [rid for rid, _ in ranked]), signal)


def _hybrid(
    store: SQLiteStore,
    conn: Conn,
    query: str,
    qvec: F32 | None,
    pending: Future[F32 | None] | None,
    scope: MemoryScope,
    limit: int,
    filters: Cond,
    now: int,
    times: Times,
    line: Timeline | None = None,
    *,
    load: bool = True,
) -> tuple[list[tuple[int, float]], dict[int, list[tuple[int, int]]], str]:
    """The fused candidates of a hybrid search, their neighbours, and the signal (``keyword`` without a vector).

    The steps overlap: the matrix product (numpy, GIL released) runs on a
    numpy thread beside the FTS5 query and the keyword candidates' neighbour
    lookup (SQLite, GIL released); only the neighbours of candidates found by
    vectors alone wait for it. A small product (below ``_ALONE_BELOW``
    floats) runs first, here: the hops to a numpy thread cost more. A large
    product (``SPLIT_FROM`` floats) runs in two parts, one per numpy thread
    (or, when the vector comes after the keyword half, one here), with the
    same scores to the bit. Each candidate's neighbours come from its own
    lookup, so splitting them in two changes nothing. Everything reads this
    transaction's snapshot: the vector job's inputs are read on this thread.
    ``load=False``: on the caller's thread (see :func:`search_hits`); the vector job raises
    ``NotCached`` before anything is handed to a numpy thread.
    """
    pool = limit * ranking.PREVIOUS_POOL if store.previous_weight else limit
    if qvec is None and pending is not None and pending.done():
        qvec, pending = pending.result(), None
    # load=False (on the caller's thread): vector_job raises NotCached before anything is started.
    job = None if qvec is None else _started(store, vector_job(store, conn, qvec, scope, pool, filters, now, load=load))
    idf: dict[str, float] | None = {} if _keys_on(store) else None
    keyword = keyword_ranking(conn, store.keyword_index, query, scope, limit, filters, now, idf, line, store.ann.words)
    plain = not filter_sql(filters)[0]
    near: dict[int, list[tuple[int, int]]] = {}
    # Without filters, while the timeline holds every rid looked up, the lookups leave ``times`` unread:
    # contextual keys answer from the timeline's positions, with_previous reads what it asks of it
    # (_previous_times), placed reads its candidates' from the timeline itself; _Unread fills ``times`` as
    # the lookups would have, in the same order, only when contextual keys' fallback asks.
    unread = None if line is None or not plain else _Unread(line, near, times)

    def look(rids: list[int]) -> None:
        nonlocal unread
        if unread is not None:
            if all(map(unread.holds, rids)):
                near.update(_near(store, conn, rids, filters, now, None, line=line))
                return
            unread.fill()  # a rid the timeline lacks: from here on, times filled by every lookup, as before
            unread = None
        near.update(_near(store, conn, rids, filters, now, times, line=line))

    # When the embedder failed, the keyword ranking stands alone; keyword search looks up fewer
    # neighbours (links among its own matches only), but every candidate's full list gives the same ranking.
    look([rid for rid, _ in keyword])
    if job is not None and qvec is not None:
        vector = job()
    else:
        qvec = None if pending is None else pending.result()  # embedded in the meantime
        if qvec is None:
            if idf:
                seen = cast("Times", times if unread is None else unread)
                keyword = _context(
                    store, keyword, near, seen, idf, admit=False, line=line, plain=plain, user=scope.user_id
                )
            return list(ranking.normalise(keyword).items()), near, "keyword"
        # Nothing left to run beside it: a large product runs in two parts, here and on a numpy thread.
        vector = _split(store, vector_job(store, conn, qvec, scope, pool, filters, now))
    words = {rid for rid, _ in keyword}
    if store.min_similarity > 0:
        # A candidate found by vectors alone must be similar enough in absolute terms: min-max
        # fusion would otherwise give the best of unrelated records a confident-looking score.
        vector = [(rid, cos) for rid, cos in vector if rid in words or cos >= store.min_similarity]
    if store.previous_weight:
        # The vector candidates' neighbours (needed for the neighbour lift anyway) give their predecessors.
        look([rid for rid, _ in vector if rid not in near])
        read = times
        if unread is not None:
            # What with_previous reads: each candidate's entry and its neighbours' at distance 1, from the timeline.
            found = _previous_times(unread, vector, near) if store.context_window >= 1 else None
            if found is None:
                unread.fill()
                unread = None
            else:
                read = found
        vector = with_previous(
            conn, qvec, vector, filters, now, store.previous_weight,
            mode=store.previous_mode, gap=store.session_gap, near=near if store.context_window >= 1 else None,
            times=read, line=line, vectors=_block(store, conn, scope, line),
        )[:limit]  # fmt: skip
    if idf:
        # Every candidate's context counts, the vector side's too: look their neighbours up first.
        look([rid for rid, _ in vector if rid not in near])
        seen = cast("Times", times if unread is None else unread)  # (read only by contextual keys' fallback)
        keyword = _context(
            store, keyword, near, seen, idf, admit=store.context_key_admit, others=vector, line=line, plain=plain,
            user=scope.user_id, cut=None if store.min_similarity > 0 else limit,
        )  # fmt: skip
        if store.min_similarity > 0:
            # A record no query word matches still needs the floor: only vector candidates that passed it enter.
            passed = {rid for rid, _ in vector}
            keyword = [(rid, score) for rid, score in keyword if rid in words or rid in passed]
        keyword = keyword[:limit]
    scored = ranking.fuse(keyword, vector)
    look([rid for rid, _ in scored if rid not in near])
    return scored, near, "hybrid"


def _halves(work: Callable[[], list[tuple[int, float]]]) -> list[Callable[[], None]]:
    """The two parts of ``work``'s product when it is a large one (:data:`~._vectors.SPLIT_FROM`), else none."""
    return work.products(2) if isinstance(work, Ranking) and work.size >= SPLIT_FROM else []


def _started(store: SQLiteStore, work: Callable[[], list[tuple[int, float]]]) -> Callable[[], list[tuple[int, float]]]:
    """``work`` (a vector ranking) started on the numpy threads; the call returned waits for it, on the caller's
    thread. A large product (:data:`~._vectors.SPLIT_FROM`) goes in two parts, one per thread; a smaller one in
    one; either way the ranking of its scores runs on the caller's thread once the product is done (a BLAS-sized
    one, whose parts BLAS's threads share, runs whole on a numpy thread).

    The caller waits (at most :data:`_BEGIN_WAIT` seconds) until each numpy thread has taken its part: the thread
    needs the GIL to call numpy, and the caller's keyword half, pure Python, would hold it until it next waits
    (the product would then start after the keyword half instead of beside it). The product itself runs without
    the GIL. Below :data:`_ALONE_BELOW` floats the ranking runs here, now: the hops cost more than the overlap.
    """
    if isinstance(work, Ranking) and work.size < _ALONE_BELOW:
        found = work()
        return lambda: found
    parts = _halves(work) or (work.products(1) if isinstance(work, Ranking) else [])
    jobs: list[Callable[[], Any]] = list(parts) or [work]
    taken = [threading.Lock() for _ in jobs]
    for lock in taken:
        lock.acquire()
    futures = [store.numpy.submit(_taken, lock, job) for lock, job in zip(taken, jobs, strict=True)]
    deadline = time.monotonic() + _BEGIN_WAIT
    for lock in taken:
        # (a busy pool: go on with the keyword half after _BEGIN_WAIT; the part starts when a thread is free)
        lock.acquire(timeout=max(deadline - time.monotonic(), 0.0))
    if not parts:
        return futures[0].result

    def finish() -> list[tuple[int, float]]:
        for future in futures:
            future.result()
        return work()

    return finish


#: Below this many floats a hybrid search's product runs on its own thread, before its keyword half: handing it
#: to a numpy thread costs more than the overlap gains. Measured paired, query by query (10k-record bench corpus
#: cut to size, 384-d, 2 cores): here 0.85x the time at 1k records, 0.94x at 4k, 0.90-0.98x at 6-8k, 1.01-1.04x
#: at 10k (3.84M floats).
_ALONE_BELOW = 3_000_000

#: How long (seconds) a hybrid search waits for the numpy threads to take its product before its keyword half.
_BEGIN_WAIT = 0.001


def _taken(lock: threading.Lock, job: Callable[[], Any]) -> Any:
    """``job`` run on a numpy thread, ``lock`` released first: the search waiting on it goes on."""
    lock.release()
    return job()


def _split(store: SQLiteStore, work: Callable[[], list[tuple[int, float]]]) -> list[tuple[int, float]]:
    """``work`` run now: a large product in two parts, one on a numpy thread and one on this thread."""
    parts = _halves(work)
    if not parts:
        return work()
    future = store.numpy.submit(parts[0])
    try:
        parts[1]()
    finally:
        future.result()
    return work()


def _keys_on(store: SQLiteStore) -> bool:
    """Whether contextual keyword keys (:func:`ranking.context_keys`) are on."""
    return bool(store.context_key_weight) and store.context_key_window >= 1 and store.keyword_index == "fts5"


def _context(
    store: SQLiteStore,
    keyword: list[tuple[int, float]],
    near: dict[int, list[tuple[int, int]]],
    times: Times,
    idf: dict[str, float],
    *,
    admit: bool,
    others: Sequence[tuple[int, float]] = (),
    line: Timeline | None = None,
    plain: bool = False,
    user: str | None = None,
    cut: int | None = None,
) -> list[tuple[int, float]]:
    """``keyword`` with contextual keys (:func:`ranking.context_keys`), from what the neighbour lookup read.

    ``line``: the user's records in RAM, current in this snapshot: which records hold each
    query word is found there once per word (:meth:`Timeline.holders`), not in every search's texts.
    ``plain``: ``near`` was read without filters or a time range; then a timeline of one scope
    answers from its positions (:func:`~._timeline.context_in`: the same scores).
    ``user``: ``line``'s user. Until its word index is bought, the index's whole-word dictionary is
    missing and this step searches the texts: its thread CPU time is rent towards the index
    (:meth:`~._keyword_user.UserIndexes.paid`), as a ranking through FTS5 is.
    """
    whole = None if line is None else line.words.whole
    users = None if line is None or store.keyword_index != "fts5" else store.ann.words.users
    rent = users is not None and line is not None and (whole is None or whole.size != len(line.rids))
    start = time.thread_time() if rent else 0.0
    found = _contextual(store, keyword, near, times, idf, admit=admit, others=others, line=line, plain=plain, cut=cut)
    if rent and users is not None and line is not None:
        users.paid(user, line.gen, time.thread_time() - start)
    return found


def _contextual(
    store: SQLiteStore,
    keyword: list[tuple[int, float]],
    near: dict[int, list[tuple[int, int]]],
    times: Times,
    idf: dict[str, float],
    *,
    admit: bool,
    others: Sequence[tuple[int, float]],
    line: Timeline | None,
    plain: bool,
    cut: int | None = None,
) -> list[tuple[int, float]]:
    """:func:`_context`'s work (``cut``: the caller keeps the first ``cut``, see :func:`~._timeline.context_in`)."""
    if plain and line is not None:
        reach = max(store.context_window if store.context_weight else 0, store.context_key_window)
        found = context_in(
            line,
            keyword,
            near,
            idf,
            weight=store.context_key_weight,
            window=store.context_key_window,
            reach=min(reach, NEIGHBOUR_SCAN),
            seconds=store.session_gap.total_seconds(),
            admit=admit,
            others=[rid for rid, _ in others],
            cut=cut,
        )
        if found is not None:
            return found
    when: dict[int, tuple[Hashable, float]] | None = None
    texts: dict[int, str]
    # The records' sessions from the timeline when it holds them all (the same grouping, cheaper).
    sessions = None if line is None else line.sessions_of(times, store.session_gap.total_seconds())
    if sessions is None:
        when, texts = {}, {}
        for rid, (at, session, agent, text) in times.items():  # one pass: cheaper than two comprehensions
            when[rid] = ((session, agent), at / 1e6)
            texts[rid] = text
    else:
        texts = {rid: found[3] for rid, found in times.items()}
    holders = None
    if line is not None:
        timeline = line

        def holders(rids: Sequence[int], words: Sequence[str]) -> dict[int, set[str]] | None:
            # The same snapshot's texts: a rid read here has the timeline's text (a rid missing holds nothing).
            for rid in rids:
                if rid not in texts:
                    return None
            return timeline.holders(rids, words)

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
        holders=holders,
        sessions=sessions,
    )


class _Unread(Mapping[int, tuple[int, Union[str, None], Union[str, None], str]]):
    """The :data:`Times` a neighbour lookup answered from ``line`` (:func:`~._timeline.sides_in`) would have
    filled for ``near`` (the candidates, each followed by its neighbours), read into ``times`` at the first
    access: the same entries in the same order, and nothing read when nobody asks. ``near`` may grow (new
    keys only, as further lookups add them) until then and after: each access reads the entries added since.
    """

    __slots__ = ("_done", "_line", "_near", "_times", "holds")

    def __init__(self, line: Timeline, near: dict[int, list[tuple[int, int]]], times: Times) -> None:
        self._line, self._near, self._times, self._done = line, near, times, 0
        # rid -> whether the timeline holds it (then a lookup of it without filters can leave its times here)
        self.holds: Callable[[object], bool] = line.at.__contains__

    def fill(self) -> Times:
        """``times``, with the entries of ``near`` not read yet."""
        near = self._near
        if self._done < len(near):
            line, times = self._line, self._times
            at, ats, sessions, agents, texts = line.at, line.ats, line.sessions, line.agents, line.texts
            for rid, found in itertools.islice(near.items(), self._done, None):
                p = at[rid]
                times[rid] = (ats[p], sessions[p], agents[p], texts[p])
                for other, _ in found:
                    q = at[other]
                    times[other] = (ats[q], sessions[q], agents[q], texts[q])
            self._done = len(near)
        return self._times

    def rows(self, rids: Sequence[int]) -> Times:
        """What the entries of ``rids`` (held by the timeline) are or will be, without reading the others."""
        return self._line.entries(rids)

    def __getitem__(self, rid: int) -> tuple[int, Union[str, None], Union[str, None], str]:
        return self.fill()[rid]

    def __iter__(self) -> Iterator[int]:
        return iter(self.fill())

    def __len__(self) -> int:
        return len(self.fill())

    def __contains__(self, rid: object) -> bool:
        return rid in self.fill()

    def items(self) -> ItemsView[int, tuple[int, Union[str, None], Union[str, None], str]]:
        return self.fill().items()


def _previous_times(
    unread: _Unread, vector: Sequence[tuple[int, float]], near: Mapping[int, Sequence[tuple[int, int]]]
) -> Times | None:
    """What :func:`with_previous` reads of ``times`` when every vector candidate's neighbours were looked up
    (``near``): the candidates' entries and their neighbours' at distance 1, from the timeline; None when a
    candidate is no key of ``near`` (then with_previous looks it up, and would fill ``times``)."""
    rids = list(map(_FIRST, vector))
    if not all(map(near.__contains__, rids)):
        return None
    wanted = [*rids, *(other for rid in rids for other, d in near[rid] if d == 1)]
    return unread.rows(wanted)


_Entry = tuple[int, Union[str, None], Union[str, None], str]  # a Times entry


class _Known(Mapping[int, _Entry]):
    """``times``, then ``line``'s columns for a rid ``times`` lacks: what :func:`placed` reads of a candidate,
    each entry made when asked (the same values: ``line`` is current in the same snapshot). A hybrid search
    places ~500 candidates (the fused ones and their neighbours) and its steps read ~50 of them.
    """

    __slots__ = ("_at", "_line", "_times", "read")

    def __init__(self, times: Mapping[int, _Entry], line: Timeline) -> None:
        self._times, self._line, self._at = times, line, line.at
        self.read: dict[int, _Entry] = {}  # rows read from the file (neither in ``times`` nor in ``line``)

    def __getitem__(self, rid: int) -> _Entry:
        found = self.get(rid)
        if found is None:
            raise KeyError(rid)  # (none holds it)
        return cast("_Entry", found)

    def get(self, rid: int, default: Any = None) -> Any:  # (hot: one lookup, no exception for a miss)
        found = self._times.get(rid)
        if found is not None:
            return found
        p = self._at.get(rid)
        if p is None:
            return self.read.get(rid, default)
        line = self._line
        return (line.ats[p], line.sessions[p], line.agents[p], line.texts[p])

    def __contains__(self, rid: object) -> bool:
        return rid in self._times or rid in self._at or rid in self.read

    def __iter__(self) -> Iterator[int]:  # (nobody iterates it in a search: the whole timeline)
        yield from self._times
        yield from (rid for rid in self._at if rid not in self._times)
        yield from (rid for rid in self.read if rid not in self._times and rid not in self._at)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _When(Mapping[int, tuple[Hashable, float]]):
    """rid -> ``((session, agent), seconds)`` of ``ranked``'s candidates that ``known`` holds, for
    :func:`ranking.session_boost`: made when asked (with ``k`` it asks for the head's and a few more)."""

    __slots__ = ("_known", "_ranked")

    def __init__(self, known: Mapping[int, _Entry], ranked: Sequence[tuple[int, float]]) -> None:
        self._known, self._ranked = known, ranked

    def __getitem__(self, rid: int) -> tuple[Hashable, float]:
        at, session, agent, _ = self._known[rid]
        return ((session, agent), at / 1e6)

    def __contains__(self, rid: object) -> bool:
        return rid in self._known

    def __iter__(self) -> Iterator[int]:
        return (rid for rid, _ in self._ranked if rid in self._known)

    def __len__(self) -> int:
        return sum(1 for rid, _ in self._ranked if rid in self._known)


def _lift_near(store: SQLiteStore, near: dict[int, list[tuple[int, int]]]) -> dict[int, list[tuple[int, int]]]:
    """``near`` cut to the neighbour lift's window (the lookup may have read farther, for contextual keys)."""
    if not _keys_on(store) or store.context_key_window <= store.context_window:
        return near
    return {rid: [(other, d) for other, d in found if d <= store.context_window] for rid, found in near.items()}


def _near(
    store: SQLiteStore,
    conn: Conn,
    rids: Sequence[int],
    filters: Cond,
    now: int,
    times: Times | None,
    *,
    among: bool = False,
    line: Timeline | None = None,
) -> dict[int, list[tuple[int, int]]]:
    """:func:`neighbours` with the store's weight and window (the wider of the lift's and contextual keys')."""
    weight, window = store.context_weight, store.context_window if store.context_weight else 0
    if _keys_on(store):
        weight, window = max(weight, store.context_key_weight), max(window, store.context_key_window)
    return neighbours(conn, rids, filters, now, weight=weight, window=window, among=among, times=times, line=line)


def _block(
    store: SQLiteStore, conn: Conn, scope: MemoryScope, line: Timeline | None
) -> tuple[F32, dict[int, int]] | None:
    """The scope's vectors in RAM and rid -> row, when current in this snapshot, else None.

    Only for a user with a timeline (at most ``TIMELINE_MAX`` records: the rid -> row map stays small).
    """
    if line is None:
        return None
    try:
        block = store.vectors.block(conn, scope, load=False)
    except NotCached:
        return None
    return store.vectors.rows(block)


def vector_job(
    store: SQLiteStore,
    conn: Conn,
    qvec: F32,
    scope: MemoryScope,
    limit: int,
    filters: Cond,
    now: int,
    *,
    load: bool = True,
) -> Callable[[], list[tuple[int, float]]]:
    """The vector ranking of ``scope``: through its user's index when it has one, else exact.

    What needs the snapshot (all of the index search, the exact path's reads)
    happens here; the returned job is pure numpy. The index serves a whole
    user's scope; a narrower scope is searched exactly (its own vectors), and
    when filters or expiry leave fewer than ``limit`` of the index's
    candidates, the search falls back to the exact scan.
    """
    # load=False (on the caller's thread): through the index only when its centroids and probed lists are
    # cached, else exactly from vectors in RAM, at most INLINE_VECTORS of them; anything else: NotCached.
    if store.ann_params is not None and scope.session_id is None and scope.agent_id is None:
        tenant = tenant_token(scope.user_id)
        row = conn.execute("SELECT gen FROM generations WHERE tenant = ?", (tenant,)).fetchone()
        gen = -1 if row is None else int(row[0])
        found = _ann.centroids_of(conn, store.ann, tenant, load=load)
        if found is not None:
            hits = _ann.search(
                conn, store.ann, store.ann_params, qvec, scope, limit, filters, now, gen, load=load, found=found
            )
            if load:
                store.maybe_build(conn, scope, found[2])
            if hits is not None and len(hits) >= limit:
                return lambda: hits
        elif load:
            store.maybe_build(conn, scope, None)
    if not load:
        size = store.vectors.cached_size(scope)
        if size is None or size > INLINE_VECTORS:
            raise NotCached(scope.kind)  # a large exact scan (an index's fallback) goes to a worker
    return store.vectors.ranking_job(conn, qvec, scope, limit, filters, now, load=load)


def with_previous(
    conn: Conn,
    qvec: F32,
    vector: list[tuple[int, float]],
    filters: Cond,
    now: int,
    weight: float,
    *,
    mode: str = ranking.PREVIOUS_MODE,
    gap: timedelta = ranking.SESSION_GAP,
    near: dict[int, list[tuple[int, int]]] | None = None,
    times: Times | None = None,
    line: Timeline | None = None,
    vectors: tuple[F32, dict[int, int]] | None = None,
) -> list[tuple[int, float]]:
    """The vector candidates re-scored by their key mixed with their predecessor's (:func:`ranking.mix_previous`).

    ``mode``: which candidates are mixed (:func:`ranking.mixes_previous`; "replies" needs the candidates'
    and predecessors' speaker prefixes and times). ``near`` and ``times``: what a neighbour lookup
    (:func:`neighbours`, window >= 1) already read; a candidate found in both takes its predecessor
    from there, the others are looked up here (in ``line`` when given, see :func:`sides`).
    ``vectors``: the scope's vectors in RAM, current in this snapshot, and rid -> row; the pairs'
    vectors come from there when it holds them all, else from the file.
    """
    if not vector:
        return vector
    read: Times = {} if times is None else times
    previous: dict[int, int] = {}
    missing: list[int] = []
    for rid, _ in vector:
        found = near.get(rid) if near is not None else None
        if found is None or rid not in read:
            missing.append(rid)
            continue
        at = (read[rid][0], rid)
        # ``near`` lists the records before and after at each distance: the predecessor is the earlier one.
        for other, distance in found:
            if distance == 1 and other in read and (read[other][0], other) < at:
                previous[rid] = other
                break
    if missing:
        before = sides(
            conn, missing, filters, now, window=1, after=False, times=None if mode == "all" else read, line=line
        )
        previous.update((rid, found[0][0]) for rid, (found, _) in before.items() if found)
    if mode != "all":
        prefix = ranking.SPEAKER_PREFIX
        previous = {
            rid: prev
            for rid, prev in previous.items()
            if rid in read
            and prev in read
            and ranking.mixes_previous(
                mode, read[rid][3][:prefix], read[prev][3][:prefix], (read[rid][0] - read[prev][0]) / 1e6, gap=gap
            )
        }
    if not previous:
        return vector
    # One matrix of the vectors read (those of the query's dimension), two products for every pair at once.
    wanted = list({*previous, *previous.values()})
    if vectors is not None and vectors[0].shape[1] == len(qvec) and all(rid in vectors[1] for rid in wanted):
        matrix, row = vectors  # the same float32 rows as in the file (the cache holds what was written)
    else:
        row = {}
        blobs: list[bytes] = []
        size = len(qvec) * 4
        for chunk in chunks(wanted):
            for rid, blob in conn.execute(
                f"SELECT rid, vec FROM vectors WHERE rid IN ({','.join('?' * len(chunk))})", chunk
            ):
                if len(blob) == size:
                    row[int(rid)] = len(blobs)
                    blobs.append(blob)
        if blobs:
            matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), len(qvec))
    pairs = [(rid, prev) for rid, prev in previous.items() if rid in row and prev in row]
    if not pairs:
        return vector
    mine = matrix[[row[rid] for rid, _ in pairs]]
    prior = matrix[[row[prev] for _, prev in pairs]]
    to_query = (prior @ qvec).tolist()
    to_record = np.einsum("ij,ij->i", prior, mine).tolist()
    parts = {rid: (to_query[i], to_record[i]) for i, (rid, _) in enumerate(pairs)}
    return ranking.mix_previous(vector, parts, weight=weight)


def placed(
    conn: Conn,
    query: str,
    ranked: list[tuple[int, float]],
    store: SQLiteStore,
    times: Times | None = None,
    k: int | None = None,
    *,
    line: Timeline | None = None,
) -> list[tuple[int, float]]:
    """``ranked`` with sessions holding a strong match lifted (:func:`ranking.session_boost`), then the
    records written on the date the query names (:func:`ranking.date_boost`), then the turns of a speaker
    the query names (:func:`ranking.speaker_boost`), then, for a query asking when, the records that
    mention a time (:func:`ranking.time_boost`), then the longer records (:func:`ranking.length_boost`).

    ``times``: what the neighbour lookup already read (see :data:`Times`); only the rest is read here,
    from ``line`` (the user's records in RAM, current in this snapshot) when it holds them.
    ``k``: only the ``k`` best are wanted. The steps after the session step add at most their weight
    to a candidate (less for most: see :func:`_lifts`), whatever the others get, so they run only on
    the head of the ranking that can still reach the ``k`` best (:func:`ranking.within_reach`, with the
    first ``k``'s exact length lifts); the session step, whose lift depends on the others in a session, runs on
    the head that bounds on it allow unless a candidate left out could chain two of the head's sessions
    (:func:`ranking.session_boost` with ``k``). The ``k`` best come out the same as with every
    candidate (``tests/sqlite/test_sqlite_hybrid_steps.py`` compares).

    A ranking longer than :data:`_WIDE` times ``k`` (hybrid search: the fused candidates and their
    neighbours, ~500 for ~50 the steps read) is read lazily: each candidate's entry, session and time
    only when a step asks, and the bound for the session step from the shape of the timeline's texts
    (:meth:`~._timeline.Timeline.shape`) instead of every candidate's text; the bound for the later
    steps then comes from the head the session step left. Touching ~500 candidates' rows costs more
    than the steps themselves once other work has emptied the CPU's caches.
    """
    span = ranking.query_dates(query) if store.date_weight else None
    if (
        span is None
        and not store.session_weight
        and not store.speaker_weight
        and not store.time_weight
        and not store.length_weight
    ) or not ranked:
        return ranked
    # Times stay stored microseconds here (seconds for the session step): a datetime per candidate costs more.
    # Texts: whole for a question asking when, else only the start that holds a speaker prefix.
    timed = bool(store.time_weight) and ranking.asks_when(query)
    known: Mapping[int, _Entry] = {} if times is None else times
    # A long ranking (hybrid's fused candidates and their neighbours, ~500) of which only the head that can reach
    # the k best is read by the steps (~50): then what is known of each candidate is read only when asked.
    wide = k is not None and len(ranked) > _WIDE * k
    # Which rids nobody read: none, most often (hybrid's lookups read every candidate and neighbour),
    # found out in one C-level pass over ~500 rids instead of a comprehension.
    every = list(map(_FIRST, ranked))
    # (a long ranking the timeline holds whole: its entries from ``times``, else the timeline, made when asked)
    held = wide and line is not None and all(map(line.at.__contains__, every))
    unknown = (
        [] if held or all(map(known.__contains__, every)) else list(itertools.filterfalse(known.__contains__, every))
    )
    if held and line is not None and not all(map(known.__contains__, every)):
        known = _Known(known, line)
    elif unknown and line is not None and wide:
        # the rest from the timeline's columns, each entry made when asked
        known = _Known(known, line)
        unknown = list(itertools.filterfalse(line.at.__contains__, unknown))
    elif unknown and line is not None and all(map(line.at.__contains__, unknown)):
        # (keyword search leaves them all to this: see search_hits) the timeline's columns, in C-level passes
        known = dict(known) if known is times else known
        cast("dict[int, _Entry]", known).update(line.entries(unknown))
        unknown = []
    for chunk in chunks(unknown):
        rows: dict[int, _Entry] = known.read if isinstance(known, _Known) else {}
        if not isinstance(known, _Known):
            known = rows = dict(known) if known is times else cast("dict[int, _Entry]", known)
        found = conn.execute(
            f"SELECT rid, created_at, session_id, agent_id, text FROM records "
            f"WHERE rid IN ({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        rows.update((rid, (at, session, agent, text)) for rid, at, session, agent, text in found)
    # The steps that add at most a known amount to a candidate (its weight), one after the other.
    # They run on the same candidates (the head within reach), so the texts are looked up once.
    texts: dict[int, str] = {}
    steps: list[tuple[float, Callable[[list[tuple[int, float]]], list[tuple[int, float]]]]] = []
    if span is not None:
        days_of = span

        def dates(scored: list[tuple[int, float]]) -> list[tuple[int, float]]:
            days = {rid: dt(known[rid][0]) for rid, _ in scored if rid in known}
            return ranking.date_boost(scored, days, days_of, weight=store.date_weight)

        steps.append((store.date_weight, dates))
    if store.speaker_weight:

        def speakers(scored: list[tuple[int, float]]) -> list[tuple[int, float]]:
            # Whole texts: speaker_boost reads a speaker prefix within their first SPEAKER_PREFIX characters.
            return ranking.speaker_boost(scored, texts, query, weight=store.speaker_weight)

        steps.append((store.speaker_weight, speakers))
    if timed:

        def when_asked(scored: list[tuple[int, float]]) -> list[tuple[int, float]]:
            return ranking.time_boost(scored, texts, query, weight=store.time_weight)

        steps.append((store.time_weight, when_asked))
    if store.length_weight:

        def lengths(scored: list[tuple[int, float]]) -> list[tuple[int, float]]:
            sizes = {rid: len(text) for rid, text in texts.items()}
            return ranking.length_boost(scored, sizes, weight=store.length_weight, pivot=store.length_pivot)

        steps.append((store.length_weight, lengths))
    cut = k is not None and len(ranked) > k
    # The timeline groups its records into sessions from their positions (the same sessions, see sessions_of).
    grouping = None if line is None else functools.partial(line.sessions_of, seconds=store.session_gap.total_seconds())
    if not wide:
        # What is known of each candidate, in ``ranked``'s order (one C-level pass; None: not read).
        rids = every if store.session_weight or (cut and steps) else []
        got = list(map(known.get, rids))
        if all(got):  # (a row read is a non-empty tuple)
            found_of = cast("list[_Entry]", got)
        else:  # rows nobody read (records gone): left out, as the steps leave them
            rids = [rid for rid, found_at in zip(rids, got, strict=True) if found_at is not None]
            found_of = [found_at for found_at in got if found_at is not None]
        # The most the steps after the session step can add to any candidate, and to each (see _lifts).
        lift, least = _lifts(store, found_of, known, span is not None, timed) if cut and steps else (0.0, None)
        if store.session_weight:
            when: Mapping[int, tuple[Hashable, float]] = {
                rid: ((found_at[1], found_at[2]), found_at[0] / 1e6)
                for rid, found_at in zip(rids, found_of, strict=True)
            }
            # Only the head that can reach the k best (ranking.session_boost with k), when that is exact.
            ranked = ranking.session_boost(
                ranked, when, weight=store.session_weight, gap=store.session_gap, k=k if cut else None, lift=lift,
                grouping=grouping,
            )  # fmt: skip
        if cut and least is not None and len(ranked) > (k or 0):
            ranked = ranking.within_reach(ranked, k or 0, lift, least=least)
    else:
        if store.session_weight:
            # The head that can reach the k best, given the most the steps after it add to any candidate
            # (_lifts): from the shape of the timeline's texts when it holds every candidate (no candidate
            # read for it). Each candidate's session and time are made only when asked: most never are.
            if not steps:
                bound = 0.0
            elif held and line is not None:
                bound = _lifts(store, [], known, span is not None, timed, line.shape(ranking.SPEAKER_PREFIX))[0]
            else:
                read = [found_at for found_at in map(known.get, every) if found_at is not None]
                bound = _lifts(store, read, known, span is not None, timed)[0]
            ranked = ranking.session_boost(
                ranked, _When(known, ranked), weight=store.session_weight, gap=store.session_gap, k=k, lift=bound,
                grouping=grouping,
            )  # fmt: skip
        if steps and len(ranked) > (k or 0):
            # The most the steps can add to any candidate left, and to each (rows gone are left out, as above).
            head = [found_at for found_at in map(known.get, map(_FIRST, ranked)) if found_at is not None]
            lift, least = _lifts(store, head, known, span is not None, timed)
            ranked = ranking.within_reach(ranked, k or 0, lift, least=least)
    if steps:
        for rid, _ in ranked:
            found = known.get(rid)
            if found is not None:
                texts[rid] = found[3]
    for _, step in steps:
        ranked = step(ranked)
    return ranked


def _lifts(
    store: SQLiteStore,
    found: list[tuple[int, Union[str, None], Union[str, None], str]],
    known: Mapping[int, _Entry],
    dated: bool,
    timed: bool,
    shape: tuple[int, bool] | None = None,
) -> tuple[float, Callable[[int], float]]:
    """The most the date, speaker, time and length steps of :func:`placed` can add to any of the ranked
    candidates (``found``: what is known of each of them, see :data:`Times`), and rid -> the least they
    add to it (its length lift, exactly as :func:`ranking.length_boost` adds it).

    The most: the longest text's length lift, the speaker step's weight only when a text has a colon
    where a speaker prefix would end (:func:`ranking.speaker_boost` lifts no other), the date and time
    steps' weights when they run. ``shape``: the longest text's length and whether a text has such a colon,
    of a set of texts holding every candidate's (:meth:`~._timeline.Timeline.shape`): then ``found`` is not read.
    """
    fixed = (store.date_weight if dated else 0.0) + (store.time_weight if timed else 0.0)
    speaker, length, pivot = store.speaker_weight, store.length_weight, store.length_pivot
    prefix = ranking.SPEAKER_PREFIX
    # The longest text, and a colon among any text's first ``prefix`` characters (see Timeline.shape).
    longest, colon = text_shape(list(map(_TEXT, found)), prefix) if shape is None else shape
    most = fixed
    if length and longest:
        most += length * min(1.0, longest / pivot)
    if speaker and colon:
        most += speaker

    def least(rid: int) -> float:
        found = known.get(rid)
        return length * min(1.0, len(found[3]) / pivot) if length and found is not None else 0.0

    return most, least


def neighbours(
    conn: Conn,
    rids: Sequence[int],
    filters: Cond,
    now: int,
    *,
    weight: float,
    window: int,
    among: bool = False,
    times: Times | None = None,
    line: Timeline | None = None,
) -> dict[int, list[tuple[int, int]]]:
    """rid -> (rid, distance) of the live records of its exact scope written just before and after it.

    Up to ``window`` on each side, in (created_at, rid) order, matching the filters.
    ``among=True``: only links between ``rids`` matter (keyword search lifts
    its own matches only), so a rid with none of the others among its user's
    nearest :data:`NEIGHBOUR_SCAN` records is left out (it has no such link).
    ``times``: filled with the :data:`Times` of the records read (the rids and their neighbours).
    ``line``: see :func:`sides`.
    """
    if not rids or not weight or window < 1:
        return {}
    if among:
        # Without times to fill, a timeline holding every rid answers from its positions.
        linked = None if times is not None or line is None else close_in(line, rids, scan=NEIGHBOUR_SCAN)
        rids = _close(conn, rids, times) if linked is None else linked
        if not rids:
            return {}
    if times is None and line is not None and not filter_sql(filters)[0]:
        joined = near_in(line, rids, window=int(window), scan=NEIGHBOUR_SCAN)
        if joined is not None:
            return joined
    found = sides(conn, rids, filters, now, window=window, times=times, line=line)
    return {rid: [*before, *after] for rid, (before, after) in found.items()}


def sides(
    conn: Conn,
    rids: Sequence[int],
    filters: Cond,
    now: int,
    *,
    window: int,
    after: bool = True,
    times: Times | None = None,
    line: Timeline | None = None,
) -> dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """rid -> ((rid, distance) before it, nearest first; the same after it, empty unless ``after``).

    The records of its exact scope, live and matching the filters, as in :func:`neighbours`;
    ``times`` is filled as there. ``line``: the rids' user's records in RAM, current in this
    snapshot (:mod:`._timeline`); without filters or a time range it answers when it holds
    every rid (the same lists, the same ``times``), else the statement runs.
    """
    if not rids or window < 1:
        return {}
    if line is not None and not filter_sql(filters)[0]:
        found_in = sides_in(line, rids, now, window=int(window), scan=NEIGHBOUR_SCAN, after=after, times=times)
        if found_in is not None:
            return found_in
    # Only the user's nearest NEIGHBOUR_SCAN records on each side are looked at, so a
    # selective filter or interleaved sessions cannot make this walk a user's whole history.
    # The walk reads the (user_id, created_at) index alone (rid is its last column); the
    # rows are read by rid for those walked until ``window`` pass (SQLite scans the walk
    # in its order and stops there), not for every one of the NEIGHBOUR_SCAN.
    fsql, fparams = filter_sql(filters, alias="w", created="w.t")
    side = (
        "(SELECT json_group_array(json_array(t, rid{text})) FROM (SELECT w.t AS t, w.rid AS rid, {x} AS x FROM ("
        "SELECT n.created_at AS t, n.rid AS rid "
        "FROM records n WHERE n.user_id IS c.user_id AND (n.created_at, n.rid) {op} (c.created_at, c.rid) "
        "ORDER BY n.created_at {dir}, n.rid {dir} LIMIT {scan}) AS w CROSS JOIN records o ON o.rid = w.rid "
        "WHERE o.session_id IS c.session_id AND o.agent_id IS c.agent_id AND (o.expires_at IS NULL OR o.expires_at > ?)"
        + fsql
        + " ORDER BY w.t {dir}, w.rid {dir} LIMIT {window}))"
    )
    one_side = [now, *fparams]
    # LIMIT and OFFSET are written into the statement, never bound: SQLite
    # re-prepares a statement whose bound LIMIT changes at every execution
    # (callgrind: 427k instructions per run of this one for one rid, 64k with literals).
    # With ``times`` the neighbours' texts come along (the rows are read anyway).
    text, x = (", x", "o.text") if times is not None else ("", "NULL")
    before = side.format(op="<", dir="DESC", scan=NEIGHBOUR_SCAN, window=int(window), text=text, x=x)
    later = side.format(op=">", dir="ASC", scan=NEIGHBOUR_SCAN, window=int(window), text=text, x=x) if after else "NULL"
    rows = conn.execute(
        f"SELECT c.rid, c.created_at, c.session_id, c.agent_id, c.text, {before}, {later} "
        "FROM records c WHERE c.rid IN (SELECT value FROM json_each(?))",
        [*one_side, *(one_side if after else []), json.dumps(list(rids))],
    ).fetchall()
    # Every side of every row in one parse: a json.loads per side cost more than the statement.
    sides_of = json.loads("[" + ",".join([f"{b or '[]'},{a or '[]'}" for *_, b, a in rows]) + "]")
    out: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
    for i, (rid, at, session, agent, said, _, _) in enumerate(rows):
        # sorted here (by created_at, then rid: unique): an aggregate's input order is not guaranteed
        found_before, found_after = sides_of[2 * i], sides_of[2 * i + 1]
        if len(found_before) > 1:
            found_before.sort(reverse=True)
        if len(found_after) > 1:
            found_after.sort()
        out[rid] = (
            [(row[1], d) for d, row in enumerate(found_before, 1)],
            [(row[1], d) for d, row in enumerate(found_after, 1)],
        )
        if times is not None:
            # A neighbour shares the candidate's session and agent (the statement asks for the exact scope).
            times[rid] = (at, session, agent, said)
            for t, other, said_there in found_before:
                times[other] = (t, session, agent, said_there)
            for t, other, said_there in found_after:
                times[other] = (t, session, agent, said_there)
    return out


def _close(conn: Conn, rids: Sequence[int], times: Times | None = None) -> list[int]:
    """The ``rids`` with another of them among their user's :data:`NEIGHBOUR_SCAN` nearest records on one side.

    Only those can be linked by :func:`neighbours`, whose lists come from that
    many records on each side. A link is symmetric, so it is enough to ask, for
    consecutive rids in (user, created_at, rid) order, whether the later one lies
    within the earlier one's next :data:`NEIGHBOUR_SCAN` records of the user: one
    covering-index walk per rid, no row read. A tie on created_at counts as
    close (then :func:`neighbours` decides exactly). ``times`` is filled
    with the rids' own :data:`Times`.
    """
    if len(rids) < 2:
        return []
    rows = conn.execute(
        "SELECT c.rid, c.user_id, c.created_at, (SELECT n.created_at FROM records n WHERE n.user_id IS c.user_id "
        "AND (n.created_at, n.rid) > (c.created_at, c.rid) ORDER BY n.created_at, n.rid "
        f"LIMIT 1 OFFSET {NEIGHBOUR_SCAN - 1}), c.session_id, c.agent_id, c.text "
        "FROM records c WHERE c.rid IN (SELECT value FROM json_each(?))",
        [json.dumps(list(rids))],
    ).fetchall()
    if times is not None:
        times.update((int(row[0]), (row[2], row[4], row[5], row[6])) for row in rows)
    rows.sort(key=lambda row: (row[1] is not None, row[1] or "", row[2], row[0]))
    close: set[int] = set()
    for (rid, user, _, last, *_), (other, other_user, at, *_) in itertools.pairwise(rows):
        # `last`: created_at of the NEIGHBOUR_SCAN-th record after `rid` (None: fewer follow it).
        if user == other_user and (last is None or at <= last):
            close.update((rid, other))
    return [rid for rid in rids if rid in close]


def vector_at_once(
    store: SQLiteStore, conn: Conn, qvec: F32, scope: MemoryScope, k: int, filters: Cond
) -> list[MemoryHit] | None:
    """An exact vector search from the scope's vectors in RAM in one statement, no transaction; None: not here.

    What ``read_nowait(search_hits(..., "vector", load=False))`` returns when the vectors in RAM are
    current, for the k best of an unfiltered scope searched exactly: the ranking runs first on the
    cached block, then one statement (its own snapshot, as a transaction would give) reads the k rows
    together with what the transaction's other statements read: the tenant's generation, whether the
    user has a vector index, whether the write-behind log holds rows. Unless the generation is the
    block's and neither of the others holds, the result is dropped (None) and the caller runs the
    search as before. Saves a ``BEGIN``, a ``COMMIT`` and two or three lookups per search (goal 6).
    """
    if filters:
        return None  # the allowed rids are read in the snapshot first (ranking_job)
    found = store.vectors.current(scope)
    if found is None:
        return None
    gen, rids, matrix, expires, soonest = found
    if len(rids) > INLINE_VECTORS:
        return None
    ranked = Ranking(rids, matrix, expires, qvec, k, us(utcnow()), None, soonest)()
    if not ranked:
        return None  # nothing to read the snapshot with: the caller's path says so in a transaction
    # The index is consulted (vector_job) only for a whole user's scope of a store with indexes on.
    ann = store.ann_params is not None and scope.session_id is None and scope.agent_id is None
    found_rows = conn.execute(
        _at_once_sql(len(ranked), ann, store.db.drain is not None),
        [tenant_token(scope.user_id), *[rid for rid, _ in ranked]],
    ).fetchall()
    if not found_rows or found_rows[0][-3] != gen or found_rows[0][-2] or found_rows[0][-1]:
        return None
    rows = {row[0]: row[:-3] for row in found_rows}
    return _hits(ranked, rows, "vector")


@functools.lru_cache(maxsize=256)
def _at_once_sql(n: int, ann: bool, inbox: bool) -> str:
    """:func:`vector_at_once`'s statement for ``n`` rids (``?1``: the tenant's token)."""
    index = "EXISTS (SELECT 1 FROM ann_index WHERE tenant = ?1)" if ann else "0"
    log = "EXISTS (SELECT 1 FROM inbox)" if inbox else "0"
    return (
        f"SELECT {COLUMNS}, coalesce((SELECT gen FROM generations WHERE tenant = ?1), -1), {index}, {log} "
        f"FROM records r WHERE r.rid IN ({','.join('?' * n)})"
    )


def _hits(ranked: list[tuple[int, float]], rows: dict[int, Sequence[Any]], signal: str) -> list[MemoryHit]:
    """The hits of ``ranked`` whose rows were read, in order (records of one scope share its object)."""
    scopes: dict[ScopeKey, MemoryScope] = {}
    # Built, not validated (see _rows.built); a non-finite score (a bug) still goes through validation.
    return [
        built(MemoryHit, {"record": record_from_row(row, scopes), "score": float(score), "signal": signal})
        if math.isfinite(score)
        else MemoryHit(record=record_from_row(row, scopes), score=score, signal=signal)
        for rid, score in ranked
        if (row := rows.get(rid)) is not None
    ]


def rows_by_rid(conn: Conn, rids: Sequence[int]) -> dict[int, Sequence[Any]]:
    if not rids:
        return {}
    found = conn.execute(f"SELECT {COLUMNS} FROM records r WHERE r.rid IN ({','.join('?' * len(rids))})", rids)
    return {row[0]: row for row in found}
