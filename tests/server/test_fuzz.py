"""Schema-based fuzzing of the OpenAPI document (schemathesis, in-process ASGI).

Bounded: a few generated examples per operation. Every answer must be a
documented, well-formed one without a 5xx, and no answer to Ann's key may hold
anything of Ben's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.server import KeyStore, create_app
from tests.core.dictstore import DictStore

BEN_TEXT = f"Ben keeps his spare key under the blue pot {uuid.uuid4().hex}"
SECRETS: dict[str, str] = {}


@pytest.fixture(scope="module", params=["sqlite", "reference"])
def api_schema(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The app over SQLite, and over the reference store (which has update, so PATCH is fuzzed too)."""
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    keys = KeyStore(tmp / "keys")
    SECRETS["ann"] = keys.create(user_id="ann").secret
    memory = SQLiteMemory(tmp / "memory.db") if request.param == "sqlite" else GuardedMemory(DictStore())
    ben = MemoryScope(user_id="ben")
    SECRETS["ben_id"] = memory.add_sync([MemoryRecord(scope=ben, text=BEN_TEXT, metadata={"kind": "fact"})])[0]
    SECRETS["ann_id"] = memory.add_sync(
        [MemoryRecord(scope=MemoryScope(user_id="ann"), text="Ann likes tea", metadata={"kind": "fact"})]
    )[0]
    # schemathesis runs the app's lifespan around every call: the memory is closed here, once.
    app = create_app(memory, keys, rate_per_minute=1_000_000, max_body_bytes=64 * 1024, close_on_shutdown=False)
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    memory.close()
    keys.close()


OPERATIONS = [
    ("POST", "/v1/memories"),
    ("GET", "/v1/memories"),
    ("GET", "/v1/memories/{memory_id}"),
    ("PATCH", "/v1/memories/{memory_id}"),
    ("DELETE", "/v1/memories/{memory_id}"),
    ("POST", "/v1/search"),
    ("GET", "/v1/export"),
    ("POST", "/v1/erase"),
    ("GET", "/v1/stats"),
    ("GET", "/v1/tools"),
    ("POST", "/v1/tools/{tool}"),
]


def test_the_fuzzed_operations_are_all_of_the_document(api_schema: Any) -> None:
    found = {(r.ok().method.upper(), r.ok().path) for r in api_schema.get_all_operations()}
    assert found == set(OPERATIONS)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_no_server_error_and_no_leak(api_schema: Any, method: str, path: str, mode: GenerationMode) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
    def run(case: Any) -> None:
        headers = dict(case.headers or {})
        headers["Authorization"] = f"Bearer {SECRETS['ann']}"
        response = case.call(headers=headers)
        assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:300])
        if mode is GenerationMode.POSITIVE:
            # The guard refuses more than a JSON schema can say (blank texts, control characters):
            # such refusals are 422s naming the field, checked by the API tests, not schema failures.
            case.validate_response(response, excluded_checks=[positive_data_acceptance])
        body = response.text
        assert BEN_TEXT not in body and "blue pot" not in body
        assert SECRETS["ben_id"] not in body

    run()


@pytest.mark.parametrize("whose", ["ann", "ben"])
@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_known_ids_fuzzed_bodies(api_schema: Any, method: str, whose: str) -> None:
    """Fuzzed requests on a real id: Ann's own (the update path runs), Ben's (always 404, nothing of his)."""
    operation = api_schema["/v1/memories/{memory_id}"][method]
    memory_id = SECRETS[f"{whose}_id"]

    @given(case=operation.as_strategy(path_parameters={"memory_id": memory_id}))
    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
    def run(case: Any) -> None:
        headers = dict(case.headers or {})
        headers["Authorization"] = f"Bearer {SECRETS['ann']}"
        response = case.call(headers=headers)
        assert response.status_code < 500, (case.method, response.status_code, response.text[:300])
        case.validate_response(response, excluded_checks=[positive_data_acceptance])
        if whose == "ben":
            assert response.status_code in (400, 403, 404, 422), response.text[:300]
            assert BEN_TEXT not in response.text and SECRETS["ben_id"] not in response.text

    run()
