"""Each user's records in time order, in RAM: the neighbour lookup of a search without a statement.

A search looks up the records written just before and after its candidates
(:func:`~._search.sides`), the predecessor of each vector candidate and the
times and texts of the ranked records. On a conversational store those reads
are most of the SQL after the query's vector arrives. A :class:`Timeline`
holds what they need of every record of one user, ordered by
``(created_at, rid)``: rid, time, session, agent, expiry and text. It is valid
for one generation of the user (the ``generations`` row that every write
bumps, in any process: an add, a delete, a purge, an update of a text or an
expiry, a re-embedding), read in the search's own transaction, so a timeline
never answers for another snapshot. Expiry is checked against the search's
clock at every lookup, as the SQL does.

The keyword ranking checks its candidates' scope and expiry there too, and
keeps the words per record (FTS5's docsize) it read, for the next search.
Contextual keys ask which records hold each query word (:meth:`Timeline.holders`):
the answer per word is kept, for the next search of that word. Once the user's
word index is bought (``_keyword_user.py``), it brings the whole words of every
text (:class:`WholeWords`), and every word is answered from there.

What it never answers (the caller runs the statement instead): a lookup with
metadata filters or a time range, a rid it does not hold, a user with more
than :data:`TIMELINE_MAX` records or without a generation, and the first
search of a user at a new generation. A timeline is built on the second
search at the same generation, so that a store which writes between every
search never pays for building one it would not use. The cache keeps the most
recently used timelines up to :data:`TIMELINE_BYTES` (texts and per-record
overhead, estimated).
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from ._rows import NEVER, Conn, expiry, tenant_token, us

if TYPE_CHECKING:
    from memoryport._records import MemoryRecord

__all__ = ["TIMELINE_BYTES", "TIMELINE_MAX", "Timeline", "Timelines", "WholeWords"]

#: The largest user (records in the file, live or not) whose timeline is kept in RAM; larger users are
#: looked up by SQL (a timeline of 50k records takes ~50 ms to read and ~10 MB; a lookup reads 16 per side).
TIMELINE_MAX = 50_000

#: What the timelines of one store may hold in RAM at most (estimated: texts plus ~500 bytes per record).
TIMELINE_BYTES = 64 << 20

_SEEN_MAX = 65_536
_KEY, _SCORE = operator.itemgetter(0), operator.itemgetter(1)
# the columns' objects, the rid map, the neighbour positions and the word holders kept per record
# (plus the texts twice: as read, and lower-cased for the word holders)
_PER_RECORD = 700
# The word holders a timeline keeps: about this many positions per record, plus _HOLDERS_BASE, in all
# (beyond that, the words not kept are looked for in each search's texts, as the first time).
_HOLDERS_PER_RECORD = 4
_HOLDERS_BASE = 1024
_ASKED_MAX = 4096
# A position no record has, however far it is moved (see _entering_order).
_NOWHERE = -(1 << 40)
# A word is looked for in all of the user's texts (and kept) once it has been looked for in this share of
# the user's records' texts, a search's at a time.
_BUY = 0.5
#: The most records of this store's own adds a timeline waits for (see :meth:`Timelines.extend`): more
#: between two searches of the user, and the timeline is dropped and read again, as after any write.
EXTEND_MAX = 2048


class _Words:
    """The user's texts lower-cased in one string, and which records hold each word looked up so far."""

    def __init__(self) -> None:
        # every text's whole words, when the user's word index brought them (see UserIndexes.of)
        self.whole: WholeWords | None = None
        # session gap (seconds) -> each position's session number in a uniform timeline (see context_in)
        self.runs: dict[float, list[int]] = {}
        self.blob: str | None = None
        self.starts: list[int] = []
        self.held: dict[str, frozenset[int]] = {}  # lower-cased word -> positions of the records holding it
        self.size = 0  # positions in ``held``
        # lower-cased word not kept -> how many records' texts were searched for it so far
        self.asked: dict[str, int] = {}


def _joined(texts: Sequence[str]) -> tuple[str, list[int]]:
    """``texts`` lower-cased, joined by newlines, and where each starts (as ``ranking.context_keys`` joins them).

    One ``lower()`` of the joined texts when no character changes length (only U+0130 does; a newline
    is neither cased nor case-ignorable, so the final sigma rule sees each text alone), else text by text.
    """
    joined = "\n".join(texts)
    blob = joined.lower()
    if len(blob) == len(joined):
        return blob, list(itertools.accumulate((len(text) + 1 for text in texts[:-1]), initial=0))
    lowered = [text.lower() for text in texts]
    return "\n".join(lowered), list(itertools.accumulate((len(text) + 1 for text in lowered[:-1]), initial=0))


def _found(lower: str, blob: str, starts: list[int]) -> frozenset[int]:
    """Which of the texts joined in ``blob`` hold ``lower`` as a whole word: ``ranking.context_keys``' own search."""
    held: set[int] = set()
    end, size = len(blob), len(lower)
    at = blob.find(lower)
    while at >= 0:
        after = at + size
        if (at == 0 or not blob[at - 1].isalnum()) and (after == end or not blob[after].isalnum()):
            held.add(bisect.bisect_right(starts, at) - 1)
        at = blob.find(lower, at + 1)
    return frozenset(held)


# A maximal run of letters and digits: exactly the characters ``str.isalnum`` accepts (checked over every code point).
_RUN = re.compile(r"[^\W_]+")
# Lower-cased ASCII bytes: letters, digits and the separator kept, anything else a space (for bytes.split).
_ASCII_RUNS = bytes(c if (48 <= c <= 57 or 97 <= c <= 122 or c == 0) else 32 for c in range(256))
# What WholeWords counts per position it holds (a tuple slot and its share of the ints) and per word.
_WHOLE_POSTING = 12
_WHOLE_WORD = 120


