"""``update`` for the SQLite store: text, metadata and expiry changed in place, in one transaction.

The id, scope and ``created_at`` stay; ``updated_at`` is set. A new text replaces
the old one in the FTS5 index (the old words are erased as on a delete) and gets
a new vector; the vectors cached in RAM are patched in place, so an update does
not force the next search to reload the scope.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memoryport._errors import EmbedderMismatch
from memoryport._records import MemoryScope, MemoryUpdate, utcnow
from memoryport.storekit import chunks

from ._ann import drop_rids, index_add
from ._erasure import fts_slots, mark_erased
from ._rows import NEVER, Conn, fts_rowid, scope_sql, tenant_token, us
from ._schema import bump
from ._vectors import F32, Patch, embed
from ._where import meta_row

if TYPE_CHECKING:
    from ._store import SQLiteStore

__all__ = ["update_records"]


async def update_records(store: SQLiteStore, changes: Sequence[MemoryUpdate], scope: MemoryScope) -> list[str]:
    """Apply ``changes`` to the live records ``scope`` covers; return the ids updated, in input order."""
    if not changes:
        return []
    texts = [c.text for c in changes if c.text is not None and "text" in c.changed]
    vectors: F32 | None = None
    if texts and store.embedder is not None:
        # Before the transaction: a failing embedder fails the update and nothing changes.
        vectors = await embed(store.embedder, texts)
    elif texts and await store._run(store._needs_embedder) is not None:
        raise EmbedderMismatch(
            f"{os.path.basename(store.path)} keeps vectors of embedder {store._needs_embedder()!r}; "
            "open it with that embedder to change texts"
        )
    return await store._run(lambda: _apply(store, changes, scope, vectors), write=True)


def _apply(store: SQLiteStore, changes: Sequence[MemoryUpdate], scope: MemoryScope, vectors: F32 | None) -> list[str]:
    now = utcnow()
    now_us = us(now)
    cutoff = None if store.retention is None else us(now - store.retention)
    where, params = scope_sql(scope)
    fts5 = store.keyword_index == "fts5"

    def write(conn: Conn) -> tuple[list[str], list[Patch], bool, int, dict[str, int]]:
        found: dict[str, tuple[Any, ...]] = {}
        ids = [c.id for c in changes]
        live = "(r.expires_at IS NULL OR r.expires_at > ?)" + ("" if cutoff is None else " AND r.created_at >= ?")
        extra = [now_us] if cutoff is None else [now_us, cutoff]
        for chunk in chunks(ids):
            for row in conn.execute(
                "SELECT r.id, r.rid, r.text, r.user_id, r.session_id, r.agent_id, r.created_at FROM records r "
                f"WHERE r.id IN ({','.join('?' * len(chunk))}) AND {where} AND {live}",
                [*chunk, *params, *extra],
            ):
                found[row[0]] = row
        done: list[str] = []
        patches: list[Patch] = []
        tenants: set[str] = set()
        text_changed = False
        next_vector = 0
        for change in changes:
            has_text = change.text is not None and "text" in change.changed
            vector = None
            if has_text and vectors is not None:
                vector = vectors[next_vector]
                next_vector += 1
            row = found.get(change.id)
            if row is None:
                continue  # absent, expired or another scope's: exactly alike
            _, rid, old_text, user, session, agent, created = row
            tenant = tenant_token(user)
            sets = ["updated_at = ?"]
            values: list[Any] = [max(now_us, int(created))]
            if has_text:
                sets.append("text = ?")
                values.append(change.text)
                if fts5:
                    at = fts_rowid(fts_slots(conn, [tenant])[tenant], rid)
                    conn.execute(
                        "INSERT INTO records_fts(records_fts, rowid, body, tenant) VALUES ('delete', ?, ?, ?)",
                        (at, old_text, tenant),
                    )
                    conn.execute(
                        "INSERT INTO records_fts(rowid, body, tenant) VALUES (?, ?, ?)", (at, change.text, tenant)
                    )
                    store.ann.words.clear()  # the old text's words leave this process's word lists now
                if vector is not None:
                    conn.execute("INSERT OR REPLACE INTO vectors(rid, vec) VALUES (?, ?)", (rid, vector.tobytes()))
                    # The index keeps the new vector's code, in the list of its nearest centroid.
                    drop_rids(conn, [(int(rid), user)])
                    index_add(conn, store.ann, [tenant], [int(rid)], vector[None, :])
                text_changed = True
            if "metadata" in change.changed:
                metadata = change.metadata or {}
                sets.append("metadata = ?")
                values.append(json.dumps(metadata, ensure_ascii=False) if metadata else None)
                conn.execute("DELETE FROM record_meta WHERE rid = ?", (rid,))
                if metadata:
                    conn.executemany(
                        "INSERT INTO record_meta VALUES (?, ?, ?, ?)",
                        [(rid, *meta_row(k, v)) for k, v in metadata.items()],
                    )
            expires: int | None = None
            if "expires_at" in change.changed:
                sets.append("expires_at = ?")
                values.append(None if change.expires_at is None else us(change.expires_at))
                expires = NEVER if change.expires_at is None else us(change.expires_at)
            conn.execute(f"UPDATE records SET {', '.join(sets)} WHERE rid = ?", [*values, rid])
            done.append(change.id)
            if vector is not None or expires is not None:
                patches.append(
                    Patch(
                        rid=int(rid),
                        scope=MemoryScope.model_construct(user_id=user, session_id=session, agent_id=agent),
                        vector=vector,
                        expires=expires,
                    )
                )
            tenants.add(tenant)
        if text_changed:
            # The old text is erased as on a delete: the file is rebuilt after the commit
            # (see _erasure.py). A metadata-only change does not rebuild it (the cost of an
            # erasure on every counter update); old metadata values can stay in unused
            # page space until the next erasure.
            mark_erased(conn)
        if text_changed and fts5 and not store.fts_secure_delete:
            # As on a delete: without FTS5 secure-delete the old words stay in old segments until a merge.
            conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
        # Other processes' caches see the new generation and reload; ours is patched below. A new text
        # changes what searches' timelines hold (_timeline.py), so it bumps too, with or without a vector.
        gen, old = bump(conn, dict.fromkeys(tenants, 0)) if patches or text_changed else (-1, {})
        return done, patches, text_changed, gen, old

    done, patches, _, gen, old = store.db.write(write)
    if old:
        store.vectors.patch(patches, gen, old)
    return done
