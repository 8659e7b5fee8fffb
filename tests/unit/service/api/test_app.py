"""The app only wires: every route reaches the process's services through dependencies, so a
test swaps one (`app.dependency_overrides`) and the route answers from the swap; the checks
that two routes share are written once and answer the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from memorystore.config import Limits
from memorystore.scope import EntityIds
from memorystore.service.api.deps import LimitChecks, authorise, get_engine, get_services
from memorystore.service.app import create_app
from memorystore.service.ops.runner import embedded_config
from memorystore.service.services import Services

MEMORY = "3f0c1d52-8a4b-4c1e-9d7a-0b6e2f9a1c44"


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Iterator[FastAPI]:
    app = create_app(embedded_config(Path(tmp_path_factory.mktemp("svc"))))
    with TestClient(app):  # the lifespan runs once, as when served; the tests' clients share it
        yield app


@pytest.fixture
def overrides(app) -> Iterator[dict[Any, Any]]:
    yield app.dependency_overrides
    app.dependency_overrides.clear()


def test_the_services_are_built_once_and_held_on_app_state(app):
    services = app.state.services
    assert isinstance(services, Services)
    assert services.cfg.tenant == "local"
    assert app.state.not_ready() is None  # what ServiceThread polls


def test_the_key_check_is_a_dependency(app, overrides):
    http = TestClient(app)
    assert http.get("/v1/ping/").status_code == 401
    overrides[authorise] = lambda: None
    answer = http.get("/v1/ping/")
    assert answer.status_code == 200
    assert answer.json() == {
        "status": "ok",
        "org_id": "local",
        "project_id": "local",
        "user_email": None,
    }


class CannedEngine:
    """Answers like the engine would, from memory: what a route test needs and no store."""

    not_ready = None

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def get(self, memory_id: str, scope: EntityIds) -> dict[str, Any]:
        self.calls.append(("get", (memory_id, scope)))
        # mem0's order, an unset score left out, a key mem0 may add one day kept
        return {
            "id": memory_id,
            "memory": "likes tea",
            "hash": None,
            "metadata": {"z": 1, "a": 2},
            "created_at": "2024-01-02T00:00:00+00:00",
            "updated_at": None,
            "user_id": "alice",
            "categories": ["drinks"],
        }

    async def search(self, *args: Any) -> list[dict[str, Any]]:
        self.calls.append(("search", args))
        return [{"id": MEMORY, "memory": "likes tea", "hash": "h", "score": 0.5, "x": 1}]


def test_a_route_answers_from_an_overridden_engine(app, overrides):
    engine = CannedEngine()
    overrides[authorise] = lambda: None
    overrides[get_engine] = lambda: engine
    http = TestClient(app)
    one = http.get(f"/v1/memories/{MEMORY}/", params={"user_id": "alice"})
    found = http.post("/v3/memories/search/", json={"query": "tea", "user_id": "alice"})
    assert engine.calls[0] == ("get", (MEMORY, EntityIds(user_id="alice")))
    assert one.status_code == 200
    # the response model keeps the engine's keys, order, nulls and extra keys as they were
    assert one.text == (
        f'{{"id":"{MEMORY}","memory":"likes tea","hash":null,"metadata":{{"z":1,"a":2}},'
        '"created_at":"2024-01-02T00:00:00+00:00","updated_at":null,"user_id":"alice",'
        '"categories":["drinks"]}'
    )
    assert found.text == (
        f'{{"results":[{{"id":"{MEMORY}","memory":"likes tea","hash":"h","score":0.5,"x":1}}]}}'
    )


def test_an_engine_answer_that_breaks_its_model_is_a_server_error(app, overrides):
    class Broken(CannedEngine):
        async def get(self, memory_id: str, scope: EntityIds) -> dict[str, Any]:
            return {"id": memory_id}  # no `memory`

    overrides[authorise] = lambda: None
    overrides[get_engine] = Broken
    http = TestClient(app, raise_server_exceptions=False)
    assert http.get(f"/v1/memories/{MEMORY}/").status_code == 500


class ErasingServices:
    """Records the erasures the routes ask for."""

    def __init__(self, services: Services) -> None:
        self.cfg = services.cfg
        self.engine = services.engine
        self.erased: list[EntityIds] = []

    async def erase(self, scope: EntityIds) -> int:
        self.erased.append(scope)
        return 3


def test_both_deletions_by_entity_take_the_one_erasure_path(app, overrides):
    services = ErasingServices(app.state.services)
    overrides[authorise] = lambda: None
    overrides[get_services] = lambda: services
    http = TestClient(app)
    by_query = http.delete("/v1/memories/", params={"user_id": "alice", "agent_id": "a"})
    by_path = http.delete("/v2/entities/run/r1/")
    assert by_query.json() == {"message": "Memories deleted successfully!", "deleted": 3}
    assert by_path.json() == {"message": "Entity deleted successfully.", "deleted": 3}
    assert services.erased == [EntityIds(user_id="alice", agent_id="a"), EntityIds(run_id="r1")]


@pytest.mark.parametrize(
    ("item", "text", "metadata", "status", "detail"),
    [
        ("", None, None, 422, "give `text` or `metadata` to update"),
        ("memories[2]", None, None, 422, "memories[2]: give `text` or `metadata` to update"),
        ("", "x" * 11, None, 422, "text is longer than limits.maxMemoryChars (10)"),
        ("memories[2]", "x" * 11, None, 422, "memories[2].text is longer than"),
        ("", None, {"user_id": "u"}, 400, "metadata.user_id: reserved"),
        ("memories[2]", None, {"role": "u"}, 400, "memories[2].metadata.role: reserved"),
    ],
)
def test_one_update_check_for_one_memory_and_a_batch(item, text, metadata, status, detail):
    checks = LimitChecks(Limits(max_memory_chars=10))
    with pytest.raises(HTTPException) as refused:
        checks.update(text, metadata, item)
    assert refused.value.status_code == status
    assert refused.value.detail.startswith(detail)
    checks.update("x" * 10, {"topic": 1}, item)  # within the limits: no refusal
