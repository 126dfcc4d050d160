"""The PostgreSQL schema: versioned migrations under an advisory lock, the embedder's record.

Every table lives in one PostgreSQL schema (``memoryport`` unless told
otherwise). Migrations are a list applied in order, each version recorded in
``meta``; they run in one transaction holding a transaction-level advisory
lock, so several processes starting at once migrate exactly once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memoryport._errors import EmbedderMismatch, UsageError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "HNSW_INDEX",
    "SCHEMA_VERSION",
    "SchemaInfo",
    "hnsw_ddl",
    "lock_key",
    "migrate",
    "quote_ident",
    "read_schema",
]

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CONFIG = re.compile(r"[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?")

# The tenant of a row, as the RLS setting spells it: never the empty string a
# reset setting reads as, and never the same for a user and the no-user scope.
TENANT_SQL = "coalesce('u:' || {a}user_id, 'none')"

# Each entry migrates the schema from version i to i + 1. ``{s}`` is the quoted
# schema, ``{cfg}`` the text-search configuration as a SQL literal.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        # The words of a record (stemmed by the schema's text-search
        # configuration), each prefixed by a short hash of its user.
        """CREATE FUNCTION {s}.tenant_prefix(user_id text) RETURNS text
            LANGUAGE sql IMMUTABLE PARALLEL SAFE
            AS $$ SELECT left(md5(coalesce('u:' || user_id, 'none')), 12) || ':' $$""",
        """CREATE FUNCTION {s}.lexemes(user_id text, body text) RETURNS text[]
            LANGUAGE sql IMMUTABLE PARALLEL SAFE
            AS $$ SELECT ARRAY(SELECT {s}.tenant_prefix(user_id) || l
                               FROM unnest(tsvector_to_array(to_tsvector({cfg}::regconfig, body))) AS l) $$""",
        """CREATE TABLE {s}.records(
            rid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            user_id text,
            session_id text,
            agent_id text,
            text text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{{}}',
            created_at timestamptz NOT NULL,
            expires_at timestamptz,
            updated_at timestamptz,
            doclen integer NOT NULL,
            lexemes text[] GENERATED ALWAYS AS ({s}.lexemes(user_id, text)) STORED)""",
        "CREATE INDEX records_scope ON {s}.records(user_id, created_at, rid)",
        "CREATE INDEX records_expiry ON {s}.records(expires_at) WHERE expires_at IS NOT NULL",
        # The inverted index as a table: one row per (user-prefixed stem, record).
        # A btree on text equality, not GIN: under row-level security PostgreSQL
        # uses an index only for leakproof operators, which GIN's array and
        # tsvector operators are not (a GIN index would be ignored for every
        # non-superuser). The stem's prefix is the user's: a posting list is one
        # user's, so a keyword search reads that user's matches only.
        """CREATE TABLE {s}.postings(
            key text NOT NULL,
            rid bigint NOT NULL,
            PRIMARY KEY (key, rid))""",
        # Per-user counts for BM25 (records, words) and for choosing exact or HNSW search.
        """CREATE TABLE {s}.tenants(
            tenant text PRIMARY KEY,
            n bigint NOT NULL,
            words bigint NOT NULL)""",
        # Row-level security: a second wall behind the WHERE clauses. Every
        # transaction of the store sets memoryport.tenant to its scope's user;
        # FORCE makes the policy bind the table's owner too.
        "ALTER TABLE {s}.records ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE {s}.records FORCE ROW LEVEL SECURITY",
        """CREATE POLICY memoryport_tenant ON {s}.records
            USING (coalesce('u:' || user_id, 'none') = current_setting('memoryport.tenant', true)
                   OR current_setting('memoryport.all_tenants', true) = 'on')
            WITH CHECK (coalesce('u:' || user_id, 'none') = current_setting('memoryport.tenant', true)
                   OR current_setting('memoryport.all_tenants', true) = 'on')""",
        "ALTER TABLE {s}.postings ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE {s}.postings FORCE ROW LEVEL SECURITY",
        """CREATE POLICY memoryport_tenant ON {s}.postings
            USING (left(key, 13) = left(md5(current_setting('memoryport.tenant', true)), 12) || ':'
                   OR current_setting('memoryport.all_tenants', true) = 'on')
            WITH CHECK (left(key, 13) = left(md5(current_setting('memoryport.tenant', true)), 12) || ':'
                   OR current_setting('memoryport.all_tenants', true) = 'on')""",
        "ALTER TABLE {s}.tenants ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE {s}.tenants FORCE ROW LEVEL SECURITY",
        """CREATE POLICY memoryport_tenant ON {s}.tenants
            USING (tenant = current_setting('memoryport.tenant', true)
                   OR current_setting('memoryport.all_tenants', true) = 'on')
            WITH CHECK (tenant = current_setting('memoryport.tenant', true)
                   OR current_setting('memoryport.all_tenants', true) = 'on')""",
    ),
    # 2: the entity graph (adapters/postgres/_graph.py): entities with aliases, facts with validity.
    # Every row carries its user; row-level security as for the records.
    (
        """CREATE TABLE {s}.graph_entities(
            eid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id text NOT NULL,
            key text NOT NULL,
            name text NOT NULL)""",
        "CREATE INDEX graph_entities_user ON {s}.graph_entities(user_id)",
        """CREATE TABLE {s}.graph_aliases(
            user_id text NOT NULL,
            key text NOT NULL,
            eid bigint NOT NULL REFERENCES {s}.graph_entities(eid) ON DELETE CASCADE,
            PRIMARY KEY (user_id, key))""",
        "CREATE INDEX graph_aliases_eid ON {s}.graph_aliases(eid)",
        """CREATE TABLE {s}.graph_facts(
            fid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            user_id text NOT NULL,
            subject bigint NOT NULL REFERENCES {s}.graph_entities(eid) ON DELETE CASCADE,
            relation text NOT NULL,
            object bigint NOT NULL REFERENCES {s}.graph_entities(eid) ON DELETE CASCADE,
            valid_from timestamptz NOT NULL,
            valid_to timestamptz,
            memory_id text)""",
        "CREATE INDEX graph_facts_subject ON {s}.graph_facts(user_id, subject, relation)",
        "CREATE INDEX graph_facts_object ON {s}.graph_facts(user_id, object)",
        *(
            statement
            for table in ("graph_entities", "graph_aliases", "graph_facts")
            for statement in (
                f"ALTER TABLE {{s}}.{table} ENABLE ROW LEVEL SECURITY",
                f"ALTER TABLE {{s}}.{table} FORCE ROW LEVEL SECURITY",
                f"""CREATE POLICY memoryport_tenant ON {{s}}.{table}
                    USING ('u:' || user_id = current_setting('memoryport.tenant', true)
                           OR current_setting('memoryport.all_tenants', true) = 'on')
                    WITH CHECK ('u:' || user_id = current_setting('memoryport.tenant', true)
                           OR current_setting('memoryport.all_tenants', true) = 'on')""",
            )
        ),
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)


def quote_ident(name: str, field: str = "schema") -> str:
    """``name`` as a quoted SQL identifier, after checking it is a plain lower-case name."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise UsageError(f"{field} must be a lower-case SQL name (letters, digits, _; at most 63), not {name!r}")
    return f'"{name}"'


