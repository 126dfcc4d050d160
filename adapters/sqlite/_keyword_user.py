"""One user's words in RAM: a keyword search that reads no FTS5 postings, with FTS5's own scores.

A keyword search of a user with a few thousand records spends most of its
SQL in FTS5: the best rows of the OR of the query's words, and each word's
document count (the IDF). Both depend only on which records hold each word
(how often) and on the records' lengths. :class:`UserWords` holds those for
one user's records at one generation, tokenized by FTS5 itself (the store's
tokenizer, in a private in-memory FTS5 table of the same SQLite library): a
sorted postings array per token and each record's length in tokens. Built
from the user's timeline (``_timeline.py``: the texts of this snapshot), it
answers:

- :func:`file_ranking`: every match's ``bm25(records_fts, 1.0, 0.0)``,
  computed in numpy with FTS5's formula, operations in FTS5's order (the same
  float64 results, bit for bit), ordered as ``ORDER BY bm25 LIMIT n`` orders
  them (rowid ascending among equal scores), when the file's FTS5 rows are
  exactly this user's records (the file's FTS5 statistics, read in the
  search's snapshot, must equal the index's: else the caller asks FTS5);
- :func:`user_lists`: which of the user's records hold each query word (the
  per-user BM25 of a user among many) and their body lengths (FTS5's
  ``docsize``), instead of one FTS5 statement per word;
- contextual keys' word holders: the index also holds the user's whole-word
  dictionary (``_timeline.WholeWords``: Python's words, not FTS5's stemmed
  tokens), lent to the user's timelines at its generation.

Rent or buy: indexing costs ~5 µs per record (FTS5's tokens ~2.5 µs: the tokenizer into a contentless table
~1.5, reading FTS5's lists ~1; contextual keys' whole words ~2.3), a search through FTS5 ~0.5-2 ms at 10k
records. A user is indexed once the keyword
searches at one generation have spent :data:`BUY` times what indexing it
would cost (measured): their rankings through FTS5 and their contextual keys' search of the texts (both of which
the index replaces; ``_search._context``), so a store that writes between searches never pays
for an index it would not use. The index belongs to one generation of the
user (any write to it, in any process, moves the generation); the indexes of
a file live in its :class:`~._keyword_large.WordLists` (shared by the
process's stores on the file), bounded by :data:`USER_BYTES`, and go with
an erasure, delete or text update of this process at once (``WordLists.clear``).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryport import ranking
from memoryport.storekit import chunks

from ._keyword_large import K1, TOKENIZE, B, _tokenizer, fts5_idf, scratch, tokens, varints
from ._rows import Conn, tenant_token
from ._timeline import WholeWords

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._timeline import Timeline

    F64 = npt.NDArray[np.float64]
    I32 = npt.NDArray[np.int32]
    I64 = npt.NDArray[np.int64]
else:
    F64 = I32 = I64 = Any

__all__ = [
    "BUY",
    "GROW_MAX",
    "USER_BYTES",
    "UserIndexes",
    "UserWords",
    "build",
    "file_ranking",
    "per_user_ranking",
    "user_lists",
    "user_order",
]

#: A user is indexed once its searches through FTS5 at one generation cost this share of indexing it.
BUY = 0.5

#: The most records of this store's own adds an index takes after its build (:meth:`UserWords.extended`): beyond,
#: it is dropped and built again once the user's searches have paid for it, as after any other write.
GROW_MAX = 2048

#: The users' indexes one file may keep in RAM (estimated bytes; least recently used dropped first).
USER_BYTES = 32 << 20

# Indexing cost per record (seconds) until one is measured: at 10k, FTS5's tokens 2.3-2.7 µs and contextual keys'
# whole words ~2.3 µs, 4.6-4.9 µs measured alone, 6.0 in the search benchmark's process (FTS5's tokens cost
# 4.0-4.6 µs before the build read FTS5's lists as they come, session 14; this estimate was 10 µs).
_PRICE = 5e-6
_FEW = 64  # texts tokenized in the thread's scratch table rather than a new database
_INSTANCES = "SELECT term, count(*), group_concat(doc) FROM words_instances GROUP BY term"
_INSERT = "INSERT INTO words(rowid, body) VALUES (?, ?)"
_TOKENS_MAX = 65_536  # query words whose FTS5 token is kept
_READ: Any = object()  # (file_ranking: the averages record not read yet)
_RENT_MAX = 4096  # users whose searches' cost is kept


@dataclass
class UserWords:
    """One user's records at generation ``gen`` (a timeline's), by position: each token's postings and lengths.

    The BM25 term of a posting (:meth:`postings`) is computed when asked, as ``bm25()`` computes it when the
    file's FTS5 rows are exactly these records (its statistics are then the index's own: ``N`` records,
    ``tokens + N`` tokens with the tenant's): so the index of a timeline grown by this store's own adds is this
    one's postings plus the new records' (:meth:`extended`), no term computed again.
    """

    gen: int
    rids: I64  # rid by position (the timeline's order)
    terms: dict[str, tuple[int, int]]  # token -> its slice of docs/tf
    docs: I32  # positions holding each token, token after token, ascending within one
    tf: F64  # beside docs: the token's occurrences in the record
    lengths: I64  # tokens of each record's body (FTS5's docsize, body column)
    tokens: int  # all the bodies' tokens
    nbytes: int
    root: object = None  # the timeline's (Timeline.root): the timelines this index can grow with
    # token -> the positions (ascending, after every position of ``docs``) and tf of the records added since the
    # build (extended), and how many records those are
    added: dict[str, tuple[I32, F64]] = field(default_factory=dict)
    grown: int = 0
    # token -> its postings and BM25 terms, as computed for a search (the next ones take them from here)
    asked: dict[str, tuple[I32, F64]] = field(default_factory=dict, compare=False)
    # every text's whole words (not FTS5's tokens: contextual keys' words, see WholeWords), by the same positions
    whole: WholeWords | None = None
    # beside docs: every posting's BM25 term, computed at the build (:func:`_all_terms`) for its records; None for
    # an index grown since (:meth:`extended`: other statistics), whose terms are computed when asked
    scores: F64 | None = field(default=None, compare=False)

    def holding(self, token: str) -> tuple[I32, F64]:
        """The positions holding ``token`` (ascending) and its occurrences in each."""
        span = self.terms.get(token)
        more = self.added.get(token) if self.added else None
        if span is None:
            docs, tf = self.docs[:0], self.tf[:0]
        else:
            docs, tf = self.docs[span[0] : span[1]], self.tf[span[0] : span[1]]
        if more is not None:
            docs, tf = np.concatenate((docs, more[0])), np.concatenate((tf, more[1]))
        return docs, tf

    def count(self, token: str) -> int:
        """How many records hold ``token``."""
        span = self.terms.get(token)
        more = self.added.get(token) if self.added else None
        return (0 if span is None else span[1] - span[0]) + (0 if more is None else len(more[0]))

    def postings(self, token: str) -> tuple[I32, F64]:
        """The positions holding ``token`` (ascending) and its BM25 term in each."""
        if self.scores is not None:
            span = self.terms.get(token)
            if span is None:
                return self.docs[:0], self.scores[:0]
            return self.docs[span[0] : span[1]], self.scores[span[0] : span[1]]
        done = self.asked.get(token)
        if done is not None:
            return done
        docs, tf = self.holding(token)
        if not len(docs):
            return docs, tf
        n = len(self.rids)
        done = self.asked[token] = (docs, _bm25_terms(fts5_idf(len(docs), n), docs, tf, self.lengths, self.tokens, n))
        return done

    def extended(self, conn: Conn, line: Timeline) -> UserWords:
        """This index with the records ``line`` holds after this one's (``line`` grew from this index's timeline:
        the same root, more records), at ``line``'s generation; this one is left as it is (a search may read it)."""
        base = len(self.rids)
        names, docs, tf, bounds, lengths, tokens = _postings(conn, line.texts[base:])
        added = dict(self.added)
        for i, name in enumerate(names):
            at, count = docs[bounds[i] : bounds[i + 1]] + base, tf[bounds[i] : bounds[i + 1]]
            have = added.get(name)
            if have is not None:
                at, count = np.concatenate((have[0], at)), np.concatenate((have[1], count))
            added[name] = (at, count)
        rids = np.concatenate((self.rids, np.asarray(line.rids[base:], dtype=np.int64)))
        more = int(docs.nbytes + 2 * tf.nbytes + lengths.nbytes + 16 * len(lengths) + 120 * len(names))
        whole = None if self.whole is None else self.whole.extended(line.texts[base:])
        if whole is not None and self.whole is not None:
            more += whole.nbytes - self.whole.nbytes
        return UserWords(
            line.gen,
            rids,
            self.terms,
            self.docs,
            self.tf,
            np.concatenate((self.lengths, lengths)),
            self.tokens + tokens,
            self.nbytes + more + sum(map(len, names)),
            self.root,
            added,
            self.grown + len(line.rids) - base,
            whole=whole,
        )


