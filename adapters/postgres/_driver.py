"""psycopg 3 and psycopg-pool, imported once behind the ``postgres`` extra's friendly error.

Every module of the adapter takes the driver's names from here, so a missing
extra raises the ``pip install "memoryport[postgres]"`` message wherever the
import starts.
"""

from __future__ import annotations

from memoryport._extras import require

psycopg = require("psycopg", extra="postgres", feature="PostgresMemory")
psycopg_pool = require("psycopg_pool", extra="postgres", feature="PostgresMemory", package="psycopg-pool")
from psycopg import errors as pg_errors  # noqa: E402  (after the guarded import above)
from psycopg import sql as pg_sql  # noqa: E402
from psycopg.adapt import Dumper  # noqa: E402
from psycopg.pq import Format  # noqa: E402
from psycopg.types import TypeInfo  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

__all__ = ["Dumper", "Format", "Jsonb", "TypeInfo", "pg_errors", "pg_sql", "psycopg", "psycopg_pool"]
