"""Per-key request budgets (token buckets) and relative times (``7d``) for filters."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from .._errors import InvalidInput

__all__ = ["RateLimiter", "parse_time"]


class RateLimiter:
    """One token bucket per key: ``per_minute`` requests a minute, bursts up to that many.

    Example:
        >>> limiter = RateLimiter(per_minute=2)
        >>> limiter.take("k1"), limiter.take("k1"), limiter.take("k1") > 0
        (0.0, 0.0, True)
    """

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(per_minute, bool) or not isinstance(per_minute, int) or per_minute < 1:
            raise InvalidInput("the rate limit must be a positive number of requests per minute", field="per_minute")
        self.per_minute = per_minute
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, per_minute: int | None = None) -> float:
        """Spend one request of ``key``: 0.0 when allowed, else the seconds until the next is."""
        rate = per_minute or self.per_minute
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(rate), now))
            tokens = min(float(rate), tokens + (now - last) * rate / 60.0)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) * 60.0 / rate

    @staticmethod
    def retry_after(wait: float) -> str:
        """``wait`` as a Retry-After header value (whole seconds, at least 1)."""
        return str(max(1, math.ceil(wait)))


_AGE = re.compile(r"^(\d{1,6})([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_time(value: str, field: str) -> datetime:
    """An aware UTC time from ISO 8601 or an age (``90m``, ``24h``, ``7d``, ``2w`` ago).

    Example:
        >>> parse_time("2026-01-02T03:04:05Z", "since").isoformat()
        '2026-01-02T03:04:05+00:00'
    """
    text = value.strip()
    match = _AGE.match(text)
    if match:
        return datetime.now(timezone.utc) - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise InvalidInput(
            f"{field} must be an ISO 8601 time or an age such as 90m, 24h, 7d, 2w", field=field
        ) from None
    if parsed.tzinfo is None or parsed.tzinfo.utcoffset(parsed) is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)
