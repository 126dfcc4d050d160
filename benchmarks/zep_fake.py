"""An in-process fake of Zep's v4 REST endpoints, driven through the real zep-cloud SDK.

The fake (httpx.MockTransport, no socket) keeps users, user graphs, episodes and
tasks in memory, models Zep's asynchronous processing (an episode is searchable
only once its task has finished; deletions take effect when their task does),
and checks every request it receives: method and path, JSON body shape, the
``Authorization: Api-Key`` header and the ``Idempotency-Key`` on POST/DELETE.
What it cannot prove: Zep's real ranking, extraction and timing. Used by
``tests/adapters/test_zep.py`` and ``benchmarks/bench_zep_graphiti.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx
from zep_cloud import AsyncZep, Zep

API_KEY = "test-key"
BASE = "http://zep.test/api/v4"
_WORD = re.compile(r"[a-z0-9]+")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def _error(status: int, code: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": message}})


@dataclass
class Task:
    uuid: str
    kind: str
    polls_left: int
    on_done: Callable[[], None]
    fail: bool = False
    status: str = "pending"


@dataclass
class FakeZep:
    """An in-memory Zep v4 project that checks the requests it gets."""

    steps: int = 2  # task polls until a task finishes
    max_page: int = 1000  # the server caps pages at this size
    search_cap: int = 50  # search ranks at most this many results
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    episodes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # user uuid -> uuid -> episode
    tasks: dict[str, Task] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    idempotency: dict[str, str] = field(default_factory=dict)
    fail_adds_after: int | None = None  # episode adds beyond this many answer 500
    fail_next_task: bool = False
    create_conflicts: int = 0  # the next user.create calls find the user already created "elsewhere"
    adds: int = 0
    in_flight: int = 0
    max_in_flight: int = 0

    # -- plumbing --------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        query = dict(request.url.params)
        self.requests.append((request.method, path, query, body))
        if request.headers.get("authorization") != f"Api-Key {API_KEY}":
            self.violations.append(f"{request.method} {path}: bad Authorization header")
            return _error(401, "unauthorized", "bad key")
        if request.method in ("POST", "DELETE", "PATCH"):
            key = request.headers.get("idempotency-key", "")
            try:
                uuid.UUID(key)
            except ValueError:
                self.violations.append(f"{request.method} {path}: Idempotency-Key {key!r} is not a UUID")
        if not path.startswith("/api/v4/"):
            self.violations.append(f"unexpected path {path}")
            return _error(404, "not_found", "no route")
        route = path[len("/api/v4/") :]
        for method, pattern, fn in self._routes():
            match = re.fullmatch(pattern, route)
            if match and method == request.method:
                return fn(*match.groups(), query=query, body=body)
        self.violations.append(f"no fake route for {request.method} {route}")
        return _error(404, "not_found", "no route")

    async def ahandle(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)  # let other requests of the same call start, as on a network
            return self.handle(request)
        finally:
            self.in_flight -= 1

    def _routes(self) -> list[tuple[str, str, Callable[..., httpx.Response]]]:
        return [
            ("POST", r"users", self.create_user),
            ("POST", r"users/lookup", self.lookup_user),
            ("DELETE", r"users/([^/]+)", self.delete_user),
            ("POST", r"graphs/([^/]+)/episodes", self.add_episode),
            ("POST", r"graphs/([^/]+)/episodes/list", self.list_episodes),
            ("GET", r"graphs/([^/]+)/episodes/([^/]+)", self.get_episode),
            ("DELETE", r"graphs/([^/]+)/episodes/([^/]+)", self.delete_episode),
            ("POST", r"graphs/([^/]+)/search/episodes", self.search_episodes),
            ("GET", r"tasks/([^/]+)", self.get_task),
        ]

    def _expect_keys(self, what: str, body: Any, required: set[str], allowed: set[str]) -> bool:
        if not isinstance(body, dict):
            self.violations.append(f"{what}: body is {type(body).__name__}, not an object")
            return False
        keys = set(body)
        if not required <= keys or not keys <= required | allowed:
            self.violations.append(f"{what}: body keys {sorted(keys)}")
            return False
        return True

    def _task(self, kind: str, on_done: Callable[[], None]) -> dict[str, Any]:
        task = Task(str(uuid.uuid4()), kind, self.steps, on_done, fail=self.fail_next_task)
        self.fail_next_task = False
        self.tasks[task.uuid] = task
        return {"uuid": task.uuid, "status": "pending", "type": kind, "created_at": _now()}

    def _page(self, items: list[dict[str, Any]], query: dict[str, str]) -> httpx.Response:
        size = int(query.get("page_size", "50"))
        if size < 1:
            self.violations.append(f"page_size {size}")
        size = min(size, self.max_page)
        start = int(query.get("cursor", "0") or "0")
        page = items[start : start + size]
        more = start + size < len(items)
        return httpx.Response(200, json={"items": page, "next_cursor": str(start + size) if more else None})

    def _graph(self, graph: str) -> dict[str, dict[str, Any]] | None:
        # The graph path takes a user uuid in place of the user's graph uuid.
        for user in self.users.values():
            if graph in (user["uuid"], user["graph_uuid"]):
                return self.episodes[user["uuid"]]
        return None

    # -- users -------------------------------------------------------------------

    def create_user(self, *, query: dict[str, str], body: Any) -> httpx.Response:
        if not self._expect_keys("POST /users", body, {"user_id"}, {"metadata", "first_name", "last_name", "email"}):
            return _error(400, "bad_request", "bad body")
        ext = body["user_id"]
        if not isinstance(ext, str) or not 0 < len(ext) <= 500:
            self.violations.append("POST /users: user_id must be 1-500 characters")
        if self.create_conflicts:
            self.create_conflicts -= 1
            self._new_user(ext)
            return _error(409, "conflict", "user_id exists")
        if any(u["user_id"] == ext for u in self.users.values()):
            return _error(409, "conflict", "user_id exists")
        return httpx.Response(201, json=self._new_user(ext, body.get("metadata")))

    def _new_user(self, ext: str, metadata: Any = None) -> dict[str, Any]:
        user = {
            "uuid": str(uuid.uuid4()),
            "user_id": ext,
            "graph_uuid": str(uuid.uuid4()),
            "created_at": _now(),
            "metadata": metadata,
        }
        self.users[user["uuid"]] = user
        self.episodes[user["uuid"]] = {}
        return user

    def lookup_user(self, *, query: dict[str, str], body: Any) -> httpx.Response:
        if not self._expect_keys("POST /users/lookup", body, {"user_id"}, set()):
            return _error(400, "bad_request", "bad body")
        for user in self.users.values():
            if user["user_id"] == body["user_id"]:
                return httpx.Response(200, json=user)
        return _error(404, "not_found", "no such user")

    def delete_user(self, user_uuid: str, *, query: dict[str, str], body: Any) -> httpx.Response:
        if user_uuid not in self.users:
            return _error(404, "not_found", "no such user")

        def done() -> None:
            self.users.pop(user_uuid, None)
            self.episodes.pop(user_uuid, None)

        return httpx.Response(202, json={"task": self._task("user_delete", done)})

    # -- episodes -------------------------------------------------------------------

    def add_episode(self, graph: str, *, query: dict[str, str], body: Any) -> httpx.Response:
        what = "POST /graphs/{g}/episodes"
        if not self._expect_keys(what, body, {"data"}, {"type", "metadata", "reference_time", "source_description"}):
            return _error(400, "bad_request", "bad body")
        if not isinstance(body["data"], str) or not body["data"].strip():
            self.violations.append(f"{what}: data must be a non-empty string")
        if body.get("type", "text") != "text":
            self.violations.append(f"{what}: type {body.get('type')!r}")
        metadata = body.get("metadata") or {}
        if len(metadata) > 10 or not all(isinstance(v, (str, int, float, bool)) for v in metadata.values()):
            self.violations.append(f"{what}: metadata must have at most 10 scalar values")
        if "reference_time" in body:
            datetime.fromisoformat(body["reference_time"].replace("Z", "+00:00"))
        episodes = self._graph(graph)
        if episodes is None:
            return _error(404, "not_found", "no such graph")
        self.adds += 1
        if self.fail_adds_after is not None and self.adds > self.fail_adds_after:
            return _error(500, "internal", "boom")
        user = next(u for u in self.users.values() if graph in (u["uuid"], u["graph_uuid"]))
        episode = {
            "uuid": str(uuid.uuid4()),
            "content": body["data"],
            "metadata": metadata,
            "created_at": _now(),
            "reference_time": body.get("reference_time") or _now(),
            "source_description": body.get("source_description"),
            "source": "text",
            "processed": False,
            "graph_uuid": user["graph_uuid"],
            "user_uuid": user["uuid"],
        }
        episodes[episode["uuid"]] = episode

        def done() -> None:
            episode["processed"] = True

        return httpx.Response(202, json={"episode": dict(episode), "task": self._task("add_episode", done)})

    def _matches(self, episode: dict[str, Any], group: dict[str, Any] | None) -> bool:
        if not group:
            return True
        results = []
        for f in group.get("filters") or []:
            value = (episode.get("metadata") or {}).get(f["property_name"])
            op = f["operator"]
            if op == "eq":
                results.append(value == f["value"])
            elif op == "in":
                results.append(value in f["value"])
            else:
                self.violations.append(f"filter operator {op} not modelled")
                results.append(False)
        return all(results) if group.get("type", "and") == "and" else any(results)

    def list_episodes(self, graph: str, *, query: dict[str, str], body: Any) -> httpx.Response:
        episodes = self._graph(graph)
        if episodes is None:
            return _error(404, "not_found", "no such graph")
        if body is not None and not self._expect_keys("episodes/list", body, set(), {"filters"}):
            return _error(400, "bad_request", "bad body")
        group = ((body or {}).get("filters") or {}).get("metadata_filters")
        items = [e for e in episodes.values() if self._matches(e, group)]
        return self._page(items, query)

    def get_episode(self, graph: str, episode_uuid: str, *, query: dict[str, str], body: Any) -> httpx.Response:
        episodes = self._graph(graph)
        if episodes is None or episode_uuid not in episodes:
            return _error(404, "not_found", "no such episode")
        return httpx.Response(200, json=episodes[episode_uuid])

    def delete_episode(self, graph: str, episode_uuid: str, *, query: dict[str, str], body: Any) -> httpx.Response:
        episodes = self._graph(graph)
        if episodes is None or episode_uuid not in episodes:
            return _error(404, "not_found", "no such episode")
        return httpx.Response(
            202, json={"task": self._task("episode_delete", lambda: episodes.pop(episode_uuid, None))}
        )

    def search_episodes(self, graph: str, *, query: dict[str, str], body: Any) -> httpx.Response:
        if not self._expect_keys("search/episodes", body, {"query"}, {"reranker", "filters"}):
            return _error(400, "bad_request", "bad body")
        episodes = self._graph(graph)
        if episodes is None:
            return _error(404, "not_found", "no such graph")
        words = set(_WORD.findall(body["query"].lower()))
        if not words:
            return _error(400, "bad_request", "empty query")
        scored = []
        for episode in episodes.values():
            if not episode["processed"]:  # not indexed yet
                continue
            score = len(words & set(_WORD.findall(episode["content"].lower()))) / len(words)
            if score > 0:
                scored.append({**episode, "score": score})
        scored.sort(key=lambda e: e["score"], reverse=True)
        return self._page(scored[: self.search_cap], query)

    # -- tasks ----------------------------------------------------------------------

    def get_task(self, task_uuid: str, *, query: dict[str, str], body: Any) -> httpx.Response:
        task = self.tasks.get(task_uuid)
        if task is None:
            return _error(404, "not_found", "no such task")
        if task.status not in ("succeeded", "failed"):
            task.polls_left -= 1
            if task.polls_left <= 0:
                task.status = "failed" if task.fail else "succeeded"
                if not task.fail:
                    task.on_done()
            else:
                task.status = "processing"
        return httpx.Response(200, json={"uuid": task.uuid, "status": task.status, "type": task.kind})

    def run_all_tasks(self) -> None:
        """Let the 'server' finish everything without anyone polling."""
        for task in self.tasks.values():
            if task.status not in ("succeeded", "failed"):
                task.status = "succeeded"
                task.on_done()

    def calls(self, method: str, pattern: str) -> list[tuple[str, str, dict[str, str], Any]]:
        return [r for r in self.requests if r[0] == method and re.fullmatch(pattern, r[1][len("/api/v4/") :])]


def sync_client(fake: FakeZep) -> Zep:
    return Zep(
        api_key=API_KEY,
        base_url=BASE,
        max_retries=0,
        httpx_client=httpx.Client(transport=httpx.MockTransport(fake.handle)),
    )


def async_client(fake: FakeZep) -> AsyncZep:
    return AsyncZep(
        api_key=API_KEY,
        base_url=BASE,
        max_retries=0,
        httpx_client=httpx.AsyncClient(transport=httpx.MockTransport(fake.ahandle)),
    )
