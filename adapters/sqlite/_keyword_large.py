"""BM25 of a large scope without ranking every match: word lists and lengths in RAM, exact scores of a shortlist.

FTS5's ``bm25()`` pays for every matching row (a B-tree lookup of its length,
its instances, the call): about 3 µs a match, 100-300 ms for a query of
common words over a scope of a million records. Listing the matches costs a
tenth of that. So a user with at least :data:`LARGE` records (and most of the
file: FTS5's statistics are then the user's) is ranked in three steps:

1. each query phrase's matches (FTS5 rowids, one ``group_concat`` per phrase)
   with its occurrences in each (from FTS5's instance list; a phrase FTS5
   splits into several tokens counts once per match), kept in RAM while the
   file's generation is unchanged (:class:`WordLists`), and its document
   count (the IDF is FTS5's own, from the whole file);
2. a BM25 estimate of every match in numpy: FTS5's formula on those
   occurrences and the record's length (its words, kept in RAM per file and
   read again only for records added since);
3. the :data:`SHORTLIST` best estimates scored exactly as ``bm25()`` scores
   them: the occurrences from step 1 (a split phrase's counted by FTS5 itself
   in the records' texts, tokenized in a private in-memory FTS5 table with the
   store's tokenizer), the lengths read again from FTS5's ``docsize`` table,
   FTS5's formula summed in FTS5's order. Those scores are FTS5's; the
   estimate can misplace a record only where it differs from them (a split
   phrase occurring twice in it, or a length kept from before another
   process rewrote its text), and only near the shortlist's edge.

Scope, expiry and filters are checked on the best of the shortlist; when too
few pass (a selective filter), the caller ranks exactly instead. Nothing here
is written to the file: deletes and erasure bump the file's generation, which
drops the cached word lists at the next search; the lengths are numbers of
words only and are re-read for every record scored exactly.
"""

from __future__ import annotations

import importlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryport.storekit import chunks

from ._rows import Conn

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._keyword_user import UserIndexes

    F32 = npt.NDArray[np.float32]
    F64 = npt.NDArray[np.float64]
    I32 = npt.NDArray[np.int32]
    U16 = npt.NDArray[np.uint16]
else:
    F32 = F64 = I32 = U16 = Any

__all__ = [
    "B",
    "K1",
    "LARGE",
    "SHORTLIST",
    "TOKENIZE",
    "WordLists",
    "fts5_idf",
    "large_bm25",
    "scratch",
    "varints",
    "words_database",
]

#: A user with at least this many records (and at least half of the file) is ranked here; smaller ones exactly.
LARGE = 50_000

#: Best estimates scored exactly (at least twice the candidates asked for).
SHORTLIST = 128

#: The store's FTS5 tokenizer (``_schema.FTS_DDL``; a test pins that they agree).
TOKENIZE = "porter unicode61 remove_diacritics 2"

#: The word lists one file may keep in RAM (4 bytes per match kept).
LIST_BYTES = 32 << 20

K1, B = 1.2, 0.75  # FTS5's bm25() constants (fts5_aux.c)


def fts5_idf(n: int, total: int) -> float:
    """FTS5's own IDF of a phrase in ``n`` of ``total`` records (``fts5_aux.c``: no ``+ 1`` inside the log,
    unlike :func:`memoryport.ranking.bm25_idf`; floored at 1e-6)."""
    total = max(total, n)
    return max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6)


def varints(blob: bytes) -> list[int]:
    """Every SQLite varint in ``blob`` (FTS5's averages and docsize records are lists of them)."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


@dataclass
class _Lengths:
    """Words per record of one span of FTS5 rowids (all columns, as ``bm25()`` counts), by ``rowid - lo``."""

    top: int  # the highest rowid read
    sizes: U16


@dataclass
class _Matches:
    """One phrase's records: how many in the file, and in one span the rowids (minus its start) and occurrences."""

    n: int
    rowids: I32
    tf: U16
    # Each record's BM25 term (float32: it only picks the shortlist) for (idf, avgdl): computed at the first
    # search of this generation that needs it, then reused (the file's statistics change only with it).
    scores: tuple[tuple[float, float], F32] | None = None

    @property
    def nbytes(self) -> int:
        return int(self.rowids.nbytes + self.tf.nbytes + 4 * len(self.rowids))

    def terms(self, idf: float, avgdl: float, norm: Callable[[], F64]) -> F32:
        """BM25's term of this phrase in each of its records (``norm()``: the length terms, by rowid)."""
        have = self.scores
        if have is not None and have[0] == (idf, avgdl):
            return have[1]
        f = self.tf.astype(np.float64)
        out = (idf * (f * (K1 + 1.0)) / (f + norm()[self.rowids])).astype(np.float32)
        self.scores = ((idf, avgdl), out)
        return out


