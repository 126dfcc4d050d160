"""What a SQLite query adds to its WHERE for metadata filters (with operators) and a time range.

Metadata lives in the typed side table ``record_meta(rid, key, tag, value)``; the
tag keeps JSON types apart (``z`` null, ``b`` bool, ``n`` number, ``N`` an
integer beyond 64 bits kept as text, ``s`` string), so ``1``, ``"1"`` and
``True`` never match each other while ``1`` and ``1.0`` do. Every value is a
bound parameter; keys and operators never reach the SQL text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from memoryport._records import MetadataValue

__all__ = ["Where", "meta_row", "where_sql"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_BIG = 1 << 63
_SQL_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def meta_row(key: str, value: MetadataValue) -> tuple[str, str, Any]:
    """(key, tag, value) for the metadata side table; the tag keeps JSON types apart."""
    if value is None:
        return key, "z", None
    if isinstance(value, bool):
        return key, "b", int(value)
    if isinstance(value, int):
        return (key, "N", str(value)) if not -_BIG <= value < _BIG else (key, "n", value)
    if isinstance(value, float):
        return key, "n", value
    return key, "s", value


@dataclass(frozen=True)
class Where:
    """A search's metadata filters and ``created_at`` range, in microseconds since the epoch."""

    filters: Mapping[str, Any] | None = None
    since: int | None = None
    until: int | None = None

    @classmethod
    def of(cls, filters: Mapping[str, Any] | None, since: datetime | None, until: datetime | None) -> Where | None:
        """``None`` when there is nothing to restrict (the fast paths stay untouched)."""
        if not filters and since is None and until is None:
            return None
        return cls(
            filters or None,
            None if since is None else (since - _EPOCH) // _US,
            None if until is None else (until - _EPOCH) // _US,
        )

    def __bool__(self) -> bool:
        return bool(self.filters) or self.since is not None or self.until is not None


def _exists(alias: str, cond: str) -> str:
    return f"EXISTS (SELECT 1 FROM record_meta m WHERE m.rid = {alias}.rid AND m.key = ?{cond})"


def _equal(values: list[Any]) -> tuple[str, list[Any]]:
    """`` AND (...)``: the side-table row holds one of ``values`` (JSON-typed)."""
    if not values:
        return " AND 0", []
    parts: list[str] = []
    params: list[Any] = []
    for value in values:
        _, tag, stored = meta_row("", value)
        parts.append("(m.tag = ? AND m.value IS ?)")
        params.extend((tag, stored))
    return f" AND ({' OR '.join(parts)})", params


def _compare(op: str, operand: Any) -> tuple[str, list[Any]]:
    sign = _SQL_COMPARE[op]
    if isinstance(operand, str):
        # TEXT compares by memcmp of UTF-8 (BINARY collation): code point order, as in Python.
        return f" AND m.tag = 's' AND m.value {sign} ?", [operand]
    # Operands are within ±2**63 (checked by the guard), so an integer kept as text
    # (beyond 64 bits) is above every operand when positive and below when negative.
    huge = "<> '-'" if op in ("$gt", "$gte") else "= '-'"
    return f" AND ((m.tag = 'n' AND m.value {sign} ?) OR (m.tag = 'N' AND substr(m.value, 1, 1) {huge}))", [operand]


def _condition(key: str, condition: Any, alias: str) -> tuple[list[str], list[Any]]:
    if not isinstance(condition, Mapping):
        condition = {"$eq": condition}
    sql: list[str] = []
    params: list[Any] = []
    for op, operand in condition.items():
        if op == "$exists":
            sql.append(("" if operand else "NOT ") + _exists(alias, ""))
            params.append(key)
        elif op in ("$eq", "$ne", "$in", "$nin"):
            values = list(operand) if op in ("$in", "$nin") else [operand]
            cond, cparams = _equal(values)
            sql.append(("NOT " if op in ("$ne", "$nin") else "") + _exists(alias, cond))
            params.extend((key, *cparams))
        else:
            cond, cparams = _compare(op, operand)
            sql.append(_exists(alias, cond))
            params.extend((key, *cparams))
    return sql, params


def where_sql(
    where: Where | Mapping[str, Any] | None, alias: str = "r", created: str | None = None
) -> tuple[str, list[Any]]:
    """`` AND ...`` restricting rows of ``alias`` (``created``: its created_at column), and the parameters."""
    if where is None:
        return "", []
    if not isinstance(where, Where):
        where = Where(where)
    created = created or f"{alias}.created_at"
    sql: list[str] = []
    params: list[Any] = []
    if where.since is not None:
        sql.append(f"{created} >= ?")
        params.append(where.since)
    if where.until is not None:
        sql.append(f"{created} < ?")
        params.append(where.until)
    for key, condition in (where.filters or {}).items():
        csql, cparams = _condition(key, condition, alias)
        sql.extend(csql)
        params.extend(cparams)
    return "".join(f" AND {part}" for part in sql), params
