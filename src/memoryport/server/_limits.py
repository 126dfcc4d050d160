"""Per-key request budgets: one token bucket per key."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from .._errors import InvalidInput

__all__ = ["RateLimiter"]


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
