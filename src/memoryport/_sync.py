"""Run coroutines from blocking code on one background event loop."""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ._errors import UsageError

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _portal() -> asyncio.AbstractEventLoop:
    import asyncio  # on first use: `import memoryport` stays cheap

    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="memoryport-sync", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], *, method: str, sync: str | None = None, owner: str = "memory") -> T:
    """Run ``coro`` to completion on the shared background loop and return its result.

    Works from any thread, any number of times. Inside a running event loop it
    refuses with a :class:`UsageError` naming the ``await`` form, because
    blocking there would stall every other task of that loop.

    Args:
        coro: the coroutine of the async method.
        method: the async method's name (``"search"``, ``"aclose"``).
        sync: the blocking twin's name when it is not ``method + "_sync"`` (``"close"``).
        owner: what the async method is called on in the message; ``""`` for a function.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        called = sync if sync is not None else f"{method}_sync"
        target = f"{owner}.{method}" if owner else method
        raise UsageError(
            f"{called}() was called inside a running event loop; use `await {target}(...)` there instead"
        )
    return asyncio.run_coroutine_threadsafe(coro, _portal()).result()
