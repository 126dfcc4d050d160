"""Move memories between backends: export a scope from one, add it to another."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._errors import MemoryportError, UnsupportedCapability, UsageError
from ._guard import GuardedMemory
from ._port import Capability, SupportsCheckRecords
from ._records import MemoryRecord, MemoryScope, utcnow, with_id
from ._sync import run_sync

__all__ = ["CopyReport", "copy_memories", "copy_memories_sync"]

logger = logging.getLogger("memoryport")


@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_memories` did.

    Attributes:
        exported: live records the source held in the scope.
        copied: records added to the target (all of them, or the call raised).
        dropped_metadata: records whose metadata was dropped (``drop_unsupported=True``).
        dropped_expiry: records whose ``expires_at`` was dropped (``drop_unsupported=True``).
        ids: source id -> target id, for every copied record.

    Example:
        >>> CopyReport(exported=2, copied=2).copied
        2
    """

    exported: int
    copied: int
    dropped_metadata: int = 0
    dropped_expiry: int = 0
    ids: dict[str, str] = field(default_factory=dict)


def _refusal(target: GuardedMemory, capability: Capability, what: str, count: int) -> UnsupportedCapability:
    return UnsupportedCapability(
        f"cannot copy: {count} record(s) {what}, and the {target.backend!r} backend has no "
        f"{capability.value!r} capability; nothing was written"
        + (" (pass drop_unsupported=True to copy them without it)" if capability in _DROPPABLE else ""),
        capability=capability.value,
        backend=target.backend,
    )


_DROPPABLE = frozenset({Capability.METADATA, Capability.EXPIRY})


def _plan(
    records: Sequence[MemoryRecord], target: GuardedMemory, drop_unsupported: bool
) -> tuple[list[MemoryRecord], int, int]:
    caps = target.capabilities
    for capability, what, attr in (
        (Capability.SESSION_SCOPE, "have a session_id", "session_id"),
        (Capability.AGENT_SCOPE, "have an agent_id", "agent_id"),
    ):
        count = sum(1 for r in records if getattr(r.scope, attr) is not None)
        if count and capability not in caps:
            # Never widened: a session's memory stays out of the user's general memory.
            raise _refusal(target, capability, what, count)
    with_metadata = sum(1 for r in records if r.metadata)
    with_expiry = sum(1 for r in records if r.expires_at is not None)
    drop_metadata = with_metadata > 0 and Capability.METADATA not in caps
    drop_expiry = with_expiry > 0 and Capability.EXPIRY not in caps
    if drop_metadata and not drop_unsupported:
        raise _refusal(target, Capability.METADATA, "carry metadata", with_metadata)
    if drop_expiry and not drop_unsupported:
        raise _refusal(target, Capability.EXPIRY, "carry expires_at", with_expiry)
    if not drop_metadata and not drop_expiry:
        # Each record without its id (the target draws fresh ones): pydantic's generic copy cost ~5 µs per record
        # of a 20k copy (the plain copy of with_id: ~1 µs; docs/benchmarks-sqlite.md, "Bulk add, round five").
        return [with_id(record, None) for record in records], 0, 0
    planned: list[MemoryRecord] = []
    for record in records:
        update: dict[str, object] = {"id": None}
        if drop_metadata:
            update["metadata"] = {}
        if drop_expiry:
            update["expires_at"] = None
        planned.append(record.model_copy(update=update))
    return planned, (with_metadata if drop_metadata else 0), (with_expiry if drop_expiry else 0)


def _precheck(target: GuardedMemory, records: Sequence[MemoryRecord]) -> None:
    """Refuse, before writing, anything the target's guard or backend would refuse mid-copy."""
    now = utcnow()
    for i, record in enumerate(records):
        target.limits.check_record(record, f"records[{i}]", now)
    if isinstance(target.store, SupportsCheckRecords):
        target.store.check_records(records)


