"""Where a keyword search's time goes in FTS5 at scale, and whether an exact top-k can skip ranking.

Issue 17 asks keyword search in one scope of 1M records to take at most 50 ms.
FTS5's ``bm25()`` ranks every match: for a query of common words that is
hundreds of thousands of rows. This probe times, per query, on one file:

* ``enumerate``: FTS5 listing the matches (``count(*)`` of the same ``MATCH``),
* ``bm25 top-k``: FTS5 ranking them (what ``SQLiteMemory`` runs for a user
  holding most of the file),
* ``docsize join``: reading each match's length, one B-tree lookup per match
  (part of what ``bm25()`` pays per row),
* ``word lists``: what ``SQLiteMemory`` runs for a user of at least 50,000
  records (``adapters/sqlite/_keyword_large.py``): each word's instance list
  and the records' lengths in RAM, BM25 in numpy, the best re-scored exactly;
  timed with the word lists read anew for each query ("cold": the first search
  after a write) and kept ("warm"), with its overlap@10 against ``bm25()``,
* ``exact bound``: an exact top-k built from FTS5's own parts, MaxScore-style:
  the query's words stemmed through a temporary FTS5 table with the same
  tokenizer, each word's postings and term frequencies from ``fts5vocab``
  (instance), IDF and the average length from FTS5's averages record, an upper
  bound per document (its length is at least its matched words), then exact
  scores in bound order until the k-th score beats the next bound. It
  reproduces ``bm25()`` (same formula, same order of the sum): the probe counts
  the queries whose k scores are bit-identical.

    python -m benchmarks.fts5_topk_probe --file /tmp/ann/data/synth.db --queries /tmp/ann/data/synth-queries.json
    python -m benchmarks.fts5_topk_probe --records 20000     # builds a one-scope file first (sqlite_bench's corpus)

The result on the 1M file (docs/benchmarks-sqlite.md): the exact bound is not
faster, because moving postings out of SQLite costs about what FTS5's ranking
does, and BM25's bound (2.2 x IDF) is loose against a typical score (~1 x IDF).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.sqlite_bench import Corpus, table
from memoryport import MemoryRecord, MemoryScope, SQLiteMemory, ranking
from memoryport.adapters.sqlite._driver import load_driver
from memoryport.adapters.sqlite._fts import match_expression
from memoryport.adapters.sqlite._keyword_large import K1, TOKENIZE, B, varints


class ExactBound:
    """An exact BM25 top-k over ``records_fts`` from FTS5's parts, ranking in order of an upper bound."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        conn.execute(f"CREATE VIRTUAL TABLE temp.probe_tok USING fts5(body, tokenize='{TOKENIZE}')")
        conn.execute("CREATE VIRTUAL TABLE temp.probe_tok_i USING fts5vocab(temp, probe_tok, instance)")
        conn.execute("CREATE VIRTUAL TABLE temp.probe_inst USING fts5vocab(main, records_fts, instance)")
        self.looked = 0

    def tokens(self, terms: Sequence[str]) -> list[str] | None:
        """Each term's FTS5 token, or None when a term is not exactly one token (FTS5 then matches a phrase)."""
        self.conn.executemany("INSERT INTO temp.probe_tok(rowid, body) VALUES (?, ?)", list(enumerate(terms)))
        rows = self.conn.execute("SELECT doc, term FROM temp.probe_tok_i").fetchall()
        self.conn.execute("DELETE FROM temp.probe_tok")
        per: dict[int, list[str]] = {}
        for doc, term in rows:
            per.setdefault(int(doc), []).append(str(term))
        if any(len(per.get(i, [])) != 1 for i in range(len(terms))):
            return None
        return [per[i][0] for i in range(len(terms))]

    def topk(self, query: str, k: int) -> list[tuple[int, float]] | None:
        """(FTS5 rowid, bm25) best first, as ``ORDER BY bm25(records_fts, 1.0, 0.0) LIMIT k`` gives them."""
        terms = ranking.query_terms(query)
        toks = self.tokens(terms) if terms else None
        if toks is None:
            return None
        (blob,) = self.conn.execute("SELECT block FROM records_fts_data WHERE id = 1").fetchone()
        averages = varints(bytes(blob))
        n_row = averages[0]
        avgdl = sum(averages[1:]) / n_row
        docs, tfs, idfs = [], [], []
        for tok in toks:
            (found,) = self.conn.execute(
                "SELECT group_concat(doc) FROM temp.probe_inst WHERE term = ? AND col = 'body'", (tok,)
            ).fetchone()
            listed = np.array([int(x) for x in found.split(",")] if found else [], dtype=np.int64)
            unique, counts = np.unique(listed, return_counts=True)
            idf = math.log((n_row - len(unique) + 0.5) / (len(unique) + 0.5))
            idfs.append(idf if idf > 0.0 else 1e-6)
            docs.append(unique)
            tfs.append(counts.astype(np.float64))
        every = np.unique(np.concatenate(docs))
        freq = np.zeros((len(toks), len(every)))
        for i, (unique, counts) in enumerate(zip(docs, tfs, strict=True)):
            freq[i, np.searchsorted(every, unique)] = counts
        shortest = freq.sum(axis=0)  # a document holds at least its matched tokens
        bound = np.zeros(len(every))
        for i, idf in enumerate(idfs):
            f = freq[i]
            bound += idf * (f * (K1 + 1.0)) / (f + K1 * (1 - B + B * shortest / avgdl))
        order = np.argsort(-bound, kind="stable")
        best: list[tuple[float, int]] = []  # (score, -rowid): a min-heap of the k best
        at = 0
        while at < len(order):
            theta = best[0][0] if len(best) >= k else -1.0
            if bound[order[at]] < theta:
                break
            batch = order[at : at + 512]
            at += len(batch)
            batch = batch[bound[batch] >= theta]
            rowids = every[batch].tolist()
            sizes = dict(
                self.conn.execute(
                    "SELECT id, sz FROM records_fts_docsize WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(rowids),),
                ).fetchall()
            )
            self.looked += len(rowids)
            for j, rowid in zip(batch.tolist(), rowids, strict=True):
                size = float(sum(varints(bytes(sizes[rowid]))))
                score = 0.0
                for i, idf in enumerate(idfs):  # bm25()'s sum, phrase by phrase, in the same order
                    f = float(freq[i, j])
                    score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * size / avgdl)))
                item = (score, -rowid)
                if len(best) < k:
                    heapq.heappush(best, item)
                elif item > best[0]:
                    heapq.heapreplace(best, item)
        return [(-neg, -score) for score, neg in sorted(best, reverse=True)]


