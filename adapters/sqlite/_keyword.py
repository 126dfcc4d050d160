"""Keyword ranking: FTS5 BM25 over the file, BM25 over one user's records, or LIKE where FTS5 is missing.

Every candidate is checked against scope, expiry and filters before it counts
(in SQL, or without filters in the user's timeline, ``_timeline.py``); the best
``limit`` come back as ``(rid, score)``, best first.
"""

from __future__ import annotations

import functools
import heapq
import json
import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import Any

from memoryport import ranking
from memoryport._records import MemoryScope
from memoryport.storekit import chunks

from . import _keyword_large
from ._fts import like_patterns, match_expression
from ._keyword_large import WordLists, fts5_idf, large_bm25
from ._keyword_user import file_ranking, per_user_ranking, user_lists
from ._rows import Cond, Conn, filter_sql, scope_sql, slot_span, tenant_token
from ._timeline import Timeline
from ._where import Where, where_sql

__all__ = ["Span", "bm25_file", "bm25_per_user", "doc_sizes", "file_idf", "keyword_ranking", "varint"]


def varint(blob: bytes) -> int:
    """The first SQLite varint of ``blob`` (FTS5's docsize record starts with the body's word count)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value


def doc_sizes(conn: Conn, rids: Sequence[int], base: int = 0) -> dict[int, int]:
    """Words in each record's text, from FTS5's own ``docsize`` table (FTS5 rowid = ``base`` + rid)."""
    sizes: dict[int, int] = {}
    for chunk in chunks(rids):
        for rid, blob in conn.execute(
            f"SELECT id - ?, sz FROM records_fts_docsize WHERE id IN ({','.join('?' * len(chunk))})",
            [base, *(base + rid for rid in chunk)],
        ):
            sizes[int(rid)] = varint(bytes(blob))
    return sizes


def keyword_ranking(
    conn: Conn,
    keyword_index: str,
    query: str,
    scope: MemoryScope,
    limit: int,
    filters: Cond,
    now: int,
    idf: dict[str, float] | None = None,
    line: Timeline | None = None,
    words: WordLists | None = None,
) -> list[tuple[int, float]]:
    """(rid, score) best first; score is -BM25 (higher is better) or the number of words matched (LIKE).

    ``idf``: filled with the BM25 IDF of each query word found in the records
    the score counts (the user's, or the file's when the user holds most of it);
    left empty by the LIKE fallback, which has none. ``line``: the user's records
    in RAM, current in this snapshot (``_timeline.py``): without filters or a time
    range, the candidates' scope and expiry are checked there, and the words per
    record it has kept are not read again. ``words``: the file's word lists in RAM; a user with at
    least :data:`~._keyword_large.LARGE` records, searched whole without filters, is ranked through them
    (``_keyword_large.py``: the same scores, without ranking every match).
    """
    where, params = scope_sql(scope)
    fsql, fparams = filter_sql(filters)
    live = "(r.expires_at IS NULL OR r.expires_at > ?)"
    if keyword_index == "fts5":
        expression = match_expression(query)
        if expression is None:
            return []
        tenant = tenant_token(scope.user_id)
        # (with FTS5's averages record, which the ranking from the user's index checks: one statement less)
        row = conn.execute(
            "SELECT g.n, g.slot, f.n, f.gen, (SELECT block FROM records_fts_data WHERE id = 1) "
            "FROM generations g, generations f WHERE g.tenant = ? AND f.tenant = ''",
            (tenant,),
        ).fetchone()
        if words is not None and row is not None:
            words.users.sweep(conn, int(row[3]), scope.user_id, line)
        if row is None:
            return []
        mine, slot, total = int(row[0]), int(row[1] or 0), int(row[2])
        # The user's records are the FTS5 rowids of its slot (see _rows.fts_rowid):
        # only their postings are read, however many other users share the file.
        span = Span(slot, tenant)
        check: Callable[[Sequence[int]], set[int]]
        if line is not None and not fsql:
            check = functools.partial(_check_in, line, scope, now)
        else:
            check = functools.partial(_check_rows, conn, where, params, live, fsql, fparams, now)
        terms = ranking.query_terms(query)
        # The user's words in RAM (``_keyword_user.py``): once its searches have paid for indexing it.
        users = None if words is None or line is None else words.users
        index = None if users is None or line is None else users.of(conn, scope.user_id, line)
        tokens = None if users is None or index is None else users.tokens_of(conn, terms)
        # The rent (UserIndexes.paid): this thread's CPU time from here to the end of a ranking through FTS5. The
        # clock (a system call here) is read only when that may be needed: no index, or one the search cannot use.
        start = time.thread_time() if users is not None and line is not None and index is None else 0.0
        if 2 * mine < total:
            lists = None if index is None or tokens is None else user_lists(index, tokens)
            if lists is not None and line is not None and index is not None:
                rank = functools.partial(per_user_ranking, index, lists, limit=limit, check=check)
                return bm25_per_user(conn, terms, span, mine, limit, check, idf, lists=lists, rank=rank)
            if index is not None and users is not None and line is not None:
                start = time.thread_time()  # the index did not answer (a word of several tokens)
            sizes = None if line is None else line.sizes
            hits = bm25_per_user(conn, terms, span, mine, limit, check, idf, sizes)
            if users is not None and line is not None:
                users.paid(scope.user_id, line.gen, time.thread_time() - start)
            return hits
        times = _time_bounds(conn, where, params, filters)
        if (
            words is not None
            and mine >= _keyword_large.LARGE
            and slot
            and not fsql
            and times is None
            and scope.session_id is None
            and scope.agent_id is None
        ):
            counts: dict[str, int] = {}
            found = large_bm25(conn, words, terms, span.lo, span.hi, span.base, limit, check, counts)
            if found is not None:
                if idf is not None:
                    idf.update((term, fts5_idf(n, total)) for term, n in counts.items() if n)
                return found
        checked = functools.partial(_ranked_checked, conn, where, params, live, fsql, fparams, now)
        # With filters, a session or an agent, take more of the best first: checking
        # them costs little next to scoring every match again in the checked pass.
        inner = limit + 32 if not filters and scope.session_id is None and scope.agent_id is None else 8 * (limit + 32)
        ranked = None
        if index is not None and tokens is not None and times is None:
            ranked = file_ranking(conn, index, tokens, inner, averages=row[4])
        if ranked is not None and index is not None and tokens is not None:
            if idf is not None:
                for term, token in zip(terms, tokens, strict=True):
                    n = index.count(token or "")
                    if n:
                        idf[term] = fts5_idf(n, total)
            return bm25_file(conn, f"body : ({expression})", limit, check, checked, span, inner, ranked=ranked)
        if index is not None and users is not None and line is not None and times is None:
            start = time.thread_time()  # the index did not answer (a word of several tokens, other statistics)
        if idf is not None:
            idf.update(file_idf(conn, terms, total))
        hits = bm25_file(conn, f"body : ({expression})", limit, check, checked, span.narrowed(times), inner)
        if users is not None and line is not None and times is None:
            users.paid(scope.user_id, line.gen, time.thread_time() - start)
        return hits

    patterns = like_patterns(query)
    if not patterns:
        return []
    # One JSON parameter holds every pattern: no limit on expression depth or host parameters.
    rows = conn.execute(
        "SELECT rid, score FROM (SELECT r.rid AS rid, r.created_at AS created_at, "
        "(SELECT count(*) FROM json_each(?) p WHERE r.text LIKE p.value ESCAPE '\\') AS score "
        f"FROM records r WHERE {where} AND {live}{fsql}) WHERE score > 0 "
        f"ORDER BY score DESC, created_at DESC LIMIT {int(limit)}",
        [json.dumps(patterns), *params, now, *fparams],
    ).fetchall()
    return [(int(rid), float(score)) for rid, score in rows]


def _check_in(line: Timeline, scope: MemoryScope, now: int, rids: Sequence[int]) -> set[int]:
    """:func:`_check_rows` without filters, from the user's records in RAM (a rid it lacks is another user's)."""
    at, sessions, agents, expires = line.at, line.sessions, line.agents, line.expires
    session, agent = scope.session_id, scope.agent_id
    if session is None and agent is None and not line.mortal:
        return at.keys() & rids  # the whole user's, none expiring: every rid it holds
    keep: set[int] = set()
    for rid in rids:
        p = at.get(rid)
        if (
            p is not None
            and expires[p] > now
            and (session is None or sessions[p] == session)
            and (agent is None or agents[p] == agent)
        ):
            keep.add(rid)
    return keep


def _check_rows(
    conn: Conn,
    where: str,
    params: list[Any],
    live: str,
    fsql: str,
    fparams: list[Any],
    now: int,
    rids: Sequence[int],
) -> set[int]:
    """The subset of ``rids`` in scope, alive and matching the filters."""
    keep: set[int] = set()
    # NOT INDEXED: look each row up by rid. Without it SQLite's planner (no
    # statistics) prefers the (user_id, created_at) index and walks every
    # record of the user, checking the rid list per row: 55 ms instead of
    # 0.1 ms for 82 candidates of a user holding 100k records.
    for chunk in chunks(rids):
        keep.update(
            r[0]
            for r in conn.execute(
                f"SELECT r.rid FROM records r NOT INDEXED WHERE r.rid IN ({','.join('?' * len(chunk))}) "
                f"AND {where} AND {live}{fsql}",
                [*chunk, *params, now, *fparams],
            )
        )
    return keep


@dataclass(frozen=True)
class Span:
    """The FTS5 rowids of one user's records: its slot's range (slot 0: shared, the tenant token tells)."""

    slot: int
    tenant: str
    lo: int = -1
    hi: int = -1

    def __post_init__(self) -> None:
        if self.lo < 0:
            lo, hi = slot_span(self.slot)
            object.__setattr__(self, "lo", lo)
            object.__setattr__(self, "hi", hi)

    @property
    def base(self) -> int:
        """What to subtract from an FTS5 rowid for the record's rid."""
        return slot_span(self.slot)[0]

    def narrowed(self, rids: tuple[int, int] | None) -> Span:
        """The span of the records from rid ``rids[0]`` to ``rids[1]`` (a time range's), or this one."""
        if rids is None:
            return self
        lo, hi = max(self.lo, self.base + rids[0]), min(self.hi, self.base + rids[1])
        return Span(self.slot, self.tenant, lo, hi) if lo <= hi else Span(self.slot, self.tenant, 1, 0)

    def term(self, phrase: str) -> str:
        """A MATCH for one quoted word in the body, of this user where the slot is shared."""
        return f'tenant : "{self.tenant}" AND body : {phrase}' if self.slot == 0 else f"body : {phrase}"