@dataclass(frozen=True)
class WholeWords:
    """Which of a timeline's records hold each word, for every word of every text: its whole-word dictionary.

    A record holds a word where the word is a maximal run of letters and digits
    (``str.isalnum``) of its lower-cased text: exactly where ``ranking.context_keys``
    finds a query word that is all letters and digits (a newline joins its texts,
    and each text is lower-cased alone, so U+0130 and the Greek final sigma
    lower-case the same). Positions are the timeline's (its ``(created_at, rid)``
    order); ``added`` holds those of records appended after the build (this store's
    own adds, :meth:`extended`), so the build's tuples are never copied.

    Example:
        >>> whole = WholeWords.of(["Ann: I paint.", "ANN's paint_brush"])
        >>> whole.holding("ann"), whole.holding("paint"), whole.holding("brush")
        ((0, 1), (0,), ())
        >>> whole.extended(["paint!"]).holding("paint")
        (0, 2)
    """

    size: int  # the records it covers: positions 0 .. size - 1
    base: dict[str, tuple[int, ...]]  # lower-cased word -> the positions holding it, ascending
    added: dict[str, tuple[int, ...]]  # the same for the positions appended since the build (all after base's)
    nbytes: int  # estimated

    @classmethod
    def of(cls, texts: Sequence[str]) -> WholeWords:
        """The dictionary of ``texts`` (position ``i``: ``texts[i]``)."""
        found = _whole(texts, 0)
        return cls(len(texts), found, {}, _whole_bytes(found))

    def extended(self, texts: Sequence[str]) -> WholeWords:
        """This dictionary with ``texts`` after its records (positions ``size`` on); this one is left as it is."""
        more = _whole(texts, self.size)
        added = dict(self.added)
        for word, held in more.items():
            have = added.get(word)
            added[word] = held if have is None else have + held
        return WholeWords(self.size + len(texts), self.base, added, self.nbytes + _whole_bytes(more))

    def holding(self, lower: str) -> tuple[int, ...]:
        """The positions whose lower-cased text holds ``lower`` as a whole word, ascending."""
        held = self.base.get(lower, ())
        if self.added:
            more = self.added.get(lower)
            if more is not None:
                return held + more
        return held


def _whole(texts: Sequence[str], start: int) -> dict[str, tuple[int, ...]]:
    """Lower-cased word -> the positions (``start + i`` for ``texts[i]``) whose lower-cased text holds it whole."""
    joined = "\x00".join(texts)
    if joined.isascii() and joined.count("\x00") == len(texts) - 1:
        # ASCII: a run of letters and digits is a run of [a-z0-9] once lower-cased, split at anything else in C.
        blob = joined.lower().encode("ascii").translate(_ASCII_RUNS)
        ascii_found: dict[bytes, list[int]] = {}
        get_ascii = ascii_found.get
        for p, runs in enumerate(map(bytes.split, blob.split(b"\x00")), start):
            for run in set(runs):
                have_ascii = get_ascii(run)
                if have_ascii is None:
                    ascii_found[run] = [p]
                else:
                    have_ascii.append(p)
        return {run.decode("ascii"): tuple(held) for run, held in ascii_found.items()}
    found: dict[str, list[int]] = {}
    get = found.get
    for p, words in enumerate((_RUN.findall(text.lower()) for text in texts), start):
        for word in set(words):
            have = get(word)
            if have is None:
                found[word] = [p]
            else:
                have.append(p)
    return {word: tuple(held) for word, held in found.items()}


def _whole_bytes(found: Mapping[str, tuple[int, ...]]) -> int:
    """What ``found`` holds in RAM, estimated."""
    return _WHOLE_POSTING * sum(map(len, found.values())) + sum(_WHOLE_WORD + len(word) for word in found)


