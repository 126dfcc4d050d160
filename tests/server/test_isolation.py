"""A key for Ann never reads, changes, forgets or exports Ben's memories, whatever the request says."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memoryport.adapters.postgres import PostgresMemory
from memoryport.adapters.sqlite import _store, load_driver
from tests.postgres.support import Server, fresh_schema

from .support import Live, live_server

BEN_SECRET_TEXT = f"Ben's locker code is kiwi-{uuid.uuid4().hex}"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The same server over SQLite and over PostgreSQL: isolation must not depend on the backend."""
    memory = None
    if request.param == "postgres":
        pg: Server = request.getfixturevalue("pg")
        memory = PostgresMemory(pg.app_dsn, schema=fresh_schema(), pool_size=2)
    with live_server(tmp_path_factory.mktemp("isolation"), memory=memory) as server:
        yield server


@pytest.fixture(scope="module")
def ids(live: Live) -> dict[str, str]:
    with live.client("ben") as ben, live.client("ann") as ann:
        r = ben.post(
            "/v1/memories",
            json={
                "memories": [
                    {"text": BEN_SECRET_TEXT, "metadata": {"kind": "fact"}, "session_id": "b1"},
                ]
            },
        )
        assert r.status_code == 200, r.text
        a = ann.post(
            "/v1/memories", json={"memories": [{"text": "Ann locker is by the pool", "metadata": {"kind": "fact"}}]}
        )
        assert a.status_code == 200, a.text
        return {"ben": r.json()["ids"][0], "ann": a.json()["ids"][0]}


def _ben_still_there(live: Live, ben_id: str) -> None:
    with live.client("ben") as ben:
        r = ben.get(f"/v1/memories/{ben_id}")
        assert r.status_code == 200 and r.json()["text"] == BEN_SECRET_TEXT
        assert r.json()["metadata"] == {"kind": "fact"} and r.json()["updated_at"] is None


def _no_leak(response: httpx.Response, ben_id: str) -> None:
    assert BEN_SECRET_TEXT not in response.text
    assert "kiwi-" not in response.text
    assert ben_id not in response.text  # not even the id: a 404 does not echo it


READS = [
    ("GET", "/v1/memories/{ben}", None, {}, 404),
    ("GET", "/v1/memories/{ben}?user_id=ben", None, {}, 422),
    ("GET", "/v1/memories?user_id=ben", None, {}, 422),
    ("GET", "/v1/memories?user=ben&kind=fact", None, {}, 422),
    ("GET", "/v1/memories?session_id=b1", None, {}, 200),
    ("GET", "/v1/memories", None, {"X-Memoryport-User": "ben"}, 403),
    ("GET", "/v1/export?user_id=ben", None, {}, 422),
    ("GET", "/v1/export", None, {"X-Memoryport-User": "ben"}, 403),
    ("GET", "/v1/export?session_id=b1", None, {}, 200),
    ("GET", "/v1/stats?user_id=ben", None, {}, 422),
    ("POST", "/v1/search", {"query": "locker kiwi"}, {}, 200),
    ("POST", "/v1/search", {"query": "locker", "user_id": "ben"}, {}, 422),
    ("POST", "/v1/search", {"query": "locker", "scope": {"user_id": "ben"}}, {}, 422),
    ("POST", "/v1/search", {"query": "locker", "session_id": "b1"}, {}, 200),
    ("POST", "/v1/search", {"query": ""}, {"X-Memoryport-User": "ben"}, 403),
    ("POST", "/v1/search?user_id=ben", {"query": "locker"}, {}, 422),
    ("POST", "/v1/tools/recall", {"query": "locker"}, {}, 200),
    ("POST", "/v1/tools/recall", {"query": "locker", "user_id": "ben"}, {}, 200),
    ("POST", "/v1/tools/recall", {"query": ""}, {"X-Memoryport-Thread": "b1"}, 200),
    ("POST", "/v1/tools/recall", {"query": "locker"}, {"X-Memoryport-User": "ben"}, 403),
]


