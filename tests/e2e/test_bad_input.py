"""Bad input over real HTTP: a clear, specific error, and nothing stored changes."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from nacl.public import PrivateKey

from protocol.ids import make_id
from protocol.version import PROTOCOL_VERSION, SUPPORTED_VERSIONS
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet

pytestmark = pytest.mark.e2e
AT = datetime(2026, 11, 29, 9, 0, tzinfo=UTC).isoformat()


def _enroll(cloud: RunningCloud, name: str, space_id: str | None = None) -> httpx.Client:
    """A raw HTTP client enrolled as a new device of a new user (or of ``space_id``)."""
    if space_id is None:
        _space, code = cloud.operator.add_user(name)
    else:
        code = cloud.operator.new_enrollment_code(space_id)
    body = {
        "protocol_version": 1,
        "code": code,
        "device_name": "probe",
        "public_key": base64.b64encode(bytes(PrivateKey.generate().public_key)).decode(),
    }
    enrolled = httpx.post(f"{cloud.url}/v1/enroll", json=body)
    assert enrolled.status_code == 200, enrolled.text
    token = enrolled.json()["credential"]
    return httpx.Client(base_url=cloud.url, headers={"Authorization": f"Bearer {token}"})


def _episode(n: int, text: str) -> dict[str, Any]:
    return {
        "kind": "add_episode",
        "op_id": make_id("op", n.to_bytes(10, "big")),
        "episode_id": make_id("ep", n.to_bytes(10, "big")),
        "conversation_id": "c1",
        "text": text,
        "typed_at": AT,
        "made_at": AT,
        "initiated_by": "user",
    }


def _changes(client: httpx.Client) -> list[dict[str, Any]]:
    pulled = client.post("/v1/pull", json={"protocol_version": 1, "cursor": None})
    assert pulled.status_code == 200, pulled.text
    return pulled.json()["changes"]


def test_unknown_protocol_version_is_refused_naming_the_range(cloud: RunningCloud) -> None:
    client = _enroll(cloud, "ada")
    for version in (0, PROTOCOL_VERSION + 1, "one"):
        response = client.post("/v1/push", json={"protocol_version": version, "ops": []})
        assert response.status_code == 400
        body = response.json()
        assert body["code"] == "unsupported_protocol_version"
        assert f"1 to {PROTOCOL_VERSION}" in body["message"]
        assert body["supported_versions"] == list(SUPPORTED_VERSIONS)


def test_malformed_op_is_refused_and_the_rest_of_the_batch_applies(cloud: RunningCloud) -> None:
    client = _enroll(cloud, "ada")
    bad = {
        "kind": "remember",
        "op_id": make_id("op", b"\x09" * 10),
        "text": "no record id",
        "made_at": AT,
        "initiated_by": "user",
    }
    ops = [_episode(1, "I grew up in Duluth."), bad, _episode(2, "I like tea.")]
    response = client.post("/v1/push", json={"protocol_version": 1, "ops": ops})
    assert response.status_code == 200, response.text
    receipts = response.json()["receipts"]
    assert [r["status"] for r in receipts] == ["applied", "refused", "applied"]
    assert receipts[1]["code"] == "malformed" and "record_id" in receipts[1]["reason"]
    assert len([c for c in _changes(client) if c["kind"] == "episode"]) == 2


def test_malformed_and_oversized_requests_change_nothing(cloud: RunningCloud) -> None:
    client = _enroll(cloud, "ada")
    before = _changes(client)
    not_json = client.post(
        "/v1/push", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code == 400 and not_json.json()["code"] == "malformed_request"
    huge = {"protocol_version": 1, "ops": [_episode(1, "x" * 3000)] * 2000}
    too_big = client.post("/v1/push", json=huge)
    assert too_big.status_code == 413 and too_big.json()["code"] == "request_too_large"
    assert _changes(client) == before


def test_op_on_forgotten_record_is_refused_and_content_stays_gone(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    phone.agent.say("I grew up in Duluth.", "c1")
    record_id = phone.agent.remember("I grew up in Duluth.", "c1").record_id
    phone.agent.sync()
    laptop.agent.sync()
    laptop.agent.forget_permanently(record_id)
    laptop.agent.sync()
    phone.agent.sync()

    # Another of ada's devices tries to write the same record back, and to forget it again.
    client = _enroll(cloud, "ada", space_id=ada.space_id)
    remember = {
        "kind": "remember",
        "op_id": make_id("op", b"\x07" * 10),
        "record_id": record_id,
        "text": "I grew up in Duluth.",
        "conversation_id": "c1",
        "source_episode_ids": [make_id("ep", b"\x01" * 10)],
        "made_at": AT,
        "initiated_by": "user",
    }
    forget = {
        "kind": "forget_permanently",
        "op_id": make_id("op", b"\x08" * 10),
        "record_id": record_id,
        "made_at": AT,
        "initiated_by": "user",
    }
    response = client.post("/v1/push", json={"protocol_version": 1, "ops": [remember, forget]})
    assert response.status_code == 200, response.text
    receipts = response.json()["receipts"]
    assert [r["code"] for r in receipts] == ["forgotten", "forgotten"]
    assert record_id in receipts[0]["reason"]
    status = client.get(f"/v1/records/{record_id}").json()
    assert status["lifecycle_state"] == "permanently_forgotten"
    assert "text" not in status
    assert not [c for c in _changes(client) if c["kind"] in ("record_version", "episode")]
    fleet.close()


def test_another_space_is_not_found(cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    phone.agent.say("I grew up in Duluth.", "c1")
    record_id = phone.agent.remember("I grew up in Duluth.", "c1").record_id
    phone.agent.sync()
    other = _enroll(cloud, "bob")
    response = other.get(f"/v1/records/{record_id}")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    forget = {
        "kind": "forget_permanently",
        "op_id": make_id("op", b"\x05" * 10),
        "record_id": record_id,
        "made_at": AT,
        "initiated_by": "user",
    }
    receipts = other.post("/v1/push", json={"protocol_version": 1, "ops": [forget]}).json()
    assert receipts["receipts"][0]["code"] == "unknown_record"
    assert phone.agent.recall("Duluth"), "bob's forget must not touch ada's space"
    fleet.close()


def test_missing_credential_is_unauthorized(cloud: RunningCloud) -> None:
    response = httpx.post(f"{cloud.url}/v1/pull", json={"protocol_version": 1})
    assert response.status_code == 401 and response.json()["code"] == "unauthorized"
