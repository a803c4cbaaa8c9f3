"""``POST /v1/export`` over real HTTP (uvicorn on loopback, httpx): a device enrolled
with its own X25519 key pair asks for its space's package with the account key's
proof and opens the sealed stream with its private key; refusals arrive as plain
``ErrorBody`` answers before any byte of a package."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from nacl.public import PrivateKey, SealedBox
from nacl.signing import SigningKey

from cloud.app import create_app
from cloud.config import CloudConfig
from protocol.export.layout import Item, lines_of, read_package
from protocol.export.package import ExportPackage, Section
from protocol.export.stream import MEDIA_TYPE, open_stream
from protocol.strongauth import prove_export
from simulator.cloud_runner import RunningCloud

pytestmark = pytest.mark.e2e

ACCOUNT = SigningKey(bytes(range(2, 34)))
SAID = "My sister lives in Lisbon."
AT = "2026-11-29T10:00:00Z"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@dataclass
class Enrolled:
    space_id: str
    device_id: str
    key: PrivateKey
    headers: dict[str, str]


def enroll(http: httpx.Client, code: str, name: str = "phone") -> Enrolled:
    key = PrivateKey.generate()
    answer = http.post(
        "/v1/enroll",
        json={
            "protocol_version": 1,
            "code": code,
            "device_name": name,
            "public_key": _b64(bytes(key.public_key)),
        },
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    headers = {"Authorization": f"Bearer {body['credential']}"}
    return Enrolled(body["space_id"], body["device_id"], key, headers)


def export_body(
    space_id: str, export_id: str, include_sensitive: bool = True, key: SigningKey = ACCOUNT
) -> dict[str, Any]:
    proof = prove_export(key, space_id, export_id, include_sensitive)
    return {
        "protocol_version": 1,
        "export_id": export_id,
        "include_sensitive": include_sensitive,
        "proof": _b64(proof),
    }


@pytest.fixture
def http(cloud: RunningCloud) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cloud.url, timeout=30) as client:
        yield client


def _fill(http: httpx.Client, phone: Enrolled) -> None:
    registered = http.post(
        "/v1/account-key",
        headers=phone.headers,
        json={"protocol_version": 1, "account_key": _b64(bytes(ACCOUNT.verify_key))},
    )
    assert registered.status_code == 200, registered.text
    user = {"made_at": AT, "initiated_by": "user"}
    ops = [
        {
            "kind": "add_episode",
            "op_id": "op_aaaaaaaaaaaaaaaa01",
            "episode_id": "ep_aaaaaaaa01",
            "conversation_id": "c1",
            "text": SAID,
            "typed_at": AT,
            **user,
        },
        {
            "kind": "remember",
            "op_id": "op_aaaaaaaaaaaaaaaa02",
            "record_id": "rec_aaaaaaaa01",
            "text": SAID,
            "conversation_id": "c1",
            "source_episode_ids": ["ep_aaaaaaaa01"],
            **user,
        },
    ]
    pushed = http.post("/v1/push", headers=phone.headers, json={"protocol_version": 1, "ops": ops})
    assert [r["status"] for r in pushed.json()["receipts"]] == ["applied", "applied"]


def test_a_device_exports_its_space_and_only_it_opens_the_package(
    cloud: RunningCloud, http: httpx.Client
) -> None:
    _space, code = cloud.operator.add_user("ada")
    phone = enroll(http, code)
    laptop = enroll(http, cloud.operator.new_enrollment_code(phone.space_id), "laptop")
    _fill(http, phone)
    body = export_body(phone.space_id, "exp_aaaaaaaa01")
    with http.stream("POST", "/v1/export", headers=phone.headers, json=body) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"] == MEDIA_TYPE
        sealed = b"".join(answer.iter_bytes())
    assert SAID.encode() not in sealed  # sealed on the wire
    plain = b"".join(open_stream([sealed], "exp_aaaaaaaa01", SealedBox(phone.key).decrypt))
    events = list(read_package(lines_of([plain])))
    records = [e.model for e in events if isinstance(e, Item) and e.section is Section.RECORDS]
    assert len(records) == 1
    package = ExportPackage.model_validate_json(plain)
    assert package.records[0].current.content.text == SAID
    assert [e.text for e in package.episodes] == [SAID]
    assert {d.name for d in package.devices} == {"phone", "laptop"}
    # another device of the same account cannot open what was sealed to the phone
    with pytest.raises(Exception, match="does not open with this device's key"):
        b"".join(open_stream([sealed], "exp_aaaaaaaa01", SealedBox(laptop.key).decrypt))


def test_refusals_are_plain_errors_before_any_package(
    cloud: RunningCloud, http: httpx.Client
) -> None:
    _space, code = cloud.operator.add_user("ada")
    phone = enroll(http, code)
    sp = phone.space_id

    def export(body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        return http.post(
            "/v1/export", headers=phone.headers if headers is None else headers, json=body
        )

    no_key = export(export_body(sp, "exp_aaaaaaaa02"))
    assert no_key.status_code == 403 and no_key.json()["code"] == "strong_auth_required"
    assert "no account key registered" in no_key.json()["message"]
    _fill(http, phone)
    wrong = export(export_body(sp, "exp_aaaaaaaa02", key=SigningKey(bytes(32))))
    assert wrong.status_code == 403 and "does not verify" in wrong.json()["message"]
    widened = export_body(sp, "exp_aaaaaaaa02", include_sensitive=False)
    widened["include_sensitive"] = True
    assert export(widened).status_code == 403
    assert export(export_body(sp, "exp_aaaaaaaa02")).status_code == 200
    again = export(export_body(sp, "exp_aaaaaaaa02"))
    assert again.status_code == 409 and again.json()["code"] == "export_id_used"
    assert "exp_aaaaaaaa02" in again.json()["message"]
    # the usual refusals of every route
    assert export(export_body(sp, "exp_aaaaaaaa03"), headers={}).status_code == 401
    bad_id = export({**export_body(sp, "exp_aaaaaaaa03"), "export_id": "exp_NOT-AN-ID"})
    assert bad_id.status_code == 400 and "export_id" in bad_id.json()["message"]
    assert export({"export_id": "exp_aaaaaaaa03"}).json()["code"] == "unsupported_protocol_version"
    assert (
        http.post(
            "/v1/export", headers={**phone.headers, "content-type": "text/plain"}, content=b"{}"
        ).status_code
        == 415
    )


def test_a_store_that_cannot_be_read_is_a_503_naming_it(tmp_path: Path) -> None:
    waits: list[float] = []
    config = CloudConfig(
        store_url=f"sqlite:///{tmp_path / 'records.db'}",
        key_store_path=tmp_path / "keys.db",
        export_wait=2.0,
        sleep=waits.append,
    )
    with TestClient(create_app(replace(config))) as client:
        service = client.app.state.service  # type: ignore[attr-defined]
        _space, code = service.add_user("ada")
        key = PrivateKey.generate()
        enrolled = client.post(
            "/v1/enroll",
            json={
                "protocol_version": 1,
                "code": code,
                "device_name": "phone",
                "public_key": _b64(bytes(key.public_key)),
            },
        ).json()
        headers = {"Authorization": f"Bearer {enrolled['credential']}"}
        service.key_store.close()
        answer = client.post(
            "/v1/export", headers=headers, json=export_body(enrolled["space_id"], "exp_aaaaaaaa04")
        )
    assert answer.status_code == 503 and answer.json()["code"] == "export_unavailable"
    assert f"the key store {tmp_path / 'keys.db'} cannot be read" in answer.json()["message"]
    assert sum(waits) == 2.0
