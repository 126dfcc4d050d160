"""Records as rows and back, and vectors in pgvector's binary format.

Rows were validated on the way in (the guard's job), so records are built
from them without re-validating, as the SQLite store does.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryport._records import MemoryRecord, MemoryScope

from ._driver import Dumper, Format

if TYPE_CHECKING:
    import numpy.typing as npt

    F32 = npt.NDArray[np.float32]
else:
    F32 = Any

__all__ = ["COLUMNS", "F32", "Vector", "record_from_row", "vector_dumper", "words"]

#: The columns :func:`record_from_row` reads, in its order (table alias ``r``).
COLUMNS = "r.id, r.user_id, r.session_id, r.agent_id, r.text, r.metadata, r.created_at, r.expires_at, r.updated_at"

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> int:
    """A text's length in words, as BM25's document length."""
    return len(_WORD.findall(text))


class Vector:
    """A float32 row sent to pgvector in its binary format."""

    __slots__ = ("row",)

    def __init__(self, row: F32) -> None:
        self.row = row


def vector_dumper(oid: int) -> type[Dumper]:
    """A psycopg dumper writing :class:`Vector` as pgvector's binary ``vector`` (type ``oid``)."""

    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            row = np.asarray(obj.row, dtype=">f4")
            return struct.pack(">HH", row.shape[0], 0) + row.tobytes()

    VectorDumper.oid = oid
    return VectorDumper


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def record_from_row(row: Sequence[Any]) -> MemoryRecord:
    """The record of a row of :data:`COLUMNS`."""
    rid, user, session, agent, text, metadata, created, expires, updated = row
    values: dict[str, Any] = {
        "id": rid,
        "scope": MemoryScope.model_construct(user_id=user, session_id=session, agent_id=agent),
        "text": text,
        "metadata": dict(metadata) if metadata else {},
        "created_at": _utc(created),
        "expires_at": _utc(expires),
    }
    if "updated_at" in MemoryRecord.model_fields:
        values["updated_at"] = _utc(updated)
    return MemoryRecord.model_construct(**values)