HNSW_INDEX = "records_embedding_hnsw"


def hnsw_ddl(schema: str, vector_schema: str, m: int, ef_construction: int, *, concurrently: bool = False) -> str:
    """The CREATE INDEX statement of the HNSW index (cosine) on the records' vectors."""
    if not (2 <= m <= 100 and 4 <= ef_construction <= 1000):
        raise UsageError("HNSW needs m from 2 to 100 and ef_construction from 4 to 1000")
    how = "CONCURRENTLY " if concurrently else ""
    return (
        f"CREATE INDEX {how}IF NOT EXISTS {HNSW_INDEX} ON {quote_ident(schema)}.records "
        f"USING hnsw (embedding {quote_ident(vector_schema, 'vector schema')}.vector_cosine_ops) "
        f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
    )


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def lock_key(schema: str) -> int:
    """The advisory-lock key of a schema's migrations (a signed 64-bit int)."""
    digest = hashlib.sha256(b"memoryport-migrate\x00" + schema.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass(frozen=True)
class SchemaInfo:
    """What ``meta`` says about a schema."""

    version: int
    text_search_config: str | None
    embedder_name: str | None
    embedder_dim: int | None
    vector_schema: str | None  # where the pgvector extension lives, when vectors are on
    has_hnsw: bool = False  # whether the HNSW index exists (and is valid)


async def read_schema(conn: AsyncConnection[Any], schema: str) -> SchemaInfo | None:
    """The schema's meta, or ``None`` when it has not been created."""
    cur = await conn.execute("SELECT to_regclass(%s)", (f"{quote_ident(schema)}.meta",))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        return None
    cur = await conn.execute(f"SELECT key, value FROM {quote_ident(schema)}.meta")
    meta = {str(k): str(v) for k, v in await cur.fetchall()}
    vector_schema = None
    if "embedder_name" in meta:
        cur = await conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        )
        found = await cur.fetchone()
        vector_schema = None if found is None else str(found[0])
    cur = await conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, HNSW_INDEX),
    )
    valid = await cur.fetchone()
    return SchemaInfo(
        has_hnsw=bool(valid is not None and valid[0]),
        version=int(meta.get("schema_version", "0")),
        text_search_config=meta.get("text_search_config"),
        embedder_name=meta.get("embedder_name"),
        embedder_dim=int(meta["embedder_dim"]) if "embedder_dim" in meta else None,
        vector_schema=vector_schema,
    )


def _way_out(schema: str) -> str:
    return (
        "copy the memories into a new schema or database opened with the new embedder "
        f"(`memoryport copy`), or keep the embedder schema {schema!r} was created with"
    )