@pytest.mark.parametrize(("method", "path", "body", "headers", "status"), READS)
def test_ann_reads_nothing_of_ben(
    live: Live, ids: dict[str, str], method: str, path: str, body: object, headers: dict[str, str], status: int
) -> None:
    with live.client("ann", **headers) as ann:
        r = ann.request(method, path.format(ben=ids["ben"]), json=body)
    assert r.status_code == status, r.text
    _no_leak(r, ids["ben"])


def test_ann_sees_her_own_and_only_her_own(live: Live, ids: dict[str, str]) -> None:
    with live.client("ann") as ann:
        listed = ann.get("/v1/memories").json()
        exported = [json.loads(line) for line in ann.get("/v1/export").text.splitlines()]
        hits = ann.post("/v1/search", json={"query": "locker"}).json()["hits"]
        stats = ann.get("/v1/stats").json()
    assert [m["id"] for m in listed["memories"]] == [ids["ann"]] and listed["total"] == 1
    assert [m["id"] for m in exported] == [ids["ann"]]
    assert [h["id"] for h in hits] == [ids["ann"]]
    assert stats["total"] == 1 and stats["user_id"] == "ann"


FORGETS = [
    ("DELETE", "/v1/memories/{ben}", None, {}, 404),
    ("DELETE", "/v1/memories/{ben}?user_id=ben", None, {}, 422),
    ("DELETE", "/v1/memories/{ben}", None, {"X-Memoryport-User": "ben"}, 403),
    ("POST", "/v1/tools/forget", {"id": "{ben}"}, {}, 200),
    ("POST", "/v1/tools/forget", {"id": "{ben}", "user_id": "ben"}, {}, 200),
    ("POST", "/v1/tools/forget", {"id": "{ben}"}, {"X-Memoryport-Thread": "b1"}, 200),
    ("POST", "/v1/erase", {"confirm": True, "user_id": "ben"}, {}, 422),
    ("POST", "/v1/erase", {"confirm": True}, {"X-Memoryport-User": "ben"}, 403),
    ("POST", "/v1/erase?user_id=ben", {"confirm": True}, {}, 422),
    ("POST", "/v1/memories", {"memories": [{"text": "x", "id": "{ben}"}]}, {}, 422),
    ("PATCH", "/v1/memories/{ben}", {"text": "overwritten"}, {}, 404),
    ("PATCH", "/v1/memories/{ben}", {"metadata": {}, "expires_at": None}, {}, 404),
    ("PATCH", "/v1/memories/{ben}?user_id=ben", {"text": "overwritten"}, {}, 422),
    ("PATCH", "/v1/memories/{ben}", {"text": "overwritten", "user_id": "ben"}, {}, 422),
    ("PATCH", "/v1/memories/{ben}", {"text": "overwritten"}, {"X-Memoryport-User": "ben"}, 403),
]


@pytest.mark.parametrize(("method", "path", "body", "headers", "status"), FORGETS)
def test_ann_cannot_forget_or_overwrite_bens(
    live: Live, ids: dict[str, str], method: str, path: str, body: object, headers: dict[str, str], status: int
) -> None:
    payload = json.loads(json.dumps(body).replace("{ben}", ids["ben"])) if body is not None else None
    with live.client("ann", **headers) as ann:
        r = ann.request(method, path.format(ben=ids["ben"]), json=payload)
    assert r.status_code == status, r.text
    assert BEN_SECRET_TEXT not in r.text
    if r.status_code == 200 and path == "/v1/tools/forget":
        result = r.json()
        assert result == {"id": ids["ben"], "forgotten": False} or result["error"]["code"] == "invalid_arguments"
    _ben_still_there(live, ids["ben"])