@dataclass(frozen=True)
class Timeline:
    """One user's records at generation ``gen``, ordered by ``(created_at, rid)``; never changed once built."""

    gen: int
    rids: list[int]
    ats: list[int]
    sessions: list[str | None]
    agents: list[str | None]
    expires: list[int]  # NEVER: no expiry
    texts: list[str]
    at: dict[int, int]  # rid -> position
    nbytes: int
    mortal: bool  # whether any record has an expiry
    # whether every record has one session and one agent (then a record's neighbours in its exact scope are the
    # nearest records, whatever their session or agent columns say: see sides_in)
    uniform: bool = False
    # scan -> position -> positions of the same session and agent among the ``scan`` nearest on each side,
    # nearest first (filled as searches ask; the same answer whoever fills it first)
    scoped: dict[int, dict[int, tuple[list[int], list[int]]]] = field(default_factory=dict, compare=False)
    # rid -> words in its text (FTS5's docsize), kept as keyword searches read them
    sizes: dict[int, int] = field(default_factory=dict, compare=False)
    # which records hold each query word, kept as contextual keys ask (see holders)
    words: _Words = field(default_factory=_Words, compare=False)
    # one object shared by a timeline read from the file and every timeline appended to it (this store's own adds,
    # see Timelines.of): of two timelines with one root, the longer holds the other's records first, unchanged
    root: object = field(default_factory=object, compare=False)
    # prefix -> (the longest text's length, whether a text has a colon within its first ``prefix`` characters)
    shapes: dict[int, tuple[int, bool]] = field(default_factory=dict, compare=False)

    def shape(self, prefix: int) -> tuple[int, bool]:
        """The longest text's length, and whether any text has a colon within its first ``prefix`` characters
        (where a speaker prefix ends): what bounds the lifts of ``_search.placed``'s steps for every record
        here, found once per timeline (a few C-level passes over its texts)."""
        found = self.shapes.get(prefix)
        if found is None:
            found = self.shapes[prefix] = text_shape(self.texts, prefix)
        return found

    def entries(self, rids: Sequence[int]) -> dict[int, tuple[int, str | None, str | None, str]]:
        """rid -> ``(created_at, session_id, agent_id, text)`` (the search's ``Times`` entry) of each of ``rids``,
        all held here, in C-level passes over the columns."""
        ps = list(map(self.at.__getitem__, rids))
        found = zip(
            map(self.ats.__getitem__, ps),
            map(self.sessions.__getitem__, ps),
            map(self.agents.__getitem__, ps),
            map(self.texts.__getitem__, ps),
            strict=True,
        )
        return dict(zip(rids, found, strict=True))

    def appended(self, records: Sequence[MemoryRecord], rids: Sequence[int], gen: int) -> Timeline | None:
        """This timeline with ``records`` (stored as ``rids``) after its last record, at ``gen``; None when
        one of them does not come after it in ``(created_at, rid)`` order (then it must be read again).

        A new timeline (this one may still serve a search of the snapshot before):
        the same columns as reading the user's records at ``gen`` would give.
        """
        rows = sorted(zip((us(record.created_at) for record in records), rids, records, strict=True))
        if self.rids and rows and (rows[0][0], rows[0][1]) <= (self.ats[-1], self.rids[-1]):
            return None
        at = dict(self.at)
        for i, (_, rid, _) in enumerate(rows, len(self.rids)):
            at[rid] = i
        texts = [record.text for _, _, record in rows]
        expires = [expiry(record) for _, _, record in rows]
        words = _Words()
        words.asked = dict(self.words.asked)
        if self.rids:
            # the session numbers go on from this timeline's last record (the new ones come after it)
            tail = [t for t, _, _ in rows]
            words.runs = {
                gap: [*runs, *_runs(tail, gap, runs[-1], self.ats[-1] / 1e6)] for gap, runs in self.words.runs.items()
            }
        return Timeline(
            gen=gen,
            rids=[*self.rids, *(rid for _, rid, _ in rows)],
            ats=[*self.ats, *(t for t, _, _ in rows)],
            sessions=[*self.sessions, *(record.scope.session_id for _, _, record in rows)],
            agents=[*self.agents, *(record.scope.agent_id for _, _, record in rows)],
            expires=[*self.expires, *expires],
            texts=[*self.texts, *texts],
            at=at,
            nbytes=self.nbytes + 2 * sum(map(len, texts)) + _PER_RECORD * len(rows),
            mortal=self.mortal or any(e != NEVER for e in expires),
            uniform=(self.uniform or not self.rids)
            and _uniform(
                [*self.sessions[:1], *(record.scope.session_id for _, _, record in rows)],
                [*self.agents[:1], *(record.scope.agent_id for _, _, record in rows)],
            ),
            sizes=dict(self.sizes),  # the words per record of the texts kept (unchanged)
            words=words,
            root=self.root,
            shapes={
                prefix: (max(longest, new[0]), colon or new[1])
                for prefix, (longest, colon) in self.shapes.items()
                for new in [text_shape(texts, prefix)]
            },
        )

    def sessions_of(self, rids: Iterable[int], seconds: float) -> dict[int, int] | None:
        """rid -> session number of each of ``rids``, or None when one is not here.

        Exactly the grouping of :func:`memoryport.ranking.sessions_of` over the rids'
        ``((session_id, agent_id), created_at / 1e6)`` with a gap of ``seconds``: per exact
        scope, in time order, a new session where the step from the previous rid is
        ``seconds`` or more (the same float operations). The rids' positions here are their
        time order already (ties on ``created_at`` are in one session either way), so an
        integer sort replaces sorting keyed tuples.
        """
        at = self.at
        try:
            ps = sorted([at[rid] for rid in rids])
        except KeyError:
            return None
        ats, rids_of = self.ats, self.rids
        out: dict[int, int] = {}
        number = -1
        if self.uniform:
            last = 0.0
            for p in ps:
                t = ats[p] / 1e6
                if number < 0 or t - last >= seconds:
                    number += 1
                out[rids_of[p]] = number
                last = t
            return out
        sessions, agents = self.sessions, self.agents
        lasts: dict[tuple[str | None, str | None], tuple[int, float]] = {}
        for p in ps:
            group = (sessions[p], agents[p])
            t = ats[p] / 1e6
            found = lasts.get(group)
            if found is None or t - found[1] >= seconds:
                number += 1
                lasts[group] = (number, t)
                out[rids_of[p]] = number
            else:
                lasts[group] = (found[0], t)
                out[rids_of[p]] = found[0]
        return out

    def holders(self, rids: Sequence[int], words: Sequence[str]) -> dict[int, set[str]] | None:
        """rid -> which of ``words`` its text holds as whole words (case ignored), for the rids holding any.

        What :func:`memoryport.ranking.context_keys` finds in the texts themselves
        (its ``_holders``: the lower-cased texts joined by newlines, each word's
        whole-word occurrences), found once per word in all of the user's texts
        and kept, once the word has been searched for in half as many records'
        texts as the user has. None when a rid is not here, a word lower-cased is not
        all letters and digits, or no word is kept yet (the caller then searches
        the texts: the same work). With the user's whole-word dictionary
        (:class:`WholeWords`, brought by its word index), every word is answered
        from there, none searched for in the texts.
        """
        index = self.words
        cap = _HOLDERS_PER_RECORD * len(self.rids) + _HOLDERS_BASE
        whole = index.whole
        if whole is not None and whole.size == len(self.rids):
            return self._held_whole(whole, rids, words, cap)
        kept: list[tuple[str, str]] = []
        once: list[tuple[str, str]] = []
        found: list[tuple[str, frozenset[int]]] = []
        missing: list[tuple[str, str]] = []
        for word in words:
            if not word.isalnum():
                continue  # _holders skips it too
            lower = word.lower()
            if not lower.isalnum():
                return None
            held = index.held.get(lower)
            if held is None:
                missing.append((word, lower))
            else:
                found.append((word, held))
        if missing:
            # Rent or buy: a word not kept is looked for in the rids' texts, until the texts searched for it
            # add up to half the user's (_BUY); then once in all of the user's texts, and kept (while there is
            # room). So a word costs at most about three times what searching each search's texts would, and
            # a word asked again and again costs nothing more.
            for word, lower in missing:
                searched = index.asked.get(lower, 0) + len(rids)
                if searched >= _BUY * len(self.rids) and index.size < cap:
                    kept.append((word, lower))
                    index.asked.pop(lower, None)
                else:
                    once.append((word, lower))
                    if lower not in index.asked and len(index.asked) >= _ASKED_MAX:
                        index.asked.clear()
                    index.asked[lower] = searched
        if not found and not kept:
            return None  # nothing kept to answer from: the caller's own search of the texts is the same work
        positions = self._positions(rids)
        if positions is None:
            return None
        if missing:
            if kept:
                blob, starts = index.blob, index.starts
                if blob is None:
                    blob, starts = _joined(self.texts)
                    index.blob, index.starts = blob, starts
                for word, lower in kept:
                    held = _found(lower, blob, starts)
                    index.held[lower] = held
                    index.size += len(held)
                    found.append((word, held))
            if once:
                order = list(positions)
                blob, starts = _joined([self.texts[p] for p in order])
                for word, lower in once:
                    found.append((word, frozenset(order[i] for i in _found(lower, blob, starts))))
        out: dict[int, set[str]] = {}
        for word, held in found:
            for p in held.intersection(positions) if len(held) > len(positions) else held:
                key = positions.get(p)
                if key is not None:
                    words_of = out.get(key)
                    if words_of is None:
                        out[key] = {word}
                    else:
                        words_of.add(word)
        return out

    def _positions(self, rids: Sequence[int]) -> dict[int, int] | None:
        """position -> rid of each of ``rids``, in their order; None when one is not here."""
        at = self.at
        positions: dict[int, int] = {}
        for rid in rids:
            p = at.get(rid)
            if p is None:
                return None
            positions[p] = rid
        return positions

    def _held_whole(
        self, whole: WholeWords, rids: Sequence[int], words: Sequence[str], cap: int
    ) -> dict[int, set[str]] | None:
        """:meth:`holders` from ``whole``: each word's positions as a set (kept; forgotten when full), intersected."""
        positions = self._positions(rids)
        if positions is None:
            return None
        held_of = _words_held(self.words, whole, words, cap)
        if held_of is None:
            return None
        inside = positions.keys()
        out: dict[int, set[str]] = {}
        for word, held in held_of:
            for p in inside & held:
                key = positions[p]
                words_of = out.get(key)
                if words_of is None:
                    out[key] = {word}
                else:
                    words_of.add(word)
        return out