async def migrate(
    conn: AsyncConnection[Any],
    schema: str = "memoryport",
    *,
    text_search_config: str | None = None,
    embedder_name: str | None = None,
    embedder_dim: int | None = None,
    hnsw: bool = False,
    hnsw_m: int = 16,
    hnsw_ef_construction: int = 64,
) -> SchemaInfo:
    """Create or upgrade ``schema`` (idempotent; safe from several processes at once).

    Holds a transaction-level advisory lock while it works, so concurrent
    migrators run one after the other and the later ones find nothing to do.
    With an embedder, records its name and dimension (first use) and adds the
    ``vector(dim)`` column and its HNSW index; a different embedder than the
    one recorded raises :class:`~memoryport.EmbedderMismatch`.

    Example:
        >>> async with await psycopg.AsyncConnection.connect(dsn) as conn:  # doctest: +SKIP
        ...     await migrate(conn, "memoryport")
    """
    s = quote_ident(schema)
    if text_search_config is not None and not _CONFIG.fullmatch(text_search_config):
        raise UsageError(f"text_search_config must name a text-search configuration, not {text_search_config!r}")
    if (embedder_name is None) != (embedder_dim is None):
        raise UsageError("migrate needs both embedder_name and embedder_dim, or neither")
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.meta(key text PRIMARY KEY, value text NOT NULL)")
        info = await read_schema(conn, schema)
        assert info is not None
        if info.version > SCHEMA_VERSION:
            raise UsageError(
                f"PostgreSQL schema {schema!r} has version {info.version}, newer than this memoryport "
                f"({SCHEMA_VERSION}); upgrade memoryport"
            )
        config = info.text_search_config
        if config is None:
            config = text_search_config or "english"
            nsp, _, cfgname = config.rpartition(".")
            cur = await conn.execute(
                "SELECT 1 FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace "
                "WHERE c.cfgname = %s AND (n.nspname = %s OR (%s = '' AND n.nspname = 'pg_catalog'))",
                (cfgname, nsp, nsp),
            )
            if await cur.fetchone() is None:
                raise UsageError(f"PostgreSQL has no text-search configuration {config!r} (see \\dF in psql)")
            await conn.execute(
                "INSERT INTO " + s + ".meta(key, value) VALUES ('text_search_config', %s)", (config,)
            )
        elif text_search_config is not None and text_search_config != config:
            raise UsageError(
                f"schema {schema!r} indexes words with text-search configuration {config!r}, not "
                f"{text_search_config!r}; open it without text_search_config, or use another schema"
            )
        for statements in MIGRATIONS[info.version :]:
            for statement in statements:
                await conn.execute(statement.format(s=s, cfg=_literal(config)))
        await conn.execute(
            "INSERT INTO " + s + ".meta(key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )
        if embedder_name is not None and embedder_dim is not None:
            await _record_embedder(conn, schema, info, embedder_name, embedder_dim, hnsw, hnsw_m, hnsw_ef_construction)
        final = await read_schema(conn, schema)
        assert final is not None
        return final


async def _record_embedder(
    conn: AsyncConnection[Any],
    schema: str,
    info: SchemaInfo,
    name: str,
    dim: int,
    hnsw: bool,
    hnsw_m: int,
    hnsw_ef_construction: int,
) -> None:
    s = quote_ident(schema)
    if info.embedder_name is not None:
        if info.embedder_name != name or info.embedder_dim != dim:
            raise EmbedderMismatch(
                f"PostgreSQL schema {schema!r} holds vectors of embedder {info.embedder_name!r} "
                f"(dim {info.embedder_dim}) and was opened with {name!r} (dim {dim}); {_way_out(schema)}"
            )
        return
    if not 1 <= dim <= 2000:
        raise UsageError(f"pgvector indexes vectors of 1 to 2000 dimensions; embedder {name!r} has {dim}")
    await conn.execute("SET LOCAL memoryport.all_tenants = 'on'")
    cur = await conn.execute(f"SELECT count(*) FROM {s}.records")
    row = await cur.fetchone()
    count = 0 if row is None else int(row[0])
    if count:
        raise EmbedderMismatch(
            f"PostgreSQL schema {schema!r} holds {count} records without vectors and was opened with "
            f"embedder {name!r}; {_way_out(schema)}"
        )
    cur = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    if await cur.fetchone() is None:
        try:
            async with conn.transaction():
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:
            raise UsageError(
                "vector search needs the pgvector extension, which this database lacks and this role cannot "
                f"create ({type(exc).__name__}); ask an administrator to run: CREATE EXTENSION vector"
            ) from exc
    cur = await conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    )
    found = await cur.fetchone()
    assert found is not None
    vs = quote_ident(str(found[0]), "the vector extension's schema")
    await conn.execute(f"ALTER TABLE {s}.records ADD COLUMN embedding {vs}.vector({int(dim)})")
    if hnsw:
        await conn.execute(hnsw_ddl(schema, str(found[0]), hnsw_m, hnsw_ef_construction))
    await conn.execute(
        "INSERT INTO " + s + ".meta(key, value) VALUES ('embedder_name', %s), ('embedder_dim', %s)",
        (name, str(int(dim))),
    )
