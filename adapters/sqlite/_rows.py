"""Records as rows and back: times in microseconds, the SQL of scopes and filters (``_where.py``).

Every SQL fragment here binds its values as parameters; nothing a caller passes
is spliced into SQL.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar, Union

from pydantic import BaseModel

from memoryport._records import MemoryRecord, MemoryScope

from ._where import Where, meta_row, where_sql

__all__ = [
    "COLUMNS",
    "FILE_ROW",
    "NEVER",
    "RID_BITS",
    "SLOT_MAX",
    "Cond",
    "Conn",
    "built",
    "ScopeKey",
    "covers",
    "dt",
    "expiry",
    "filter_sql",
    "fts_rowid",
    "meta_row",
    "next_generation",
    "record_from_row",
    "scope_key",
    "scope_sql",
    "slot_span",
    "tenant_token",
    "us",
    "us_all",
]

M = TypeVar("M", bound=BaseModel)
Conn = Any  # a DB-API connection of whichever driver was chosen
# Metadata filters (operators included) and a time range, or plain equality filters, or nothing.
Cond = Union[Where, Mapping[str, Any], None]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
NEVER = (1 << 63) - 1  # "no expiry" in the vector cache's int64 column

COLUMNS = (
    "r.rid, r.id, r.user_id, r.session_id, r.agent_id, r.text, r.metadata, r.created_at, r.expires_at, r.updated_at"
)


#: The ``generations`` row of the whole file (no tenant token is empty: they start with ``t``): its ``gen`` is the
#: file's generation counter, its ``n`` the file's record count. Kept beside the tenants' rows (schema 7; ``meta``
#: before), so that an add of a user of a small file updates one page of bookkeeping and one statement.
FILE_ROW = ""


def next_generation(conn: Conn) -> int:
    """The file's generation counter, advanced (in the caller's write transaction): a value never handed out."""
    return int(
        conn.execute(
            "INSERT INTO generations(tenant, gen, n) VALUES ('', 1, 0) "
            "ON CONFLICT(tenant) DO UPDATE SET gen = gen + 1 RETURNING gen"
        ).fetchone()[0]
    )


def us(value: datetime) -> int:
    """Microseconds since the epoch: how times are stored."""
    return (value - _EPOCH) // _US


def us_all(values: Iterable[datetime]) -> list[int]:
    """:func:`us` of each value (a batch's times in one comprehension, no call per value)."""
    return [(value - _EPOCH) // _US for value in values]


def dt(value: int) -> datetime:
    """The aware datetime of a stored time."""
    return _EPOCH + timedelta(0, 0, value)  # positional: the same timedelta, ~0.1 µs less than microseconds=


def expiry(record: MemoryRecord) -> int:
    """A record's ``expires_at`` as stored, :data:`NEVER` when it has none."""
    return NEVER if record.expires_at is None else us(record.expires_at)


@functools.lru_cache(maxsize=65_536)
def tenant_token(user_id: str | None) -> str:
    """The FTS5 token (and cache key) standing for a user: digits of a hash, never the id."""
    raw = b"\x00" if user_id is None else b"u" + user_id.encode("utf-8")
    return "t" + str(int.from_bytes(hashlib.sha256(b"memoryport-tenant\x00" + raw).digest()[:10], "big"))


# A record's FTS5 rowid is its user's slot (a small number per user, kept in
# `generations`) above its rid: each word's postings hold one user's records
# together, so a search reads the user's postings only (a rowid range), however
# many other users share the file. Slot 0 is the overflow beyond SLOT_MAX users
# (searched through the tenant token, as before slots).
RID_BITS = 40
SLOT_MAX = (1 << (63 - RID_BITS)) - 1


def fts_rowid(slot: int, rid: int) -> int:
    """The FTS5 rowid of record ``rid`` of a user in ``slot``."""
    if not 0 <= rid < 1 << RID_BITS:
        raise ValueError(f"record rowid {rid} is beyond the keyword index's {RID_BITS} bits")
    return (slot << RID_BITS) | rid


def slot_span(slot: int) -> tuple[int, int]:
    """The first and last FTS5 rowid of a slot."""
    return slot << RID_BITS, (slot << RID_BITS) | ((1 << RID_BITS) - 1)


def scope_sql(scope: MemoryScope, alias: str = "r") -> tuple[str, list[Any]]:
    """The rows a scope covers: its user (None included), and its session and agent where set."""
    conds = [f"{alias}.user_id IS ?"]
    params: list[Any] = [scope.user_id]
    if scope.session_id is not None:
        conds.append(f"{alias}.session_id = ?")
        params.append(scope.session_id)
    if scope.agent_id is not None:
        conds.append(f"{alias}.agent_id = ?")
        params.append(scope.agent_id)
    return " AND ".join(conds), params


def filter_sql(filters: Cond, alias: str = "r", created: str | None = None) -> tuple[str, list[Any]]:
    """Filters (operators included) and the time range as `` AND ...``, or ``""``; see ``_where.py``."""
    return where_sql(filters, alias, created)


# BaseModel's four slots, set through their descriptors (object.__setattr__ looks each one up by name).
_SLOTS = BaseModel.__dict__
_set_dict = _SLOTS["__dict__"].__set__
_set_fields = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__
_new = object.__new__

ScopeKey = tuple[str | None, str | None, str | None]


def built(cls: type[M], values: dict[str, Any]) -> M:
    """A model from values already valid and complete (every field given), without validation.

    What ``model_construct`` does, minus its walk over the fields' defaults:
    records read back from the file were validated on the way in, and
    re-validating (or even ``model_construct``) cost ~20-50 µs per hit, as much
    as ranking a few thousand vectors.
    """
    obj: M = _new(cls)
    _set_dict(obj, values)
    _set_fields(obj, set(values))
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def record_from_row(row: Sequence[Any], scopes: dict[ScopeKey, MemoryScope] | None = None) -> MemoryRecord:
    """The record of a row selected with :data:`COLUMNS`.

    ``scopes``: the scopes built so far for a run of rows (an export): records of one scope share one
    (frozen) :class:`MemoryScope` object, built once, so that comparing their scopes downstream (the
    guard's and the store's one-scope batch tests when the records are added elsewhere: ``copy``) is
    an identity test instead of a model comparison per record.
    """
    _, rid, user, session, agent, text, metadata, created, expires, updated = row
    if scopes is None:
        scope = built(MemoryScope, {"user_id": user, "session_id": session, "agent_id": agent})
    else:
        key = (user, session, agent)
        known = scopes.get(key)
        if known is None:
            known = scopes[key] = built(MemoryScope, {"user_id": user, "session_id": session, "agent_id": agent})
        scope = known
    return built(
        MemoryRecord,
        {
            "id": rid,
            "scope": scope,
            "text": text,
            "metadata": json.loads(metadata) if metadata else {},
            "created_at": dt(created),
            "expires_at": None if expires is None else dt(expires),
            "updated_at": None if updated is None else dt(updated),
        },
    )


def scope_key(scope: MemoryScope) -> ScopeKey:
    """A scope as a hashable key (the vector cache's)."""
    return scope.user_id, scope.session_id, scope.agent_id


def covers(key: ScopeKey, record: MemoryRecord) -> bool:
    """Whether the scope of ``key`` covers ``record``."""
    return MemoryScope.model_construct(user_id=key[0], session_id=key[1], agent_id=key[2]).covers(record.scope)