def _words_held(
    index: _Words, whole: WholeWords, words: Sequence[str], cap: int
) -> list[tuple[str, frozenset[int]]] | None:
    """(word, the positions holding it) for each of ``words`` held anywhere (:func:`_kept`), in their order;
    a word with a separator in it is skipped (``ranking._holders`` skips it too); None when one lower-cased
    is not all letters and digits (the caller searches the texts)."""
    out: list[tuple[str, frozenset[int]]] = []
    for word in words:
        if not word.isalnum():
            continue
        lower = word.lower()
        if not lower.isalnum():
            return None
        held = _kept(index, whole, lower, cap)
        if held:
            out.append((word, held))
    return out


def _kept(index: _Words, whole: WholeWords, lower: str, cap: int) -> frozenset[int]:
    """The positions holding ``lower`` as a set, kept in ``index``: at most ``cap`` positions in all, the words
    least recently asked forgotten first (any is made again from ``whole``, at the cost of its positions)."""
    kept = index.held
    held = kept.pop(lower, None)
    if held is None:
        postings = whole.holding(lower)
        if not postings:
            return frozenset()
        # Searches of one user on two threads share ``index`` (no lock): the other may forget words meanwhile.
        while index.size + len(postings) > cap:
            oldest = next(iter(kept), None)
            if oldest is None:
                break
            dropped = kept.pop(oldest, None)
            if dropped is not None:
                index.size -= len(dropped)
        held = frozenset(postings)
        index.size += len(held)
    kept[lower] = held  # (again) the most recently asked
    return held


def _runs(ats: Sequence[int], seconds: float, number: int = -1, last: float = 0.0) -> list[int]:
    """Each position's session number when every record is in one scope: :meth:`Timeline.sessions_of`'s steps
    (``number`` and ``last``: the number and time, in seconds, of the record before ``ats[0]``, if any)."""
    out: list[int] = []
    for stamp in ats:
        t = stamp / 1e6
        if number < 0 or t - last >= seconds:
            number += 1
        out.append(number)
        last = t
    return out