def bm25_file(
    conn: Conn,
    match: str,
    limit: int,
    check: Callable[[Sequence[int]], set[int]],
    checked: Callable[[str, int, Span], list[tuple[int, float]]],
    span: Span,
    inner: int | None = None,
    *,
    ranked: list[tuple[int, float]] | None = None,
) -> list[tuple[int, float]]:
    """FTS5's own BM25: right when the user holds most of the file (its IDF is then the user's).

    Only the postings in ``span`` are scored: the ``inner`` best (default
    ``limit + 32``) are checked first; if too few pass, ``checked(match,
    limit, span)`` ranks just the rows that pass scope, expiry and filters, in one pass.
    ``ranked``: those best (rid, bm25), already found (``_keyword_user.file_ranking``: the same rows).
    """
    if span.lo > span.hi:
        return []
    if (span.lo, span.hi) != slot_span(span.slot):
        # A narrow time range: FTS5 scores only the rowids it can reach.
        return checked(match, limit, span)
    # (LIMITs are written into the statements, not bound: a bound LIMIT makes
    # SQLite re-prepare the statement at every run; see _search.neighbours.)
    # Take FTS5's best rows first, then check scope, expiry and filters on
    # just those: joining every match to `records` before sorting costs a
    # row lookup per match (47 vs 32 ms at 100k).
    inner = inner or limit + 32
    if ranked is None:
        ranked = conn.execute(
            "SELECT rowid - ?, bm25(records_fts, 1.0, 0.0) AS score FROM records_fts "
            f"WHERE records_fts MATCH ? AND rowid BETWEEN ? AND ? ORDER BY score LIMIT {int(inner)}",
            (span.base, match, span.lo, span.hi),
        ).fetchall()
    keep = check([rid for rid, _ in ranked])
    # (rid, score): an int and a float as SQLite returns them for ``rowid - ?`` and ``bm25()``, and as file_ranking
    # gives them (numpy's tolist)
    hits = [(rid, -score) for rid, score in ranked if rid in keep][:limit]
    if len(hits) >= limit or len(ranked) < inner:
        return hits
    # Too many of the best failed (a selective filter, session or agent):
    # rank the rows that pass, in one pass, instead of ranking again wider.
    return checked(match, limit, span)