def fts5_ways(conn: Any, k: int) -> dict[str, Callable[[str], Any]]:
    """The FTS5 statements the probe times, each a function of the query text."""

    def run(sql: str) -> Callable[[str], Any]:
        def call(query: str) -> Any:
            expression = match_expression(query)
            return conn.execute(sql, (f"body : ({expression})",)).fetchall() if expression else []

        return call

    return {
        "enumerate (count of the matches)": run("SELECT count(*) FROM records_fts WHERE records_fts MATCH ?"),
        "bm25 top-k (what the store runs)": run(
            "SELECT rowid, bm25(records_fts, 1.0, 0.0) AS s FROM records_fts WHERE records_fts MATCH ? "
            f"ORDER BY s LIMIT {int(k)}"
        ),
        "docsize join (a length per match)": run(
            "SELECT count(d.sz) FROM (SELECT rowid AS r FROM records_fts WHERE records_fts MATCH ?) AS f "
            "JOIN records_fts_docsize AS d ON d.id = f.r"
        ),
    }


async def build(folder: Path, n: int, queries: int) -> tuple[Path, list[str]]:
    """A one-scope keyword-only file of ``n`` of sqlite_bench's sentences, and queries drawn from them."""
    corpus = Corpus()
    texts = corpus.texts(n)
    path = folder / f"probe-{n}.db"
    memory = SQLiteMemory(path, search_mode="keyword")
    scope = MemoryScope(user_id="bench")
    for start in range(0, n, 1000):
        await memory.add([MemoryRecord(scope=scope, text=t) for t in texts[start : start + 1000]])
    await memory.aclose()
    return path, [corpus.query(texts[corpus.rng.randrange(n)]) for _ in range(queries)]