def context_in(
    line: Timeline,
    keyword: Sequence[tuple[int, float]],
    near: Mapping[int, Sequence[tuple[int, int]]],
    idf: Mapping[str, float],
    *,
    weight: float,
    window: int,
    reach: int,
    seconds: float,
    admit: bool = False,
    others: Sequence[int] = (),
    cut: int | None = None,
) -> list[tuple[int, float]] | None:
    """:func:`memoryport.ranking.context_keys` from ``line``'s positions; None: ask it. ``cut``: the caller keeps
    only the first ``cut`` (with ``admit`` the answer may then end there: the records that enter with their credit
    alone are ordered only where they can reach those).

    For ``near`` as :func:`sides_in` reads it from ``line`` without filters: each
    key's ``reach`` nearest records on each side (checked by count), in a timeline
    of one scope without expiry, whose whole words are known (:class:`WholeWords`).
    Then a link is two positions at most ``window`` (and ``reach``) apart, one of
    them a key, and every record between them was read too, so they are in one
    session exactly when the timeline's session numbers (``seconds``, as
    :meth:`sessions_of` steps) are equal. Each keyword candidate (with ``admit``,
    each position linked) takes the query words its linked positions hold and it
    does not, found from the holders of each word (not from every link), and its
    score grows by ``weight`` times their IDF summed by ``math.fsum``: the same
    floats; records that enter with their credit alone are ordered among equal
    scores as ``context_keys`` orders them (``others``, the other side's candidates,
    then the walk of the keys' near lists). None (the caller runs
    ``context_keys``) for anything else: another shape of ``near``, a rid not
    here, a candidate twice, candidates not best first or not finite, a word that
    lower-cased is not letters and digits.
    """
    whole = line.words.whole
    if (
        not line.uniform
        or line.mortal
        or whole is None
        or whole.size != len(line.rids)
        or weight <= 0
        or window < 1
        or reach < 1
        or not idf
        or not near
    ):
        return None
    at = line.at
    last = len(line.rids) - 1
    maybe = list(map(at.get, near))
    if None in maybe:
        return None
    found = cast("list[int]", maybe)
    looked = set(found)
    if min(found) >= reach and max(found) <= last - reach:
        links = 2 * reach * len(found)
    else:
        links = sum((reach if p >= reach else p) + (reach if p + reach <= last else last - p) for p in looked)
    if links != sum(map(len, near.values())):
        return None  # not the lists sides_in reads (filters, expiry, another window): context_keys reads them
    rids = list(map(_KEY, keyword))
    given = list(map(_SCORE, keyword))
    places = list(map(at.get, rids))
    # Candidates once each, best first, finite (a sum overflows or turns NaN when one is not), each here.
    if None in places or not math.isfinite(sum(given)) or not all(map(operator.ge, given, given[1:])):
        return None
    targets: dict[int, int] = dict(zip(places, rids, strict=True))  # type: ignore[arg-type]  # (no None: checked)
    if len(targets) != len(keyword):
        return None
    index = line.words
    runs = index.runs.get(seconds)
    if runs is None:
        runs = index.runs[seconds] = _runs(line.ats, seconds)
    held_of = _words_held(index, whole, list(idf), _HOLDERS_PER_RECORD * len(line.rids) + _HOLDERS_BASE)
    if held_of is None:
        return None
    span = min(window, reach)
    offsets = [d for k in range(1, span + 1) for d in (-k, k)]
    # Who may take credit: the candidates, or (admit) any position linked to a key of near.
    takers: AbstractSet[int] = looked if admit else targets.keys()
    lo, hi = max(min(takers) - span, 0), min(max(takers) + span, last)
    simple = runs[lo] == runs[hi]  # one session around every taker: any two positions within ``span`` may link
    keyed = not admit and looked.issuperset(targets)
    zone: set[int] | None = None
    taken_by: list[AbstractSet[int]] = []
    for _, held in held_of:
        lenders: AbstractSet[int] = held
        if len(held) > 32:
            # A common word: only its holders within reach of a key of near can lend (a link has a key at one end).
            if zone is None:
                zone = set().union(*map(range, [p - span for p in looked], [p + span + 1 for p in looked]))
            lenders = held & zone
        taken: set[int] = set()
        if lenders:
            reached: set[int] = set()
            for d in offsets:
                reached.update(map(operator.add, lenders, itertools.repeat(d)))
            if simple and keyed:
                taken = targets.keys() & reached  # every candidate a key: it takes from any holder within span
                taken -= held  # its own word
            elif simple:
                # A key takes from any holder within span; a position that is no key, from a key within span only.
                keys = lenders & looked
                taken = reached & looked
                if keys:
                    for d in offsets:
                        taken.update(map(operator.add, keys, itertools.repeat(d)))
                taken -= held  # its own word
                if not admit:
                    taken &= targets.keys()
            else:
                for q in reached - held if admit else targets.keys() & reached - held:
                    if not 0 <= q <= last:
                        continue
                    session, lent = runs[q], q in looked
                    if any(
                        0 <= h <= last and h in lenders and runs[h] == session and (lent or h in looked)
                        for h in (q + d for d in offsets)
                    ):
                        taken.add(q)  # (else another session, or neither of the two a key of near)
        taken_by.append(taken)
    if not any(taken_by):
        return list(keyword)
    if admit:
        return _credited(line, keyword, list(targets), held_of, taken_by, idf, weight, others, near, looked, reach, cut)
    # Keyword candidates only: each one's words, their sum once per set of words, the candidates re-sorted.
    credit: dict[int, set[str]] = {}
    for (word, _), given_to in zip(held_of, taken_by, strict=True):
        for q in given_to:
            words_of = credit.get(q)
            if words_of is None:
                credit[q] = {word}
            else:
                words_of.add(word)
    sums: dict[frozenset[str], float] = {}
    out: list[tuple[int, float]] = []
    for p, rid in targets.items():
        score = given[len(out)]
        found_words = credit.get(p)
        if found_words is not None:
            words = frozenset(found_words)
            total = sums.get(words)
            if total is None:
                total = sums[words] = math.fsum(map(idf.__getitem__, words))
            score = score + weight * total
            if not math.isfinite(score):
                return None
        out.append((rid, score))
    return sorted(out, key=_SCORE, reverse=True)


def _credited(
    line: Timeline,
    keyword: Sequence[tuple[int, float]],
    places: Sequence[int],
    held_of: Sequence[tuple[str, frozenset[int]]],
    taken_by: Sequence[AbstractSet[int]],
    idf: Mapping[str, float],
    weight: float,
    others: Sequence[int],
    near: Mapping[int, Sequence[tuple[int, int]]],
    looked: AbstractSet[int],
    reach: int,
    cut: int | None = None,
) -> list[tuple[int, float]] | None:
    """:func:`context_in`'s scores and order with ``admit``, given the positions each query word is credited to
    (``taken_by``). With ``admit`` a few hundred records may take a word: only those are looked at, in C-level
    passes over dicts keyed by position (nothing of the user's size). ``cut``: only the first ``cut`` are
    returned."""
    codes: dict[int, int] = {}  # position -> the words credited to it, one bit each (Python ints: any number)
    for i, taken in enumerate(taken_by):
        bit = 1 << i
        both = codes.keys() & taken
        codes.update(dict.fromkeys(taken - both if both else taken, bit))
        for q in both:
            codes[q] |= bit
    size = len(line.rids)
    if codes and (min(codes) < 0 or max(codes) >= size):
        codes = {q: code for q, code in codes.items() if 0 <= q < size}  # (a key's offsets past either end)
    if not codes:
        return list(keyword)
    # Each set of words summed once, by math.fsum (exactly rounded: the order of the words does not matter).
    words = [word for word, _ in held_of]
    sums = {
        code: math.fsum([idf[word] for i, word in enumerate(words) if code >> i & 1]) for code in set(codes.values())
    }
    # The same float operations as context_keys: score (0.0 for a record that enters) + weight * the sum.
    out = list(keyword)
    mine = list(map(codes.pop, places, itertools.repeat(0)))  # each keyword candidate's words (0: none)
    for i in itertools.compress(range(len(mine)), mine):
        rid, score = out[i]
        score = score + weight * sums[mine[i]]
        if not math.isfinite(score):
            return None
        out[i] = (rid, score)
    if codes:
        entered = {code: 0.0 + weight * total for code, total in sums.items()}
        if not all(map(math.isfinite, entered.values())):
            return None
        # With ``cut``, only the records that can be among the first ``cut`` are ordered (most often none).
        entering = sorted(codes) if cut is None else _reaching(out, codes, entered, cut)
        order = _entering_order(line, keyword, entering, others, near, looked, reach) if entering else []
        if order is None:
            return None
        scores = map(entered.__getitem__, map(codes.__getitem__, order))
        out += zip(map(line.rids.__getitem__, order), scores, strict=True)
    best = sorted(out, key=_SCORE, reverse=True)  # best first, ties in order
    return best if cut is None else best[:cut]


