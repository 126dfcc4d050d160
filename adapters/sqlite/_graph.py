"""The graph capability on SQLite: entities, aliases and facts in the memory file, walked by recursive CTEs.

``SQLiteGraph(memory)`` shares the file (and its connections, locks and erasure)
of a :class:`~memoryport.adapters.sqlite.SQLiteMemory`; its tables come from the
file's migration list. Erasing a user through the memory
(``delete(scope=MemoryScope(user_id=...))``) deletes their graph rows in the same
transaction (see :func:`erase_graph`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, TypeVar

from memoryport._errors import InvalidInput, UsageError
from memoryport._graph import Fact, KnowledgeGraph, NewFact, Related, normalise_name
from memoryport._guard import GuardedMemory

from ._rows import Conn

if TYPE_CHECKING:
    from ._store import SQLiteStore

T = TypeVar("T")

__all__ = ["GRAPH_DDL", "SQLiteGraph", "SQLiteGraphStore", "erase_graph"]

GRAPH_DDL: tuple[str, ...] = (
    "CREATE TABLE graph_entities(eid INTEGER PRIMARY KEY, user_id TEXT NOT NULL, name TEXT NOT NULL)",
    """CREATE TABLE graph_aliases(user_id TEXT NOT NULL, key TEXT NOT NULL, eid INTEGER NOT NULL,
        PRIMARY KEY(user_id, key)) WITHOUT ROWID""",
    "CREATE INDEX graph_aliases_eid ON graph_aliases(eid)",
    """CREATE TABLE graph_facts(fid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
        subject INTEGER NOT NULL, relation TEXT NOT NULL, object INTEGER NOT NULL,
        valid_from INTEGER NOT NULL, valid_to INTEGER, memory_id TEXT)""",
    "CREATE INDEX graph_facts_subject ON graph_facts(user_id, subject, relation)",
    "CREATE INDEX graph_facts_object ON graph_facts(user_id, object)",
)
"""The graph's tables: one migration of the SQLite file (``_schema.MIGRATIONS``)."""

_FOREVER = 2**62


def _us(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000)


def _dt(us: int | None) -> datetime | None:
    return None if us is None else datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)


def erase_graph(conn: Conn, user_id: str) -> int:
    """Delete every graph row of ``user_id`` (in the caller's transaction); returns how many facts went."""
    n = conn.execute("DELETE FROM graph_facts WHERE user_id = ?", (user_id,)).rowcount
    n_entities = conn.execute("DELETE FROM graph_entities WHERE user_id = ?", (user_id,)).rowcount
    conn.execute("DELETE FROM graph_aliases WHERE user_id = ?", (user_id,))
    return int(n) + int(n_entities)


def _valid(as_of: int | None, alias: str = "f") -> tuple[str, list[int]]:
    if as_of is None:
        return f"{alias}.valid_to IS NULL", []
    return f"{alias}.valid_from <= ? AND ({alias}.valid_to IS NULL OR ? < {alias}.valid_to)", [as_of, as_of]


