"""Keyword ranking: FTS5 BM25 over the file, BM25 over one user's records, or LIKE where FTS5 is missing.

Every candidate is checked against scope, expiry and filters in SQL before it
counts; the best ``limit`` come back as ``(rid, score)``, best first.
"""

from __future__ import annotations

import functools
import heapq
import json
from collections.abc import Callable, Sequence
from typing import Any

from memoryport import ranking
from memoryport._records import MemoryScope
from memoryport.storekit import chunks

from ._fts import like_patterns, match_expression
from ._rows import Cond, Conn, filter_sql, scope_sql, tenant_token

__all__ = ["bm25_file", "bm25_per_user", "doc_sizes", "keyword_ranking", "varint"]


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


def doc_sizes(conn: Conn, rids: Sequence[int]) -> dict[int, int]:
    """Words in each record's text, from FTS5's own ``docsize`` table."""
    sizes: dict[int, int] = {}
    for chunk in chunks(rids):
        for rid, blob in conn.execute(
            f"SELECT id, sz FROM records_fts_docsize WHERE id IN ({','.join('?' * len(chunk))})", chunk
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
) -> list[tuple[int, float]]:
    """(rid, score) best first; score is -BM25 (higher is better) or the number of words matched (LIKE)."""
    where, params = scope_sql(scope)
    fsql, fparams = filter_sql(filters)
    live = "(r.expires_at IS NULL OR r.expires_at > ?)"
    if keyword_index == "fts5":
        expression = match_expression(query)
        if expression is None:
            return []
        # The tenant token confines the FTS5 scan to this user's postings, so
        # other users' records cost (almost) nothing. When the user holds most
        # of the file it only adds work (4 of 7 ms at 100k): leave it out.
        tenant = tenant_token(scope.user_id)
        row = conn.execute(
            "SELECT g.n, m.value FROM generations g, meta m WHERE g.tenant = ? AND m.key = 'records'", (tenant,)
        ).fetchone()
        if row is None:
            return []
        mine, total = int(row[0]), int(row[1])
        check = functools.partial(_check_rows, conn, where, params, live, fsql, fparams, now)
        if 2 * mine < total:
            return bm25_per_user(conn, ranking.query_terms(query), tenant, mine, limit, check)
        return bm25_file(conn, f"body : ({expression})", limit, check)

    patterns = like_patterns(query)
    if not patterns:
        return []
    # One JSON parameter holds every pattern: no limit on expression depth or host parameters.
    rows = conn.execute(
        "SELECT rid, score FROM (SELECT r.rid AS rid, r.created_at AS created_at, "
        "(SELECT count(*) FROM json_each(?) p WHERE r.text LIKE p.value ESCAPE '\\') AS score "
        f"FROM records r WHERE {where} AND {live}{fsql}) WHERE score > 0 "
        "ORDER BY score DESC, created_at DESC LIMIT ?",
        [json.dumps(patterns), *params, now, *fparams, limit],
    ).fetchall()
    return [(int(rid), float(score)) for rid, score in rows]


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


def bm25_file(
    conn: Conn, match: str, limit: int, check: Callable[[Sequence[int]], set[int]]
) -> list[tuple[int, float]]:
    """FTS5's own BM25: right when the user holds most of the file (its IDF is then the user's)."""
    # Take FTS5's best rows first, then check scope, expiry and filters on
    # just those: joining every match to `records` before sorting costs a
    # row lookup per match (47 vs 32 ms at 100k). Widen while rows fail.
    inner = limit + 32
    while True:
        ranked = conn.execute(
            "SELECT rowid, bm25(records_fts, 1.0, 0.0) AS score FROM records_fts "
            "WHERE records_fts MATCH ? ORDER BY score LIMIT ?",
            (match, inner),
        ).fetchall()
        keep = check([rid for rid, _ in ranked])
        hits = [(int(rid), -float(score)) for rid, score in ranked if rid in keep][:limit]
        if len(hits) >= limit or len(ranked) < inner or inner < 0:
            return hits
        inner = inner * 8 if inner < 20_000 else -1  # -1: no limit


def bm25_per_user(
    conn: Conn,
    terms: Sequence[str],
    tenant: str,
    n_user: int,
    limit: int,
    check: Callable[[Sequence[int]], set[int]],
) -> list[tuple[int, float]]:
    """BM25 over the user's own records, for a user among many in the file.

    FTS5's ``bm25()`` reads every posting of each query word in the whole file
    to count its documents (1.9 vs 7.8 ms for 10k records among 1M others).
    Here each word's postings are read only within the user's tenant token
    (FTS5 skips through the rest), the IDF is the user's own, and each word
    is assumed to occur once per record (short memories).
    """
    words: dict[int, float] = {}
    for term in terms:
        phrase = '"' + term.replace('"', '""') + '"'
        rids = [
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM records_fts WHERE records_fts MATCH ?",
                (f'tenant : "{tenant}" AND body : {phrase}',),
            )
        ]
        idf = ranking.bm25_idf(len(rids), n_user)
        for rid in rids:
            words[rid] = words.get(rid, 0.0) + idf
    if not words:
        return []
    window = 2 * limit + 16
    # The best few by summed IDF first; sorting every candidate only if rows fail the checks.
    by_idf = heapq.nlargest(window, words.items(), key=lambda kv: (kv[1], -kv[0]))
    done = 0
    hits: list[tuple[int, float]] = []
    while True:
        part = by_idf[done : done + window]
        done += len(part)
        keep = check([rid for rid, _ in part])
        part = [(rid, idf) for rid, idf in part if rid in keep]
        sizes = doc_sizes(conn, [rid for rid, _ in part])
        avg = sum(sizes.values()) / len(sizes) if sizes else 1.0
        hits.extend((rid, idf * ranking.bm25_length_factor(sizes.get(rid, 1), avg)) for rid, idf in part)
        if len(hits) >= limit or done >= len(words):
            break
        if len(by_idf) < len(words):
            by_idf = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))
        window *= 8
    hits.sort(key=lambda kv: (-kv[1], kv[0]))
    return hits[:limit]
