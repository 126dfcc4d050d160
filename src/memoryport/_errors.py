"""The exception tree of memoryport.

Every error the package raises on purpose derives from :class:`MemoryportError`::

    MemoryportError
    ├── InvalidInput (ValueError)        bad records, scopes, queries, ids, filters
    ├── UnsupportedCapability            the backend cannot do what was asked
    ├── UsageError                       the API was called the wrong way
    │   └── EmbedderMismatch             a file was opened with another embedder
    ├── BackendError                     a backend or third-party SDK failed (chained)
    │   ├── EmbeddingError               an embedder failed
    │   ├── ModelError                   a language model failed or answered badly
    │   └── WalRemoved                   an SQLite store's -wal was removed under it; reopen it
    └── MissingExtra (ImportError)       an optional dependency is not installed

Error messages name fields and limits, never the stored texts.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "EmbedderMismatch",
    "EmbeddingError",
    "InvalidInput",
    "MemoryportError",
    "MissingExtra",
    "ModelError",
    "UnsupportedCapability",
    "UsageError",
    "WalRemoved",
]


class MemoryportError(Exception):
    """Root of every error memoryport raises on purpose."""


class InvalidInput(MemoryportError, ValueError):
    """Input was refused; nothing was stored or changed.

    Attributes:
        field: where the problem is, for example ``"records[2].text"``.
        limit: the name of the limit that was exceeded, when one was
            (for example ``"max_text_chars"``), else ``None``.

    Example:
        >>> from memoryport import MemoryScope, InvalidInput
        >>> try:
        ...     MemoryScope()
        ... except InvalidInput as exc:
        ...     print(exc.field)
        scope
    """

    def __init__(self, message: str, *, field: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.limit = limit


class UnsupportedCapability(MemoryportError):
    """The backend does not support what the call needs; it was not called.

    Attributes:
        capability: the missing capability's value, e.g. ``"session_scope"``.
        backend: the backend's name.
    """

    def __init__(self, message: str, *, capability: str, backend: str) -> None:
        super().__init__(message)
        self.capability = capability
        self.backend = backend


class UsageError(MemoryportError):
    """The API was used the wrong way (a missing scope, a sync call inside a loop, ...)."""


class EmbedderMismatch(UsageError):
    """A store was opened with an embedder other than the one its vectors came from."""


class BackendError(MemoryportError):
    """A backend or its SDK failed. The original exception is chained as ``__cause__``.

    Attributes:
        backend: the backend's name.
        operation: the port operation that failed (``"add"``, ``"search"``, ...).
    """

    def __init__(self, message: str, *, backend: str, operation: str) -> None:
        super().__init__(message)
        self.backend = backend
        self.operation = operation


class EmbeddingError(BackendError):
    """An embedder failed or returned rows of the wrong shape."""


class ModelError(BackendError):
    """A language model (a :class:`~memoryport.models.ModelPort`) failed or its answer was unusable.

    Messages and logs carry the reason and the error type, never the prompt or the answer.

    Attributes:
        reason: ``"timeout"``, ``"connect"`` (the server could not be reached),
            ``"http"`` (an error status), ``"malformed"`` (not a JSON object, or
            not the expected shape), ``"refused"`` (no content) or ``"error"``
            (the model's function raised).

    Example:
        >>> ModelError("model 'm' timed out", backend="m", reason="timeout").reason
        'timeout'
    """

    def __init__(self, message: str, *, backend: str, reason: str, operation: str = "complete") -> None:
        super().__init__(message, backend=backend, operation=operation)
        self.reason = reason


class WalRemoved(BackendError):
    """An SQLite store's ``-wal`` file was removed under it; the call wrote and read nothing. Reopen the store.

    Another copy of SQLite in the same process (Python's ``sqlite3`` while the
    store uses ``pysqlite3``, say) opened the file and closed it: it does not see
    the store's locks, so it took itself for the file's last user, copied the
    WAL into the file and deleted it. The store's connections would write into
    the deleted file (lost at close) and read without seeing other processes'
    writes, so every read and write of that store raises this instead. What it
    acknowledged before is in the file: close the store and open it again.
    On Linux a store holds locks that keep its ``-wal`` from being deleted, so
    this is raised only where those are missing (macOS, the BSDs) or could
    not be taken.

    Example:
        >>> from memoryport import BackendError, WalRemoved
        >>> issubclass(WalRemoved, BackendError)
        True
    """


class MissingExtra(MemoryportError, ImportError):
    """An optional dependency is missing; the message holds the exact install line.

    Attributes:
        extra: the name of the extra, e.g. ``"mem0"``.
    """

    def __init__(self, extra: str, *, package: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the optional dependency {package!r}, which is not installed. "
            f'Install it with: pip install "memoryport[{extra}]"'
        )
        self.extra = extra
        self.package = package
