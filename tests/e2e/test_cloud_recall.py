"""``POST /v1/recall`` over real HTTP (uvicorn on loopback), from a device credential.

A real SQLCipher device tells the cloud what the user said; a second device of the same
user asks the cloud. The cloud runs the same eight steps over the whole space that the
device runs over its subset, so for records the device holds both answer alike.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from nacl.public import PrivateKey, SealedBox

from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet

pytestmark = pytest.mark.e2e

SAID = [
    "I grew up in Duluth.",
    "I drink my coffee iced.",
    "My sister Maya lives in Oslo.",
    "I work as a nurse at the county hospital.",
]


def _device_client(cloud: RunningCloud, space_id: str) -> httpx.Client:
    """Enroll another device of the user over HTTP; a client carrying its credential
    (and, for opening sealed answers, its private key)."""
    key = PrivateKey.generate()
    body = {
        "protocol_version": 1,
        "code": cloud.operator.new_enrollment_code(space_id),
        "device_name": "assistant-host",
        "public_key": base64.b64encode(bytes(key.public_key)).decode(),
    }
    enrolled = httpx.post(f"{cloud.url}/v1/enroll", json=body)
    assert enrolled.status_code == 200, enrolled.text
    token = enrolled.json()["credential"]
    client = httpx.Client(
        base_url=cloud.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    KEYS[id(client)] = key
    return client


KEYS: dict[int, PrivateKey] = {}


def _recall(client: httpx.Client, query: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/recall", json={"protocol_version": 1, "query": query, **fields})
    assert r.status_code == 200, r.text
    assert r.json()["protocol_version"] == 1 and set(r.json()) == {
        "protocol_version",
        "sealed_answer",
    }
    sealed = base64.b64decode(r.json()["sealed_answer"])
    body: dict[str, Any] = json.loads(SealedBox(KEYS[id(client)]).decrypt(sealed))
    return body


def test_recall_over_http_matches_the_device_and_forgets(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone")
        records = {}
        for i, sentence in enumerate(SAID):
            phone.agent.say(sentence, f"c{i}")
            records[sentence] = phone.agent.remember(sentence, f"c{i}").record_id
        phone.agent.sync()
        # the cloud indexes after the push, in the background: index it now, as a worker
        # would, so the answers below do not race that thread
        cloud.operator.reindex()
        host = _device_client(cloud, ada.space_id)

        answer = _recall(host, "Where did I grow up?")
        assert answer["scope"] == "cloud"
        first = answer["lines"][0]
        assert first["record_id"] == records["I grew up in Duluth."]
        assert first["text"] == "I grew up in Duluth." and first["epistemic_state"] == "said"
        assert 'you wrote: "I grew up in Duluth."' in first["line"]
        assert answer["block"].startswith("<memory-data id=")
        assert _recall(host, "childhood home town")["lines"][0]["record_id"] == first["record_id"]

        # the same pipeline on both sides: the device's own answer over what it holds
        for query in (
            "Where did I grow up?",
            "coffee",
            "Where does my sister live?",
            "Where do I work?",
        ):
            from_cloud = [(x["record_id"], x["line"]) for x in _recall(host, query)["lines"]]
            on_device = [(h.record_id, h.line) for h in phone.agent.recall(query)]
            assert from_cloud and from_cloud == on_device, query
            # and the device itself asking the cloud gets the same, opened with its key
            asked = phone.agent.retrieve_from_cloud(query)
            assert [(h.record_id, h.line) for h in asked.hits] == on_device, query
            assert asked.scope == "cloud" and "whole space" in asked.note

        # forgotten on the device, forgotten in the cloud's answers too
        phone.agent.forget_permanently(records["I grew up in Duluth."])
        phone.agent.sync()
        for query in ("Where did I grow up?", "Duluth", "childhood home town"):
            gone = _recall(host, query)
            assert records["I grew up in Duluth."] not in [x["record_id"] for x in gone["lines"]]
            assert "Duluth" not in gone["block"]

        # the wall: another user's device never sees this space
        other_space, _code = cloud.operator.add_user("bob")
        stranger = _device_client(cloud, other_space)
        assert _recall(stranger, "coffee")["lines"] == []

        assert httpx.post(f"{cloud.url}/v1/recall", json={"protocol_version": 1}).status_code == 401
        bad = host.post("/v1/recall", json={"protocol_version": 1, "query": "x", "limit": 99})
        assert bad.status_code == 400 and bad.json()["code"] == "malformed_request"
        wrong = host.post("/v1/recall", json={"protocol_version": 9, "query": "x"})
        assert wrong.json()["code"] == "unsupported_protocol_version"
    finally:
        fleet.close()