def word_lists(conn: Any, k: int) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
    """The store's large-scope keyword ranking over the whole table (rowid - 0 = rid), cold and warm."""
    from memoryport.adapters.sqlite import _keyword_large

    cache = _keyword_large.WordLists()
    (lo, hi) = conn.execute("SELECT min(id), max(id) FROM records_fts_docsize").fetchone()
    cache.sizes(conn, lo, hi)  # read once per process, as the store does

    def run(query: str, cold: bool) -> Any:
        if cold:
            with cache.lock:
                cache.lists.clear()
                cache.nbytes = 0
        terms = ranking.query_terms(query)
        found = _keyword_large.large_bm25(conn, cache, terms, lo, hi, 0, k, set) if terms else []
        return [(rowid, -score) for rowid, score in found or []]

    return (lambda q: run(q, True)), (lambda q: run(q, False))


def probe(path: Path, qtexts: Sequence[str], k: int, driver: str | None) -> str:
    conn = load_driver(driver)[1].connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    conn.execute("PRAGMA mmap_size = 8589934592")
    ways = fts5_ways(conn, k)
    cold, warm = word_lists(conn, k)
    ways["word lists, read anew (the store, >= 50k records)"] = cold
    ways["word lists, kept in RAM (the store, >= 50k records)"] = warm
    exact = ExactBound(conn)
    ways["exact bound (this probe's top-k)"] = lambda q: exact.topk(q, k)
    times: dict[str, list[float]] = {name: [] for name in ways}
    same = fallbacks = 0
    overlaps: list[float] = []
    names = list(ways)
    for i, query in enumerate(qtexts):
        results: dict[str, Any] = {}
        for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate the order
            start = time.perf_counter()
            results[name] = ways[name](query)
            times[name].append(time.perf_counter() - start)
        mine, theirs = results[names[-1]], results["bm25 top-k (what the store runs)"]
        lists = results["word lists, read anew (the store, >= 50k records)"]
        top = {rowid for rowid, _ in theirs[:10]}
        overlaps.append(len(top & {rowid for rowid, _ in lists[:10]}) / max(len(top), 1))
        if mine is None:
            fallbacks += 1
        elif [s for _, s in mine] == [s for _, s in theirs]:
            same += 1
    base = statistics.median(times["bm25 top-k (what the store runs)"])
    rows = [[name, statistics.median(t) * 1000, statistics.median(t) / base] for name, t in times.items()]
    (n_rows,) = conn.execute("SELECT count(*) FROM records_fts_docsize").fetchone()
    return "\n".join(
        [
            f"\n### FTS5 top-{k} on {n_rows:,} rows, {len(qtexts)} queries (medians)\n",
            table(["step", "ms", "x bm25 top-k"], rows),
            f"\nExact bound: scores bit-identical to bm25() on {same} of {len(qtexts) - fallbacks} queries "
            f"({fallbacks} left to FTS5: a word that is not one token); {exact.looked:,} lengths read.",
            f"Word lists: overlap@10 with bm25()'s top-10 {statistics.mean(overlaps):.3f} "
            f"over {len(overlaps)} queries.",
        ]
    )


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, help="an SQLiteMemory file (read only)")
    parser.add_argument("--queries", type=Path, help="a JSON list of query texts (with --file)")
    parser.add_argument("--records", type=int, default=20_000, help="without --file: build a file this large")
    parser.add_argument("--n", type=int, default=60, help="queries to run")
    parser.add_argument("--k", type=int, default=42, help="top-k (the store asks k + 32 of FTS5)")
    parser.add_argument("--driver", default=None, help="SQLite driver (default: the store's)")
    args = parser.parse_args(argv)
    if args.file is not None:
        if args.queries is None:
            parser.error("--file needs --queries")
        qtexts = list(json.loads(args.queries.read_text()))[: args.n]
        return probe(args.file, qtexts, args.k, args.driver)
    with tempfile.TemporaryDirectory() as folder:
        path, qtexts = asyncio.run(build(Path(folder), args.records, args.n))
        return probe(path, qtexts, args.k, args.driver)


if __name__ == "__main__":
    sys.stdout.write(main() + "\n")
