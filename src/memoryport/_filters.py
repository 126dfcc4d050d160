"""Metadata filters: validation, the operator table, and the matching the guard re-checks with.

A filter maps a metadata key to a condition: a JSON scalar (equality, as
``{"kind": "fact"}``) or an operator dict (``{"importance": {"$gte": 0.5}}``;
several operators in one dict must all hold). Keys are ANDed.

======== ============================================ ===========================
operator operand                                      a record matches when
======== ============================================ ===========================
``$eq``  a scalar                                     the key holds an equal value
``$ne``  a scalar                                     the key is absent or holds another value
``$gt``  a number or a string                         the value is of the same kind and greater
``$gte`` a number or a string                         ... greater or equal
``$lt``  a number or a string                         ... less
``$lte`` a number or a string                         ... less or equal
``$in``  a list of scalars                            the value equals one of them
``$nin`` a list of scalars                            the key is absent or equals none of them
``$exists`` ``True`` / ``False``                      the key is present (even as ``null``) / absent
======== ============================================ ===========================

Equality keeps JSON types apart: ``1``, ``"1"`` and ``True`` differ, ``1`` and
``1.0`` are equal. Numbers compare with numbers and strings with strings (by
code point); a record whose value is of another kind never matches a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Union

from ._errors import InvalidInput
from ._records import MetadataValue, check_scalar

__all__ = [
    "COMPARISONS",
    "OPERATORS",
    "Condition",
    "Filters",
    "check_filters",
    "matches",
    "operators_in",
    "same_value",
    "split_filters",
]

OPERATORS: frozenset[str] = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"})
"""Every filter operator the port knows."""
COMPARISONS: frozenset[str] = frozenset({"$gt", "$gte", "$lt", "$lte"})

Condition = Union[MetadataValue, Mapping[str, Any]]
"""A scalar (equality) or an operator dict such as ``{"$gte": 0.5}``."""
Filters = Mapping[str, Condition]
"""Metadata key -> condition; all must hold."""

# Comparison operands stay inside the 64-bit range, where every store compares them exactly.
_BOUND = float(1 << 63)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def same_value(a: object, b: object) -> bool:
    """JSON equality: ``1 == 1.0``, but ``1``, ``"1"`` and ``True`` all differ.

    Example:
        >>> same_value(1, 1.0), same_value(1, True), same_value(1, "1")
        (True, False, False)
    """
    kind = _kind(a)
    return kind == _kind(b) and (kind == "null" or a == b)


def check_filters(filters: object, *, max_values: int = 1_000) -> dict[str, Condition]:
    """Validate a filter mapping; raise :class:`~memoryport.InvalidInput` naming the key.

    Returns a plain dict (operator dicts copied, ``$in``/``$nin`` lists as lists).

    Example:
        >>> check_filters({"kind": {"$in": ("fact", "preference")}})
        {'kind': {'$in': ['fact', 'preference']}}
        >>> check_filters({"importance": {"$gte": 0.5, "$bad": 1}})
        Traceback (most recent call last):
        ...
        memoryport._errors.InvalidInput: filters['importance']: unknown operator '$bad'; ...
    """
    if not isinstance(filters, Mapping):
        raise InvalidInput("filters must be a mapping of metadata key to a value or an operator dict", field="filters")
    out: dict[str, Condition] = {}
    for key, condition in filters.items():
        if not isinstance(key, str) or not key:
            raise InvalidInput("filters: keys must be non-empty strings", field="filters")
        field = f"filters[{key!r}]"
        if key.startswith("$") and not _is_scalar(condition):
            raise InvalidInput(
                f"{field}: top-level keys are metadata keys (a key may start with '$'); operators go "
                f'inside a key\'s dict, e.g. {{"importance": {{"$gte": 0.5}}}}; there is no $and/$or: keys are ANDed',
                field=field,
            )
        if isinstance(condition, Mapping):
            out[key] = _check_operators(condition, field, max_values)
        else:
            _scalar(condition, field)
            out[key] = condition
    return out


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _scalar(value: object, what: str, field: str | None = None) -> None:
    field = field or what
    try:
        check_scalar(value, what)
    except ValueError as exc:
        raise InvalidInput(f"{exc} (or an operator dict such as {{'$gte': 1}})", field=field) from None


def _check_operators(condition: Mapping[Any, Any], field: str, max_values: int) -> dict[str, Any]:
    if not condition:
        raise InvalidInput(f"{field}: an operator dict needs at least one operator", field=field)
    plain = [op for op in condition if not (isinstance(op, str) and op.startswith("$"))]
    if plain:
        raise InvalidInput(
            f"{field}: mixes operators with plain keys ({plain[0]!r}); metadata is flat, so a dict "
            f"condition holds only operators: {', '.join(sorted(OPERATORS))}",
            field=field,
        )
    out: dict[str, Any] = {}
    for op, operand in condition.items():
        where = f"{field}[{op!r}]"
        if op not in OPERATORS:
            raise InvalidInput(
                f"{field}: unknown operator {op!r}; use one of {', '.join(sorted(OPERATORS))}", field=field
            )
        if op in ("$eq", "$ne"):
            _scalar(operand, where, field)
            out[op] = operand
        elif op in COMPARISONS:
            if isinstance(operand, bool) or operand is None or not isinstance(operand, (int, float, str)):
                raise InvalidInput(f"{where}: compares with a number or a string, not {_kind(operand)}", field=field)
            if isinstance(operand, (int, float)) and not (math.isfinite(operand) and -_BOUND <= operand < _BOUND):
                raise InvalidInput(f"{where}: a number to compare with must be finite and within ±2**63", field=field)
            _scalar(operand, where, field)
            out[op] = operand
        elif op in ("$in", "$nin"):
            if isinstance(operand, (str, bytes, Mapping)) or not isinstance(operand, (Sequence, set, frozenset)):
                raise InvalidInput(f"{where}: takes a list of scalars", field=field)
            values = list(operand)
            if len(values) > max_values:
                raise InvalidInput(
                    f"{where}: has {len(values):,} values; the limit is {max_values:,} (Limits.max_filter_values)",
                    field=field,
                    limit="max_filter_values",
                )
            for i, item in enumerate(values):
                _scalar(item, f"{where}[{i}]", field)
            out[op] = values
        else:  # $exists
            if not isinstance(operand, bool):
                raise InvalidInput(f"{where}: takes True or False", field=field)
            out[op] = operand
    return out


def operators_in(filters: Filters | None) -> set[str]:
    """The operators a (checked) filter uses; a plain value counts as ``$eq``.

    Example:
        >>> sorted(operators_in({"kind": "fact", "n": {"$gt": 1, "$lt": 5}}))
        ['$eq', '$gt', '$lt']
    """
    used: set[str] = set()
    for condition in (filters or {}).values():
        used.update(condition) if isinstance(condition, Mapping) else used.add("$eq")
    return used


def split_filters(
    filters: Filters | None, native: frozenset[str], *, plain_only: bool
) -> tuple[dict[str, Condition] | None, dict[str, Condition] | None]:
    """(what the store runs itself, what the guard applies on the way out).

    ``plain_only``: the store takes equality as plain values only (no operator
    dicts), so ``{"$eq": v}`` is sent as ``v``.

    Example:
        >>> split_filters({"kind": "fact", "n": {"$gte": 2}}, frozenset({"$eq"}), plain_only=True)
        ({'kind': 'fact'}, {'n': {'$gte': 2}})
    """
    if not filters:
        return None, None
    pushed: dict[str, Condition] = {}
    rest: dict[str, Condition] = {}
    for key, condition in filters.items():
        if not isinstance(condition, Mapping):
            if "$eq" in native:
                pushed[key] = condition
            else:
                rest[key] = condition
            continue
        mine = {op: v for op, v in condition.items() if op in native}
        other = {op: v for op, v in condition.items() if op not in native}
        if mine:
            pushed[key] = mine["$eq"] if plain_only and set(mine) == {"$eq"} else mine
        if other:
            rest[key] = other
    return pushed or None, rest or None


def _compare(op: str, value: object, operand: object) -> bool:
    kind = _kind(operand)
    if _kind(value) != kind:
        return False
    a: Any = value
    b: Any = operand
    if op == "$gt":
        return bool(a > b)
    if op == "$gte":
        return bool(a >= b)
    if op == "$lt":
        return bool(a < b)
    return bool(a <= b)


def _holds(op: str, operand: Any, present: bool, value: object) -> bool:
    if op == "$exists":
        return present is operand
    if op == "$eq":
        return present and same_value(value, operand)
    if op == "$ne":
        return not (present and same_value(value, operand))
    if op == "$in":
        return present and any(same_value(value, x) for x in operand)
    if op == "$nin":
        return not (present and any(same_value(value, x) for x in operand))
    return present and _compare(op, value, operand)


def matches(metadata: Mapping[str, object], filters: Filters | None) -> bool:
    """Whether a record's metadata satisfies every condition of a (checked) filter.

    Example:
        >>> matches({"importance": 0.7, "kind": "fact"}, {"importance": {"$gte": 0.5}, "kind": {"$ne": "todo"}})
        True
        >>> matches({"n": True}, {"n": 1})
        False
    """
    for key, condition in (filters or {}).items():
        present = key in metadata
        value = metadata.get(key)
        if isinstance(condition, Mapping):
            if not all(_holds(op, operand, present, value) for op, operand in condition.items()):
                return False
        elif not _holds("$eq", condition, present, value):
            return False
    return True
