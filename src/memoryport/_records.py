"""Records: scopes, memories, hits, and the input limits the guard enforces."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._errors import InvalidInput

__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "MemoryHit",
    "MemoryRecord",
    "MemoryScope",
    "MemoryUpdate",
    "MetadataValue",
    "SearchMode",
    "new_id",
    "new_ids",
    "utcnow",
]

MetadataValue = Union[str, int, float, bool, None]
"""A metadata value: a JSON scalar."""

SearchMode = Literal["keyword", "vector", "hybrid", "recent", "backend"]
"""How a search ranked: a hit's ``signal`` and a search's ``mode`` (``"backend"``: the store's own ranking)."""


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(timezone.utc)


def new_id() -> str:
    """A fresh record id: a UUIDv7 as 32 hex characters (the form of ``uuid.UUID(...).hex``).

    See :func:`new_ids`.

    Example:
        >>> a, b = new_id(), new_id()
        >>> len(a), a != b, int(a[12], 16)
        (32, True, 7)
    """
    # One id without new_ids' batch slicing: the same layout from one 10-byte read.
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits, 74 of them used
    value = (
        (time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76
        | (rand >> 68) << 64  # rand_a: 12 bits
        | 0b10 << 62
        | rand & 0x3FFF_FFFF_FFFF_FFFF  # rand_b: 62 bits
    )
    return f"{value:032x}"


# RFC 9562's version (7) and variant (binary 10) bits, set on random bytes by bytes.translate.
_VERSION = bytes(0x70 | (b & 0x0F) for b in range(256))
_VARIANT = bytes(0x80 | (b & 0x3F) for b in range(256))


def new_ids(n: int) -> list[str]:
    """``n`` fresh record ids: UUIDv7 (RFC 9562) as 32 hex characters each, from one read of the OS's random source.

    48 bits of Unix time in milliseconds, then the version and variant bits, then
    74 random bits (``os.urandom``) per id. Ids made later sort later (to the
    millisecond), so a store's index of ids grows at its end instead of at random
    places: a batch of 1,000 touches a few index pages, not hundreds (SQLite's
    bulk add, docs/benchmarks-sqlite.md). The time in an id is when the guard
    stored the record; the record's ``created_at`` says as much or more.

    Example:
        >>> ids = new_ids(3)
        >>> [len(i) for i in ids], len(set(ids)), {i[12] for i in ids}
        ([32, 32, 32], 3, {'7'})
    """
    raw = bytearray(os.urandom(16 * n))
    stamp = (time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF).to_bytes(6, "big")
    for k in range(6):  # the same 6 time bytes at the head of every id
        raw[k::16] = stamp[k : k + 1] * n
    raw[6::16] = raw[6::16].translate(_VERSION)
    raw[8::16] = raw[8::16].translate(_VARIANT)
    text = raw.hex()
    return [text[k : k + 32] for k in range(0, 32 * n, 32)]


_set = object.__setattr__
_new = object.__new__
# BaseModel's slots, set through their descriptors (cheaper than object.__setattr__ by name).
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def with_id(record: MemoryRecord, record_id: str | None) -> MemoryRecord:
    """``record.model_copy(update={"id": record_id})``, without pydantic's generic copy (several times cheaper).

    For the guard, which gives every record of a batch without an id a fresh
    one, and for ``copy_memories``, which takes the ids off (``None``): the
    same object ``model_copy`` builds (a shallow copy: same field values,
    ``id`` replaced and counted as set, no validation), for a plain
    :class:`MemoryRecord`; a subclass goes through ``model_copy`` itself.

    Example:
        >>> r = MemoryRecord(scope=MemoryScope(user_id="ann"), text="tea")
        >>> with_id(r, "r1") == r.model_copy(update={"id": "r1"})
        True
    """
    if type(record) is not MemoryRecord or record.__pydantic_private__ is not None:
        return record.model_copy(update={"id": record_id})
    copy = _new(MemoryRecord)
    values = record.__dict__.copy()
    values["id"] = record_id
    _set(copy, "__dict__", values)
    _set_fields(copy, record.__pydantic_fields_set__ | {"id"})
    _set_extra(copy, None)
    _set_private(copy, None)
    return copy


def pseudonym(value: str, *, prefix: str, hash_key: bytes | str | None = None) -> str:
    """``prefix`` + the hex SHA-256 of ``value`` (its HMAC-SHA-256 under ``hash_key`` when given).

    How adapters name a user in a third-party service without handing it the
    user id itself; with a key the name cannot be guessed from a known id.

    Example:
        >>> pseudonym("ann", prefix="mp-")[:9]
        'mp-49915e'
    """
    data = value.encode("utf-8")
    if hash_key is None:
        return prefix + hashlib.sha256(data).hexdigest()
    key = hash_key.encode("utf-8") if isinstance(hash_key, str) else hash_key
    return prefix + hmac.new(key, data, hashlib.sha256).hexdigest()


# Unicode's control characters (category Cc) are exactly U+0000-U+001F and U+007F-U+009F;
# lone surrogates cannot be encoded as UTF-8. One regex pass instead of a Python loop per character.
_BAD_ANY = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_BAD_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _bad_chars(value: str, *, allow_whitespace_controls: bool) -> str | None:
    """Name the first unacceptable character class in ``value``, if any.

    ``allow_whitespace_controls`` lets tab, newline and carriage return through (texts);
    every other control character is refused everywhere.
    """
    found = (_BAD_TEXT if allow_whitespace_controls else _BAD_ANY).search(value)
    if found is None:
        return None
    ch = found.group()
    if ch == "\x00":
        return "a NUL character"
    if 0xD800 <= ord(ch) <= 0xDFFF:
        return "a lone surrogate (not encodable as UTF-8)"
    return "a control character"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_utf8(value: str, field: str) -> None:
    # One regex pass, not a Python loop per character (every search's query comes here).
    if _SURROGATE.search(value) is not None:
        raise ValueError(f"{field} contains a lone surrogate (not encodable as UTF-8)")


class _Model(BaseModel):
    """Base model whose validation failures raise :class:`InvalidInput`."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False, defer_build=True)

    if not TYPE_CHECKING:

        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise _invalid(exc, type(self).__name__) from None

        @classmethod
        def model_validate(cls, obj: Any, **kwargs: Any) -> Any:
            try:
                return super().model_validate(obj, **kwargs)
            except ValidationError as exc:
                raise _invalid(exc, cls.__name__) from None

        @classmethod
        def model_validate_json(cls, json_data: Any, **kwargs: Any) -> Any:
            try:
                return super().model_validate_json(json_data, **kwargs)
            except ValidationError as exc:
                raise _invalid(exc, cls.__name__) from None


_FIELD_NAMES = {"MemoryScope": "scope", "MemoryRecord": "record", "MemoryHit": "hit", "MemoryUpdate": "change"}


def _invalid(exc: ValidationError, model: str) -> InvalidInput:
    """Turn pydantic's error into ours, without echoing the input value."""
    err = exc.errors(include_url=False, include_input=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    field = f"{_FIELD_NAMES.get(model, model)}.{loc}" if loc else _FIELD_NAMES.get(model, model)
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return InvalidInput(f"{field}: {msg}", field=field)


class MemoryScope(_Model):
    """Whose memory this is: an end user, a session (chat) and/or an agent.

    At least one id must be set. A query scope *covers* a record's scope when
    the user ids are equal (both may be ``None``) and the session and agent ids
    are equal wherever the query sets them.

    Example:
        >>> ann = MemoryScope(user_id="ann")
        >>> ann.covers(MemoryScope(user_id="ann", session_id="s1"))
        True
        >>> MemoryScope(user_id="ann", session_id="s1").covers(MemoryScope(user_id="ann"))
        False
        >>> ann.covers(MemoryScope(user_id="ben"))
        False
        >>> MemoryScope(user_id="ann", session_id="s1").kind
        'user+session'
    """

    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None

    @field_validator("user_id", "session_id", "agent_id")
    @classmethod
    def _check_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must be a non-empty string or None")
        bad = _bad_chars(value, allow_whitespace_controls=False)
        if bad:
            raise ValueError(f"must not contain {bad}")
        return value

    @model_validator(mode="after")
    def _at_least_one(self) -> MemoryScope:
        if self.user_id is None and self.session_id is None and self.agent_id is None:
            raise ValueError("at least one of user_id, session_id, agent_id must be set")
        return self

    def covers(self, other: MemoryScope) -> bool:
        """Whether a query in this scope may see a record stored in ``other``."""
        if self.user_id != other.user_id:
            return False
        if self.session_id is not None and self.session_id != other.session_id:
            return False
        return self.agent_id is None or self.agent_id == other.agent_id

    @property
    def kind(self) -> str:
        """Which ids are set, joined by ``+`` (``"user"``, ``"user+session"``, ...)."""
        return _SCOPE_KINDS[self.user_id is not None, self.session_id is not None, self.agent_id is not None]


# MemoryScope.kind by which of user, session and agent are set (every guarded call asks).
_SCOPE_KINDS = {
    (user, session, agent): "+".join(
        name for name, present in (("user", user), ("session", session), ("agent", agent)) if present
    )
    for user in (False, True)
    for session in (False, True)
    for agent in (False, True)
}


def _aware_utc(value: datetime, field: str) -> datetime:
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"{field} must be timezone-aware (got a naive datetime)")
    return value.astimezone(timezone.utc)


class MemoryRecord(_Model):
    """One memory: a text in a scope, with optional flat metadata and an expiry.

    ``id`` is assigned on add when absent. ``created_at`` defaults to now and is
    normalised to UTC; ``expires_at``, when set, must come after it.

    Example:
        >>> r = MemoryRecord(scope=MemoryScope(user_id="ann"), text="Ann likes green tea",
        ...                  metadata={"kind": "preference"})
        >>> r.created_at.tzinfo is not None
        True
    """

    id: str | None = None
    scope: MemoryScope
    text: str
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime | None = None
    updated_at: datetime | None = None
    """When the record was last changed by ``update`` (``None`` until then)."""

    @field_validator("id")
    @classmethod
    def _check_record_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must be a non-empty string or None")
        bad = _bad_chars(value, allow_whitespace_controls=False)
        if bad:
            raise ValueError(f"must not contain {bad}")
        return value

    @field_validator("text")
    @classmethod
    def _check_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty or only whitespace")
        bad = _bad_chars(value, allow_whitespace_controls=True)
        if bad:
            raise ValueError(f"must not contain {bad}")
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _check_metadata(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError("must be a flat mapping of str to JSON scalars")
        for key, item in value.items():
            if not isinstance(key, str) or not key:
                raise ValueError("keys must be non-empty strings")
            bad = _bad_chars(key, allow_whitespace_controls=False)
            if bad:
                raise ValueError(f"key must not contain {bad}")
            check_scalar(item, f"value of {key!r}")
        return dict(value)

    @field_validator("created_at")
    @classmethod
    def _check_created(cls, value: datetime) -> datetime:
        return _aware_utc(value, "created_at")

    @field_validator("expires_at")
    @classmethod
    def _check_expires(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _aware_utc(value, "expires_at")

    @field_validator("updated_at")
    @classmethod
    def _check_updated(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _aware_utc(value, "updated_at")

    @model_validator(mode="after")
    def _expiry_after_creation(self) -> MemoryRecord:
        if self.expires_at is not None and self.expires_at <= self.created_at:
            raise ValueError("expires_at must be after created_at")
        return self

    def is_expired(self, now: datetime) -> bool:
        """Whether ``expires_at`` has passed at ``now``."""
        return self.expires_at is not None and self.expires_at <= now


class MemoryUpdate(_Model):
    """A change to one stored record, by id: its text, metadata and/or expiry.

    Fields not given are left as they are; ``metadata`` replaces the whole
    mapping; ``expires_at=None`` given explicitly clears the expiry. The id,
    scope and ``created_at`` never change (moving a record to another scope is
    a copy and a delete); the store sets ``updated_at``.

    Example:
        >>> change = MemoryUpdate(id="3f0c", text="Ann now drinks black tea")
        >>> sorted(change.changed)
        ['text']
        >>> sorted(MemoryUpdate(id="3f0c", expires_at=None).changed)
        ['expires_at']
    """

    id: str
    text: str | None = None
    metadata: dict[str, MetadataValue] | None = None
    expires_at: datetime | None = None

    @field_validator("id")
    @classmethod
    def _check_update_id(cls, value: str) -> str:
        checked = MemoryRecord._check_record_id(value)
        assert checked is not None
        return checked

    @field_validator("text")
    @classmethod
    def _check_update_text(cls, value: str | None) -> str | None:
        if value is None:
            raise ValueError("must be a non-empty string (leave it out to keep the text)")
        return MemoryRecord._check_text(value)

    @field_validator("metadata", mode="before")
    @classmethod
    def _check_update_metadata(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must be a mapping ({} clears it; leave it out to keep it)")
        return MemoryRecord._check_metadata(value)

    @field_validator("expires_at")
    @classmethod
    def _check_update_expires(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _aware_utc(value, "expires_at")

    @property
    def changed(self) -> frozenset[str]:
        """The fields this update sets (``text``, ``metadata``, ``expires_at``)."""
        return frozenset(self.model_fields_set - {"id"})

    def apply(self, record: MemoryRecord, now: datetime) -> MemoryRecord:
        """``record`` with these changes and ``updated_at=now`` (id, scope, created_at kept).

        Stores without an update of their own can write this back.
        """
        values: dict[str, Any] = {name: getattr(self, name) for name in self.changed}
        values["updated_at"] = max(now, record.created_at)
        return record.model_copy(update=values)


def check_scalar(item: Any, what: str) -> None:
    if item is None or isinstance(item, bool):
        return
    if isinstance(item, int):
        if item.bit_length() > 63:
            try:
                str(item)  # metadata is stored and compared as JSON text
            except ValueError:
                raise ValueError(
                    f"{what} is an integer of more digits than Python writes as text "
                    f"(sys.get_int_max_str_digits() = {sys.get_int_max_str_digits()}); store it as a string"
                ) from None
        return
    if isinstance(item, float):
        if not math.isfinite(item):
            raise ValueError(f"{what} must be a finite number")
        return
    if isinstance(item, str):
        _check_utf8(item, what)
        if "\x00" in item:
            raise ValueError(f"{what} must not contain a NUL character")
        return
    raise ValueError(f"{what} must be a JSON scalar (str, int, float, bool or None)")


class MemoryHit(_Model):
    """A search result: the record, its score (higher is better) and its signal.

    Example:
        >>> rec = MemoryRecord(scope=MemoryScope(user_id="ann"), text="tea")
        >>> MemoryHit(record=rec, score=0.5, signal="keyword").score
        0.5
    """

    record: MemoryRecord
    score: float
    signal: SearchMode = "backend"

    @field_validator("score")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


@dataclass(frozen=True)
class Limits:
    """Bounds on input, enforced by :class:`~memoryport.GuardedMemory` on the way in.

    Records check their own shape (non-empty text, no NUL, aware times, ...);
    these bounds are the configurable part. A violation raises
    :class:`~memoryport.InvalidInput` naming the field and the limit.

    Example:
        >>> from memoryport import Limits
        >>> Limits(max_text_chars=2_000).max_text_chars
        2000
    """

    max_text_chars: int = 32_000
    max_query_chars: int = 32_000
    max_id_chars: int = 256
    max_metadata_keys: int = 32
    max_metadata_key_chars: int = 64
    max_metadata_bytes: int = 8_192
    max_batch: int = 10_000
    max_k: int = 1_000
    max_ids: int = 10_000
    max_filter_values: int = 1_000
    clock_skew: timedelta = timedelta(seconds=5)

    def check_scope(self, scope: MemoryScope, field: str = "scope") -> None:
        """Refuse scope ids longer than ``max_id_chars``."""
        for name in ("user_id", "session_id", "agent_id"):
            value = getattr(scope, name)
            if value is not None and len(value) > self.max_id_chars:
                raise InvalidInput(
                    f"{field}.{name} is {len(value):,} characters; "
                    f"the limit is {self.max_id_chars:,} (Limits.max_id_chars)",
                    field=f"{field}.{name}",
                    limit="max_id_chars",
                )

    def check_id(self, value: object, field: str) -> str:
        """Return ``value`` if it is an acceptable record id, else raise."""
        if not isinstance(value, str) or not value:
            raise InvalidInput(f"{field} must be a non-empty string", field=field)
        if len(value) > self.max_id_chars:
            raise InvalidInput(
                f"{field} is {len(value):,} characters; the limit is {self.max_id_chars:,} (Limits.max_id_chars)",
                field=field,
                limit="max_id_chars",
            )
        bad = _bad_chars(value, allow_whitespace_controls=False)
        if bad:
            raise InvalidInput(f"{field} must not contain {bad}", field=field)
        return value

    def check_metadata(self, metadata: Mapping[str, Any], field: str) -> None:
        """Refuse metadata with too many keys, long keys or too many bytes."""
        if len(metadata) > self.max_metadata_keys:
            raise InvalidInput(
                f"{field} has {len(metadata)} keys; the limit is {self.max_metadata_keys} (Limits.max_metadata_keys)",
                field=field,
                limit="max_metadata_keys",
            )
        for key in metadata:
            if len(key) > self.max_metadata_key_chars:
                raise InvalidInput(
                    f"{field} has a key of {len(key)} characters; the limit is "
                    f"{self.max_metadata_key_chars} (Limits.max_metadata_key_chars)",
                    field=field,
                    limit="max_metadata_key_chars",
                )
        size = len(json.dumps(dict(metadata), ensure_ascii=False).encode("utf-8"))
        if size > self.max_metadata_bytes:
            raise InvalidInput(
                f"{field} is {size:,} bytes as JSON; the limit is "
                f"{self.max_metadata_bytes:,} (Limits.max_metadata_bytes)",
                field=field,
                limit="max_metadata_bytes",
            )

    def check_record(self, record: MemoryRecord, field: str, now: datetime, *, scope: bool = True) -> None:
        """Apply every bound to one record about to be stored (``scope=False``: its scope is checked already)."""
        if record.id is not None:
            self.check_id(record.id, f"{field}.id")
        if scope:
            self.check_scope(record.scope, f"{field}.scope")
        if len(record.text) > self.max_text_chars:
            raise InvalidInput(
                f"{field}.text is {len(record.text):,} characters; the limit is "
                f"{self.max_text_chars:,} (Limits.max_text_chars)",
                field=f"{field}.text",
                limit="max_text_chars",
            )
        if record.metadata:
            self.check_metadata(record.metadata, f"{field}.metadata")
        if record.created_at > now + self.clock_skew:
            raise InvalidInput(
                f"{field}.created_at is in the future; records may not be dated "
                f"later than now (tolerance Limits.clock_skew = {self.clock_skew})",
                field=f"{field}.created_at",
                limit="clock_skew",
            )


DEFAULT_LIMITS = Limits()
