"""PATCH /v1/memories/{id}: update through the guard; another user's id is a 404 and stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryport import Capability, GuardedMemory, SQLiteMemory
from memoryport.adapters.postgres import PostgresMemory
from tests.core.dictstore import DictStore
from tests.postgres.support import Server, fresh_schema

from .support import live_server


@pytest.mark.parametrize("backend", ["sqlite", "reference", "postgres"])
def test_update_own_memory_and_never_bens(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "postgres":
        pg: Server = request.getfixturevalue("pg")
        memory: GuardedMemory = PostgresMemory(pg.app_dsn, schema=fresh_schema(), pool_size=2)
    elif backend == "sqlite":
        memory = SQLiteMemory(tmp_path / "memory.db")
    else:
        memory = GuardedMemory(DictStore())
    with live_server(tmp_path, memory=memory) as live:
        with live.client("ben") as ben:
            ben_id = ben.post("/v1/memories", json={"memories": [{"text": "Ben likes chess"}]}).json()["ids"][0]
        with live.client("ann") as ann:
            new = {"text": "Ann likes tea", "metadata": {"kind": "fact"}, "expires_at": "2999-01-01T00:00:00Z"}
            [ann_id] = ann.post("/v1/memories", json={"memories": [new]}).json()["ids"]
            before = ann.get(f"/v1/memories/{ann_id}").json()
            assert before["updated_at"] is None

            r = ann.patch(f"/v1/memories/{ann_id}", json={"text": "Ann now likes coffee"})
            assert r.status_code == 200, r.text
            after = r.json()
            assert after["text"] == "Ann now likes coffee" and after["metadata"] == {"kind": "fact"}
            assert after["created_at"] == before["created_at"] and after["updated_at"] is not None
            assert after["expires_at"] == before["expires_at"]  # not given: unchanged

            after = ann.patch(f"/v1/memories/{ann_id}", json={"metadata": {"kind": "pref"}, "expires_at": None}).json()
            assert after["metadata"] == {"kind": "pref"} and after["expires_at"] is None
            assert after["text"] == "Ann now likes coffee"
            hits = ann.post("/v1/search", json={"query": "coffee"}).json()["hits"]
            assert [h["id"] for h in hits] == [ann_id]

            # Ben's memory, whatever the request says: the same 404 as a missing id, and nothing changes.
            for path, body, headers, status in [
                (f"/v1/memories/{ben_id}", {"text": "hacked"}, {}, 404),
                (f"/v1/memories/{'0' * 32}", {"text": "hacked"}, {}, 404),
                (f"/v1/memories/{ben_id}?user_id=ben", {"text": "hacked"}, {}, 422),
                (f"/v1/memories/{ben_id}", {"text": "hacked", "user_id": "ben"}, {}, 422),
                (f"/v1/memories/{ben_id}", {"text": "hacked"}, {"X-Memoryport-User": "ben"}, 403),
            ]:
                r = ann.patch(path, json=body, headers=headers)
                assert r.status_code == status, (path, r.text)
                assert "chess" not in r.text and ben_id not in r.text

            assert ann.patch(f"/v1/memories/{ann_id}", json={}).json()["error"]["field"] == "body"
            bad = ann.patch(f"/v1/memories/{ann_id}", json={"text": "  "}).json()["error"]
            assert bad["field"] == "text"
            assert (
                ann.patch(f"/v1/memories/{ann_id}", json={"expires_at": "2000-01-01T00:00:00Z"}).json()["error"][
                    "field"
                ]
                == "expires_at"
            )
        with live.client("ben") as ben:
            assert ben.get(f"/v1/memories/{ben_id}").json()["text"] == "Ben likes chess"
            assert ben.get(f"/v1/memories/{ben_id}").json()["updated_at"] is None


def test_update_on_a_backend_without_it_is_a_clear_400(tmp_path: Path) -> None:
    store = DictStore(frozenset(Capability) - {Capability.VECTOR_SEARCH, Capability.UPDATE})
    with live_server(tmp_path, memory=GuardedMemory(store)) as live, live.client("ann") as ann:
        [ann_id] = ann.post("/v1/memories", json={"memories": [{"text": "Ann likes tea"}]}).json()["ids"]
        r = ann.patch(f"/v1/memories/{ann_id}", json={"text": "Ann likes coffee"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "unsupported"
        assert ann.get(f"/v1/memories/{ann_id}").json()["text"] == "Ann likes tea"
