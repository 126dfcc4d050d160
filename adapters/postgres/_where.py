"""The SQL of a PostgreSQL query's WHERE: the scope, metadata filters (with operators), liveness, time ranges.

Every value is a bound parameter (``%s``); keys and operators never reach the
SQL text. The scope's conditions are in every query (row-level security is the
second wall behind them, see ``_connection.py``); search, update and erasure
all take them from :func:`scope_sql` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from memoryport._errors import InvalidInput
from memoryport._records import MemoryScope

from ._driver import Jsonb

__all__ = ["Sql", "filter_sql", "live_sql", "range_sql", "scope_sql", "tenant"]


def tenant(user_id: str | None) -> str:
    """The value of ``memoryport.tenant`` for a user (the RLS key): ``u:<id>`` or ``none``."""
    return "none" if user_id is None else "u:" + user_id


class Sql:
    """A WHERE clause and its positional parameters, built piece by piece (values never spliced)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.params: list[Any] = []

    def add(self, part: str, *params: Any) -> Sql:
        self.parts.append(part)
        self.params.extend(params)
        return self

    @property
    def text(self) -> str:
        return " AND ".join(self.parts) if self.parts else "TRUE"


def scope_sql(scope: MemoryScope, a: str = "r") -> Sql:
    """The scope's conditions: user equality (``IS NULL`` for none), session and agent where set."""
    q = Sql()
    if scope.user_id is None:
        q.add(f"{a}.user_id IS NULL")
    else:
        q.add(f"{a}.user_id = %s", scope.user_id)
    if scope.session_id is not None:
        q.add(f"{a}.session_id = %s", scope.session_id)
    if scope.agent_id is not None:
        q.add(f"{a}.agent_id = %s", scope.agent_id)
    return q


def range_sql(q: Sql, since: datetime | None, until: datetime | None, a: str = "r") -> Sql:
    """``since`` inclusive, ``until`` exclusive, on ``created_at``."""
    if since is not None:
        q.add(f"{a}.created_at >= %s", since)
    if until is not None:
        q.add(f"{a}.created_at < %s", until)
    return q


def live_sql(q: Sql, now: datetime, retention: timedelta | None, a: str = "r") -> Sql:
    """Not expired at ``now``, and within the retention period when there is one."""
    q.add(f"({a}.expires_at IS NULL OR {a}.expires_at > %s)", now)
    if retention is not None:
        q.add(f"{a}.created_at >= %s", now - retention)
    return q


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def filter_sql(q: Sql, filters: Mapping[str, Any] | None, a: str = "r") -> Sql:
    """Metadata conditions: a plain value is equality; operator dicts as in :mod:`memoryport` filters.

    JSON equality keeps types apart (``1`` vs ``"1"`` vs ``true``; ``1 == 1.0``);
    comparisons hold only between values of the same kind, strings by code point.
    """
    for key, condition in (filters or {}).items():
        ops = dict(condition) if isinstance(condition, Mapping) else {"$eq": condition}
        for op, operand in ops.items():
            value = f"({a}.metadata -> %s)"
            if op == "$eq":
                q.add(f"{value} = %s", key, Jsonb(operand))
            elif op == "$ne":
                q.add(f"{value} IS DISTINCT FROM %s", key, Jsonb(operand))
            elif op == "$in":
                q.add(f"{value} = ANY(%s::jsonb[])", key, [Jsonb(v) for v in operand])
            elif op == "$nin":
                q.add(f"NOT coalesce({value} = ANY(%s::jsonb[]), false)", key, [Jsonb(v) for v in operand])
            elif op == "$exists":
                q.add(f"{'' if operand else 'NOT '}({a}.metadata ? %s)", key)
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                sign = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
                if _kind(operand) == "number":
                    q.add(
                        f"(jsonb_typeof({value}) = 'number' AND ({a}.metadata ->> %s)::numeric {sign} %s::numeric)",
                        key,
                        key,
                        str(operand),
                    )
                else:
                    q.add(
                        f"(jsonb_typeof({value}) = 'string' AND ({a}.metadata ->> %s) COLLATE \"C\" {sign} %s)",
                        key,
                        key,
                        str(operand),
                    )
            else:  # the guard validates operators; never drop one silently
                raise InvalidInput(f"filters[{key!r}]: unknown operator {op!r}", field="filters")
    return q
