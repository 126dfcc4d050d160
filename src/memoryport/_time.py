"""Times read back from an SDK or a database: ISO strings or datetimes, naive or aware, made aware UTC."""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["parse_time", "utc"]


def utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime; a naive one is taken as UTC wall-clock time (what Kuzu returns).

    Example:
        >>> utc(datetime(2024, 5, 1, 12, 0)).isoformat()
        '2024-05-01T12:00:00+00:00'
    """
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def parse_time(value: object) -> datetime | None:
    """An aware UTC datetime from a datetime or an ISO 8601 string (``Z`` too); ``None`` when there is none.

    Anything else (an empty string, a number, text that is not a time) is
    ``None``: the caller decides what a missing time means.

    Example:
        >>> parse_time("2024-05-01T12:00:00Z").isoformat()
        '2024-05-01T12:00:00+00:00'
        >>> parse_time("2024-05-01T14:00:00+02:00") == parse_time("2024-05-01T12:00:00")
        True
        >>> parse_time("soon") is None and parse_time("") is None and parse_time(None) is None
        True
    """
    if isinstance(value, datetime):
        return utc(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None