def file_idf(conn: Conn, terms: Sequence[str], total: int) -> dict[str, float]:
    """The IDF of each of ``terms`` found in the file, as FTS5's ``bm25()`` weighs it (its scores are summed
    with these): ``log((N - n + 0.5) / (n + 0.5))``, at least 1e-6. One statement per 100 words.

    Each word's records are counted up to ``N // 2 + 1`` only: from there on the
    logarithm is not positive and the IDF is 1e-6 whatever the count, so the
    postings of a word most records hold are not read to the end.
    """
    out: dict[str, float] = {}
    cap = max(int(total), 0) // 2 + 1
    for part in chunks(list(terms), 100):
        phrases = ['body : "' + term.replace('"', '""') + '"' for term in part]
        counts = conn.execute(
            "SELECT "
            + ", ".join(
                [f"(SELECT count(*) FROM (SELECT 1 FROM records_fts WHERE records_fts MATCH ? LIMIT {cap}))"]
                * len(phrases)
            ),
            phrases,
        ).fetchone()
        found = list(counts) if counts else [0] * len(part)
        out.update((term, fts5_idf(int(n), total)) for term, n in zip(part, found, strict=True) if n)
    return out


# Up to this many records in a time range, their rid span bounds the FTS5 scan.
TIME_BOUNDS_MAX = 4096