def _postings(conn: Conn, texts: Sequence[str]) -> tuple[list[str], I32, F64, list[int], I64, int]:
    """``texts`` tokenized by FTS5 (a private in-memory table, ``conn``'s SQLite library): the tokens, each
    token's postings (text positions ascending, ``docs[bounds[i]:bounds[i + 1]]`` for token ``i``) and their
    occurrences, each text's length in tokens, and all their tokens."""
    if len(texts) <= _FEW:
        # A few texts (an extension): this thread's scratch table, emptied after (opening one costs ~0.5 ms).
        words = _tokenizer(conn)
        try:
            words.executemany("INSERT INTO words(rowid, body) VALUES (?, ?)", enumerate(texts))
            rows = words.execute(_INSTANCES).fetchall()
        finally:
            words.rollback()  # (the texts never stay)
        return _grouped(rows, len(texts))
    words = _index_database(conn)
    try:
        words.executemany(_INSERT, enumerate(texts))
        found = _listed(words, len(texts))
        if found is None:  # (never seen: the two lists disagree) FTS5's instances grouped by SQL, as for a few
            found = _grouped(words.execute(_INSTANCES).fetchall(), len(texts))
        return found
    finally:
        words.close()


def _index_database(conn: Conn) -> Any:
    """A new private in-memory database (``conn``'s driver) whose FTS5 table ``words`` of the store's tokenizer
    keeps only its index: no copy of the texts (contentless) and no lengths table (``columnsize=0``), 40% less
    to insert than a table that keeps them; its instance list ``words_instances`` and term list ``words_terms``."""
    driver = importlib.import_module(type(conn).__module__)
    have = driver.connect(":memory:", check_same_thread=False)
    have.execute(f"CREATE VIRTUAL TABLE words USING fts5(body, tokenize='{TOKENIZE}', content='', columnsize=0)")
    have.execute("CREATE VIRTUAL TABLE words_instances USING fts5vocab(words, instance)")
    have.execute("CREATE VIRTUAL TABLE words_terms USING fts5vocab(words, row)")
    return have


