"""The security boundary over real HTTP (uvicorn on loopback): credentials are stored
hashed; a revoked device is refused (401 ``device_revoked``) and wipes its copy of the
memory when it next reaches the cloud; and every route is scoped to the caller's
space — a sweep of every route with another space's ids and credentials gets 401/404
or its own (empty) space, never this space's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from cloud.app import create_app
from cloud.errors import NotFound
from device.errors import DeviceRevoked
from protocol.model import Sensitivity
from simulator import cli
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from simulator.forensics import scan_device_database

pytestmark = pytest.mark.e2e

SECRET = "I keep the spare key under the blue flowerpot."


def _credential(handle: DeviceHandle) -> str:
    row = handle.agent._debug_db().one("SELECT credential FROM meta")
    assert row[0], "the device holds a credential"
    return str(row[0])


def _cloud_files(cloud: RunningCloud) -> bytes:
    folder = Path(cloud.config.store_url.removeprefix("sqlite:///")).parent
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def test_a_revoked_device_is_refused_and_wipes_its_copy(
    cloud: RunningCloud, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
        phone.agent.say(SECRET, "c1")
        record = phone.agent.remember(SECRET, "c1").record_id
        phone.agent.keep_on_device(Sensitivity.HEALTH)
        phone.agent.say("I take insulin every morning.", "c2")
        phone.agent.end_session("c2")
        phone.agent.sync()
        laptop.agent.sync()
        credential = _credential(phone)
        assert credential.encode() not in _cloud_files(cloud)  # stored hashed, never as is
        needles = {"sentence": SECRET.encode(), "kept": b"insulin"}
        needles |= {f"key {n}": k for n, k in enumerate(phone.agent.data_keys_for(record))}
        before = scan_device_database(phone.db_path, phone.passphrase, needles)
        assert {h.needle for h in before.hits} >= {"kept", "key 0"}  # the scan can see

        argv = ["cloud", "revoke-device", "--user", "ada", phone.agent.device_id or ""]
        argv += ["--store", cloud.config.store_url, "--keys", str(cloud.config.key_store_path)]
        assert cli.main(argv) == 0
        assert "wipes its copy of the memory" in capsys.readouterr().out
        with pytest.raises(NotFound, match="no device"):
            cloud.operator.revoke_device(ada.space_id, phone.agent.device_id or "")

        raw = httpx.post(
            f"{cloud.url}/v1/pull",
            json={"protocol_version": 1, "limit": 10},
            headers={"Authorization": f"Bearer {credential}"},
        )
        assert raw.status_code == 401 and raw.json()["code"] == "device_revoked"

        with pytest.raises(DeviceRevoked, match="was wiped"):
            phone.agent.sync()
        assert phone.agent.list_records() == [] and phone.agent.pending_ops() == 0
        after = scan_device_database(phone.db_path, phone.passphrase, needles)
        assert after.clean and after.pages > 0 and after.unreadable_pages == 0, after.hits
        # the account's other devices and the cloud keep the memory: revoking is not forgetting
        laptop.agent.sync()
        assert [v.text for v in laptop.agent.list_records()] == [SECRET]
        assert cloud.operator.record_status(ada.space_id, record).lifecycle_state.value == (
            "active"
        )
    finally:
        fleet.close()


class _DropPath(httpx.BaseTransport):
    """A fault at the device's transport seam: requests to ``path`` never arrive."""

    def __init__(self, inner: httpx.BaseTransport, path: str) -> None:
        self.inner = inner
        self.path = path
        self.dropping = True

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.dropping and request.url.path == self.path:
            raise httpx.ConnectError(f"{self.path} lost (simulated)", request=request)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _pending_names(cloud: RunningCloud, space_id: str) -> dict[str | None, list[str]]:
    forgets = cloud.operator.pending(space_id).forgets
    return {f.record_id: [d.device_name for d in f.pending] for f in forgets}


