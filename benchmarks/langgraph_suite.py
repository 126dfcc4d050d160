"""memoryport's contract suite run on LangGraph's own stores, through the adapter a LangGraph user would write.

The comparison behind docs/integrations-comparison.md: which of memoryport's
promises LangGraph's ``InMemoryStore`` and ``SqliteStore`` keep when a host maps
memoryport's port onto them directly (:class:`LangGraphPort`), and where they
fall short. Failures are the point: they show what the guard and a certified
store add. The run never fails on them; it reports.

    .venv/bin/python -m benchmarks.langgraph_suite            # writes docs/integrations-comparison.md
    .venv/bin/python -m benchmarks.langgraph_suite --out x.md --quick

The mapping (one namespace per full scope, the record as the value):

- namespace ``("mp", user_id or "~", session_id or "~", agent_id or "~")``,
  key = record id; value = ``{"text", "created_at", "expires_at", "user", "session", "agent", "m_<key>": ...}``.
- search: ``store.search(("mp", user), query=..., filter={scope ids set, metadata}, limit=k)``;
  an empty query lists everything in scope and sorts it newest first here.
- get/delete: found by a search filtered on ``"id"``; erasing a scope deletes what
  a search of the scope returns; export: one search with a large limit.
- expiry: ``SqliteStore`` TTL (minutes from now) and ``sweep_ttl()`` for purge;
  ``InMemoryStore`` has no TTL, so it declares no expiry.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memoryport import Capability, MemoryHit, MemoryRecord, MemoryScope

ROOT = Path(__file__).resolve().parents[1]
DOCS_OUT = ROOT / "docs" / "integrations-comparison.md"
NONE = "~"
EXPORT_LIMIT = 1_000_000

STORES = {
    "InMemoryStore": "langgraph.store.memory",
    "SqliteStore": "langgraph.store.sqlite",
}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


class LangGraphPort:
    """memoryport's port over a LangGraph ``BaseStore`` (sync API), written as a LangGraph user would."""

    def __init__(self, store: Any, *, name: str, ttl: bool) -> None:
        self.store = store
        self.name = name
        self.ttl = ttl
        caps = {
            Capability.SESSION_SCOPE,
            Capability.AGENT_SCOPE,
            Capability.METADATA,
            Capability.FILTERS,
            Capability.KEYWORD_SEARCH,
            Capability.GET,
            Capability.DELETE,
            Capability.EXPORT,
        }
        if ttl:
            caps |= {Capability.EXPIRY, Capability.PURGE}
        self.capabilities = frozenset(caps)

    @staticmethod
    def _namespace(scope: MemoryScope) -> tuple[str, ...]:
        return ("mp", scope.user_id or NONE, scope.session_id or NONE, scope.agent_id or NONE)

    @staticmethod
    def _scope_filter(scope: MemoryScope) -> dict[str, Any]:
        wanted: dict[str, Any] = {}
        if scope.session_id is not None:
            wanted["session"] = scope.session_id
        if scope.agent_id is not None:
            wanted["agent"] = scope.agent_id
        return wanted

    @staticmethod
    def _record(value: Mapping[str, Any]) -> MemoryRecord:
        return MemoryRecord(
            id=value["id"],
            scope=MemoryScope(user_id=value["user"], session_id=value["session"], agent_id=value["agent"]),
            text=value["text"],
            metadata={k[2:]: v for k, v in value.items() if k.startswith("m_")},
            created_at=datetime.fromisoformat(value["created_at"]),
            expires_at=None if value["expires_at"] is None else datetime.fromisoformat(value["expires_at"]),
        )

    def _find(
        self,
        scope: MemoryScope,
        *,
        query: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = EXPORT_LIMIT,
    ) -> list[Any]:
        wanted = self._scope_filter(scope)
        wanted.update({f"m_{k}": v for k, v in (filters or {}).items()})
        return list(self.store.search(("mp", scope.user_id or NONE), query=query, filter=wanted or None, limit=limit))

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        for r in records:
            value = {
                "id": r.id,
                "text": r.text,
                "created_at": _iso(r.created_at),
                "expires_at": _iso(r.expires_at),
                "user": r.scope.user_id,
                "session": r.scope.session_id,
                "agent": r.scope.agent_id,
                **{f"m_{k}": v for k, v in r.metadata.items()},
            }
            ttl = None
            if self.ttl and r.expires_at is not None:
                ttl = max((r.expires_at - datetime.now(timezone.utc)).total_seconds() / 60, 1e-6)
            if self.ttl:
                self.store.put(self._namespace(r.scope), str(r.id), value, ttl=ttl)
            else:
                self.store.put(self._namespace(r.scope), str(r.id), value)
        return [str(r.id) for r in records]

    async def search(
        self, query: str, *, scope: MemoryScope, k: int, filters: Mapping[str, Any] | None
    ) -> list[MemoryHit]:
        if not query.strip():
            items = self._find(scope, filters=filters)
            records = sorted((self._record(i.value) for i in items), key=lambda r: r.created_at, reverse=True)
            return [MemoryHit(record=r, score=0.0, signal="recent") for r in records[:k]]
        items = self._find(scope, query=query, filters=filters, limit=k)
        return [MemoryHit(record=self._record(i.value), score=float(i.score or 0.0), signal="keyword") for i in items]

    async def get(self, id: str, *, scope: MemoryScope) -> MemoryRecord | None:
        found = self._find(scope, filters=None, limit=EXPORT_LIMIT)
        for item in found:
            if item.value.get("id") == id:
                return self._record(item.value)
        return None

    async def delete(self, ids: Sequence[str] | None, *, scope: MemoryScope) -> int:
        items = self._find(scope)
        doomed = [i for i in items if ids is None or i.value.get("id") in ids]
        for item in doomed:
            self.store.delete(item.namespace, item.key)
        return len(doomed)

    async def export(self, scope: MemoryScope) -> list[MemoryRecord]:
        return sorted((self._record(i.value) for i in self._find(scope)), key=lambda r: r.created_at)

    async def purge(self, *, now: datetime, created_before: datetime | None) -> int:
        return int(self.store.sweep_ttl() or 0)


