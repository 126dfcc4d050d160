"""The ``since``/``until`` grammar of search, export and count, parsed once in the core.

A bound is an aware :class:`~datetime.datetime`, a :class:`~datetime.timedelta`
(that long ago), a duration string (``"90s"``, ``"90m"``, ``"24h"``, ``"7d"``,
``"2w"``: that long ago) or an ISO 8601 string (``"2026-05-01T09:00:00+02:00"``,
``"2026-05-01T07:00:00Z"``, or a date ``"2026-05-01"``, read as midnight UTC).
Ranges are over ``created_at``: ``since`` inclusive, ``until`` exclusive.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Union

from ._errors import InvalidInput

__all__ = ["TimeBound", "parse_time", "time_range"]

TimeBound = Union[datetime, timedelta, str]
"""What ``since`` and ``until`` accept: an aware datetime, a timedelta (ago) or a string."""

_DURATION = re.compile(r"(\d{1,9})\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MAX_AGO = timedelta(days=365 * 1000)


def _grammar(field: str) -> str:
    return (
        f"{field} must be an aware datetime, a timedelta, a duration such as '90m', '24h', '7d' or '2w' "
        "(s, m, h, d, w: that long ago), or an ISO 8601 time with a timezone such as "
        "'2026-05-01T09:00:00Z' (a bare date '2026-05-01' means midnight UTC)"
    )


def parse_time(value: TimeBound, *, field: str, now: datetime) -> datetime:
    """One bound as an aware UTC datetime; ``timedelta`` and durations count back from ``now``.

    Raises :class:`~memoryport.InvalidInput` naming ``field`` for anything else
    (a naive datetime, a negative duration, an unknown unit, a malformed ISO text).

    Example:
        >>> from datetime import datetime, timezone
        >>> now = datetime(2026, 5, 8, 12, 0, tzinfo=timezone.utc)
        >>> parse_time("7d", field="since", now=now).isoformat()
        '2026-05-01T12:00:00+00:00'
        >>> parse_time("2026-05-01", field="since", now=now).isoformat()
        '2026-05-01T00:00:00+00:00'
        >>> parse_time("2026-05-01T09:00:00+02:00", field="since", now=now).isoformat()
        '2026-05-01T07:00:00+00:00'
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise InvalidInput(
                f"{field} is a naive datetime; give it a timezone (e.g. tzinfo=timezone.utc)", field=field
            )
        return value.astimezone(timezone.utc)
    if isinstance(value, timedelta):
        return _ago(value, field, now)
    if not isinstance(value, str):
        raise InvalidInput(f"{_grammar(field)}; got a {type(value).__name__}", field=field)
    text = value.strip()
    if not text or len(text) > 64:
        raise InvalidInput(_grammar(field), field=field)
    match = _DURATION.fullmatch(text)
    if match is not None:
        return _ago(timedelta(**{_UNITS[match.group(2)]: int(match.group(1))}), field, now)
    if _DATE.fullmatch(text):
        try:
            return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)
        except ValueError:
            raise InvalidInput(f"{field} is not a valid date: {text!r}", field=field) from None
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        parsed = datetime.fromisoformat(iso)
    except ValueError:
        raise InvalidInput(_grammar(field), field=field) from None
    if parsed.tzinfo is None or parsed.tzinfo.utcoffset(parsed) is None:
        raise InvalidInput(
            f"{field} {text!r} has no timezone; add one ('Z' for UTC, or an offset such as '+02:00')", field=field
        )
    return parsed.astimezone(timezone.utc)


def _ago(delta: timedelta, field: str, now: datetime) -> datetime:
    if delta < timedelta(0):
        raise InvalidInput(f"{field} as a duration counts back from now and must not be negative", field=field)
    if delta > _MAX_AGO:
        raise InvalidInput(f"{field} reaches back more than 1000 years", field=field)
    return now - delta


def time_range(
    since: TimeBound | None, until: TimeBound | None, *, now: datetime
) -> tuple[datetime | None, datetime | None]:
    """Both bounds parsed; ``since`` must come before ``until`` when both are given.

    Example:
        >>> from datetime import datetime, timezone
        >>> now = datetime(2026, 5, 8, tzinfo=timezone.utc)
        >>> [t.day for t in time_range("7d", "1d", now=now)]
        [1, 7]
    """
    start = None if since is None else parse_time(since, field="since", now=now)
    end = None if until is None else parse_time(until, field="until", now=now)
    if start is not None and end is not None and start >= end:
        raise InvalidInput(
            f"since ({start.isoformat()}) must be before until ({end.isoformat()}); the range is empty",
            field="since",
        )
    return start, end


def in_range(created_at: datetime, since: datetime | None, until: datetime | None) -> bool:
    """Whether ``created_at`` lies in ``[since, until)``.

    Example:
        >>> from datetime import datetime, timezone
        >>> t = datetime(2026, 5, 1, tzinfo=timezone.utc)
        >>> in_range(t, t, None), in_range(t, None, t)
        (True, False)
    """
    return (since is None or created_at >= since) and (until is None or created_at < until)