def test_a_revoked_device_stays_pending_even_after_it_confirms_its_wipe(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
        phone.agent.say(SECRET, "c1")
        record = phone.agent.remember(SECRET, "c1").record_id
        phone.agent.sync()
        laptop.agent.sync()  # the laptop holds the record's keys
        credential = _credential(laptop)
        cloud.operator.revoke_device(ada.space_id, laptop.agent.device_id or "")
        phone.agent.forget_permanently(record)
        phone.agent.sync()
        # revoked but not wiped: it still holds the keys (a stolen laptop), so it is pending
        assert _pending_names(cloud, ada.space_id) == {record: ["laptop"]}

        dropping = _DropPath(laptop.transport.inner, "/v1/wiped")
        laptop.transport.inner = dropping
        with pytest.raises(DeviceRevoked, match="could not be told yet"):
            laptop.agent.sync()
        assert laptop.agent.list_records() == []  # wiped at once ...
        assert _credential(laptop) == credential  # ... keeping only what confirms it
        assert _pending_names(cloud, ada.space_id) == {record: ["laptop"]}  # not heard yet
        with pytest.raises(DeviceRevoked, match="could not be told yet"):
            laptop.agent.retrieve_from_cloud("spare key")  # every call to the cloud tries again

        dropping.dropping = False
        with pytest.raises(DeviceRevoked, match="the cloud was told"):
            laptop.agent.retrieve_from_cloud("spare key")
        assert laptop.agent._debug_db().one("SELECT credential FROM meta")[0] is None
        # its confirmation is recorded but is only its word (issue 22, item 4): it stays
        # pending, and the devices list shows it revoked ("may still hold copies")
        assert _pending_names(cloud, ada.space_id) == {record: ["laptop"]}
        (listed,) = [d for d in cloud.operator.devices(ada.space_id).devices if d.name == "laptop"]
        assert listed.revoked_at is not None and listed.wiped_at is not None
        # confirming again (a retry whose answer was lost) is harmless: same time kept
        first = cloud.operator.confirm_wipe(credential).wiped_at
        again = httpx.post(
            f"{cloud.url}/v1/wiped",
            json={"protocol_version": 1},
            headers={"Authorization": f"Bearer {credential}"},
        )
        assert again.status_code == 200, again.text
        assert again.json()["device_id"] == laptop.agent.device_id
        assert cloud.operator.confirm_wipe(credential).wiped_at == first
        # the wipe confirmation is the only thing a revoked credential can do
        refused = httpx.post(
            f"{cloud.url}/v1/pull",
            json={"protocol_version": 1},
            headers={"Authorization": f"Bearer {credential}"},
        )
        assert refused.status_code == 401 and refused.json()["code"] == "device_revoked"
        # anything but an empty envelope is refused, naming the field
        extra = httpx.post(
            f"{cloud.url}/v1/wiped",
            json={"protocol_version": 1, "device_id": "dev_somebodyelse1"},
            headers={"Authorization": f"Bearer {credential}"},
        )
        assert extra.status_code == 400 and "device_id" in extra.json()["message"]
        unknown = httpx.post(
            f"{cloud.url}/v1/wiped",
            json={"protocol_version": 1},
            headers={"Authorization": "Bearer cred_not-a-credential"},
        )
        assert unknown.status_code == 401 and unknown.json()["code"] == "unauthorized"
    finally:
        fleet.close()


# --- every route, from another space -------------------------------------------------


ROUTES: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/v1/health"): {},
    ("POST", "/v1/enroll"): {},
    ("POST", "/v1/push"): {},
    ("POST", "/v1/pull"): {},
    ("POST", "/v1/recall"): {},
    ("POST", "/v1/ack"): {},
    ("POST", "/v1/account-key"): {},
    ("POST", "/v1/account-key/change"): {},
    ("POST", "/v1/wiped"): {},
    ("POST", "/v1/export"): {},
    ("GET", "/v1/forgets/pending"): {},
    ("GET", "/v1/devices"): {},
    ("GET", "/v1/records/{record_id}"): {},
    ("POST", "/v1/account/delete"): {},
    ("GET", "/v1/service"): {},
    ("GET", "/v1/subset"): {},
    ("POST", "/v1/subset/policy"): {},
    ("POST", "/v1/subset/pins"): {},
}