def _listed(words: Any, n: int) -> tuple[list[str], I32, F64, list[int], I64, int] | None:
    """:func:`_postings` of the ``n`` texts in ``words`` from two lists FTS5 reads in its index's order (by token,
    then text, then offset): each token's records and occurrences (``fts5vocab`` row), and every instance's text
    in one string, instead of grouping the instances by token in SQL. None if they do not agree (each token's
    occurrences, its records, the order within one token): the caller groups in SQL."""
    terms = words.execute("SELECT term, doc, cnt FROM words_terms").fetchall()
    text = words.execute("SELECT group_concat(doc) FROM words_instances").fetchone()[0]
    names = [row[0] for row in terms]
    held = np.fromiter((row[1] for row in terms), dtype=np.int64, count=len(terms))
    counts = np.fromiter((row[2] for row in terms), dtype=np.int64, count=len(terms))
    every = np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    if len(every) != (int(ends[-1]) if len(ends) else 0) or (len(every) and (every.min() < 0 or every.max() >= n)):
        return None
    starts_of = ends - counts  # each token's first instance
    new = np.ones(len(every), dtype=bool)
    if len(every) > 1:
        step = every[1:] - every[:-1]
        new[1:] = step != 0
        # Within a token the texts ascend: a step down only where a token starts.
        down = np.flatnonzero(step < 0) + 1
        if len(down) and not np.isin(down, starts_of).all():
            return None
    new[starts_of[counts > 0]] = True  # a token's first instance starts a posting, whatever text came before
    starts = np.flatnonzero(new)
    bounds = np.searchsorted(starts, np.append(starts_of, len(every)))
    if not np.array_equal(np.diff(bounds), held):  # each token's postings are its records
        return None
    docs = every[starts].astype(np.int32)
    tf = np.diff(np.append(starts, len(every))).astype(np.float64)
    lengths = np.bincount(every, minlength=n).astype(np.int64) if len(every) else np.zeros(n, dtype=np.int64)
    return names, docs, tf, bounds.tolist(), lengths, int(lengths.sum())