def test_ann_erasing_herself_leaves_ben(live: Live, ids: dict[str, str]) -> None:
    with live.client("ann") as ann:
        extra = ann.post("/v1/memories", json={"memories": [{"text": "Ann extra"}]}).json()["ids"][0]
        assert ann.post("/v1/erase", json={"dry_run": True}).json() == {"deleted": 2, "dry_run": True}
        assert ann.post("/v1/erase", json={}).status_code == 422  # not confirmed: nothing goes
        assert ann.get(f"/v1/memories/{extra}").status_code == 200
        assert ann.post("/v1/erase", json={"confirm": True}).json() == {"deleted": 2, "dry_run": False}
        assert ann.get("/v1/memories").json()["total"] == 0
        # put Ann's memory back for the other tests of this module
        ids["ann"] = ann.post(
            "/v1/memories", json={"memories": [{"text": "Ann locker is by the pool", "metadata": {"kind": "fact"}}]}
        ).json()["ids"][0]
    _ben_still_there(live, ids["ben"])


def test_an_ordinary_key_naming_itself_is_fine(live: Live, ids: dict[str, str]) -> None:
    with live.client("ann", **{"X-Memoryport-User": "ann"}) as ann:
        assert ann.get(f"/v1/memories/{ids['ann']}").status_code == 200


def test_admin_acts_for_the_named_user_and_is_logged(
    live: Live, ids: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="memoryport.server")
    with live.client("admin", **{"X-Memoryport-User": "ben"}) as admin:
        r = admin.get(f"/v1/memories/{ids['ben']}")
        assert r.status_code == 200 and r.json()["text"] == BEN_SECRET_TEXT
        hits = admin.post("/v1/search", json={"query": "locker"}).json()["hits"]
        assert [h["id"] for h in hits] == [ids["ben"]]
    with live.client("admin") as admin:
        r = admin.get("/v1/memories")  # an admin must name the user
        assert r.status_code == 422 and r.json()["error"]["field"] == "X-Memoryport-User"
    lines = [json.loads(rec.getMessage()) for rec in caplog.records if rec.name == "memoryport.server.admin"]
    assert [(x["user"], x["route"], x["method"]) for x in lines] == [
        ("ben", "/v1/memories/{memory_id}", "GET"),
        ("ben", "/v1/search", "POST"),
    ]
    everything = "\n".join(rec.getMessage() for rec in caplog.records)
    assert BEN_SECRET_TEXT not in everything and "locker" not in everything and ids["ben"] not in everything


def test_a_record_still_in_the_write_behind_log_is_as_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default SQLite store logs a small add (write_behind) and drains it later: the drain thread is held
    # back here, so before every request of Ann's, Ben's newest memory is in the log only (the request's read
    # or write drains it first) and must stay Ben's.
    monkeypatch.setattr(_store, "DRAIN_DELAY", 3600.0)
    monkeypatch.setattr(_store, "DRAIN_ROWS", 10**9)
    with live_server(tmp_path) as live, live.client("ben") as ben, live.client("ann") as ann:
        assert ann.post("/v1/memories", json={"memories": [{"text": "Ann locker is by the pool"}]}).status_code == 200
        assert ann.get("/v1/memories").json()["total"] == 1  # drains Ann's
        for method, path, body, headers, status in READS + FORGETS:
            secret = f"Ben's locker code is kiwi-{uuid.uuid4().hex}"
            r = ben.post("/v1/memories", json={"memories": [{"text": secret, "session_id": "b1"}]})
            assert r.status_code == 200, r.text
            ben_id = r.json()["ids"][0]
            conn = load_driver()[1].connect(str(live.db))
            assert conn.execute("SELECT count(*) FROM inbox").fetchone()[0] == 1
            conn.close()
            payload = json.loads(json.dumps(body).replace("{ben}", ben_id)) if body is not None else None
            r = ann.request(method, path.format(ben=ben_id), json=payload, headers=headers)
            assert r.status_code == status, (method, path, r.text)
            assert secret not in r.text, (method, path)
            if (method, path, body, headers, status) in READS:
                assert ben_id not in r.text, (method, path)
            got = ben.get(f"/v1/memories/{ben_id}")
            assert got.status_code == 200 and got.json()["text"] == secret, (method, path)