TEST_MODULE = '''
"""Written by benchmarks/langgraph_suite.py: memoryport's contract suite on LangGraph's stores."""
import tempfile
from pathlib import Path

import pytest

from benchmarks.langgraph_suite import LangGraphPort
from memoryport import GuardedMemory
from memoryport.contracts import MemoryContract


class TestInMemoryStore(MemoryContract):
    hypothesis_examples = {examples}
    export_records = {export}

    @pytest.fixture
    async def memory(self):
        from langgraph.store.memory import InMemoryStore

        yield GuardedMemory(LangGraphPort(InMemoryStore(), name="langgraph-inmemory", ttl=False))


class TestSqliteStore(MemoryContract):
    hypothesis_examples = {examples}
    export_records = {export}

    @pytest.fixture
    async def memory(self, tmp_path):
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(str(tmp_path / "lg.db"), ttl={{"default_ttl": None}}) as store:
            store.setup()
            yield GuardedMemory(LangGraphPort(store, name="langgraph-sqlite", ttl=True))
'''


def run(*, quick: bool = False, workdir: Path | None = None) -> dict[str, dict[str, tuple[str, str]]]:
    """Run the suite on both stores; ``{store: {test: (outcome, first line of the reason)}}``."""
    work = Path(workdir or tempfile.mkdtemp(prefix="mp-lg-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    module = work / "test_langgraph_stores.py"
    module.write_text(TEST_MODULE.format(examples=3 if quick else 25, export=150 if quick else 1_500))
    (work / "conftest.py").write_text('pytest_plugins = ["memoryport.contracts"]\n')
    junit = work / "junit.xml"
    env = dict(os.environ, PYTHONPATH=str(ROOT), LANGSMITH_TRACING="false")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(module),
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            f"--junitxml={junit}",
            "--rootdir",
            str(work),
            "-W",
            "ignore::DeprecationWarning",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    results: dict[str, dict[str, tuple[str, str]]] = {}
    for case in ET.parse(junit).iter("testcase"):
        cls = case.get("classname", "").split(".")[-1].removeprefix("Test")
        test = case.get("name", "")
        outcome, reason = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "fail"
                reason = (child.get("message") or child.text or "").strip()
            elif child.tag == "skipped":
                outcome = "xfail" if "xfail" in (child.get("type") or "") else "skip"
                reason = (child.get("message") or "").strip()
        results.setdefault(cls, {})[test] = (outcome, _first_line(reason))
    return results


def _first_line(text: str, limit: int = 160) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.removeprefix("Failed: ").replace("|", "\\|")
    return line if len(line) <= limit else line[: limit - 1] + "…"


MARK = {"pass": "✅", "fail": "❌", "skip": "⊘", "xfail": "⊘"}

# What each failure means, checked by hand against langgraph 1.2.22 (shown only for tests that fail).
WHY = {
    "test_filters_match_metadata_exactly": (
        "LangGraph's filters compare with Python equality (InMemoryStore) or SQLite's JSON values "
        '(SqliteStore), so `{"n": 1}` also matches items whose `n` is `True` or `1.0`: a filter on a '
        "flag or a count returns items that do not match. memoryport keeps JSON types apart."
    ),
    "test_keyword_search_finds_words": (
        "Without an `index` config (an embedding model) both stores ignore `query`: every item of the "
        "namespace comes back, unranked, with `score=None`. memoryport's SQLite backend ranks by words "
        "(FTS5, BM25) with no model at all."
    ),
    "test_purge_removes_expired_records": (
        "SqliteStore's `sweep_ttl()` compares `expires_at` as text with `CURRENT_TIMESTAMP`, to the "
        "second, and a TTL cannot lie in the past, so an item that has just expired is swept only in "
        "the next second; reads also move `expires_at` forward (`refresh_on_read`). memoryport's "
        "`expires_at` is a fixed time and `purge()` removes everything past it."
    ),
}


def table(results: Mapping[str, Mapping[str, tuple[str, str]]]) -> str:
    """The comparison as markdown: one row per contract test, one column per store, then the reasons."""
    stores = list(results)
    tests = sorted({t for r in results.values() for t in r})
    lines = ["| Contract test | " + " | ".join(stores) + " |", "|---|" + "---|" * len(stores)]
    for test in tests:
        cells = [MARK.get(results[s].get(test, ("skip", ""))[0], "?") for s in stores]
        lines.append(f"| `{test}` | " + " | ".join(cells) + " |")
    totals = []
    for s in stores:
        counts = {k: sum(1 for o, _ in results[s].values() if o == k) for k in ("pass", "fail", "skip")}
        totals.append(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    lines.append("| **total** | " + " | ".join(totals) + " |")
    reasons = ["", "## Why they fail", ""]
    failed = sorted({t for r in results.values() for t, (o, _) in r.items() if o == "fail"})
    for test in failed:
        where = ", ".join(s for s in stores if results[s].get(test, ("", ""))[0] == "fail")
        reasons.append(f"- `{test}` ({where}): {WHY.get(test, 'not yet explained; see the message below.')}")
    reasons += ["", "The suite's own messages (first line):", ""]
    for s in stores:
        for test, (outcome, reason) in sorted(results[s].items()):
            if outcome == "fail":
                reasons.append(f"- {s} · `{test}`: {reason}")
    if not failed:
        reasons = ["", "Every contract test passed on both stores."]
    return "\n".join(lines + reasons) + "\n"


HEADER = """# LangGraph's stores under memoryport's contract suite

The contract suite (the promises every memoryport backend keeps; see
[the contract suite](contract-suite.md)) run on LangGraph's own `InMemoryStore`
and `SqliteStore` (langgraph {version}), each mapped onto memoryport's port by the
adapter a LangGraph user would write (`benchmarks/langgraph_suite.py`: a
namespace per scope, the record as the value, LangGraph's `filter` for the
session, agent and metadata). The guard is on, as for every backend: it hides
what the store gets wrong from the host, and the suite reports it as a failure
of the store. `MemoryportStore` (the other direction: LangGraph's store API over
a memoryport backend) is tested in `tests/integrations/` instead.

What the guard adds shows in the failures: a host holding `GuardedMemory` over
these stores never sees the mismatched filter results (the guard re-checks
filters and expiry on the way out, and the suite counts what it dropped), but a
host calling the stores directly does. Scope isolation holds on both: they
compare namespaces label by label, so `("mp", "ann")` does not reach
`("mp", "ann2")`.

Regenerate with `.venv/bin/python -m benchmarks.langgraph_suite` (one run on a
shared 2-core machine; no timing is involved).

"""


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DOCS_OUT)
    parser.add_argument("--quick", action="store_true", help="fewer property examples and export records")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    import langgraph.version

    results = run(quick=args.quick, workdir=args.dir)
    text = HEADER.format(version=langgraph.version.__version__) + table(results)
    args.out.write_text(text)
    print(textwrap.shorten(text, 400))
    return text


if __name__ == "__main__":
    main()
