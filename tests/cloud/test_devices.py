"""``GET /v1/devices``: the caller's space's devices with their dates, on both stores.

The list holds every device ever enrolled in the caller's space (revoked and wiped
ones included) and nothing of any other space; ``last_seen`` moves only when the
device pushes or pulls; no credential is 401.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nacl.public import PrivateKey

from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.service import CloudService
from tests.cloud.conftest import START, FakeClock


@pytest.fixture
def client(config: CloudConfig) -> Iterator[TestClient]:
    with TestClient(create_app(config)) as c:
        yield c


def _service(client: TestClient) -> CloudService:
    service = client.app.state.service  # type: ignore[attr-defined]
    assert isinstance(service, CloudService)
    return service


def _enroll(client: TestClient, code: str, name: str) -> dict[str, Any]:
    r = client.post(
        "/v1/enroll",
        json={
            "protocol_version": 1,
            "code": code,
            "device_name": name,
            "public_key": base64.b64encode(bytes(PrivateKey.generate().public_key)).decode(),
        },
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    body["headers"] = {"Authorization": f"Bearer {body['credential']}"}
    return body


def test_devices_lists_the_callers_space_only_with_its_dates(
    client: TestClient, clock: FakeClock
) -> None:
    service = _service(client)
    space, code = service.add_user("ada")
    phone = _enroll(client, code, "phone")
    clock.advance(timedelta(hours=1))
    laptop = _enroll(client, service.new_enrollment_code(space), "laptop")
    _, bob_code = service.add_user("bob")
    bob = _enroll(client, bob_code, "bobs-phone")

    listed = client.get("/v1/devices", headers=phone["headers"])
    assert listed.status_code == 200, listed.text
    devices = listed.json()["devices"]
    assert [d["name"] for d in devices] == ["phone", "laptop"]
    assert [d["device_id"] for d in devices] == [phone["device_id"], laptop["device_id"]]
    assert devices[0]["enrolled_at"].startswith(START.date().isoformat())
    assert all(d["last_seen"] is None and d["revoked_at"] is None for d in devices)
    assert bob["device_id"] not in listed.text and "bobs-phone" not in listed.text

    clock.advance(timedelta(hours=1))
    pulled = client.post("/v1/pull", headers=laptop["headers"], json={"protocol_version": 1})
    assert pulled.status_code == 200
    service.revoke_device(space, phone["device_id"])
    devices = client.get("/v1/devices", headers=laptop["headers"]).json()["devices"]
    seen = {d["name"]: d for d in devices}
    assert seen["laptop"]["last_seen"] is not None
    assert seen["laptop"]["last_seen"].startswith((START + timedelta(hours=2)).isoformat()[:13])
    assert seen["phone"]["last_seen"] is None and seen["phone"]["revoked_at"] is not None

    assert [
        d["name"] for d in client.get("/v1/devices", headers=bob["headers"]).json()["devices"]
    ] == ["bobs-phone"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer cred_unknown"}])
def test_devices_needs_a_device_credential(client: TestClient, headers: dict[str, str]) -> None:
    r = client.get("/v1/devices", headers=headers)
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"