class SQLiteGraphStore:
    """The :class:`~memoryport.GraphPort` of a SQLite memory file (plain storage; hosts hold a KnowledgeGraph)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._db = store.db

    async def _run(self, fn: Callable[[], T], *, write: bool = False) -> T:
        return await self._store._run(fn, write=write)

    # -- entities ------------------------------------------------------------

    @staticmethod
    def _find(conn: Conn, user_id: str, name: str) -> int | None:
        row = conn.execute(
            "SELECT eid FROM graph_aliases WHERE user_id = ? AND key = ?", (user_id, normalise_name(name))
        ).fetchone()
        return None if row is None else int(row[0])

    @classmethod
    def _ensure(cls, conn: Conn, user_id: str, name: str) -> int:
        eid = cls._find(conn, user_id, name)
        if eid is None:
            eid = int(
                conn.execute("INSERT INTO graph_entities(user_id, name) VALUES (?, ?)", (user_id, name)).lastrowid
            )
            conn.execute(
                "INSERT INTO graph_aliases(user_id, key, eid) VALUES (?, ?, ?)", (user_id, normalise_name(name), eid)
            )
        return eid

    async def add_entity(self, name: str, aliases: Sequence[str], *, user_id: str) -> str:
        def write(conn: Conn) -> str:
            eid = self._ensure(conn, user_id, name)
            for i, alias in enumerate(aliases):
                other = self._find(conn, user_id, alias)
                if other is not None and other != eid:
                    raise InvalidInput(f"aliases[{i}] already names another entity", field=f"aliases[{i}]")
                if other is None:
                    conn.execute(
                        "INSERT INTO graph_aliases(user_id, key, eid) VALUES (?, ?, ?)",
                        (user_id, normalise_name(alias), eid),
                    )
            return str(conn.execute("SELECT name FROM graph_entities WHERE eid = ?", (eid,)).fetchone()[0])

        return await self._run(lambda: self._db.write(write), write=True)

    # -- facts ---------------------------------------------------------------

    _FACT_SQL = (
        "SELECT f.id, s.name, f.relation, o.name, f.valid_from, f.valid_to, f.memory_id FROM graph_facts f "
        "JOIN graph_entities s ON s.eid = f.subject JOIN graph_entities o ON o.eid = f.object"
    )

    @staticmethod
    def _fact(row: Sequence[object]) -> Fact:
        return Fact(
            id=str(row[0]),
            subject=str(row[1]),
            relation=str(row[2]),
            object=str(row[3]),
            valid_from=_dt(int(row[4])),  # type: ignore[call-overload]
            valid_to=_dt(None if row[5] is None else int(row[5])),  # type: ignore[call-overload]
            memory_id=None if row[6] is None else str(row[6]),
        )

    def _facts_by_fid(self, conn: Conn, fids: Sequence[int]) -> dict[int, Fact]:
        out: dict[int, Fact] = {}
        for i in range(0, len(fids), 500):
            chunk = list(fids[i : i + 500])
            rows = conn.execute(
                f"SELECT f.fid, f.id, s.name, f.relation, o.name, f.valid_from, f.valid_to, f.memory_id "
                f"FROM graph_facts f JOIN graph_entities s ON s.eid = f.subject "
                f"JOIN graph_entities o ON o.eid = f.object WHERE f.fid IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            for row in rows:
                out[int(row[0])] = self._fact(row[1:])
        return out

    async def add_facts(
        self, facts: Sequence[NewFact], *, user_id: str, now: datetime, single_valued: frozenset[str]
    ) -> list[Fact]:
        def write(conn: Conn) -> list[Fact]:
            made: list[int] = []
            for fact in facts:
                s = self._ensure(conn, user_id, fact.subject)
                o = self._ensure(conn, user_id, fact.object)
                start = _us(fact.valid_from or now)
                same = conn.execute(
                    "SELECT fid FROM graph_facts WHERE user_id = ? AND subject = ? AND relation = ? AND object = ? "
                    "AND valid_to IS NULL",
                    (user_id, s, fact.relation, o),
                ).fetchone()
                if same is not None:
                    made.append(int(same[0]))
                    continue
                valid_to = None
                if fact.relation in single_valued:
                    current = conn.execute(
                        "SELECT fid, valid_from FROM graph_facts WHERE user_id = ? AND subject = ? AND relation = ? "
                        "AND valid_to IS NULL",
                        (user_id, s, fact.relation),
                    ).fetchall()
                    for fid, began in current:
                        if int(began) <= start:
                            conn.execute("UPDATE graph_facts SET valid_to = ? WHERE fid = ?", (start, fid))
                        else:
                            # The current fact began later: the new one is history, true until then.
                            valid_to = int(began) if valid_to is None else min(valid_to, int(began))
                if valid_to is not None and valid_to <= start:
                    raise InvalidInput(
                        f"a {fact.relation!r} fact of {fact.subject!r} already starts at that time", field="valid_from"
                    )
                cur = conn.execute(
                    "INSERT INTO graph_facts(id, user_id, subject, relation, object, valid_from, valid_to, memory_id) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (uuid.uuid4().hex, user_id, s, fact.relation, o, start, valid_to, fact.memory_id),
                )
                made.append(int(cur.lastrowid))
            found = self._facts_by_fid(conn, made)
            return [found[f] for f in made]

        return await self._run(lambda: self._db.write(write), write=True)

    async def facts_about(
        self, entity: str, *, user_id: str, as_of: datetime | None, history: bool, limit: int
    ) -> list[Fact]:
        def read(conn: Conn) -> list[Fact]:
            eid = self._find(conn, user_id, entity)
            if eid is None:
                return []
            if history:
                valid, params = "1", list[int]()
            else:
                valid, params = _valid(None if as_of is None else _us(as_of))
            rows = conn.execute(
                # Two indexed lookups (by subject, by object) rather than an OR that scans the user's facts.
                f"{self._FACT_SQL} WHERE f.fid IN ("
                "SELECT fid FROM graph_facts INDEXED BY graph_facts_subject WHERE user_id = ? AND subject = ? "
                "UNION ALL SELECT fid FROM graph_facts INDEXED BY graph_facts_object WHERE user_id = ? AND object = ?) "
                f"AND {valid} "
                "ORDER BY f.valid_from, f.fid LIMIT ?",
                [user_id, eid, user_id, eid, *params, limit],
            ).fetchall()
            return [self._fact(r) for r in rows]

        return await self._run(lambda: self._db.read(read))

    async def related(
        self, entity: str, *, user_id: str, depth: int, as_of: datetime | None, limit: int
    ) -> list[Related]:
        def read(conn: Conn) -> list[Related]:
            start = self._find(conn, user_id, entity)
            if start is None:
                return []
            valid, vp = _valid(None if as_of is None else _us(as_of))
            # Two recursive steps (out along subject->object, in along object->subject); UNION drops
            # repeated (entity, depth) pairs, and the depth bound ends every cycle.
            rows = conn.execute(
                f"""WITH RECURSIVE walk(eid, depth, fid) AS (
                    SELECT ?, 0, NULL
                    UNION
                    SELECT f.object, w.depth + 1, f.fid FROM walk w
                        CROSS JOIN graph_facts f INDEXED BY graph_facts_subject
                        ON f.user_id = ? AND f.subject = w.eid WHERE w.depth < ? AND {valid}
                    UNION
                    SELECT f.subject, w.depth + 1, f.fid FROM walk w
                        CROSS JOIN graph_facts f INDEXED BY graph_facts_object
                        ON f.user_id = ? AND f.object = w.eid WHERE w.depth < ? AND {valid}
                )
                SELECT eid, MIN(depth), fid FROM walk WHERE eid != ? GROUP BY eid ORDER BY 2, 1 LIMIT ?""",
                [start, user_id, depth, *vp, user_id, depth, *vp, start, limit],
            ).fetchall()
            facts = self._facts_by_fid(conn, [int(r[2]) for r in rows])
            names = (
                dict(
                    conn.execute(
                        f"SELECT eid, name FROM graph_entities WHERE eid IN ({','.join('?' * len(rows))})",
                        [int(r[0]) for r in rows],
                    ).fetchall()
                )
                if rows
                else {}
            )
            return [Related(entity=names[int(r[0])], depth=int(r[1]), fact=facts[int(r[2])]) for r in rows]

        return await self._run(lambda: self._db.read(read))

    async def paths(
        self, source: str, target: str, *, user_id: str, max_depth: int, as_of: datetime | None, limit: int
    ) -> list[list[Fact]]:
        def read(conn: Conn) -> list[list[Fact]]:
            a = self._find(conn, user_id, source)
            b = self._find(conn, user_id, target)
            if a is None or b is None or a == b:
                return []
            valid, vp = _valid(None if as_of is None else _us(as_of))
            rows = conn.execute(
                f"""WITH RECURSIVE p(eid, depth, nodes, fids) AS (
                    SELECT ?, 0, ',' || ? || ',', ''
                    UNION ALL
                    SELECT f.object, p.depth + 1, p.nodes || f.object || ',', p.fids || f.fid || ','
                        FROM p CROSS JOIN graph_facts f INDEXED BY graph_facts_subject
                        ON f.user_id = ? AND f.subject = p.eid
                        WHERE p.depth < ? AND p.eid != ? AND instr(p.nodes, ',' || f.object || ',') = 0 AND {valid}
                    UNION ALL
                    SELECT f.subject, p.depth + 1, p.nodes || f.subject || ',', p.fids || f.fid || ','
                        FROM p CROSS JOIN graph_facts f INDEXED BY graph_facts_object
                        ON f.user_id = ? AND f.object = p.eid
                        WHERE p.depth < ? AND p.eid != ? AND instr(p.nodes, ',' || f.subject || ',') = 0 AND {valid}
                )
                SELECT fids FROM p WHERE eid = ? ORDER BY depth, fids LIMIT ?""",
                [a, a, user_id, max_depth, b, *vp, user_id, max_depth, b, *vp, b, limit],
            ).fetchall()
            chains = [[int(x) for x in str(r[0]).strip(",").split(",")] for r in rows]
            facts = self._facts_by_fid(conn, sorted({f for c in chains for f in c}))
            return [[facts[f] for f in c] for c in chains]

        return await self._run(lambda: self._db.read(read))

    async def erase(self, *, user_id: str) -> int:
        from ._erasure import mark_erased

        def write(conn: Conn) -> int:
            n = erase_graph(conn, user_id)
            if n:
                mark_erased(conn)
            return n

        return await self._run(lambda: self._db.write(write, erasing=True), write=True)


def SQLiteGraph(memory: GuardedMemory, *, single_valued: Iterable[str] = ()) -> KnowledgeGraph:
    """The entity graph of a SQLite memory file, guarded: facts that know when they were true.

    The same as ``KnowledgeGraph(memory, single_valued=...)``, checking that ``memory``
    is a SQLite one.

    Args:
        memory: a :func:`SQLiteMemory`; the graph lives in the same file and is erased with the user.
        single_valued: relations that hold one object per subject at a time (``"lives_in"``,
            ``"works_at"``): a new fact closes the current one (see :mod:`memoryport._graph`).

    Example:
        >>> from memoryport import MemoryScope, NewFact, SQLiteMemory
        >>> from memoryport.adapters.sqlite import SQLiteGraph
        >>> graph = SQLiteGraph(SQLiteMemory("memory.db"), single_valued={"lives_in"})  # doctest: +SKIP
    """
    from ._store import SQLiteStore

    if not isinstance(memory, GuardedMemory) or not isinstance(memory.store, SQLiteStore):
        raise UsageError("SQLiteGraph() takes a SQLiteMemory(...) (the graph lives in its file)")
    return KnowledgeGraph(memory, single_valued=single_valued)