@dataclass
class WordLists:
    """The word lists and record lengths of one file, shared by every store of this process on it."""

    max_bytes: int = LIST_BYTES
    lock: threading.Lock = field(default_factory=threading.Lock)
    gen: int = -1  # the file generation the lists belong to
    lists: OrderedDict[tuple[str, int], _Matches] = field(default_factory=OrderedDict)
    nbytes: int = 0
    lengths: dict[int, _Lengths] = field(default_factory=dict)  # by span start
    norm: tuple[tuple[int, float], U16, F64] | None = None  # the last length terms computed (see norms)
    # Smaller users' words, one user's records at a time (``_keyword_user.py``), gone with clear() too.
    users: UserIndexes = field(default_factory=lambda: _user_indexes())

    def clear(self) -> None:
        with self.lock:
            self.lists.clear()
            self.nbytes = 0
            self.lengths.clear()
            self.norm = None
        self.users.clear()

    def matches(self, conn: Conn, gen: int, phrase: str, token: str | None, lo: int, hi: int) -> _Matches:
        """``phrase``'s records in the file, and those of rowids ``lo..hi`` (minus ``lo``) with its occurrences.

        ``token``: the phrase's one token (FTS5's, stemmed): the occurrences are counted from FTS5's
        instance list; None (a phrase of several tokens): its matches, each counted once.
        """
        key = (phrase, lo)
        with self.lock:
            if self.gen != gen:
                self.lists.clear()
                self.nbytes = 0
                self.gen = gen
            hit = self.lists.get(key)
            if hit is not None:
                self.lists.move_to_end(key)
                return hit
        if token is not None:
            _instances(conn)
            (text,) = conn.execute(
                "SELECT group_concat(doc - ?) FROM temp.memoryport_instances WHERE term = ?", (lo, token)
            ).fetchone()
            every = _ints(text)
            if len(every) > 1 and not bool(np.all(every[1:] >= every[:-1])):
                every = np.sort(every)
            starts = np.flatnonzero(np.concatenate(([True], every[1:] != every[:-1]))) if len(every) else every
            docs = every[starts]
            tf = np.diff(np.append(starts, len(every)))
        else:
            (text,) = conn.execute(
                "SELECT group_concat(rowid - ?) FROM records_fts WHERE records_fts MATCH ?", (lo, f"body : {phrase}")
            ).fetchone()
            docs = _ints(text)
            tf = np.ones(len(docs), dtype=np.int64)
        inside = (docs >= 0) & (docs <= hi - lo)
        found = _Matches(len(docs), docs[inside].astype(np.int32), np.minimum(tf[inside], 65_535).astype(np.uint16))
        with self.lock:
            if self.gen == gen:
                self.lists[key] = found
                self.nbytes += found.nbytes
                while self.nbytes > self.max_bytes and self.lists:
                    _, dropped = self.lists.popitem(last=False)
                    self.nbytes -= dropped.nbytes
        return found

    def norms(self, lo: int, sizes: U16, avgdl: float, span: int) -> F64:
        """BM25's length term ``k1 * (1 - b + b * words / avgdl)`` of rowids ``lo..lo + span - 1`` (by ``rowid - lo``).

        A record whose length is not read yet (added since) counts as of average length: its exact score is
        computed from its own length (``_exact``).
        """
        with self.lock:
            have = self.norm
        # (The lengths array itself is the key, held here: a new array is never mistaken for it.)
        if have is not None and have[0] == (lo, avgdl) and have[1] is sizes and len(have[2]) >= span:
            return have[2]
        words = np.full(max(span, len(sizes)), avgdl, dtype=np.float64)
        words[: len(sizes)] = sizes
        words[words == 0] = avgdl
        norm = K1 * (1.0 - B + B * words / avgdl)
        with self.lock:
            self.norm = ((lo, avgdl), sizes, norm)
        return norm

    def sizes(self, conn: Conn, lo: int, hi: int) -> U16:
        """Words per record of rowids ``lo..hi`` (index ``rowid - lo``); records added since the last call are read."""
        (top,) = conn.execute("SELECT max(id) FROM records_fts_docsize WHERE id BETWEEN ? AND ?", (lo, hi)).fetchone()
        top = lo - 1 if top is None else int(top)
        with self.lock:
            have = self.lengths.get(lo)
        if have is not None and have.top >= top:
            return have.sizes
        start = lo if have is None else have.top + 1
        ids_text, hex_text = conn.execute(
            "SELECT group_concat(id - ?), group_concat(hex(sz), '') FROM records_fts_docsize WHERE id BETWEEN ? AND ?",
            (lo, start, top),
        ).fetchone()
        ids = _ints(ids_text)
        raw = bytes.fromhex(hex_text or "")
        pairs = np.frombuffer(raw, dtype=np.uint8)
        if len(raw) == 2 * len(ids) and not bool((pairs >= 0x80).any()):
            # The usual record: two one-byte varints (body and tenant words, each under 128).
            words = pairs.reshape(-1, 2).sum(axis=1, dtype=np.int64)
        else:
            (lens_text,) = conn.execute(
                "SELECT group_concat(length(sz)) FROM records_fts_docsize WHERE id BETWEEN ? AND ?", (start, top)
            ).fetchone()
            words = _decode(_ints(lens_text), raw)
        size = int(ids.max()) + 1 if len(ids) else 0
        old = have.sizes if have is not None else np.zeros(0, dtype=np.uint16)
        if size > len(old):
            grown = np.zeros(max(size, len(old) + len(old) // 4), dtype=np.uint16)
            grown[: len(old)] = old
        else:
            grown = old.copy()
        grown[ids] = np.minimum(words, 65_535)
        with self.lock:
            self.lengths[lo] = _Lengths(top=top, sizes=grown)
        return grown


def _user_indexes() -> UserIndexes:
    from ._keyword_user import UserIndexes  # (it imports this module)

    return UserIndexes()


def _ints(text: str | None) -> npt.NDArray[np.int64]:
    """The integers of a ``group_concat`` (comma-separated), as an array."""
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def _decode(lengths: npt.NDArray[np.int64], blob: bytes) -> npt.NDArray[np.int64]:
    """The sum of the varints of each docsize record (``lengths[i]`` bytes each, concatenated in ``blob``)."""
    raw = np.frombuffer(blob, dtype=np.uint8)
    out = np.zeros(len(lengths), dtype=np.int64)
    if not len(lengths):
        return out
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    # Records of single-byte varints (a column under 128 words): their bytes are their counts.
    simple = np.ones(len(lengths), dtype=bool)
    big = np.flatnonzero(raw >= 0x80)
    if len(big):
        simple[np.searchsorted(starts, big, side="right") - 1] = False
    if len(raw):
        out[:] = np.add.reduceat(raw.astype(np.int64), starts)
    for i in np.flatnonzero(~simple).tolist():
        at = int(starts[i])
        out[i] = sum(varints(blob[at : at + int(lengths[i])]))
    return out


_TOKENS = threading.local()


def scratch(span: int, dtype: type[np.floating[Any]] = np.float32) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]:
    """This thread's score buffer of ``dtype`` and mark buffer of at least ``span`` items, all zero (callers zero
    what they set)."""
    buffers: dict[Any, tuple[npt.NDArray[Any], npt.NDArray[np.uint8]]] | None = getattr(_TOKENS, "scratch", None)
    if buffers is None:
        buffers = _TOKENS.scratch = {}
    have = buffers.get(dtype)
    if have is None or len(have[0]) < span:
        have = buffers[dtype] = (
            np.zeros(span + span // 4, dtype=dtype),
            np.zeros(span + span // 4, dtype=np.uint8),
        )
    return have[0][:span], have[1][:span]


def _instances(conn: Conn) -> None:
    """FTS5's instance list of the store's index, as a table of this connection's temp schema (nothing stored)."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memoryport_instances USING fts5vocab(main, records_fts, instance)"
    )


def tokens(conn: Conn, terms: Sequence[str]) -> list[str | None]:
    """Each query word's FTS5 token (stemmed by the store's tokenizer); None for a word of several tokens or none,
    and for one that reads like a tenant token (FTS5's instance list would count the ``tenant`` column too)."""
    words = _tokenizer(conn)
    try:
        # The contentless table keeps no copy of the words and no lengths: ~15% less per search that misses the
        # token cache (2-3 words), half the time for a dictionary's thousands (``UserIndexes.warm``).
        words.executemany("INSERT INTO tokens(rowid, body) VALUES (?, ?)", enumerate(terms))
        per: dict[int, list[str]] = {}
        for doc, term in words.execute("SELECT doc, term FROM tokens_instances"):
            per.setdefault(int(doc), []).append(str(term))
    finally:
        words.rollback()  # the words never stay: cheaper than deleting them (and committing), ~30 -> ~20 µs
    out: list[str | None] = []
    for i in range(len(terms)):
        found = per.get(i, [])
        one = found[0] if len(found) == 1 else None
        out.append(None if one is None or (one[:1] == "t" and one[1:].isdigit()) else one)
    return out


def _tokenizer(conn: Conn) -> Any:
    """This thread's private in-memory database with an FTS5 table of the store's tokenizer (same driver)."""
    have = getattr(_TOKENS, "conn", None)
    if have is None:
        have = words_database(conn)
        have.execute("PRAGMA secure_delete = ON")
        # (query words' tokens: the same tokenizer, no copy of the words, no lengths; see tokens)
        have.execute(
            f"CREATE VIRTUAL TABLE tokens USING fts5(body, tokenize='{TOKENIZE}', content='', columnsize=0)"
        )
        have.execute("CREATE VIRTUAL TABLE tokens_instances USING fts5vocab(tokens, instance)")
        _TOKENS.conn = have
    return have


def words_database(conn: Conn) -> Any:
    """A new private in-memory database (``conn``'s driver, so its SQLite) with an FTS5 table ``words`` of the
    store's tokenizer and its instance list ``words_instances``: FTS5's own tokens of any text, nothing stored."""
    driver = importlib.import_module(type(conn).__module__)
    have = driver.connect(":memory:", check_same_thread=False)
    have.execute(f"CREATE VIRTUAL TABLE words USING fts5(body, tokenize='{TOKENIZE}')")
    have.execute("CREATE VIRTUAL TABLE words_instances USING fts5vocab(words, instance)")
    return have


def _occurrences(conn: Conn, texts: dict[int, str], phrases: Sequence[str]) -> list[dict[int, int]]:
    """For each phrase, how often it occurs in each text (by FTS5's own tokenizer and phrase matching)."""
    words = _tokenizer(conn)
    try:
        words.executemany("INSERT INTO words(rowid, body) VALUES (?, ?)", texts.items())
        out: list[dict[int, int]] = []
        for phrase in phrases:
            counts: dict[int, int] = {}
            for rowid, marked in words.execute(
                "SELECT rowid, highlight(words, 0, char(1), '') FROM words WHERE words MATCH ?", (phrase,)
            ):
                # Adjacent instances stay apart; only overlapping instances of one phrase would merge.
                counts[int(rowid)] = marked.count("\x01") - texts[int(rowid)].count("\x01")
            out.append(counts)
        return out
    finally:
        words.execute("DELETE FROM words")
        words.commit()


def large_bm25(
    conn: Conn,
    cache: WordLists,
    terms: Sequence[str],
    lo: int,
    hi: int,
    base: int,
    want: int,
    check: Callable[[Sequence[int]], set[int]],
    counts: dict[str, int] | None = None,
) -> list[tuple[int, float]] | None:
    """The ``want`` best (rid, -bm25) of the records in FTS5 rowids ``lo..hi`` (rid = rowid - ``base``) that pass
    ``check``, for the OR of the query words ``terms`` in the body; None when too few of the
    shortlist pass ``check`` (the caller ranks exactly). ``counts``: filled with each query word's records in the file.
    """
    phrases = ['"' + term.replace('"', '""') + '"' for term in terms]
    (gen,) = conn.execute("SELECT gen FROM generations WHERE tenant = ''").fetchone() or (0,)
    row = conn.execute("SELECT block FROM records_fts_data WHERE id = 1").fetchone()
    if row is None:
        return []
    averages = varints(bytes(row[0]))
    total = averages[0]
    if total <= 0:
        return []
    avgdl = sum(averages[1:]) / total
    sizes = cache.sizes(conn, lo, hi)
    idfs: list[float] = []
    found: list[tuple[_Matches, float]] = []
    all_matched: list[_Matches] = []
    token_of = tokens(conn, terms)
    for term, phrase, token in zip(terms, phrases, token_of, strict=True):
        matched = cache.matches(conn, int(gen), phrase, token, lo, hi)
        all_matched.append(matched)
        n = matched.n
        if counts is not None:
            counts[term] = n
        idf = fts5_idf(n, total)
        idfs.append(idf)
        if len(matched.rowids):
            found.append((matched, idf))
    if not found:
        return []
    span = max(int(matched.rowids.max()) for matched, _ in found) + 1
    lengths: list[F64] = []

    def norm() -> F64:
        if not lengths:
            lengths.append(cache.norms(lo, sizes, avgdl, span))
        return lengths[0]

    if len(found) == 1:
        matched, idf = found[0]
        at: npt.NDArray[Any] = matched.rowids
        estimate = matched.terms(idf, avgdl, norm)
    else:
        dense, mark = scratch(span)
        for matched, idf in found:
            dense[matched.rowids] += matched.terms(idf, avgdl, norm)
            mark[matched.rowids] = 1
        at = np.flatnonzero(mark)
        estimate = dense[at]
        dense[at] = 0.0  # the buffers are this thread's, zero again for the next search
        mark[at] = 0
    m = max(SHORTLIST, 2 * want)
    best = at[np.argpartition(-estimate, m - 1)[:m]] if len(at) > m else at
    best = np.sort(best).astype(np.int64)
    known: list[dict[int, int] | None] = []
    for matched, token in zip(all_matched, token_of, strict=True):
        if token is None:
            known.append(None)
            continue
        where = np.minimum(np.searchsorted(matched.rowids, best), max(len(matched.rowids) - 1, 0))
        hit = matched.rowids[where] == best if len(matched.rowids) else np.zeros(len(best), dtype=bool)
        known.append(dict(zip((best[hit] + lo).tolist(), matched.tf[where[hit]].tolist(), strict=True)))
    rowids = (best.astype(np.int64) + lo).tolist()
    scored = _exact(conn, rowids, base, phrases, known, idfs, avgdl)
    scored.sort(key=lambda item: (-item[1], item[0]))
    keep = check([rid for rid, _ in scored[: want + 32]])
    hits = [(rid, score) for rid, score in scored[: want + 32] if rid in keep][:want]
    if len(hits) < want and len(scored) > len(hits):
        keep = check([rid for rid, _ in scored])
        hits = [(rid, score) for rid, score in scored if rid in keep][:want]
        if len(hits) < want and len(at) > len(scored):
            return None  # a selective filter: the caller ranks the rows that pass
    return hits


def _exact(
    conn: Conn,
    rowids: list[int],
    base: int,
    phrases: Sequence[str],
    known: Sequence[dict[int, int] | None],
    idfs: Sequence[float],
    avgdl: float,
) -> list[tuple[int, float]]:
    """(rid, -bm25) of each FTS5 rowid, as ``bm25(records_fts, 1.0, 0.0)`` scores it (same formula and order).

    ``known[i]``: phrase i's occurrences in these records (from FTS5's instance list), or None: counted here.
    """
    texts: dict[int, str] = {}
    lengths: dict[int, int] = {}
    count = any(found is None for found in known)
    for chunk in chunks(rowids):
        marks = ",".join("?" * len(chunk))
        if count:
            texts.update(
                conn.execute(
                    f"SELECT rid + ?, text FROM records NOT INDEXED WHERE rid IN ({marks})",
                    [base, *(rowid - base for rowid in chunk)],
                ).fetchall()
            )
        for rowid, blob in conn.execute(f"SELECT id, sz FROM records_fts_docsize WHERE id IN ({marks})", chunk):
            raw = bytes(blob)
            # Two one-byte varints (body and tenant words) are the usual record.
            lengths[int(rowid)] = raw[0] + raw[1] if len(raw) == 2 and raw[0] | raw[1] < 0x80 else sum(varints(raw))
    if count:
        missing = [phrase for phrase, found in zip(phrases, known, strict=True) if found is None]
        counted = iter(_occurrences(conn, texts, missing))
        known = [next(counted) if found is None else found for found in known]
    out: list[tuple[int, float]] = []
    for rowid in rowids:
        if rowid not in lengths or (count and rowid not in texts):
            continue  # gone from the file in this snapshot
        length = float(lengths[rowid])
        score = 0.0
        for idf, found in zip(idfs, known, strict=True):
            f = float(found.get(rowid, 0))  # type: ignore[union-attr]
            score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * length / avgdl)))
        out.append((rowid - base, score))
    return out
