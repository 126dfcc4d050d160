"""Helpers shared by the HTTP clients over httpx (``OpenAIEmbedder``, ``OpenAIModel``).

Imports no httpx at run time: the callers hold the (lazily imported) module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

__all__ = ["error_code", "retry_after"]


def error_code(response: httpx.Response) -> str:
    """The error's type or code from the body as ``" (code)"``, never its message (which may quote the input).

    >>> import httpx
    >>> error_code(httpx.Response(429, json={"error": {"code": "rate_limit", "message": "the prompt was ..."}}))
    ' (rate_limit)'
    >>> error_code(httpx.Response(500, text="not json"))
    ''
    """
    try:
        err = response.json().get("error")
    except Exception:
        return ""
    if isinstance(err, dict):
        code = err.get("code") or err.get("type")
        if isinstance(code, str) and code.isprintable() and len(code) <= 64:
            return f" ({code})"
    return ""


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (never negative), else ``None``.

    >>> import httpx
    >>> retry_after(httpx.Response(429, headers={"retry-after": "2"}))
    2.0
    >>> retry_after(httpx.Response(429)) is None
    True
    """
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
