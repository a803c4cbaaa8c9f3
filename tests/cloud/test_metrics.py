"""``/metrics``, request ids and JSON logs (``cloud.telemetry``, ``cloud.metrics``,
``cloud.logs``) through FastAPI's test client, on both record stores.

What would break each test: a global registry (two apps in one process), a raw path as
the route label, a receipt not counted, a gauge not read from the store, a request id
not echoed, a log line that is not one JSON object, or one that carries a credential or
a sentence the user typed.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nacl.public import PrivateKey
from prometheus_client.parser import text_string_to_metric_families

from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.logs import configure_logging
from cloud.service import CloudService
from tests.cloud.conftest import SENTENCE, START, TYPED, Ops

STEP = 0.25  # every request takes exactly this long on the injected timer


def _ticks() -> Any:
    counter = itertools.count()
    return lambda: next(counter) * STEP  # each read one STEP on: a request lasts one STEP


def _ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"req-{next(counter):04d}"


@pytest.fixture
def client(config: CloudConfig) -> Iterator[TestClient]:
    app = create_app(replace(config, timer=_ticks(), request_id=_ids()))
    with TestClient(app) as c:
        yield c


def _service(client: TestClient) -> CloudService:
    service = client.app.state.service  # type: ignore[attr-defined]
    assert isinstance(service, CloudService)
    return service


def _enroll(client: TestClient, code: str, device: str) -> dict[str, str]:
    key = PrivateKey.generate()
    r = client.post(
        "/v1/enroll",
        json={
            "protocol_version": 1,
            "code": code,
            "device_name": device,
            "public_key": base64.b64encode(bytes(key.public_key)).decode(),
        },
    )
    assert r.status_code == 200, r.text
    body: dict[str, str] = r.json()
    return {"Authorization": f"Bearer {body['credential']}"}


def _scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _latency(samples: dict[Any, float], route: str, suffix: str) -> float:
    name = f"memsync_http_request_duration_seconds_{suffix}"
    return sum(v for (n, labels), v in samples.items() if n == name and ("route", route) in labels)


def test_metrics_after_a_push_count_ops_by_outcome_and_read_the_store(
    client: TestClient, ops: Ops
) -> None:
    service = _service(client)
    space_id, code = service.add_user("alice")
    phone = _enroll(client, code, "phone")
    _enroll(client, service.new_enrollment_code(space_id), "laptop")
    before = _scrape(client)
    assert before[("memsync_ops_applied_total", (("outcome", "applied"),))] == 0
    assert before[("memsync_pending_forgets", ())] == 0

    episode = ops.episode("ep_aaaaaaaa01", TYPED)
    pushed = [
        episode,
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
        ops.forget("rec_aaaaaaaa01"),
        ops.forget("rec_bbbbbbbb01"),  # refused: unknown record
        episode,  # a replay: duplicate
    ]
    r = client.post("/v1/push", headers=phone, json={"protocol_version": 1, "ops": pushed})
    assert r.status_code == 200, r.text
    statuses = [x["status"] for x in r.json()["receipts"]]
    assert statuses == ["applied", "applied", "applied", "refused", "duplicate"]
    r = client.post("/v1/push", headers=phone, json={"protocol_version": 1, "ops": [episode]})
    assert r.status_code == 409  # pull first: no receipt, nothing counted
    with service.store.session() as s:  # two waiting items: one ready, one not
        s.add_work_item(space_id, "ep_cccccccc01", 0, "candidate", "conv-x", START)
        s.add_work_item(space_id, "ep_cccccccc02", None, "behaviour", "conv-y", START)
    client.get("/v1/records/rec_aaaaaaaa01", headers=phone)
    client.get("/v1/records/rec_zzzzzzzz99", headers=phone)

    after = _scrape(client)
    outcome = {
        o: after[("memsync_ops_applied_total", (("outcome", o),))]
        for o in ("applied", "duplicate", "refused", "conflict")
    }
    assert outcome == {"applied": 3, "duplicate": 1, "refused": 1, "conflict": 0}
    # the forget waits for the phone (it holds the record; the laptop never pulled it),
    # exactly what the operator's pending list says
    waiting = [f for f in service.pending(space_id).forgets if f.pending]
    assert after[("memsync_pending_forgets", ())] == len(waiting) == 1
    assert after[("memsync_pending_forget_devices", ())] == len(waiting[0].pending) == 1
    depth = {labels: v for (n, labels), v in after.items() if n == "memsync_work_queue_depth"}
    assert sum(depth.values()) == 2
    assert depth[(("kind", "behaviour"), ("ready", "true"))] == 1
    assert depth[(("kind", "candidate"), ("ready", "false"))] == 1
    assert after[("memsync_live_pulls", ())] == 0
    assert after[("memsync_store_up", ())] == 1
    # latency by route template: two pushes, each exactly STEP on the injected timer
    assert _latency(after, "/v1/push", "count") == 2
    assert _latency(after, "/v1/push", "sum") == pytest.approx(2 * STEP)
    # the record route is one series for every record id, never the raw path
    assert _latency(after, "/v1/records/{record_id}", "count") == 2
    assert not any("rec_" in str(labels) for (_n, labels) in after)


def test_two_apps_in_one_process_keep_their_own_metrics(
    client: TestClient, config: CloudConfig
) -> None:
    client.get("/v1/health")
    other = create_app(config)
    with TestClient(other) as second:
        second_samples = _scrape(second)
    assert _latency(second_samples, "/v1/health", "count") == 0
    assert _latency(_scrape(client), "/v1/health", "count") == 1


def test_metrics_can_be_switched_off_or_need_a_token(config: CloudConfig) -> None:
    with TestClient(create_app(replace(config, metrics=False))) as off:
        r = off.get("/metrics")
        assert r.status_code == 404 and r.json()["code"] == "not_found"
    token = "t" * 32
    with TestClient(create_app(replace(config, metrics_token=token))) as guarded:
        assert guarded.get("/metrics").status_code == 401
        wrong = guarded.get("/metrics", headers={"Authorization": "Bearer " + "u" * 32})
        assert wrong.status_code == 401 and wrong.json()["code"] == "unauthorized"
        right = guarded.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert right.status_code == 200 and "memsync_ops_applied_total" in right.text


def test_metrics_stay_readable_while_the_service_is_closed(client: TestClient, ops: Ops) -> None:
    from datetime import timedelta

    service = _service(client)
    service.announce_closing(START + timedelta(days=1), START + timedelta(days=2))
    # from closes_at until export_until only export, pulls, acks and wipes go on
    service.config.clock.advance(timedelta(days=1, hours=12))  # type: ignore[attr-defined]
    assert client.post("/v1/push", json={"protocol_version": 1, "ops": []}).status_code == 503
    samples = _scrape(client)
    assert _latency(samples, "/v1/push", "count") == 1  # the gate's refusal is counted too


def test_the_request_id_is_echoed_or_made(client: TestClient) -> None:
    given = client.get("/v1/health", headers={"X-Request-ID": "lb-7f3a.1:2"})
    assert given.headers["X-Request-ID"] == "lb-7f3a.1:2"
    made = client.get("/v1/health")
    assert made.headers["X-Request-ID"].startswith("req-")
    for bad in ("x" * 129, "has space", "semi;colon", ""):
        r = client.get("/v1/health", headers={"X-Request-ID": bad})
        assert r.headers["X-Request-ID"].startswith("req-"), bad
    error = client.get("/v1/records/rec_aaaaaaaa01", headers={"X-Request-ID": "err-1"})
    assert error.status_code == 401 and error.headers["X-Request-ID"] == "err-1"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging("json", "info", stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_json_logs_are_one_object_per_line_with_request_ids_and_no_secrets(
    client: TestClient, ops: Ops, json_log: io.StringIO
) -> None:
    service = _service(client)
    _space_id, code = service.add_user("bob")
    phone = _enroll(client, code, "phone")
    credential = phone["Authorization"].removeprefix("Bearer ")
    pushed = [
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    ]
    headers = {**phone, "X-Request-ID": "push-1"}
    r = client.post("/v1/push", headers=headers, json={"protocol_version": 1, "ops": pushed})
    assert r.status_code == 200
    client.get("/v1/records/rec_aaaaaaaa01", headers=phone)
    client.post("/v1/pull", headers=phone, content=b"{not json")

    every = [json.loads(line) for line in json_log.getvalue().splitlines()]  # one object each
    # the test client's own lines (httpx) are the client's, not the cloud's
    lines = [line for line in every if not line["logger"].startswith("httpx")]
    text = "\n".join(json.dumps(line) for line in lines)
    access = [line for line in lines if line["logger"] == "memsync.http"]
    push = next(line for line in access if line.get("request_id") == "push-1")
    assert push["route"] == "/v1/push" and push["method"] == "POST" and push["status"] == 200
    assert push["latency_ms"] == pytest.approx(STEP * 1000)
    assert push["level"] == "info" and push["time"].endswith("+00:00")
    assert {"/v1/enroll", "/v1/records/{record_id}", "/v1/pull"} <= {a["route"] for a in access}
    assert any(a["status"] == 400 for a in access)
    assert all(a["request_id"] for a in access)
    for secret in (credential, code, SENTENCE, "1729", "tea", "rec_aaaaaaaa01"):
        assert secret not in text, secret


def test_text_logs_carry_the_request_id(client: TestClient) -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging("text", "info", stream)
    try:
        client.get("/v1/health", headers={"X-Request-ID": "txt-1"})
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    line = next(x for x in stream.getvalue().splitlines() if "memsync.http" in x)
    assert line.endswith("[txt-1]") and "GET /v1/health 200" in line