def _grouped(rows: Sequence[Any], n: int) -> tuple[list[str], I32, F64, list[int], I64, int]:
    """:func:`_postings` from ``(token, instances, their texts joined by commas)`` rows (``_INSTANCES``)."""
    names = [str(row[0]) for row in rows]
    counts = np.fromiter((int(row[1]) for row in rows), dtype=np.int64, count=len(rows))
    every = np.fromstring(",".join(str(row[2]) for row in rows), dtype=np.int64, sep=",") if rows else np.zeros(0)
    every = every.astype(np.int64)
    term_of = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    # Instances by (term, position): one posting per run, its length the occurrences.
    order = np.lexsort((every, term_of))
    every, term_of = every[order], term_of[order]
    lengths = np.bincount(every, minlength=n).astype(np.int64) if len(every) else np.zeros(n, dtype=np.int64)
    if len(every):
        new = np.concatenate(([True], (every[1:] != every[:-1]) | (term_of[1:] != term_of[:-1])))
        starts = np.flatnonzero(new)
        docs = every[starts].astype(np.int32)
        tf = np.diff(np.append(starts, len(every))).astype(np.float64)
        first = np.searchsorted(term_of[starts], np.arange(len(rows) + 1, dtype=np.int64))
    else:
        docs, tf, first = np.zeros(0, dtype=np.int32), np.zeros(0), np.zeros(1, dtype=np.int64)
    return names, docs, tf, first.tolist(), lengths, int(lengths.sum())


def build(conn: Conn, line: Timeline) -> UserWords:
    """The index of ``line``'s records, tokenized by FTS5 (a private in-memory table, ``conn``'s SQLite library)."""
    names, docs, tf, bounds, lengths, tokens = _postings(conn, line.texts)
    n = len(line.texts)
    terms = {name: (bounds[i], bounds[i + 1]) for i, name in enumerate(names)}
    rids = np.asarray(line.rids, dtype=np.int64)
    # (the BM25 terms the searches ask for come to at most one float64 per posting: counted as if all were asked)
    nbytes = int(docs.nbytes + 2 * tf.nbytes + lengths.nbytes + rids.nbytes + 8 * n + 120 * len(terms))
    nbytes += sum(map(len, names))
    # Contextual keys' whole words, built here so that the rent of the index pays for them too (~2.3 us per record,
    # about as much as FTS5's tokens: the index is bought after about twice the rent).
    whole = WholeWords.of(line.texts)
    scores = _all_terms(docs, tf, lengths, bounds, tokens, n) if n else None
    return UserWords(
        line.gen, rids, terms, docs, tf, lengths, tokens, nbytes + whole.nbytes, line.root, whole=whole, scores=scores
    )


def _all_terms(docs: I32, tf: F64, lengths: I64, bounds: Sequence[int], tokens: int, n: int) -> F64:
    """Every posting's BM25 term (``docs``/``tf`` token after token, token ``i``'s at ``bounds[i]:bounds[i + 1]``),
    exactly as :meth:`UserWords.postings` computes one token's (:func:`_bm25_terms`, each token's IDF repeated over
    its postings). ~1-2 ms at 10k records, a few percent of the build; the searches then slice instead of computing
    a new token's terms (~6 numpy operations each, on records' lengths scattered across the array)."""
    edges = np.asarray(bounds, dtype=np.int64)
    counts = edges[1:] - edges[:-1]
    idf = np.repeat(np.array([fts5_idf(int(c), n) for c in counts.tolist()], dtype=np.float64), counts)
    return _bm25_terms(idf, docs, tf, lengths, tokens, n)


def _bm25_terms(idf: float | F64, docs: I32, tf: F64, lengths: I64, tokens: int, n: int) -> F64:
    """The BM25 term of each posting (``docs``, ``tf``) with ``idf`` (one per posting, or one for all) under FTS5's
    statistics of a file holding exactly the index's ``n`` records: N rows, the bodies' ``tokens`` + one tenant
    token each. fts5_aux.c: aIDF[i] * ((aFreq[i] * (k1 + 1.0)) / (aFreq[i] + k1 * (1 - b + b * D / avgdl))),
    float64 as in C, element by element (the same operations whichever postings are asked)."""
    avgdl = (tokens + n) / n
    d = (lengths[docs] + 1).astype(np.float64)
    norm = K1 * ((1 - B) + B * d / avgdl)
    out: F64 = idf * ((tf * (K1 + 1.0)) / (tf + norm))
    return out