async def copy_memories(
    source: GuardedMemory,
    target: GuardedMemory,
    scope: MemoryScope,
    *,
    drop_unsupported: bool = False,
) -> CopyReport:
    """Copy every live record ``scope`` covers from ``source`` into ``target``.

    Texts, scopes, metadata, ``created_at`` and ``expires_at`` are kept; the
    target assigns fresh ids (the report maps old to new), so a copy never
    collides with what the target already holds. Copying twice copies twice.

    Everything is checked before the first write: a record the target cannot
    hold raises :class:`UnsupportedCapability` — metadata into a backend
    without ``metadata`` (``user_only`` ones), ``expires_at`` without
    ``expiry``, a session or agent id into a backend without that scope.
    ``drop_unsupported=True`` copies such records without their metadata or
    expiry instead (counted in the report); session and agent ids are never
    dropped, since that would widen who sees the record. If the target fails
    part-way, the records already copied are deleted again (when the target
    supports ``delete``) and the error is raised.

    Args:
        source: where to read (needs ``export``).
        target: where to write; a different object than ``source``.
        scope: which records to copy.
        drop_unsupported: drop metadata/expiry the target cannot hold.

    Returns:
        A :class:`CopyReport`.

    Example:
        >>> from memoryport import copy_memories, MemoryScope
        >>> report = await copy_memories(SQLiteMemory("old.db"), Mem0Memory(client),  # doctest: +SKIP
        ...                              MemoryScope(user_id="ann"))
        >>> report.copied                                                 # doctest: +SKIP
        42
    """
    if not isinstance(source, GuardedMemory) or not isinstance(target, GuardedMemory):
        raise UsageError("copy_memories(source, target, scope) takes two GuardedMemory objects")
    if source is target:
        raise UsageError("copy_memories: source and target are the same memory")
    if not isinstance(scope, MemoryScope):
        raise UsageError("copy_memories: scope must be a MemoryScope")
    # The target's own scope rules first, so a refusal names the query scope.
    if scope.session_id is not None and Capability.SESSION_SCOPE not in target.capabilities:
        raise _refusal(target, Capability.SESSION_SCOPE, "are in a session scope", 1)
    if scope.agent_id is not None and Capability.AGENT_SCOPE not in target.capabilities:
        raise _refusal(target, Capability.AGENT_SCOPE, "are in an agent scope", 1)
    records = await source.export(scope)
    planned, dropped_metadata, dropped_expiry = _plan(records, target, drop_unsupported)
    _precheck(target, planned)
    if dropped_metadata or dropped_expiry:
        logger.warning(
            "copy from %r to %r drops metadata from %d and expiry from %d records (drop_unsupported=True)",
            source.backend,
            target.backend,
            dropped_metadata,
            dropped_expiry,
        )
    ids: dict[str, str] = {}
    written: list[str] = []
    batch = target.limits.max_batch
    try:
        for start in range(0, len(planned), batch):
            chunk = planned[start : start + batch]
            new_ids = await target.add(chunk)
            written.extend(new_ids)
            for old, new in zip(records[start : start + batch], new_ids, strict=True):
                ids[str(old.id)] = new
    except MemoryportError:
        if written and Capability.DELETE in target.capabilities:
            logger.warning("copy to %r failed part-way; deleting the %d records it wrote", target.backend, len(written))
            for record_scope in {r.scope for r in planned}:
                try:
                    await target.delete(written, scope=record_scope)
                except MemoryportError as exc:
                    logger.warning("copy clean-up on %r failed: %s", target.backend, type(exc).__name__)
        raise
    return CopyReport(
        exported=len(records),
        copied=len(written),
        dropped_metadata=dropped_metadata,
        dropped_expiry=dropped_expiry,
        ids=ids,
    )


def copy_memories_sync(
    source: GuardedMemory,
    target: GuardedMemory,
    scope: MemoryScope,
    *,
    drop_unsupported: bool = False,
) -> CopyReport:
    """Blocking twin of :func:`copy_memories`.

    Example:
        >>> report = copy_memories_sync(old, new, MemoryScope(user_id="ann"))  # doctest: +SKIP
    """
    return run_sync(
        copy_memories(source, target, scope, drop_unsupported=drop_unsupported), method="copy_memories", owner=""
    )
