"""``update`` for the PostgreSQL store: text, metadata and expiry changed in place, in one transaction.

The id, scope and ``created_at`` stay; ``updated_at`` is set. A new text is
re-embedded (before the transaction: a failing embedder changes nothing) and
re-indexed: only the postings of stems that changed are deleted or inserted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memoryport._errors import EmbedderMismatch
from memoryport._records import MemoryScope, MemoryUpdate, utcnow
from memoryport.storekit import embed_unit

from ._driver import Jsonb
from ._rows import Vector, words
from ._where import live_sql, scope_sql, tenant

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from ._store import PostgresStore

__all__ = ["update_records"]


async def update_records(store: PostgresStore, changes: Sequence[MemoryUpdate], scope: MemoryScope) -> list[str]:
    """Apply ``changes`` to the live records ``scope`` covers; return the ids updated, in input order."""
    if not changes:
        return []
    info = await store.ready()
    texts = [c for c in changes if "text" in c.changed]
    vectors: dict[str, Vector] = {}
    if texts and store.embedder is not None:
        rows = await embed_unit(store.embedder, [str(c.text) for c in texts])
        vectors = {c.id: Vector(rows[i]) for i, c in enumerate(texts)}
    elif texts and info.embedder_name is not None:
        raise EmbedderMismatch(
            f"PostgreSQL schema {store.schema!r} keeps vectors of embedder {info.embedder_name!r}; "
            "open it with that embedder to change texts"
        )
    key = tenant(scope.user_id)
    now = utcnow()
    s = store.quoted_schema

    async def write(conn: AsyncConnection[Any]) -> list[str]:
        done: list[str] = []
        added_words = 0
        async with store.db.tx(conn, key) as cur:
            for change in changes:
                sets: list[str] = ["updated_at = greatest(%s, r.created_at)"]
                params: list[Any] = [now]
                if "text" in change.changed:
                    sets += ["text = %s", "doclen = %s"]
                    params += [change.text, words(str(change.text))]
                    if change.id in vectors:
                        sets.append("embedding = %b")
                        params.append(vectors[change.id])
                if "metadata" in change.changed:
                    sets.append("metadata = %s")
                    params.append(Jsonb(dict(change.metadata or {})))
                if "expires_at" in change.changed:
                    sets.append("expires_at = %s")
                    params.append(change.expires_at)
                where = live_sql(scope_sql(scope, "o"), now, store.retention, "o").add("o.id = %s", change.id)
                await cur.execute(
                    f"WITH old AS (SELECT o.rid, o.doclen, o.lexemes FROM {s}.records o "
                    f"WHERE {where.text} FOR UPDATE), "
                    f"upd AS (UPDATE {s}.records r SET {', '.join(sets)} FROM old WHERE r.rid = old.rid "
                    "RETURNING r.id, r.rid, r.doclen - old.doclen AS words, r.lexemes AS new, old.lexemes AS old), "
                    # Only the stems that changed: a posting kept stays put (no delete and re-insert of one key).
                    f"unposted AS (DELETE FROM {s}.postings p USING (SELECT upd.rid, unnest(upd.old) AS key, "
                    "upd.new FROM upd) AS gone WHERE p.key = gone.key AND p.rid = gone.rid "
                    "AND NOT (gone.key = ANY(gone.new))), "
                    f"posted AS (INSERT INTO {s}.postings(key, rid) SELECT k, upd.rid "
                    "FROM upd, unnest(upd.new) AS k WHERE NOT (k = ANY(upd.old))) "
                    "SELECT id, words FROM upd",
                    [*where.params, *params],
                )
                row = await cur.fetchone()
                if row is not None:
                    done.append(str(row[0]))
                    added_words += int(row[1])
            if added_words:
                await cur.execute(f"UPDATE {s}.tenants SET words = words + %s WHERE tenant = %s", (added_words, key))
        return done

    return await store.write("update", write)