@dataclass
class UserIndexes:
    """The users' indexes of one file (in its ``WordLists``) and what each user's searches spent without one."""

    max_bytes: int = USER_BYTES
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: OrderedDict[str | None, UserWords] = field(default_factory=OrderedDict)
    nbytes: int = 0
    rent: dict[str | None, tuple[int, float]] = field(default_factory=dict)  # user -> (gen, seconds spent)
    price: float = _PRICE  # seconds per record, as last measured
    tokens: dict[str, str | None] = field(default_factory=dict)  # query word -> its one FTS5 token, or None
    file_gen: int = -1  # the file's generation when the kept indexes were last checked (see sweep)

    def clear(self) -> None:
        with self.lock:
            self.users.clear()
            self.nbytes = 0
            self.rent.clear()
            self.tokens.clear()

    def of(self, conn: Conn, user: str | None, line: Timeline) -> UserWords | None:
        """``user``'s index at ``line``'s generation: kept, built now (the rent is paid), or None (ask FTS5)."""
        with self.lock:
            have = self.users.get(user)
            if have is not None and have.gen == line.gen:
                self.users.move_to_end(user)
                _lend(have, line)
                return have
            grow = None
            if have is not None:  # a write since: its words go now
                del self.users[user]
                self.nbytes -= have.nbytes
                if have.root is line.root and len(have.rids) < len(line.rids) <= len(have.rids) - have.grown + GROW_MAX:
                    grow = have  # only this store's adds since, after its records: the index takes them
            if grow is None:
                spent = self.rent.get(user)
                if spent is None or spent[0] != line.gen or spent[1] < BUY * self.price * max(len(line.rids), 1):
                    return None
                del self.rent[user]
        if grow is not None:
            index = grow.extended(conn, line)
        else:
            start = time.thread_time()
            index = build(conn, line)
            if index.whole is not None:
                self.warm(conn, index.whole.base)
            took = time.thread_time() - start
        with self.lock:
            if grow is None and line.rids:
                self.price = max(took / len(line.rids), 1e-7)
            _lend(index, line)
            if index.nbytes > self.max_bytes:
                return index  # this search only
            old = self.users.pop(user, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self.users[user] = index
            self.nbytes += index.nbytes
            while self.nbytes > self.max_bytes and len(self.users) > 1:
                _, dropped = self.users.popitem(last=False)
                self.nbytes -= dropped.nbytes
        return index

    def current(self, user: str | None, gen: int | None = None) -> bool:
        """Whether ``user``'s index is kept, at generation ``gen`` when given (:meth:`of` would return it as it is)."""
        with self.lock:
            have = self.users.get(user)
            return have is not None and (gen is None or have.gen == gen)

    def sweep(self, conn: Conn, file_gen: int, searched: str | None = None, line: Timeline | None = None) -> None:
        """At the first search after the file's generation moved (a write in any process), drop the indexes of the
        users written since: another process's deletes and erasures leave this process's RAM at its next keyword
        search, whoever it is for. ``searched``'s index stays when ``line`` (its timeline, current in this snapshot)
        grew from the index's own timeline: the writes since are this store's adds, which the index takes
        (:meth:`of`)."""
        if file_gen == self.file_gen:
            return
        with self.lock:
            kept = {tenant_token(user): (user, index.gen) for user, index in self.users.items()}
        gens: dict[str, int] = {}
        for part in chunks(list(kept), 500):
            gens.update(
                conn.execute(
                    f"SELECT tenant, gen FROM generations WHERE tenant IN ({','.join('?' * len(part))})", part
                ).fetchall()
            )
        with self.lock:
            for token, (user, gen) in kept.items():
                have = self.users.get(user)
                if (
                    have is not None
                    and have.gen == gen
                    and gens.get(token) != gen
                    and not (line is not None and user == searched and have.root is line.root)
                ):
                    del self.users[user]
                    self.nbytes -= have.nbytes
            self.file_gen = file_gen

    def paid(self, user: str | None, gen: int, seconds: float) -> None:
        """A search of ``user`` at ``gen`` spent ``seconds`` of its thread's CPU on what the index would replace (a
        ranking through FTS5, contextual keys without the whole-word dictionary): rent towards its index."""
        with self.lock:
            spent = self.rent.get(user)
            if spent is None and len(self.rent) >= _RENT_MAX:
                self.rent.clear()  # many users searched once each: forget them, not grow
            total = spent[1] if spent is not None and spent[0] == gen else 0.0
            self.rent[user] = (gen, total + seconds)

    def warm(self, conn: Conn, words: Iterable[str]) -> None:
        """Keep the FTS5 token of each of ``words`` not kept yet (an index's whole words, when it is built): the
        searches of its user then find most query words' tokens kept (:meth:`tokens_of`), instead of tokenizing
        2-3 of them in the thread's scratch table at each search (~50-70 µs in the search benchmark, where most
        searches bring a word not asked before). ~1.3 µs per word (a few thousand words per 10k records, a few
        percent of the index's build, whose cost it shares: the rent). Nothing when they would not fit
        (:data:`_TOKENS_MAX`): a vocabulary that large would only push the searches' words out."""
        with self.lock:
            missing = [word for word in words if word not in self.tokens]
            room = len(self.tokens) + len(missing) <= _TOKENS_MAX // 2
        if not missing or not room:
            return
        found = dict(zip(missing, tokens(conn, missing), strict=True))
        with self.lock:
            if len(self.tokens) + len(found) <= _TOKENS_MAX:
                self.tokens.update(found)

    def tokens_of(self, conn: Conn, terms: Sequence[str]) -> list[str | None]:
        """Each query word's one FTS5 token (stemmed; None: several or none), kept for the next searches."""
        with self.lock:
            known = [self.tokens.get(term, "") for term in terms]
        missing = [term for term, token in zip(terms, known, strict=True) if token == ""]
        if missing:
            found = dict(zip(missing, tokens(conn, missing), strict=True))
            with self.lock:
                if len(self.tokens) + len(found) > _TOKENS_MAX:
                    self.tokens.clear()
                self.tokens.update(found)
            known = [found[term] if token == "" else token for term, token in zip(terms, known, strict=True)]
        return known


def _lend(index: UserWords, line: Timeline) -> None:
    """Give ``line`` (a timeline at the index's generation) the index's whole words, for contextual keys."""
    if index.whole is not None and line.words.whole is None and index.whole.size == len(line.rids):
        line.words.whole = index.whole


def file_ranking(
    conn: Conn, index: UserWords, tokens: Sequence[str | None], inner: int, *, averages: Any = _READ
) -> list[tuple[int, float]] | None:
    """``SELECT rowid - base, bm25(records_fts, 1.0, 0.0) ... ORDER BY bm25 LIMIT inner`` of the OR of the phrases
    whose tokens are ``tokens``, as (rid, bm25): the same rows, order and scores. None when the file's FTS5 rows
    are not exactly the index's records (its statistics differ) or a phrase is not one token. ``averages``: FTS5's
    averages record (``records_fts_data`` id 1, None if missing) already read in the search's snapshot; else read
    here."""
    if any(token is None for token in tokens):
        return None
    if averages is _READ:
        row = conn.execute("SELECT block FROM records_fts_data WHERE id = 1").fetchone()
        averages = None if row is None else row[0]
    if averages is None:
        return None
    counts = varints(bytes(averages))
    n = len(index.rids)
    # The file's rows and tokens (body + tenant) are the index's records' exactly: then every count, the IDFs and
    # the average length (hence the weights) are the file's.
    if not n or counts[0] != n or sum(counts[1:]) != index.tokens + n:
        return None
    found = [index.postings(token) for token in tokens if token is not None]
    found = [(docs, weights) for docs, weights in found if len(docs)]
    if not found:
        return []
    at, score = _summed(found, len(index.rids))
    bm25 = -1.0 * score
    if len(at) > inner:
        # The inner best by (bm25, rowid), as SQLite's ORDER BY ... LIMIT keeps them (ties: the first rows FTS5
        # returned, in rowid order); a partition first, then an exact sort of the few (only their rids read).
        cut = np.partition(bm25, inner - 1)[inner - 1]
        keep = np.flatnonzero(bm25 <= cut)
        bm25, at = bm25[keep], at[keep]
    rids = index.rids[at]
    order = np.lexsort((rids, bm25))[:inner]
    return list(zip(rids[order].tolist(), bm25[order].tolist(), strict=True))


def _summed(found: Sequence[tuple[I32, F64]], n: int) -> tuple[npt.NDArray[Any], F64]:
    """The records (positions ascending) holding any of the phrases ``found`` (each: positions ascending, a term
    for each) and the sum of their terms, added from 0.0 phrase after phrase as ``bm25()`` sums them."""
    if len(found) == 1:
        return found[0]
    # The sums in this thread's dense buffer (zero), phrase after phrase, as bm25() sums them (a phrase's positions
    # are distinct: one addition each); the holders are the positions given, sorted, each once. Only the holders'
    # cache lines of the buffer are touched: no array of n sums allocated and scanned (bincount, flatnonzero),
    # 30 -> 16 µs for three phrases of ~600 holders at 10k records with the caches cold.
    dense, _ = scratch(n, np.float64)
    for docs, terms in found:
        dense[docs] += terms
    every = np.concatenate([docs for docs, _ in found])
    every.sort()
    at = every[np.concatenate(([True], every[1:] != every[:-1]))] if len(every) else every
    score = dense[at]
    dense[at] = 0.0  # this thread's buffer, zero again for the next search
    return at, score


def user_lists(index: UserWords, tokens: Sequence[str | None]) -> list[I32] | None:
    """Each phrase's records (positions, ascending) among the user's, for the per-user BM25; None if a phrase is
    not one token."""
    out: list[I32] = []
    for token in tokens:
        if token is None:
            return None
        out.append(index.postings(token)[0])
    return out


def user_order(
    index: UserWords, lists: Sequence[I32], weights: Sequence[float], head: int | None
) -> tuple[I64, F64, I64, int]:
    """The records holding any phrase, best first by (summed weights of their phrases, -rid), as (rids, sums,
    positions, how many in all): the first ``head`` of them (None: all). Sums are float64 additions phrase after
    phrase from 0.0, as Python's."""
    dense, mark = scratch(len(index.rids), np.float64)
    for docs, weight in zip(lists, weights, strict=True):
        if len(docs):
            dense[docs] += weight
            mark[docs] = 1
    at = np.flatnonzero(mark)
    sums = dense[at]
    dense[at] = 0.0
    mark[at] = 0
    count = len(at)
    if head is not None and count > head:
        cut = np.partition(sums, count - head)[count - head]
        keep = np.flatnonzero(sums >= cut)
        sums, at = sums[keep], at[keep]
    rids = index.rids[at]
    order = np.lexsort((rids, -sums))
    if head is not None:
        order = order[:head]
    return rids[order], sums[order], at[order], count


def per_user_ranking(
    index: UserWords,
    lists: Sequence[I32],
    weights: Sequence[float],
    *,
    limit: int,
    check: Callable[[Sequence[int]], set[int]],
) -> list[tuple[int, float]]:
    """``_keyword.bm25_per_user``'s ranking (the same hits and float64 scores) from the index: the candidates
    best first by summed IDF ``weights`` of the phrases they hold, checked a window at a time, each scored
    ``sum * ranking.bm25_length_factor(words, mean words of the window's records that pass)``."""
    window = 2 * limit + 16
    rids, sums, pos, total = user_order(index, lists, weights, window)
    if not total:
        return []
    done = 0
    found: list[tuple[I64, F64]] = []
    count = 0
    while True:
        part = slice(done, done + window)
        part_rids, part_sums, part_pos = rids[part], sums[part], pos[part]
        done += len(part_rids)
        listed = part_rids.tolist()
        keep = check(listed)
        passed = np.fromiter((rid in keep for rid in listed), dtype=bool, count=len(listed))
        part_rids, part_sums, part_pos = part_rids[passed], part_sums[passed], part_pos[passed]
        words = index.lengths[part_pos]
        avg = int(words.sum()) / len(words) if len(words) else 1.0
        # ranking.bm25_length_factor, elementwise: the same float64 operations in the same order
        ratio = words / avg if avg > 0 else np.ones(len(words))
        norm = (1.0 - ranking.BM25_B) + ranking.BM25_B * ratio
        factor = (ranking.BM25_K1 + 1.0) / (1.0 + ranking.BM25_K1 * norm)
        found.append((part_rids, part_sums * factor))
        count += len(part_rids)
        if count >= limit or done >= total:
            break
        if len(rids) < total:
            rids, sums, pos, _ = user_order(index, lists, weights, None)
        window *= 8
    all_rids = np.concatenate([r for r, _ in found])
    all_scores = np.concatenate([s for _, s in found])
    order = np.lexsort((all_rids, -all_scores))[:limit]
    return list(zip(all_rids[order].tolist(), all_scores[order].tolist(), strict=True))
