"""API keys: created and revoked with the CLI, hashed at rest, each mapped to a principal."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import stat
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .._errors import InvalidInput, UsageError
from .._records import MemoryScope

__all__ = ["ApiKey", "KeyStore", "NewKey", "Principal"]

_PREFIX = "mpk_"
_ID_CHARS = 12

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    hash BLOB NOT NULL,
    user_id TEXT,
    admin INTEGER NOT NULL DEFAULT 0,
    label TEXT NOT NULL DEFAULT '',
    rate_per_minute INTEGER,
    created_at TEXT NOT NULL,
    revoked_at TEXT
)
"""


@dataclass(frozen=True)
class Principal:
    """Who is calling, as the key says: the user whose memory it is, or an admin.

    Attributes:
        key_id: the key's public id (the part of the key before the secret; safe to log).
        user_id: the user an ordinary key acts for; ``None`` for an admin key.
        admin: whether the key may act for any user (always logged).
        rate_per_minute: this key's own request budget, or ``None`` for the server's default.

    Example:
        >>> Principal(key_id="k1", user_id="ann", admin=False).user_id
        'ann'
    """

    key_id: str
    user_id: str | None
    admin: bool = False
    rate_per_minute: int | None = None


@dataclass(frozen=True)
class ApiKey:
    """A stored key as ``memoryport keys list`` shows it; the secret itself is never kept.

    Example:
        >>> ApiKey("k1", "ann", False, "laptop", None, "2026-01-01T00:00:00+00:00", None).active
        True
    """

    id: str
    user_id: str | None
    admin: bool
    label: str
    rate_per_minute: int | None
    created_at: str
    revoked_at: str | None

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


@dataclass(frozen=True)
class NewKey:
    """A key just created: ``secret`` is shown once and cannot be recovered later.

    Example:
        >>> new = KeyStore(":memory:").create(user_id="ann")    # doctest: +SKIP
        >>> new.secret.startswith("mpk_")                        # doctest: +SKIP
        True
    """

    key: ApiKey
    secret: str


def _digest(secret: str) -> bytes:
    # Keys are 256-bit random tokens, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(secret.encode("utf-8")).digest()


class KeyStore:
    """The API keys of a server, in their own SQLite file (owner-only on POSIX).

    Only a SHA-256 digest of each secret is stored. A key reads
    ``mpk_<id>_<secret>``; the id is public (logs, ``keys list``), the secret is not.

    Args:
        path: the keys file (created on first use), or ``":memory:"`` for tests.

    Example:
        >>> keys = KeyStore("keys.db")                           # doctest: +SKIP
        >>> new = keys.create(user_id="ann", label="ann's laptop")  # doctest: +SKIP
        >>> keys.authenticate(new.secret).user_id                # doctest: +SKIP
        'ann'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = str(path)
        self._lock = threading.Lock()
        if self._path != ":memory:":
            target = Path(self._path)
            if target.is_dir():
                raise UsageError(f"{target} is a directory; the keys file must be a file")
            if not target.parent.exists():
                raise UsageError(f"the folder {target.parent} does not exist")
            if not target.exists():
                fd = os.open(target, os.O_CREAT | os.O_WRONLY, stat.S_IRUSR | stat.S_IWUSR)
                os.close(fd)
        self._db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout = 5000")
        self._db.execute(_SCHEMA)

    @property
    def path(self) -> str:
        """Where the keys live."""
        return self._path

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    def create(
        self,
        *,
        user_id: str | None = None,
        admin: bool = False,
        label: str = "",
        rate_per_minute: int | None = None,
    ) -> NewKey:
        """A new key for ``user_id`` (or an admin key with ``admin=True`` and no user).

        Raises:
            InvalidInput: a bad user id, both or neither of user and admin, a bad rate.

        Example:
            >>> KeyStore(":memory:").create(user_id="ann").key.user_id
            'ann'
        """
        if admin == (user_id is not None):
            raise InvalidInput("a key is either for one user (user_id) or an admin key (admin=True)", field="user_id")
        if user_id is not None:
            MemoryScope(user_id=user_id)  # the same id rules as every scope
        if rate_per_minute is not None and (
            isinstance(rate_per_minute, bool) or not isinstance(rate_per_minute, int) or rate_per_minute < 1
        ):
            raise InvalidInput("rate_per_minute must be a positive integer or None", field="rate_per_minute")
        if not isinstance(label, str) or len(label) > 200 or any(ord(c) < 32 for c in label):
            raise InvalidInput("label must be a printable string of at most 200 characters", field="label")
        key_id = secrets.token_hex(_ID_CHARS // 2)
        secret = f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock:
            self._db.execute(
                "INSERT INTO api_keys (id, hash, user_id, admin, label, rate_per_minute, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key_id, _digest(secret), user_id, int(admin), label, rate_per_minute, now),
            )
        return NewKey(ApiKey(key_id, user_id, admin, label, rate_per_minute, now, None), secret)

    def list(self, *, include_revoked: bool = False) -> list[ApiKey]:
        """The keys, oldest first (revoked ones too with ``include_revoked=True``).

        Example:
            >>> KeyStore(":memory:").list()
            []
        """
        sql = "SELECT id, user_id, admin, label, rate_per_minute, created_at, revoked_at FROM api_keys"
        if not include_revoked:
            sql += " WHERE revoked_at IS NULL"
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY rowid").fetchall()
        return [ApiKey(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6]) for r in rows]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by its id (``mpk_<id>_...``); ``False`` if there is no such active key.

        Example:
            >>> KeyStore(":memory:").revoke("0123456789ab")
            False
        """
        if key_id.startswith(_PREFIX):
            key_id = key_id[len(_PREFIX) :].split("_", 1)[0]
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock:
            cur = self._db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (now, key_id)
            )
        return cur.rowcount > 0

    def authenticate(self, secret: str | None) -> Principal | None:
        """The principal of an active key, or ``None`` (unknown, malformed and revoked alike).

        Example:
            >>> KeyStore(":memory:").authenticate("mpk_nope") is None
            True
        """
        if not isinstance(secret, str) or not secret.startswith(_PREFIX) or len(secret) > 200:
            return None
        key_id, sep, _ = secret[len(_PREFIX) :].partition("_")
        if not sep or len(key_id) != _ID_CHARS:
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT hash, user_id, admin, rate_per_minute, revoked_at FROM api_keys WHERE id = ?", (key_id,)
            ).fetchone()
        # Compare a digest even when the id is unknown, so timing says nothing about which ids exist.
        stored = row[0] if row is not None else b"\0" * 32
        if not hmac.compare_digest(stored, _digest(secret)) or row is None or row[4] is not None:
            return None
        return Principal(key_id=key_id, user_id=row[1], admin=bool(row[2]), rate_per_minute=row[3])