def _time_bounds(conn: Conn, where: str, params: list[Any], filters: Cond) -> tuple[int, int] | None:
    """(first, last) rid of the scope's records in the filters' time range, when it holds few (else None)."""
    if not isinstance(filters, Where) or (filters.since is None and filters.until is None):
        return None
    tsql, tparams = where_sql(Where(since=filters.since, until=filters.until))
    row = conn.execute(
        f"SELECT min(rid), max(rid), count(*) FROM (SELECT r.rid AS rid FROM records r WHERE {where}{tsql} "
        f"LIMIT {TIME_BOUNDS_MAX + 1})",
        [*params, *tparams],
    ).fetchone()
    if row is None or row[2] > TIME_BOUNDS_MAX:
        return None
    if not row[2]:
        return (1, 0)  # nothing in range: an empty span
    return int(row[0]), int(row[1])


def _ranked_checked(
    conn: Conn,
    where: str,
    params: list[Any],
    live: str,
    fsql: str,
    fparams: list[Any],
    now: int,
    match: str,
    limit: int,
    span: Span,
) -> list[tuple[int, float]]:
    """FTS5's BM25 over the matches in scope, alive and passing the filters: one pass, best first."""
    # CROSS JOIN keeps FTS5 outermost; NOT INDEXED: each match looked up by rid.
    rows = conn.execute(
        "SELECT r.rid, bm25(records_fts, 1.0, 0.0) AS score FROM records_fts "
        "CROSS JOIN records r NOT INDEXED "
        "WHERE records_fts MATCH ? AND records_fts.rowid BETWEEN ? AND ? AND r.rid = records_fts.rowid - ? "
        f"AND {where} AND {live}{fsql} ORDER BY score LIMIT {int(limit)}",
        [match, span.lo, span.hi, span.base, *params, now, *fparams],
    ).fetchall()
    return [(int(rid), -float(score)) for rid, score in rows]