def _reaching(
    out: Sequence[tuple[int, float]], codes: Mapping[int, int], entered: Mapping[int, float], cut: int
) -> list[int]:
    """The positions (ascending) of the records entering with their credit alone (``codes``: position -> its
    words, ``entered``: words -> its score) that the first ``cut`` of the ranking may hold: those of each score
    that the candidates (``out``) and the higher entering scores leave room for. Among equal scores the
    candidates come first, then the entering records in their order: a score with room is taken whole (the
    ranking then cuts the ones of it past ``cut``)."""
    count: Counter[float] = Counter()
    for code, n in Counter(codes.values()).items():
        count[entered[code]] += n
    given = list(map(_SCORE, out))
    room: set[float] = set()
    higher = 0  # entering records scored above the one looked at
    for value in sorted(count, reverse=True):
        same = itertools.repeat(value)
        if higher + sum(map(operator.gt, given, same)) + sum(map(operator.eq, given, same)) >= cut:
            break
        room.add(value)
        higher += count[value]
    if not room:
        return []
    taken = {code for code in entered if entered[code] in room}
    return sorted(p for p, code in codes.items() if code in taken)


def _entering_order(
    line: Timeline,
    keyword: Sequence[tuple[int, float]],
    entering: Sequence[int],
    others: Sequence[int],
    near: Mapping[int, Sequence[tuple[int, int]]],
    looked: AbstractSet[int],
    reach: int,
) -> list[int] | None:
    """The records that enter with their credit alone (positions ``entering``, ascending) in context_keys'
    order among equal scores: the other side's candidates first, in their order, then as first met walking
    the keyword candidates, the other side's and near's keys, each followed by its near list (before it
    nearest first, then after it), then any never met, by position. None when a rid is not here."""
    at = line.at
    walk = list(dict.fromkeys([*map(_KEY, keyword), *others, *near]))  # each rid's first visit, in order
    spots = list(map(at.get, walk))
    if None in spots:
        return None
    # The walk written out: per key visited, itself, then its list's slots (before: d = 1..reach, after: the
    # same); a position visited as no key of near has no list (a slot no position fills).
    stride = 2 * reach + 1
    walked: list[int | None] = [None] * (len(spots) * stride)
    walked[::stride] = spots
    keyed = [p if p in looked else _NOWHERE for p in cast("list[int]", spots)]
    for d in range(1, reach + 1):
        walked[d::stride] = map(operator.sub, keyed, itertools.repeat(d))
        walked[reach + d :: stride] = map(operator.add, keyed, itertools.repeat(d))
    rest = set(entering)
    front = cast("list[int]", [p for p in map(at.get, dict.fromkeys(others)) if p in rest])  # the other side's first
    rest.difference_update(front)
    met = cast("list[int]", list(filter(rest.__contains__, dict.fromkeys(walked))))  # each at its first visit
    if len(met) < len(rest):
        seen = set(met)
        met += [p for p in entering if p in rest and p not in seen]
    return front + met


