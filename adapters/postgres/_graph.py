"""The graph capability on PostgreSQL: entities, aliases and facts beside the records, walked by recursive CTEs.

The tables come from the schema's migrations (version 2, see ``_schema.py``);
every row carries its user and row-level security keeps users apart as for the
records. A write takes a per-user advisory lock (one graph writer per user at a
time, so two processes never create the same entity twice) and runs in one
transaction: a batch of facts is resolved, checked against the current facts
and written in a handful of statements. Erasing the user through the memory
(``delete(scope=MemoryScope(user_id=...))``) deletes their graph rows in the
records' transaction (:func:`erase_graph`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from memoryport._errors import InvalidInput
from memoryport._graph import Fact, NewFact, Related, normalise_name

from ._schema import lock_key

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor

    from ._store import PostgresStore

__all__ = ["PostgresGraphStore", "erase_graph"]


def _tenant(user_id: str) -> str:
    return "u:" + user_id


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


async def erase_graph(cur: AsyncCursor[Any], s: str, user_id: str) -> int:
    """Delete every graph row of ``user_id`` (in the caller's transaction); how many facts and entities went."""
    n = 0
    for table in ("graph_facts", "graph_aliases", "graph_entities"):
        await cur.execute(f"DELETE FROM {s}.{table} WHERE user_id = %s", (user_id,))
        if table != "graph_aliases":
            n += max(0, cur.rowcount)
    return n


def _valid(as_of: datetime | None, a: str = "f") -> tuple[str, list[Any]]:
    if as_of is None:
        return f"{a}.valid_to IS NULL", []
    return f"{a}.valid_from <= %s AND ({a}.valid_to IS NULL OR %s < {a}.valid_to)", [as_of, as_of]


@dataclass
class _Row:
    """A fact while a batch is worked out: one stored (``fid``) or one to insert."""

    id: str
    subject: int
    relation: str
    object: int
    valid_from: datetime
    valid_to: datetime | None
    memory_id: str | None
    fid: int | None = None
    closed: bool = False  # a stored fact whose valid_to this batch sets


class PostgresGraphStore:
    """The :class:`~memoryport.GraphPort` of a PostgreSQL schema (plain storage; hosts hold a KnowledgeGraph).

    Reached as ``memory.store.graph_port()``; hosts write ``KnowledgeGraph(memory)``.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._s = store.quoted_schema

    @asynccontextmanager
    async def _tx(
        self, conn: AsyncConnection[Any], user_id: str, *, read_only: bool = False
    ) -> AsyncIterator[AsyncCursor[Any]]:
        """A transaction of one user's graph: ``memoryport.tenant`` set for row-level security."""
        async with conn.transaction():
            cur = conn.cursor()
            # Separate statements: reads run in pipeline mode, where they go out without waiting.
            if read_only:
                await cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            else:
                # One graph writer per user: entities are resolved, then created, without a race.
                await cur.execute(
                    "SELECT pg_advisory_xact_lock(%s::int4, hashtext(%s))",
                    (lock_key(self._store.schema) >> 32, user_id),
                )
            await cur.execute("SELECT set_config('memoryport.tenant', %s, true)", (_tenant(user_id),))
            yield cur

    # -- entities ------------------------------------------------------------

    async def _resolve(self, cur: AsyncCursor[Any], user_id: str, names: Sequence[str]) -> dict[str, int]:
        """normalised name -> entity id, creating the entities not known yet (named as first given)."""
        wanted: dict[str, str] = {}
        for name in names:
            wanted.setdefault(normalise_name(name), name)
        await cur.execute(
            f"SELECT key, eid FROM {self._s}.graph_aliases WHERE user_id = %s AND key = ANY(%s)",
            (user_id, list(wanted)),
        )
        found = {str(k): int(e) for k, e in await cur.fetchall()}
        missing = [k for k in wanted if k not in found]
        if missing:
            await cur.execute(
                f"INSERT INTO {self._s}.graph_entities(user_id, key, name) "
                "SELECT %s, k, n FROM unnest(%s::text[], %s::text[]) AS t(k, n) RETURNING key, eid",
                (user_id, missing, [wanted[k] for k in missing]),
            )
            made = {str(k): int(e) for k, e in await cur.fetchall()}
            await cur.execute(
                f"INSERT INTO {self._s}.graph_aliases(user_id, key, eid) "
                "SELECT %s, k, e FROM unnest(%s::text[], %s::bigint[]) AS t(k, e)",
                (user_id, list(made), list(made.values())),
            )
            found.update(made)
        return found

    async def _names(self, cur: AsyncCursor[Any], eids: Sequence[int]) -> dict[int, str]:
        if not eids:
            return {}
        await cur.execute(f"SELECT eid, name FROM {self._s}.graph_entities WHERE eid = ANY(%s)", (list(set(eids)),))
        return {int(e): str(n) for e, n in await cur.fetchall()}

    async def add_entity(self, name: str, aliases: Sequence[str], *, user_id: str) -> str:
        async def write(conn: AsyncConnection[Any]) -> str:
            async with self._tx(conn, user_id) as cur:
                eid = (await self._resolve(cur, user_id, [name]))[normalise_name(name)]
                keys = list(dict.fromkeys(normalise_name(a) for a in aliases))
                await cur.execute(
                    f"SELECT key, eid FROM {self._s}.graph_aliases WHERE user_id = %s AND key = ANY(%s)",
                    (user_id, keys),
                )
                taken = {str(k): int(e) for k, e in await cur.fetchall()}
                for i, alias in enumerate(aliases):
                    if taken.get(normalise_name(alias), eid) != eid:
                        raise InvalidInput(f"aliases[{i}] already names another entity", field=f"aliases[{i}]")
                new = [k for k in keys if k not in taken]
                if new:
                    await cur.execute(
                        f"INSERT INTO {self._s}.graph_aliases(user_id, key, eid) "
                        "SELECT %s, k, %s FROM unnest(%s::text[]) k",
                        (user_id, eid, new),
                    )
                return (await self._names(cur, [eid]))[eid]

        return await self._store.write("graph add_entity", write)

    # -- facts ---------------------------------------------------------------

    _FACT_SQL = (
        "SELECT f.id, s.name, f.relation, o.name, f.valid_from, f.valid_to, f.memory_id, f.fid FROM {s}.graph_facts f "
        "JOIN {s}.graph_entities s ON s.eid = f.subject JOIN {s}.graph_entities o ON o.eid = f.object"
    )

    @staticmethod
    def _fact(row: Sequence[Any]) -> Fact:
        return Fact.model_construct(
            id=str(row[0]),
            subject=str(row[1]),
            relation=str(row[2]),
            object=str(row[3]),
            valid_from=row[4].astimezone(timezone.utc),
            valid_to=_utc(row[5]),
            memory_id=None if row[6] is None else str(row[6]),
        )

    async def _facts_by_fid(self, cur: AsyncCursor[Any], fids: Sequence[int]) -> dict[int, Fact]:
        if not fids:
            return {}
        await cur.execute(self._FACT_SQL.format(s=self._s) + " WHERE f.fid = ANY(%s)", (list(set(fids)),))
        return {int(r[7]): self._fact(r) for r in await cur.fetchall()}

    async def add_facts(
        self, facts: Sequence[NewFact], *, user_id: str, now: datetime, single_valued: frozenset[str]
    ) -> list[Fact]:
        async def write(conn: AsyncConnection[Any]) -> list[Fact]:
            async with self._tx(conn, user_id) as cur:
                ids = await self._resolve(cur, user_id, [n for f in facts for n in (f.subject, f.object)])
                pairs = {(ids[normalise_name(f.subject)], f.relation) for f in facts}
                # The current facts of every (subject, relation) the batch touches, worked on in memory.
                await cur.execute(
                    f"SELECT f.fid, f.id, f.subject, f.relation, f.object, f.valid_from, f.memory_id "
                    f"FROM {self._s}.graph_facts f JOIN unnest(%s::bigint[], %s::text[]) AS t(s, r) "
                    "ON f.subject = t.s AND f.relation = t.r WHERE f.user_id = %s AND f.valid_to IS NULL",
                    ([p[0] for p in pairs], [p[1] for p in pairs], user_id),
                )
                current: dict[tuple[int, str], list[_Row]] = {}
                for fid, fact_id, s, rel, o, began, memory_id in await cur.fetchall():
                    row = _Row(str(fact_id), int(s), str(rel), int(o), _utc(began), None, memory_id, fid=int(fid))  # type: ignore[arg-type]
                    current.setdefault((int(s), str(rel)), []).append(row)
                made: list[_Row] = []
                new: list[_Row] = []
                for fact in facts:
                    s, o = ids[normalise_name(fact.subject)], ids[normalise_name(fact.object)]
                    start = fact.valid_from or now
                    open_ = [r for r in current.get((s, fact.relation), []) if r.valid_to is None]
                    same = next((r for r in open_ if r.object == o), None)
                    if same is not None:
                        made.append(same)
                        continue
                    valid_to: datetime | None = None
                    if fact.relation in single_valued:
                        for r in open_:
                            if r.valid_from <= start:
                                r.valid_to, r.closed = start, r.fid is not None
                            else:  # the current fact began later: the new one is history, true until then
                                valid_to = r.valid_from if valid_to is None else min(valid_to, r.valid_from)
                    if valid_to is not None and valid_to <= start:
                        raise InvalidInput(
                            f"a {fact.relation!r} fact of {fact.subject!r} already starts at that time",
                            field="valid_from",
                        )
                    row = _Row(uuid.uuid4().hex, s, fact.relation, o, start, valid_to, fact.memory_id)
                    current.setdefault((s, fact.relation), []).append(row)
                    made.append(row)
                    new.append(row)
                closed = [r for rows in current.values() for r in rows if r.closed]
                if closed:
                    await cur.execute(
                        f"UPDATE {self._s}.graph_facts f SET valid_to = t.v "
                        "FROM unnest(%s::bigint[], %s::timestamptz[]) AS t(fid, v) WHERE f.fid = t.fid",
                        ([r.fid for r in closed], [r.valid_to for r in closed]),
                    )
                if new:
                    await cur.execute(
                        f"INSERT INTO {self._s}.graph_facts"
                        "(id, user_id, subject, relation, object, valid_from, valid_to, memory_id) "
                        "SELECT i, %s, s, r, o, vf, vt, m FROM unnest(%s::text[], %s::bigint[], %s::text[], "
                        "%s::bigint[], %s::timestamptz[], %s::timestamptz[], %s::text[]) AS t(i, s, r, o, vf, vt, m)",
                        (
                            user_id,
                            [r.id for r in new],
                            [r.subject for r in new],
                            [r.relation for r in new],
                            [r.object for r in new],
                            [r.valid_from for r in new],
                            [r.valid_to for r in new],
                            [r.memory_id for r in new],
                        ),
                    )
                names = await self._names(cur, [e for r in made for e in (r.subject, r.object)])
                return [
                    Fact.model_construct(
                        id=r.id,
                        subject=names[r.subject],
                        relation=r.relation,
                        object=names[r.object],
                        valid_from=r.valid_from,
                        valid_to=r.valid_to,
                        memory_id=r.memory_id,
                    )
                    for r in made
                ]

        return await self._store.write("graph add_facts", write)

    async def _find(self, cur: AsyncCursor[Any], user_id: str, name: str) -> int | None:
        await cur.execute(
            f"SELECT eid FROM {self._s}.graph_aliases WHERE user_id = %s AND key = %s", (user_id, normalise_name(name))
        )
        row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def facts_about(
        self, entity: str, *, user_id: str, as_of: datetime | None, history: bool, limit: int
    ) -> list[Fact]:
        async def read(conn: AsyncConnection[Any]) -> list[Fact]:
            async with self._tx(conn, user_id, read_only=True) as cur:
                valid, params = ("TRUE", []) if history else _valid(as_of)
                # The name's entity, its facts either way (two index lookups) and their names: one statement.
                await cur.execute(
                    f"WITH e AS (SELECT eid FROM {self._s}.graph_aliases WHERE user_id = %s AND key = %s) "
                    + self._FACT_SQL.format(s=self._s)
                    + f" WHERE f.fid IN (SELECT g.fid FROM {self._s}.graph_facts g JOIN e ON g.subject = e.eid "
                    "WHERE g.user_id = %s "
                    f"UNION ALL SELECT g.fid FROM {self._s}.graph_facts g JOIN e ON g.object = e.eid "
                    "WHERE g.user_id = %s) "
                    f"AND {valid} ORDER BY f.valid_from, f.fid LIMIT %s",
                    [user_id, normalise_name(entity), user_id, user_id, *params, limit],
                )
                return [self._fact(r) for r in await cur.fetchall()]

        return await self._store.read("graph facts_about", read)

    def _steps(self, alias: str, as_of: datetime | None) -> tuple[str, list[Any]]:
        """A LATERAL subquery: the facts leaving ``alias.eid`` either way, as (other entity, fid)."""
        valid, vp = _valid(as_of)
        sql = (
            f"SELECT f.object AS other, f.fid FROM {self._s}.graph_facts f "
            f"WHERE f.user_id = %s AND f.subject = {alias}.eid AND {valid} "
            f"UNION ALL SELECT f.subject, f.fid FROM {self._s}.graph_facts f "
            f"WHERE f.user_id = %s AND f.object = {alias}.eid AND {valid}"
        )
        return sql, vp

    async def related(
        self, entity: str, *, user_id: str, depth: int, as_of: datetime | None, limit: int
    ) -> list[Related]:
        async def read(conn: AsyncConnection[Any]) -> list[Related]:
            async with self._tx(conn, user_id, read_only=True) as cur:
                steps, vp = self._steps("w", as_of)
                valid, hp = _valid(as_of)
                # The walk keeps (entity, depth) pairs only: UNION drops a pair reached again, so each
                # entity is expanded at most once per depth and the bound ends every cycle. The fact of
                # the last hop is then picked among those linking an entity to one a level nearer; the
                # start's lookup and the names come in the same statement (one round trip).
                s = self._s
                await cur.execute(
                    f"""WITH RECURSIVE st AS (SELECT eid FROM {s}.graph_aliases WHERE user_id = %s AND key = %s),
                    walk(eid, depth) AS (
                        SELECT eid, 0 FROM st
                        UNION
                        SELECT e.other, w.depth + 1 FROM walk w CROSS JOIN LATERAL ({steps}) e WHERE w.depth < %s
                    ), best AS (SELECT eid, min(depth) AS depth FROM walk GROUP BY eid),
                    top AS (
                        SELECT b.eid, b.depth, h.fid FROM best b CROSS JOIN LATERAL (
                            SELECT f.fid FROM {s}.graph_facts f JOIN best p ON p.eid = f.subject
                                WHERE f.user_id = %s AND f.object = b.eid AND p.depth = b.depth - 1 AND {valid}
                            UNION ALL
                            SELECT f.fid FROM {s}.graph_facts f JOIN best p ON p.eid = f.object
                                WHERE f.user_id = %s AND f.subject = b.eid AND p.depth = b.depth - 1 AND {valid}
                            ORDER BY 1 LIMIT 1) h
                        WHERE b.depth > 0 ORDER BY b.depth, b.eid LIMIT %s)
                    SELECT f.id, fs.name, f.relation, fo.name, f.valid_from, f.valid_to, f.memory_id, n.name, top.depth
                    FROM top JOIN {s}.graph_entities n ON n.eid = top.eid JOIN {s}.graph_facts f ON f.fid = top.fid
                    JOIN {s}.graph_entities fs ON fs.eid = f.subject JOIN {s}.graph_entities fo ON fo.eid = f.object
                    ORDER BY top.depth, top.eid""",
                    [user_id, normalise_name(entity), user_id, *vp, user_id, *vp, depth, user_id, *hp, user_id, *hp,
                     limit],
                )  # fmt: skip
                return [
                    Related.model_construct(entity=str(r[7]), depth=int(r[8]), fact=self._fact(r))
                    for r in await cur.fetchall()
                ]

        return await self._store.read("graph related", read)

    async def paths(
        self, source: str, target: str, *, user_id: str, max_depth: int, as_of: datetime | None, limit: int
    ) -> list[list[Fact]]:
        async def read(conn: AsyncConnection[Any]) -> list[list[Fact]]:
            async with self._tx(conn, user_id, read_only=True) as cur:
                a = await self._find(cur, user_id, source)
                b = await self._find(cur, user_id, target)
                if a is None or b is None or a == b:
                    return []
                near, np_ = self._steps("n", as_of)
                steps, vp = self._steps("p", as_of)
                # First how far every entity near the target is from it (a bounded walk back), then
                # simple paths from the source that only step where the target is still in reach.
                await cur.execute(
                    f"""WITH RECURSIVE back(eid, depth) AS (
                        SELECT %s::bigint, 0
                        UNION
                        SELECT e.other, n.depth + 1 FROM back n CROSS JOIN LATERAL ({near}) e WHERE n.depth < %s
                    ), dist AS (SELECT eid, min(depth) AS depth FROM back GROUP BY eid),
                    p(eid, depth, nodes, fids) AS (
                        SELECT %s::bigint, 0, ARRAY[%s::bigint], ARRAY[]::bigint[]
                        UNION ALL
                        SELECT e.other, p.depth + 1, p.nodes || e.other, p.fids || e.fid
                        FROM p CROSS JOIN LATERAL ({steps}) e JOIN dist d ON d.eid = e.other
                        WHERE p.depth < %s AND p.eid <> %s AND e.other <> ALL(p.nodes)
                            AND d.depth <= %s - p.depth - 1
                    )
                    SELECT fids FROM p WHERE eid = %s ORDER BY depth, fids LIMIT %s""",
                    [b, user_id, *np_, user_id, *np_, max_depth - 1, a, a, user_id, *vp, user_id, *vp, max_depth, b,
                     max_depth, b, limit],
                )  # fmt: skip
                chains = [[int(x) for x in r[0]] for r in await cur.fetchall()]
                facts = await self._facts_by_fid(cur, [f for c in chains for f in c])
                return [[facts[f] for f in c] for c in chains]

        return await self._store.read("graph paths", read)

    async def erase(self, *, user_id: str) -> int:
        async def write(conn: AsyncConnection[Any]) -> int:
            async with self._tx(conn, user_id) as cur:
                return await erase_graph(cur, self._s, user_id)

        return await self._store.write("graph erase", write)