def bm25_per_user(
    conn: Conn,
    terms: Sequence[str],
    span: Span,
    n_user: int,
    limit: int,
    check: Callable[[Sequence[int]], set[int]],
    idf: dict[str, float] | None = None,
    known: dict[int, int] | None = None,
    *,
    lists: Sequence[Sized] | None = None,
    rank: Callable[[Sequence[float]], list[tuple[int, float]]] | None = None,
) -> list[tuple[int, float]]:
    """BM25 over the user's own records, for a user among many in the file.

    FTS5's ``bm25()`` reads every posting of each query word in the whole file
    to count its documents (1.9 vs 7.8 ms for 10k records among 1M others).
    Here each word's postings are read only within the user's slot (a rowid
    range FTS5 seeks to), the IDF is the user's own, and each word is assumed
    to occur once per record (short memories). ``idf``: filled with each found word's IDF.
    ``known``: rid -> words in its text, kept from earlier searches (valid while the texts
    are unchanged: a timeline's); only the others are read, and then kept there.
    From the user's words in RAM instead (``_keyword_user.py``, the same records and numbers):
    ``lists``, each term's records, and ``rank(weights)``, the ranking below given each term's
    IDF (``_keyword_user.per_user_ranking``).
    """
    window = 2 * limit + 16
    if lists is not None and rank is not None:
        weights = [ranking.bm25_idf(len(found), n_user) for found in lists]
        if idf is not None:
            idf.update((term, weight) for term, found, weight in zip(terms, lists, weights, strict=True) if len(found))
        return rank(weights)
    words: dict[int, float] = {}
    for term in terms:
        phrase = '"' + term.replace('"', '""') + '"'
        found = conn.execute(
            "SELECT json_group_array(rowid - ?) FROM records_fts WHERE records_fts MATCH ? AND rowid BETWEEN ? AND ?",
            (span.base, span.term(phrase), span.lo, span.hi),
        ).fetchone()
        rids = json.loads(found[0]) if found and found[0] else []
        weight = ranking.bm25_idf(len(rids), n_user)
        if idf is not None and rids:
            idf[term] = weight
        for rid in rids:
            words[rid] = words.get(rid, 0.0) + weight
    if not words:
        return []
    # The best few by summed IDF first; sorting every candidate only if rows fail the checks.
    by_idf = heapq.nlargest(window, words.items(), key=lambda kv: (kv[1], -kv[0]))
    done = 0
    hits: list[tuple[int, float]] = []
    while True:
        part = by_idf[done : done + window]
        done += len(part)
        keep = check([rid for rid, _ in part])
        part = [(rid, idf) for rid, idf in part if rid in keep]
        if known is None:
            sizes = doc_sizes(conn, [rid for rid, _ in part], span.base)
        else:
            sizes = {rid: known[rid] for rid, _ in part if rid in known}
            if len(sizes) < len(part):
                read = doc_sizes(conn, [rid for rid, _ in part if rid not in sizes], span.base)
                known.update(read)
                sizes.update(read)
        avg = sum(sizes.values()) / len(sizes) if sizes else 1.0
        hits.extend((rid, idf * ranking.bm25_length_factor(sizes.get(rid, 1), avg)) for rid, idf in part)
        if len(hits) >= limit or done >= len(words):
            break
        if len(by_idf) < len(words):
            by_idf = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))
        window *= 8
    hits.sort(key=lambda kv: (-kv[1], kv[0]))
    return hits[:limit]
