"""A LangGraph ``BaseStore`` over any memoryport backend (extra ``langgraph``).

LangGraph agents keep long-term memory in a store addressed by namespaces
(tuples of strings) and keys. :class:`MemoryportStore` is such a store over a
:class:`~memoryport.GuardedMemory`, so every item goes through the guard: input
checks, scope isolation, expiry, events. A declared **namespace template** says
which labels of a namespace are the scope::

    ("memories", "{user_id}")                            # one namespace per user
    ("users", "{user_id}", "threads", "{session_id}")    # per user and thread
    ("agents", "{agent_id}", "users", "{user_id}", "{kind}")  # {kind}: a free label

``{user_id}``, ``{session_id}`` and ``{agent_id}`` become the record's
:class:`~memoryport.MemoryScope`; any other ``{name}`` is a free label stored
with the item; every other label is a literal that must match exactly. A
namespace that does not fit the template is refused with :class:`NamespaceRefused`
(an :class:`~memoryport.InvalidInput` and a LangGraph ``InvalidNamespaceError``),
never widened: a search or listing must name the user when the template has a
user, so no prefix can reach two users.

How an item maps to a record:

- ``text``: the indexed text of the value: the fields of ``index={"fields": [...]}``
  (LangGraph's JSON-path syntax, ``"$"`` = the whole value, the default), joined
  by newlines; the backend's own keyword or vector search runs on it. An item
  stored with ``index=False`` (or whose fields are all missing) is kept and
  readable but never returned by a search with a query.
- ``metadata``: ``lg_namespace`` (the namespace as a JSON list), ``lg_key``,
  ``lg_value`` (the value as JSON), ``lg_updated_at``, and ``lg_ttl`` (minutes)
  when the item has a TTL. The value therefore counts against
  :attr:`~memoryport.Limits.max_metadata_bytes` (8 KiB by default); a larger
  value is refused with :class:`~memoryport.InvalidInput`, never cut. Raise the
  limit with ``GuardedMemory(store, limits=Limits(max_metadata_bytes=...))``.
- ``id``: derived from the namespace and key (a SHA-256), so ``put`` replaces the
  same record; ``created_at`` is kept across replacements.
- TTL (minutes) becomes ``expires_at``; the guard hides an expired item at once
  (no sweeper needed). Reads refresh a TTL as LangGraph does (``refresh_ttl``,
  ``ttl={"refresh_on_read": ...}``).

The backend needs the ``metadata``, ``get`` and ``delete`` capabilities (and
``export`` for :meth:`~MemoryportStore.list_namespaces`, ``expiry`` for TTLs,
``session_scope``/``agent_scope`` for templates that use them).

Example:
    >>> from memoryport import SQLiteMemory
    >>> from memoryport.integrations.langgraph import MemoryportStore
    >>> store = MemoryportStore(SQLiteMemory("memory.db"), namespace=("memories", "{user_id}"))  # doctest: +SKIP
    >>> store.put(("memories", "ann"), "tea", {"text": "Ann likes green tea"})  # doctest: +SKIP
    >>> [i.key for i in store.search(("memories", "ann"), query="tea")]  # doctest: +SKIP
    ['tea']
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from .._errors import InvalidInput, UnsupportedCapability, UsageError
from .._extras import require
from .._guard import GuardedMemory
from .._port import Capability
from .._records import MemoryHit, MemoryRecord, MemoryScope, MemoryUpdate, utcnow
from .._sync import run_sync

require("langgraph.store.base", extra="langgraph", feature="memoryport.integrations.langgraph", package="langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
)

__all__ = ["MemoryportStore", "NamespaceRefused", "NamespaceTemplate"]

SCOPE_FIELDS = ("user_id", "session_id", "agent_id")
_PLACEHOLDER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_NEEDS = {
    "session_id": Capability.SESSION_SCOPE,
    "agent_id": Capability.AGENT_SCOPE,
}
META_NAMESPACE = "lg_namespace"
META_KEY = "lg_key"
META_VALUE = "lg_value"
META_UPDATED = "lg_updated_at"
META_TTL = "lg_ttl"
META_UNINDEXED = "lg_unindexed"


class NamespaceRefused(InvalidInput, InvalidNamespaceError):
    """A namespace (or prefix) that does not fit the store's template; nothing was read or written.

    Both an :class:`~memoryport.InvalidInput` (``field="namespace"``) and
    LangGraph's ``InvalidNamespaceError``, so either ``except`` catches it.

    Example:
        >>> store.get(("memories",), "k")  # doctest: +SKIP
        Traceback (most recent call last):
        NamespaceRefused: namespace ('memories',) does not fit the template ('memories', '{user_id}') ...
    """


@dataclass(frozen=True)
class NamespaceTemplate:
    """A validated namespace template: literal labels and ``{placeholders}``.

    Attributes:
        labels: the template as given, e.g. ``("memories", "{user_id}")``.

    Example:
        >>> t = NamespaceTemplate.parse(("users", "{user_id}", "threads", "{session_id}"))
        >>> t.scope_of(("users", "ann", "threads", "t1"))
        MemoryScope(user_id='ann', session_id='t1', agent_id=None)
    """

    labels: tuple[str, ...]

    @classmethod
    def parse(cls, template: Sequence[str]) -> NamespaceTemplate:
        """Check ``template`` and return it; :class:`~memoryport.UsageError` says what is wrong."""
        if isinstance(template, str) or not isinstance(template, Sequence) or not template:
            raise UsageError(
                f'namespace must be a non-empty tuple of labels, e.g. ("memories", "{{user_id}}"), not {template!r}'
            )
        labels = tuple(template)
        seen: set[str] = set()
        for label in labels:
            if not isinstance(label, str) or not label:
                raise UsageError(f"namespace template labels must be non-empty strings, not {label!r}")
            name = _placeholder(label)
            if name is None:
                if "{" in label or "}" in label:
                    raise UsageError(f"template label {label!r}: a placeholder is a whole label like '{{user_id}}'")
                if "." in label:
                    raise UsageError(f"template label {label!r}: LangGraph namespace labels cannot contain '.'")
                continue
            if name in seen:
                raise UsageError(f"template placeholder {label!r} appears twice")
            seen.add(name)
        if not seen & set(SCOPE_FIELDS):
            raise UsageError(
                f"namespace template {labels!r} names no scope: use at least one of "
                "{user_id}, {session_id}, {agent_id} (whose memory it is must come from the namespace)"
            )
        if labels[0] == "langgraph":
            raise UsageError("LangGraph reserves the root label 'langgraph'")
        return cls(labels)

    @property
    def placeholders(self) -> dict[int, str]:
        """Position -> placeholder name."""
        return {i: n for i, label in enumerate(self.labels) if (n := _placeholder(label)) is not None}

    def _refuse(self, namespace: tuple[str, ...], why: str) -> NamespaceRefused:
        return NamespaceRefused(
            f"namespace {namespace!r} does not fit the template {self.labels!r}: {why}", field="namespace"
        )

    def _check_labels(self, namespace: Any, *, prefix: bool) -> tuple[str, ...]:
        if not isinstance(namespace, tuple):
            namespace = tuple(namespace) if isinstance(namespace, list) else namespace
        if not isinstance(namespace, tuple) or not all(isinstance(x, str) for x in namespace):
            raise NamespaceRefused(f"a namespace is a tuple of strings, not {namespace!r}", field="namespace")
        if len(namespace) > len(self.labels) or (not prefix and len(namespace) != len(self.labels)):
            raise self._refuse(namespace, f"it must have {len(self.labels)} labels")
        holes = self.placeholders
        for i, label in enumerate(namespace):
            if i in holes:
                if not label or "." in label:
                    raise self._refuse(namespace, f"label {i} must be a non-empty string without '.'")
                if holes[i] in SCOPE_FIELDS and label == "*":
                    raise self._refuse(namespace, f"{{{holes[i]}}} cannot be the wildcard '*'")
            elif label != self.labels[i]:
                raise self._refuse(namespace, f"label {i} must be {self.labels[i]!r}")
        return namespace

    def _scope(self, namespace: tuple[str, ...]) -> MemoryScope:
        ids = {name: namespace[i] for i, name in self.placeholders.items() if i < len(namespace)}
        wanted = [n for n in self.placeholders.values() if n in SCOPE_FIELDS]
        if "user_id" in wanted and "user_id" not in ids:
            raise self._refuse(namespace, "it must name the user ({user_id}); a prefix may never reach two users")
        if not any(n in ids for n in SCOPE_FIELDS):
            raise self._refuse(namespace, "it must name whose memory it is")
        try:
            return MemoryScope(**{n: ids[n] for n in SCOPE_FIELDS if n in ids})
        except InvalidInput as exc:
            raise NamespaceRefused(f"namespace {namespace!r}: {exc}", field="namespace") from None

    def scope_of(self, namespace: Sequence[str]) -> MemoryScope:
        """The scope of a full namespace (for get, put, delete); refused unless it fits exactly."""
        return self._scope(self._check_labels(namespace, prefix=False))

    def scope_of_prefix(self, prefix: Sequence[str]) -> MemoryScope:
        """The scope a search prefix covers; refused unless it fits and names the user (when there is one)."""
        return self._scope(self._check_labels(prefix, prefix=True))


def _placeholder(label: str) -> str | None:
    match = _PLACEHOLDER.match(label)
    return match.group(1) if match else None


def _record_id(namespace: tuple[str, ...], key: str) -> str:
    blob = json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def _ttl_minutes(ttl: Any) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise InvalidInput(f"ttl must be a positive number of minutes or None, not {ttl!r}", field="ttl")
    return float(ttl)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0``, but ``True`` is not ``1`` and ``"1"`` is not ``1``.

    LangGraph's own stores let ``{"n": 1}`` match ``True``; the contract suite does not.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) and _number(b):
        return bool(a == b)
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return _match(a, b) if isinstance(b, (Mapping, list, tuple)) else False
    return type(a) is type(b) and bool(a == b)


def _match(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: equality (nested dicts and lists) and ``$eq $ne $gt $gte $lt $lte``."""
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, Mapping) and all(_match(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_match(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return _same(value, wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _same(value, operand)
    if op == "$ne":
        return not _same(value, operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if not _number(value) or not _number(operand):
            return False
        a, b = float(value), float(operand)
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise InvalidInput(f"unsupported filter operator {op!r}; use $eq $ne $gt $gte $lt $lte", field="filter")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class MemoryportStore(BaseStore):
    """A LangGraph store whose items live in a memoryport backend, scoped by a namespace template.

    Args:
        memory: any :class:`~memoryport.GuardedMemory` (``SQLiteMemory(path)``,
            ``GuardedMemory(MyStore())``, ...).
        namespace: the template, e.g. ``("memories", "{user_id}")``; see the module docs.
        index: LangGraph's index config; only ``fields`` is read (which parts of
            a value are searched). The backend embeds with its own embedder, so
            ``embed`` and ``dims`` are refused rather than ignored.
        ttl: LangGraph's TTL config: ``default_ttl`` (minutes) and
            ``refresh_on_read`` (default ``True``). Expired items are always
            omitted; ``sweep_interval_minutes`` is not needed
            (``await memory.purge()`` removes them physically).

    Raises:
        UsageError: a bad template, or a backend that lacks what the store needs.

    Example:
        >>> store = MemoryportStore(SQLiteMemory("m.db"), namespace=("memories", "{user_id}"),  # doctest: +SKIP
        ...                         index={"fields": ["text"]})
        >>> agent = create_react_agent(model, tools, store=store)  # doctest: +SKIP
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: GuardedMemory,
        *,
        namespace: Sequence[str],
        index: Mapping[str, Any] | None = None,
        ttl: TTLConfig | Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(memory, GuardedMemory):
            raise UsageError(
                f"MemoryportStore takes a GuardedMemory (e.g. SQLiteMemory(path)), not {type(memory).__name__}"
            )
        self.memory = memory
        self.template = NamespaceTemplate.parse(namespace)
        caps = memory.capabilities
        needed = [Capability.METADATA, Capability.GET, Capability.DELETE]
        needed += [_NEEDS[n] for n in self.template.placeholders.values() if n in _NEEDS]
        missing = [c.value for c in needed if c not in caps]
        if missing:
            raise UsageError(f"the {memory.backend!r} backend cannot back a LangGraph store: it lacks {missing}")
        index = dict(index or {})
        unknown = set(index) - {"fields", "dims", "embed"}
        if unknown:
            raise UsageError(f"index: unknown keys {sorted(unknown)}; only 'fields' is read")
        if "embed" in index or "dims" in index:
            raise UsageError(
                "index: 'embed' and 'dims' do not apply; the memoryport backend embeds with its own embedder "
                "(e.g. SQLiteMemory(path, embedder=...)). Pass only index={'fields': [...]}"
            )
        fields = index.get("fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise UsageError(f"index['fields'] must be a list of JSON paths, not {fields!r}")
        self.fields: list[str] = list(fields)
        self.index_config = {"fields": self.fields}
        ttl = dict(ttl or {})
        unknown = set(ttl) - {"default_ttl", "refresh_on_read", "omit_expired", "sweep_interval_minutes"}
        if unknown:
            raise UsageError(f"ttl: unknown keys {sorted(unknown)}")
        if ttl.get("omit_expired") is False:
            raise UsageError("ttl: omit_expired=False is not offered; the guard never returns an expired item")
        default_ttl = _ttl_minutes(ttl.get("default_ttl"))
        if default_ttl is not None and Capability.EXPIRY not in caps:
            raise UsageError(f"ttl: the {memory.backend!r} backend has no expiry capability")
        self._ttl: TTLConfig = {"default_ttl": default_ttl, "refresh_on_read": bool(ttl.get("refresh_on_read", True))}
        self.ttl_config = self._ttl

    # -- the two methods LangGraph asks of a store --------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order and return their results; blocking twin of :meth:`abatch`.

        Called inside a running event loop it raises :class:`~memoryport.UsageError`
        naming ``abatch`` (use the ``a``-methods of the store there).
        """
        return run_sync(self.abatch(ops), method="abatch", sync="batch", owner="store")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (a later op sees what an earlier put wrote) and return their results.

        Not one transaction: when an op fails, the ops before it stay done.
        """
        ops = list(ops)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                raise UsageError(f"unknown LangGraph store operation {type(op).__name__}")
        return results

    # -- operations ----------------------------------------------------------------

    def _refresh(self, refresh: bool | None) -> bool:
        if refresh is None:
            return bool(self._ttl.get("refresh_on_read", True))
        return bool(refresh)

    def _item(self, record: MemoryRecord) -> Item:
        md = record.metadata
        return Item(
            namespace=tuple(json.loads(str(md[META_NAMESPACE]))),
            key=str(md[META_KEY]),
            value=json.loads(str(md[META_VALUE])),
            created_at=record.created_at,
            updated_at=datetime.fromisoformat(str(md[META_UPDATED])),
        )

    async def _get(self, op: GetOp) -> Item | None:
        namespace = tuple(op.namespace)
        scope = self.template.scope_of(namespace)
        record = await self.memory.get(_record_id(namespace, op.key), scope=scope)
        if record is None or record.metadata.get(META_KEY) != op.key:
            return None
        if self._refresh(op.refresh_ttl) and record.metadata.get(META_TTL) is not None:
            record = await self._touch(record)
        return self._item(record)

    async def _touch(self, record: MemoryRecord) -> MemoryRecord:
        """Move a TTL item's expiry to now + its TTL (LangGraph's refresh on read)."""
        ttl = float(cast(float, record.metadata[META_TTL]))
        fresh = record.model_copy(update={"expires_at": utcnow() + timedelta(minutes=ttl)})
        await self._replace(record, fresh)
        return fresh

    async def _replace(self, old: MemoryRecord | None, new: MemoryRecord) -> None:
        """Put ``new`` in place of ``old`` (same id).

        With the ``update`` capability, one update (atomic where the store has
        transactions); without it, delete and add, putting ``old`` back if the add fails.
        """
        caps = self.memory.capabilities
        if old is not None and Capability.UPDATE in caps:
            change: dict[str, Any] = {"id": cast(str, old.id), "text": new.text, "metadata": dict(new.metadata)}
            if Capability.EXPIRY in caps:
                change["expires_at"] = new.expires_at
            if await self.memory.update([MemoryUpdate(**change)], scope=old.scope):
                return
            old = None  # gone in the meantime (expired, deleted): add it afresh
        if old is not None:
            await self.memory.delete([cast(str, old.id)], scope=old.scope)
        try:
            try:
                await self.memory.add([new])
            except InvalidInput as exc:
                if old is not None or not exc.field.endswith(".id"):
                    raise
                # The id is taken by the item's expired past self, hidden but not yet
                # purged (the guard never shows it): remove it and add again.
                await self.memory.delete([cast(str, new.id)], scope=new.scope)
                await self.memory.add([new])
        except BaseException:
            if old is not None:
                await self.memory.add([old])
            raise

    def _text(self, value: Mapping[str, Any], index: Any) -> str | None:
        if index is False:
            return None
        fields = self.fields if index is None else list(index)
        texts: list[str] = []
        for path in fields:
            texts.extend(t for t in get_text_at_path(value, path) if t.strip())
        return "\n".join(texts) or None

    async def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        scope = self.template.scope_of(namespace)
        if not isinstance(op.key, str) or not op.key:
            raise InvalidInput("key must be a non-empty string", field="key")
        record_id = _record_id(namespace, op.key)
        old = await self.memory.get(record_id, scope=scope)
        if op.value is None:
            if old is not None:
                await self.memory.delete([record_id], scope=scope)
            return
        if not isinstance(op.value, Mapping):
            kind = type(op.value).__name__
            raise InvalidInput(f"value must be a dict (or None to delete), not {kind}", field="value")
        ttl = op.ttl
        if isinstance(ttl, NotProvided):  # the store's default
            ttl = self._ttl.get("default_ttl")
        minutes = _ttl_minutes(ttl)
        if minutes is not None and Capability.EXPIRY not in self.memory.capabilities:
            raise UnsupportedCapability(
                f"ttl needs the expiry capability, which the {self.memory.backend!r} backend lacks",
                capability=Capability.EXPIRY.value,
                backend=self.memory.backend,
            )
        try:
            value_json = json.dumps(dict(op.value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"value must be JSON-serialisable: {exc}", field="value") from None
        text = self._text(op.value, op.index)
        now = utcnow()
        metadata: dict[str, Any] = {
            META_NAMESPACE: json.dumps(list(namespace), ensure_ascii=False),
            META_KEY: op.key,
            META_VALUE: value_json,
            META_UPDATED: now.isoformat(),
        }
        if minutes is not None:
            metadata[META_TTL] = minutes
        metadata[META_UNINDEXED] = text is None
        created = old.created_at if old is not None else now
        record = MemoryRecord(
            id=record_id,
            scope=scope,
            text=text if text is not None else op.key,
            metadata=metadata,
            created_at=created,
            expires_at=None if minutes is None else now + timedelta(minutes=minutes),
        )
        await self._replace(old, record)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        scope = self.template.scope_of_prefix(prefix)
        for name, bound in (("limit", op.limit), ("offset", op.offset)):
            if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
                raise InvalidInput(f"{name} must be a non-negative integer, not {bound!r}", field=name)
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise InvalidInput("filter must be a dict", field="filter")
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidInput("query must be a string", field="query")
        if op.limit == 0:
            return []
        query = (op.query or "").strip()
        wanted = op.offset + op.limit
        max_k = self.memory.limits.max_k
        if wanted > max_k:
            raise InvalidInput(
                f"offset + limit is {wanted}; the backend returns at most {max_k} (Limits.max_k)", field="limit"
            )
        full = prefix if len(prefix) == len(self.template.labels) else None
        push = Capability.FILTERS in self.memory.capabilities
        filters: dict[str, Any] = {}
        if push and full is not None:
            filters[META_NAMESPACE] = json.dumps(list(full), ensure_ascii=False)
        if push and query:
            filters[META_UNINDEXED] = False
        # When some items may be dropped here (a value filter, a namespace or
        # index check the backend could not do), ask for as many as allowed and
        # say so below if that was not enough, rather than return a short page.
        lossy = bool(op.filter) or not push or full is None
        k = max_k if lossy else wanted
        hits = await self.memory.search(query, scope=scope, k=k, filters=filters or None)
        found: list[tuple[MemoryHit, tuple[str, ...], Any]] = []
        for hit in hits:
            md = hit.record.metadata
            if META_VALUE not in md or META_NAMESPACE not in md:
                continue  # a record some other writer put in this scope: not a LangGraph item
            namespace = tuple(json.loads(str(md[META_NAMESPACE])))
            if namespace[: len(prefix)] != prefix:
                continue
            if query and md.get(META_UNINDEXED):
                continue
            value = json.loads(str(md[META_VALUE]))
            if op.filter and not all(_match(value.get(k), v) for k, v in op.filter.items()):
                continue
            found.append((hit, namespace, value))
            if len(found) >= wanted:
                break
        if lossy and len(hits) >= k and len(found) < wanted:
            raise InvalidInput(
                f"the best {k} records in this scope held only {len(found)} items matching the namespace and "
                f"filter; fewer than offset + limit = {wanted}. Search a longer namespace prefix or a narrower query",
                field="filter",
            )
        page: list[SearchItem] = []
        refresh = self._refresh(op.refresh_ttl)
        for hit, namespace, value in found[op.offset : wanted]:
            record = hit.record
            if refresh and record.metadata.get(META_TTL) is not None:
                record = await self._touch(record)
            md = record.metadata
            page.append(
                SearchItem(
                    namespace=namespace,
                    key=str(md[META_KEY]),
                    value=value,
                    created_at=record.created_at,
                    updated_at=datetime.fromisoformat(str(md[META_UPDATED])),
                    score=float(hit.score) if query else None,
                )
            )
        return page

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] | None = None
        suffixes: list[MatchCondition] = []
        for cond in op.match_conditions or ():
            if cond.match_type == "prefix":
                if prefix is not None:
                    raise InvalidInput("list_namespaces takes one prefix condition", field="prefix")
                prefix = tuple(cond.path)
            else:
                suffixes.append(cond)
        if prefix is None:
            raise NamespaceRefused(
                f"list_namespaces needs a prefix that names whose memory it is, per the template "
                f"{self.template.labels!r}; it never lists across users",
                field="namespace",
            )
        holes = self.template.placeholders
        # '*' is LangGraph's wildcard: allowed on a literal or a free label, never on a scope label
        # (the template refuses it there), so a listing still names whose memory it is.
        concrete = tuple(
            label if label != "*" or holes.get(i) in SCOPE_FIELDS else "_" if i in holes else self.template.labels[i]
            for i, label in enumerate(prefix)
        )
        scope = self.template.scope_of_prefix(concrete)
        if Capability.EXPORT not in self.memory.capabilities:
            raise UnsupportedCapability(
                f"list_namespaces needs the export capability, which the {self.memory.backend!r} backend lacks",
                capability=Capability.EXPORT.value,
                backend=self.memory.backend,
            )
        found: set[tuple[str, ...]] = set()
        for record in await self.memory.export(scope):
            raw = record.metadata.get(META_NAMESPACE)
            if raw is None or META_VALUE not in record.metadata:
                continue
            namespace = tuple(json.loads(str(raw)))
            if not _fits(namespace, prefix, "prefix") or not all(_fits(namespace, s.path, "suffix") for s in suffixes):
                continue
            found.add(namespace if op.max_depth is None else namespace[: op.max_depth])
        return sorted(found)[op.offset : op.offset + op.limit]


def _fits(namespace: tuple[str, ...], path: Sequence[str], how: str) -> bool:
    if len(namespace) < len(path):
        return False
    ends = (namespace[: len(path)], tuple(path)) if how == "prefix" else (namespace[-len(path) :], tuple(path))
    pairs = zip(*ends, strict=True) if path else iter(())
    return all(p == "*" or a == p for a, p in pairs)
