"""Changing the account passphrase end to end (issue 23 item 3): the real app under
uvicorn on loopback, real SQLCipher devices, the CLI and the API.

- ``memsync device account-key set`` with the current passphrase changes it: the old
  one is refused from then on, on this device (locally) and in the cloud (a stale
  device's proof), and an export works with the new one.
- Another device of the account takes the new passphrase at ``account-key set`` (the
  cloud confirms it is the space's key now); until then its proofs by the old key are
  refused by the cloud.
- An export package written before the change stays readable, and imports back only
  as "signed by another account" (``--unsigned-ok``), as the CLI says.
- Every refusal names its reason, and nothing changes: a wrong current passphrase, the
  same passphrase again, a forget of an area still queued, a proof by another key over
  HTTP; a retried change answers the same.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from device import cli as device_cli
from device.errors import PackageNotSigned, Refused, StrongAuthRequired
from protocol import strongauth
from protocol.model import LifeArea
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet

pytestmark = pytest.mark.e2e

OLD = "the first account passphrase of ada"
NEW = "a second account passphrase for ada"
SECRET = "I keep the spare key under the blue flowerpot."


@pytest.fixture
def fleet(cloud: RunningCloud, tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(cloud, tmp_path / "devices")
    try:
        yield made
    finally:
        made.close()


def _credential(handle: DeviceHandle) -> str:
    return str(handle.agent._debug_db().one("SELECT credential FROM meta")[0])


def _is_the_clouds_key(cloud: RunningCloud, handle: DeviceHandle, passphrase: str) -> bool:
    """Whether the cloud holds the key of ``passphrase`` now: registering a key answers
    200 only for the space's current one (409 for any other), and changes nothing."""
    key = strongauth.account_verify_key(passphrase, handle.user.space_id)
    answer = httpx.post(
        f"{cloud.url}/v1/account-key",
        json={"protocol_version": 4, "account_key": base64.b64encode(key).decode()},
        headers={"Authorization": f"Bearer {_credential(handle)}"},
    )
    assert answer.status_code in (200, 409), answer.text
    return answer.status_code == 200


