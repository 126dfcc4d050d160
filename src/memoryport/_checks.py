"""Argument checks for constructors and options: one message, one error, one place.

Each raises :class:`~memoryport.InvalidInput` naming the argument (a ``bool``
is never taken for a number), so every constructor refuses the same way.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ._errors import InvalidInput

__all__ = ["check_duration", "check_int", "check_number"]


def check_int(value: Any, field: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) from ``minimum`` to ``maximum``, else :class:`InvalidInput`.

    Example:
        >>> check_int(4, "workers")
        4
        >>> check_int(True, "workers")
        Traceback (most recent call last):
        ...
        memoryport._errors.InvalidInput: workers must be an integer of at least 1
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
        raise InvalidInput(f"{field} must be an integer {bound}", field=field)
    return value


def check_number(value: Any, field: str, *, minimum: float, maximum: float) -> float:
    """``value`` as a float if it is a number (not a ``bool``) in ``[minimum, maximum]``, else :class:`InvalidInput`.

    Example:
        >>> check_number(0.4, "context_weight", minimum=0, maximum=1)
        0.4
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not minimum <= value <= maximum:
        raise InvalidInput(f"{field} must be a number from {minimum:g} to {maximum:g}", field=field)
    return float(value)


def check_duration(value: Any, field: str) -> timedelta:
    """``value`` if it is a positive :class:`~datetime.timedelta`, else :class:`InvalidInput`.

    Example:
        >>> check_duration(timedelta(minutes=30), "session_gap")
        datetime.timedelta(seconds=1800)
        >>> check_duration(0, "session_gap")
        Traceback (most recent call last):
        ...
        memoryport._errors.InvalidInput: session_gap must be a positive timedelta
    """
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidInput(f"{field} must be a positive timedelta", field=field)
    return value