class Timelines:
    """The timelines of one store, least recently used dropped beyond ``max_bytes``."""

    def __init__(self, max_bytes: int = TIMELINE_BYTES, max_records: int = TIMELINE_MAX) -> None:
        self.max_bytes = max_bytes
        self.max_records = max_records
        self._lock = threading.Lock()
        self._lines: OrderedDict[str | None, Timeline] = OrderedDict()
        self._seen: dict[str | None, int] = {}  # user -> the generation its last search saw (not yet built)
        # user -> this store's own adds not yet in the user's timeline (see extend): their records, rids,
        # and the generation the last of them committed
        self._tails: dict[str | None, tuple[list[MemoryRecord], list[int], int]] = {}

    def clear(self) -> None:
        with self._lock:
            self._lines.clear()
            self._seen.clear()
            self._tails.clear()

    def of(self, conn: Conn, user_id: str | None) -> Timeline | None:
        """The timeline of ``user_id`` current in ``conn``'s snapshot, or None (then ask SQL).

        Built here (in the caller's transaction) on the second call at the same generation.
        """
        gen = self._generation(conn, user_id)
        if gen is None:
            return None
        with self._lock:
            line = self._lines.get(user_id)
            tail = self._tails.pop(user_id, None)
            if line is not None and tail is not None and tail[2] == gen:
                # This store's own adds since the timeline was current, and nothing else: append them now
                # (None when one comes before the timeline's last record: read again, as after any write).
                grown = line.appended(tail[0], tail[1], gen)
                if grown is None or grown.nbytes > self.max_bytes:
                    del self._lines[user_id]
                else:
                    self._keep(user_id, grown)
                    return grown
            elif line is not None and line.gen == gen:
                self._lines.move_to_end(user_id)
                return line
            if self._seen.get(user_id) != gen:
                if len(self._seen) >= _SEEN_MAX:
                    self._seen.clear()  # many users searched once each: forget them, not grow
                self._seen[user_id] = gen
                return None
        line = _read(conn, user_id, gen)
        if line.nbytes > self.max_bytes:
            return line  # used for this search only
        with self._lock:
            self._seen.pop(user_id, None)
            self._keep(user_id, line)
        return line

    def current(self, conn: Conn, user_id: str | None) -> Timeline | None:
        """The timeline of ``user_id`` kept and current in ``conn``'s snapshot as it is, else None.

        :meth:`of` without its work: nothing is read, appended or counted towards a build (a search
        that must not wait on the event loop's thread asks this, and goes to a worker on None).
        """
        gen = self._generation(conn, user_id)
        if gen is None:
            return None
        with self._lock:
            line = self._lines.get(user_id)
            if line is None or line.gen != gen or user_id in self._tails:
                return None
            self._lines.move_to_end(user_id)
            return line

    def _generation(self, conn: Conn, user_id: str | None) -> int | None:
        """``user_id``'s generation in ``conn``'s snapshot, or None when it can have no timeline (none, or too big)."""
        row = conn.execute("SELECT gen, n FROM generations WHERE tenant = ?", (tenant_token(user_id),)).fetchone()
        if row is None or int(row[0]) < 0 or int(row[1]) > self.max_records:
            return None
        return int(row[0])

    def held(self, user_id: str | None) -> bool:
        """Whether a timeline of ``user_id`` is kept (current or not: :meth:`current` tells in a snapshot)."""
        with self._lock:
            return user_id in self._lines

    def _keep(self, user_id: str | None, line: Timeline) -> None:
        """Keep ``line`` as ``user_id``'s, most recently used; drop the least recently used beyond the bytes."""
        self._lines[user_id] = line
        self._lines.move_to_end(user_id)
        total = sum(other.nbytes for other in self._lines.values())
        while total > self.max_bytes and len(self._lines) > 1:
            user, dropped = self._lines.popitem(last=False)
            self._tails.pop(user, None)
            total -= dropped.nbytes

    def extend(
        self, records: Sequence[MemoryRecord], base: int, gen: int, old: Mapping[str, int], erased: bool
    ) -> None:
        """This store's own add (record ``i`` written as rid ``base + i``), committed at generation ``gen``.

        A timeline that was current just before the write (its user's generation
        then, ``old``, is the timeline's, or that of the adds already waiting for
        it) takes the user's new records at its next search (:meth:`of`), as a new
        timeline at ``gen``, when that search finds the user at ``gen`` (no other
        write since) and the records all come after the timeline's last one in
        ``(created_at, rid)`` order (new turns of a conversation): no statement and
        no rebuild, and the add itself copies nothing (appending copies the
        timeline's columns: ~1 ms at 10k records). Any other timeline of a user in
        the batch is dropped (read again at its second search, as after any
        write), as is one whose waiting records would pass :data:`EXTEND_MAX`.
        """
        with self._lock:
            if not self._lines:
                return
            mine: dict[str | None, list[int]] = {}
            for i, record in enumerate(records):
                user = record.scope.user_id
                if user in self._lines:
                    mine.setdefault(user, []).append(i)
            for user, at in mine.items():
                tail = self._tails.pop(user, None)
                tip = self._lines[user].gen if tail is None else tail[2]
                waiting = len(at) + (0 if tail is None else len(tail[1]))
                if erased or old.get(tenant_token(user)) != tip or waiting > EXTEND_MAX:
                    del self._lines[user]
                    continue
                new = [records[i] for i in at]
                rids = [base + i for i in at]
                self._tails[user] = (new, rids, gen) if tail is None else ([*tail[0], *new], [*tail[1], *rids], gen)


def _read(conn: Conn, user_id: str | None, gen: int) -> Timeline:
    rows = conn.execute(
        f"SELECT rid, created_at, session_id, agent_id, coalesce(expires_at, {NEVER}), text FROM records "
        "WHERE user_id IS ? ORDER BY created_at, rid",
        (user_id,),
    ).fetchall()
    if rows:
        rids, ats, sessions, agents, expires, texts = (list(column) for column in zip(*rows, strict=True))
    else:
        rids, ats, sessions, agents, expires, texts = [], [], [], [], [], []
    return Timeline(
        gen=gen,
        rids=rids,
        ats=ats,
        sessions=sessions,
        agents=agents,
        expires=expires,
        texts=texts,
        at={rid: i for i, rid in enumerate(rids)},
        nbytes=2 * sum(map(len, texts)) + _PER_RECORD * len(rids),
        mortal=any(e != NEVER for e in expires),
        uniform=_uniform(sessions, agents),
    )


def text_shape(texts: Sequence[str], prefix: int) -> tuple[int, bool]:
    """:meth:`Timeline.shape` of ``texts``: the longest one's length, and whether one has a colon within its first
    ``prefix`` characters (none when no text holds one at all: one search of the joined texts; else one C-level
    pass)."""
    if not texts:
        return 0, False
    longest = max(map(len, texts))
    colon = ":" in "\n".join(texts) and max(map(str.find, texts, itertools.repeat(":"), itertools.repeat(0),
                                                   itertools.repeat(prefix))) >= 0  # fmt: skip
    return longest, colon


def _uniform(sessions: Sequence[str | None], agents: Sequence[str | None]) -> bool:
    """Whether all of ``sessions`` are one value and all of ``agents`` one value (None counts as a value)."""
    return (not sessions or sessions.count(sessions[0]) == len(sessions)) and (
        not agents or agents.count(agents[0]) == len(agents)
    )


Sides = dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]]
Times = dict[int, tuple[int, "str | None", "str | None", str]]