def test_the_sweep_covers_every_route(cloud: RunningCloud) -> None:
    app = create_app(cloud.config)
    served = {
        (method, route.path)
        for route in app.routes
        if route.path.startswith("/v1/")
        for method in getattr(route, "methods", set()) - {"HEAD"}
    }
    assert served == set(ROUTES), "a new route needs a line in the wall sweep below"


def test_no_route_reaches_another_space(cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone")
        phone.agent.say(SECRET, "c1")
        record = phone.agent.remember(SECRET, "c1").record_id
        phone.agent.sync()
        bob = fleet.add_user("bob")
        stranger = fleet.add_device(bob, "stranger")
        theirs = {"Authorization": f"Bearer {_credential(stranger)}"}
        episode = phone.agent._debug_db().one("SELECT episode_id FROM episodes")[0]
        v1 = {"protocol_version": 1}
        base = cloud.url
        with httpx.Client(base_url=base, timeout=30) as http:
            answers = {
                ("GET", "/v1/health"): http.get("/v1/health"),
                ("POST", "/v1/enroll"): http.post(
                    "/v1/enroll",
                    json={
                        **v1,
                        "code": "not-a-code-of-ada",
                        "device_name": "x",
                        "public_key": "A" * 43 + "=",
                    },
                ),
                ("POST", "/v1/push"): http.post(
                    "/v1/push",
                    headers=theirs,
                    json={
                        **v1,
                        "ops": [
                            {
                                "kind": "forget_permanently",
                                "op_id": "op_aaaaaaaaaaaaaaaaaaaaaaaaaa",
                                "made_at": "2026-11-29T10:00:00Z",
                                "initiated_by": "user",
                                "record_id": record,
                                "episode_ids": [episode],
                            },
                            {
                                "kind": "dont_use",
                                "op_id": "op_bbbbbbbbbbbbbbbbbbbbbbbbbb",
                                "made_at": "2026-11-29T10:00:00Z",
                                "initiated_by": "user",
                                "record_id": record,
                            },
                        ],
                    },
                ),
                ("POST", "/v1/pull"): http.post(
                    "/v1/pull", headers=theirs, json={**v1, "limit": 100}
                ),
                ("POST", "/v1/recall"): http.post(
                    "/v1/recall", headers=theirs, json={**v1, "query": "spare key flowerpot"}
                ),
                ("POST", "/v1/ack"): http.post(
                    "/v1/ack", headers=theirs, json={**v1, "event_ids": [1, 2, 3]}
                ),
                ("POST", "/v1/account-key"): http.post(
                    "/v1/account-key", headers={}, json={**v1, "account_key": "A" * 43 + "="}
                ),
                # the stranger's credential decides the space: it can only change its own
                ("POST", "/v1/account-key/change"): http.post(
                    "/v1/account-key/change",
                    headers=theirs,
                    json={
                        **v1,
                        "request_id": "req_aaaaaaaaaaaa",
                        "account_key": "A" * 43 + "=",
                        "proof": "A" * 86 + "==",
                        "new_proof": "A" * 86 + "==",
                    },
                ),
                ("POST", "/v1/wiped"): http.post("/v1/wiped", headers=theirs, json=v1),
                # the stranger's credential decides the space: only its own could be exported
                ("POST", "/v1/export"): http.post(
                    "/v1/export",
                    headers=theirs,
                    json={
                        **v1,
                        "export_id": "exp_aaaaaaaaaaaaaaaa",
                        "include_sensitive": True,
                        "proof": "A" * 86 + "==",
                    },
                ),
                ("GET", "/v1/forgets/pending"): http.get("/v1/forgets/pending", headers=theirs),
                # the stranger's own devices only: never ada's phone
                ("GET", "/v1/devices"): http.get("/v1/devices", headers=theirs),
                ("GET", "/v1/records/{record_id}"): http.get(
                    f"/v1/records/{record}", headers=theirs
                ),
                ("POST", "/v1/account/delete"): http.post(
                    "/v1/account/delete",
                    headers=theirs,
                    json={"protocol_version": 2, "request_id": "req_aaaaaaaaaaaa", "proof": "AA=="},
                ),
                ("GET", "/v1/service"): http.get("/v1/service"),
                # the stranger's own subset only; it cannot pin a record of ada's
                ("GET", "/v1/subset"): http.get("/v1/subset", headers=theirs),
                ("POST", "/v1/subset/policy"): http.post(
                    "/v1/subset/policy",
                    headers=theirs,
                    json={"protocol_version": 3, "policy": {"budget": {"max_records": 0}}},
                ),
                ("POST", "/v1/subset/pins"): http.post(
                    "/v1/subset/pins",
                    headers=theirs,
                    json={"protocol_version": 3, "record_id": record, "pinned": True},
                ),
            }
        assert set(answers) == set(ROUTES)
        for route, answer in answers.items():
            body = answer.text
            # a push may name back the ids the stranger itself sent; nothing else may
            sent = route in {
                ("POST", "/v1/push"),
                ("GET", "/v1/records/{record_id}"),
                ("POST", "/v1/subset/pins"),
            }
            for leak in (SECRET, "flowerpot", ada.space_id, *([] if sent else [record, episode])):
                assert leak not in body, (route, leak, body[:300])
        assert answers[("POST", "/v1/enroll")].status_code == 403
        assert answers[("POST", "/v1/account-key")].status_code == 401
        assert answers[("POST", "/v1/account-key/change")].status_code == 403  # none to change
        assert answers[("GET", "/v1/records/{record_id}")].status_code == 404
        assert answers[("POST", "/v1/subset/pins")].status_code == 404  # like a missing one
        assert answers[("GET", "/v1/subset")].json()["subset"]["records"] == 0
        assert answers[("POST", "/v1/subset/policy")].status_code == 200  # its own device
        assert answers[("POST", "/v1/export")].status_code == 403  # no account key of its own
        # the stranger cannot delete its own account without strong authentication, and
        # nothing it sends can end another space
        assert answers[("POST", "/v1/account/delete")].status_code == 403
        assert cloud.operator.account_status(ada.space_id) is None
        assert cloud.operator.account_status(bob.space_id) is None
        # a device that is not revoked has no wipe to confirm, and is not marked wiped
        assert answers[("POST", "/v1/wiped")].status_code == 404
        assert "is not revoked" in answers[("POST", "/v1/wiped")].json()["message"]
        listed = answers[("GET", "/v1/devices")].json()["devices"]
        assert [d["name"] for d in listed] == ["stranger"]
        assert phone.agent.device_id not in answers[("GET", "/v1/devices")].text
        receipts = json.loads(answers[("POST", "/v1/push")].text)["receipts"]
        assert [r["code"] for r in receipts] == ["unknown_record", "unknown_record"]
        # ... and ada's memory is exactly as it was, her phone's subset too
        phone.agent.sync()
        assert [v.text for v in phone.agent.list_records()] == [SECRET]
        assert phone.agent.subset().pins == [] and phone.agent.subset().records == 1
        state = cloud.operator.record_status(ada.space_id, record)
        assert state.lifecycle_state.value == "active"
        # without any credential, every route but health, service and enroll is 401
        with httpx.Client(base_url=base, timeout=30) as http:
            for method, path in ROUTES:
                if path in ("/v1/health", "/v1/service", "/v1/enroll"):
                    continue
                url = path.replace("{record_id}", record)
                answer = http.request(method, url, json=v1 if method == "POST" else None)
                assert answer.status_code == 401, (method, path, answer.text)
    finally:
        fleet.close()