def _cli(
    handle: DeviceHandle,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *argv: str,
) -> tuple[int, str, str]:
    """Run ``memsync device ARGV`` on the device's own files (its handle closed, then
    reopened with the fleet's transport and clock)."""
    handle.close()
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", handle.passphrase)
    try:
        code = device_cli.main(["device", *argv, "--dir", str(handle.directory)])
    finally:
        handle.reopen()
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_changes_the_passphrase_and_the_old_one_stops_working(
    cloud: RunningCloud,
    fleet: Fleet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone", account_passphrase=OLD)
    laptop = fleet.add_device(ada, "laptop", account_passphrase=OLD)
    phone.agent.say(SECRET, "c1")
    phone.agent.remember(SECRET, "c1")
    phone.agent.sync()
    laptop.agent.sync()
    before = tmp_path / "before"
    before.mkdir()
    old_package = phone.agent.export(before, OLD).package_path

    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", NEW)
    monkeypatch.setenv("MEMSYNC_CURRENT_ACCOUNT_PASSPHRASE", OLD)
    code, out, err = _cli(phone, monkeypatch, capsys, "account-key", "set")
    assert code == 0, err
    assert f"The account passphrase of space {ada.space_id} was changed" in out
    assert "old passphrase no longer works" in out and "--unsigned-ok" in out
    assert phone.agent.account_key == strongauth.account_verify_key(NEW, ada.space_id)
    assert _is_the_clouds_key(cloud, phone, NEW) and not _is_the_clouds_key(cloud, phone, OLD)

    # the old passphrase: refused on this device before anything is sent ...
    after = tmp_path / "after"
    after.mkdir()
    with pytest.raises(Refused, match="account passphrase is wrong"):
        phone.agent.export(after, OLD)
    # ... and by the cloud, from a device that still holds the old key
    assert laptop.agent.account_key == strongauth.account_verify_key(OLD, ada.space_id)
    with pytest.raises(StrongAuthRequired, match="does not verify"):
        laptop.agent.export(after, OLD)
    assert list(after.iterdir()) == []

    # the new one works: an export, and (after it learns it) the laptop too
    exported = phone.agent.export(after, NEW)
    assert SECRET in exported.package_path.read_text()
    with pytest.raises(Refused, match="account passphrase is wrong"):
        laptop.agent.export(after, NEW)  # not learnt yet: its own check refuses it
    monkeypatch.delenv("MEMSYNC_CURRENT_ACCOUNT_PASSPHRASE")
    code, out, err = _cli(laptop, monkeypatch, capsys, "account-key", "set", "--json")
    assert code == 0, err
    assert json.loads(out)["outcome"] == "learned"
    assert laptop.agent.account_key == strongauth.account_verify_key(NEW, ada.space_id)
    laptops = tmp_path / "laptop"
    laptops.mkdir()
    assert SECRET in laptop.agent.export(laptops, NEW).package_path.read_text()
    code, out, _ = _cli(laptop, monkeypatch, capsys, "account-key", "set")
    assert code == 0 and "matches the account key already set" in out

    # the package written under the old key: readable as it is; imported only when asked
    assert SECRET in old_package.read_text()
    with pytest.raises(PackageNotSigned):
        laptop.agent.import_package(old_package)
    report = laptop.agent.import_package(old_package, allow_unsigned=True)
    assert report.origin == "signed by another account"  # its words are already here


def test_a_change_through_the_api_refuses_with_its_reason(
    cloud: RunningCloud, fleet: Fleet, tmp_path: Path
) -> None:
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone", account_passphrase=OLD)
    with pytest.raises(Refused, match="account passphrase is wrong"):
        phone.agent.change_account_passphrase("not the passphrase", NEW)
    with pytest.raises(Refused, match="is the current one"):
        phone.agent.change_account_passphrase(OLD, OLD)
    with pytest.raises(Refused, match="new account passphrase is empty"):
        phone.agent.change_account_passphrase(OLD, "")
    phone.go_offline()
    phone.agent.forget_area(LifeArea.HEALTH, OLD)  # queued, proved by the old key
    with pytest.raises(Refused, match="wait to be sent") as waiting:
        phone.agent.change_account_passphrase(OLD, NEW)
    assert "memsync device sync" in str(waiting.value)
    phone.go_online()
    phone.agent.sync()
    assert _is_the_clouds_key(cloud, phone, OLD)  # nothing changed so far

    change = phone.agent.change_account_passphrase(OLD, NEW)
    assert change.space_id == ada.space_id and change.request_id.startswith("req_")
    assert _is_the_clouds_key(cloud, phone, NEW)
    with pytest.raises(Refused, match="account passphrase is wrong"):
        phone.agent.forget_area(LifeArea.WORK, OLD)
    assert phone.agent.forget_area(LifeArea.WORK, NEW).receipt is not None
    phone.agent.sync()


def test_the_cloud_checks_both_proofs_and_answers_a_retry_the_same(
    cloud: RunningCloud, fleet: Fleet
) -> None:
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone", account_passphrase=OLD)
    space = ada.space_id
    old_key = strongauth.account_signing_key(OLD, space)
    new_key = strongauth.account_signing_key(NEW, space)
    new = bytes(new_key.verify_key)
    stranger = strongauth.account_signing_key("someone else's words", space)

    def post(request_id: str, proof_key: object, new_proof_key: object) -> httpx.Response:
        body = {
            "protocol_version": 4,
            "request_id": request_id,
            "account_key": base64.b64encode(new).decode(),
            "proof": base64.b64encode(
                strongauth.prove_change_key(proof_key, space, request_id, new)  # type: ignore[arg-type]
            ).decode(),
            "new_proof": base64.b64encode(
                strongauth.prove_change_key(new_proof_key, space, request_id, new)  # type: ignore[arg-type]
            ).decode(),
        }
        return httpx.post(
            f"{cloud.url}/v1/account-key/change",
            json=body,
            headers={"Authorization": f"Bearer {_credential(phone)}"},
        )

    wrong = post("req_aaaaaaaaaaaa", stranger, new_key)
    assert wrong.status_code == 403 and wrong.json()["code"] == "strong_auth_required"
    message = wrong.json()["message"]
    assert "req_aaaaaaaaaaaa" in message and space in message
    assert "current account key" in message and "nothing was changed" in message
    unowned = post("req_bbbbbbbbbbbb", old_key, stranger)
    assert unowned.status_code == 403 and "new key's proof" in unowned.json()["message"]
    assert _is_the_clouds_key(cloud, phone, OLD)

    done = post("req_cccccccccccc", old_key, new_key)
    assert done.status_code == 200, done.text
    assert base64.b64decode(done.json()["account_key"]) == new
    again = post("req_cccccccccccc", old_key, new_key)  # the answer was lost: retried
    assert again.status_code == 200 and again.json()["account_key"] == done.json()["account_key"]
    assert _is_the_clouds_key(cloud, phone, NEW)
    replayed = post("req_dddddddddddd", new_key, new_key)  # "change" to the key set
    assert replayed.status_code == 403 and "already set" in replayed.json()["message"]
    unauthenticated = httpx.post(f"{cloud.url}/v1/account-key/change", json={})
    assert unauthenticated.status_code == 401


def test_the_cli_without_the_current_passphrase_refuses_and_says_how(
    cloud: RunningCloud,
    fleet: Fleet,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone", account_passphrase=OLD)
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", NEW)
    monkeypatch.delenv("MEMSYNC_CURRENT_ACCOUNT_PASSPHRASE", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, out, err = _cli(phone, monkeypatch, capsys, "account-key", "set")
    assert code == 2 and out == ""
    assert "account passphrase is wrong" in err and "--current-from-stdin" in err
    assert _is_the_clouds_key(cloud, phone, OLD)

    monkeypatch.setattr("sys.stdin", io.StringIO("not the passphrase\n"))
    code, _, err = _cli(phone, monkeypatch, capsys, "account-key", "set", "--current-from-stdin")
    assert code == 2 and "account passphrase is wrong" in err
    assert _is_the_clouds_key(cloud, phone, OLD)

    monkeypatch.setattr("sys.stdin", io.StringIO(OLD + "\n"))
    code, out, err = _cli(phone, monkeypatch, capsys, "account-key", "set", "--current-from-stdin")
    assert code == 0, err
    assert "was changed" in out
    assert _is_the_clouds_key(cloud, phone, NEW)