def sides_in(
    line: Timeline, rids: Sequence[int], now: int, *, window: int, scan: int, after: bool, times: Times | None
) -> Sides | None:
    """What :func:`~._search.sides` answers without filters, from ``line``; None when it holds a rid not.

    The same walk as the statement: the user's ``scan`` nearest records on each side in
    ``(created_at, rid)`` order, of those the first ``window`` of the candidate's exact
    scope (session and agent, None matching None) that are live at ``now``. Rids come out
    in ascending order, once each, as the statement returns them.
    """
    at = line.at
    for rid in rids:
        if rid not in at:
            return None
    rids_of, ats, sessions, agents, expires, texts = (
        line.rids, line.ats, line.sessions, line.agents, line.expires, line.texts,
    )  # fmt: skip
    total = len(rids_of)
    scoped = line.scoped.get(scan)
    if scoped is None:
        scoped = line.scoped.setdefault(scan, {})
    out: Sides = {}
    uniform, mortal = line.uniform, line.mortal
    reach = scan if mortal else min(scan, window)  # the positions a side needs (all the scan's: some may expire)
    near: tuple[Sequence[int], Sequence[int]] | None
    before: Sequence[int]
    later: Sequence[int]
    if uniform and not mortal:
        _sides_uniform(line, rids, reach if after else 0, reach, out, times)
        return out
    for rid in sorted(set(rids)):
        p = at[rid]
        session, agent = sessions[p], agents[p]
        if uniform:
            # Every record is in this one's exact scope: its nearest records on each side are its neighbours.
            near = (range(p - 1, max(p - 1 - reach, -1), -1), range(p + 1, min(p + 1 + reach, total)))
        else:
            near = scoped.get(p)
        if near is None:
            near = scoped[p] = (
                [j for j in range(p - 1, max(p - 1 - scan, -1), -1) if sessions[j] == session and agents[j] == agent],
                [j for j in range(p + 1, min(p + 1 + scan, total)) if sessions[j] == session and agents[j] == agent],
            )
        if mortal:
            before = [j for j in near[0] if expires[j] > now][:window]
            later = [j for j in near[1] if expires[j] > now][:window] if after else []
        else:
            before = near[0][:window]
            later = near[1][:window] if after else []
        out[rid] = (
            [(rids_of[j], d) for d, j in enumerate(before, 1)],
            [(rids_of[j], d) for d, j in enumerate(later, 1)],
        )
        if times is not None:
            # In the order the statement's rows fill it (the candidate, then each side nearest first).
            times[rid] = (ats[p], session, agent, texts[p])
            for j in before:
                times[rids_of[j]] = (ats[j], session, agent, texts[j])
            for j in later:
                times[rids_of[j]] = (ats[j], session, agent, texts[j])
    return out


def _sides_uniform(
    line: Timeline, rids: Sequence[int], later: int, reach: int, out: Sides, times: Times | None
) -> None:
    """:func:`sides_in` of a uniform timeline without expiries: each rid's ``reach`` nearest positions before it
    and ``later`` after it, the same lists and the same ``times`` (filled in the same order), in one loop per side.
    """
    rids_of, ats, sessions, agents, texts = line.rids, line.ats, line.sessions, line.agents, line.texts
    at = line.at
    last = len(rids_of) - 1
    for rid in sorted(set(rids)):
        p = at[rid]
        session, agent = sessions[p], agents[p]
        if times is not None:
            times[rid] = (ats[p], session, agent, texts[p])
        before: list[tuple[int, int]] = []
        for d in range(1, (reach if p >= reach else p) + 1):
            j = p - d
            other = rids_of[j]
            before.append((other, d))
            if times is not None:
                times[other] = (ats[j], session, agent, texts[j])
        after: list[tuple[int, int]] = []
        for d in range(1, (later if p + later <= last else last - p) + 1):
            j = p + d
            other = rids_of[j]
            after.append((other, d))
            if times is not None:
                times[other] = (ats[j], session, agent, texts[j])
        out[rid] = (before, after)


def near_in(line: Timeline, rids: Sequence[int], *, window: int, scan: int) -> dict[int, list[tuple[int, int]]] | None:
    """rid -> its neighbours, before (nearest first) then after: what :func:`sides_in` answers without
    ``times``, joined as :func:`~._search.neighbours` joins them, in C-level passes over every rid at once.

    Only for a uniform timeline without expiry whose ``rids`` all lie at least ``min(window, scan)``
    positions from either end (then each has that many on each side); None for anything else (the
    caller asks :func:`sides_in`). Rids come out in ascending order, once each.
    """
    reach = min(window, scan)
    if not line.uniform or line.mortal or reach < 1 or not rids:
        return None
    at = line.at
    keys = sorted(set(rids))
    maybe = list(map(at.get, keys))
    if None in maybe:
        return None
    ps = cast("list[int]", maybe)
    if min(ps) < reach or max(ps) + reach > len(line.rids) - 1:
        return None
    get = line.rids.__getitem__
    columns = [
        zip(map(get, map(operator.sub, ps, itertools.repeat(d))), itertools.repeat(d)) for d in range(1, reach + 1)
    ]
    columns += [
        zip(map(get, map(operator.add, ps, itertools.repeat(d))), itertools.repeat(d)) for d in range(1, reach + 1)
    ]
    return dict(zip(keys, map(list, zip(*columns, strict=True)), strict=True))


def close_in(line: Timeline, rids: Sequence[int], *, scan: int) -> list[int] | None:
    """:func:`~._search._close` from ``line`` (no statement): the ``rids`` with another of them among the user's
    ``scan`` nearest records on one side, in the order given; None when ``line`` lacks one of them.

    The same test as the statement's: for consecutive rids in ``(created_at, rid)`` order (positions here),
    the later one is close when fewer than ``scan`` records follow the earlier one or it was written no later
    than the ``scan``-th of them (the timeline holds all of the user's records, live or not, as the walk reads).
    """
    at = line.at
    maybe = list(map(at.get, rids))
    if None in maybe:
        return None
    ps = sorted(set(cast("list[int]", maybe)))
    ats, last, rids_of = line.ats, len(line.rids) - 1, line.rids
    close: set[int] = set()
    for p, q in itertools.pairwise(ps):
        if p + scan > last or ats[q] <= ats[p + scan]:
            close.add(rids_of[p])
            close.add(rids_of[q])
    return [rid for rid in rids if rid in close]
