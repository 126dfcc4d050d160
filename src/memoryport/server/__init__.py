"""``memoryport serve``: the memory over HTTP, for hosts in any language, and a dashboard for people.

The API key decides whose memory a request touches: an ordinary key acts for
its own user only; an admin key names the user in the ``X-Memoryport-User``
header and every such action is logged without content. Needs the ``server``
extra (Starlette and uvicorn)::

    from memoryport import SQLiteMemory
    from memoryport.server import KeyStore, create_app

    keys = KeyStore("memory.keys")
    print(keys.create(user_id="ann").secret)     # shown once
    app = create_app(SQLiteMemory("memory.db"), keys)
    # uvicorn.run(app, host="127.0.0.1", port=8787)

or, from the shell, ``memoryport keys create --db memory.db --user ann`` and
``memoryport serve --db memory.db``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import lazy_exports
from ._backend import open_memory
from ._keys import ApiKey, KeyStore, NewKey, Principal

if TYPE_CHECKING:
    from ._app import create_app
    from ._run import serve

__all__ = ["ApiKey", "KeyStore", "NewKey", "Principal", "create_app", "open_memory", "serve"]

_LAZY = {"create_app": "memoryport.server._app", "serve": "memoryport.server._run"}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
