"""The end of an account end to end: the real app under uvicorn on loopback, real
SQLCipher devices over httpx, the cloud's clock injected and moved on.

- Deleting the account with one device offline until after the deletion: the cloud
  destroys every key of the space at once and reports the offline device pending; when
  it reconnects it hears 410 ``account_ended``, wipes its whole copy (queued changes
  included), confirms, and nothing is pending any more.
- The service's closing: while closing every answer carries the notice and the device
  CLI prints it; after ``closes_at`` a push answers 503 and the device keeps its queue
  while pulls work; after ``export_until`` every account has ended and every device
  wipes itself.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from cloud.account_end import EndReason
from cloud.config import CloudConfig
from device import cli as device_cli
from device.errors import AccountEnded, Refused
from protocol import strongauth
from protocol.messages import CLOSING_HEADER, parse_closing_header
from simulator import cli
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from simulator.forensics import scan_device_database
from simulator.walls import compare, take_digest
from tests.cloud.conftest import FakeClock

pytestmark = pytest.mark.e2e

SECRET = "I keep the spare key under the blue flowerpot."
ACCOUNT = "the account passphrase of ada, long enough"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgresql"])
def cloud(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> Iterator[RunningCloud]:
    if request.param == "sqlite":
        with RunningCloud.sqlite(tmp_path / "cloud", clock=clock) as running:
            yield running
        return
    request.applymarker(pytest.mark.postgres)
    make_db: Callable[[], str] = request.getfixturevalue("postgres_database")
    config = CloudConfig(store_url=make_db(), key_store_path=tmp_path / "keys.db", clock=clock)
    with RunningCloud(config) as running:
        yield running


@pytest.fixture
def fleet(cloud: RunningCloud, tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(cloud, tmp_path / "devices")
    try:
        yield made
    finally:
        made.close()


def _credential(handle: DeviceHandle) -> str:
    row = handle.agent._debug_db().one("SELECT credential FROM meta")
    return str(row[0])


def _needles(handle: DeviceHandle, record: str) -> dict[str, bytes]:
    keys = {f"key {n}": k for n, k in enumerate(handle.agent.data_keys_for(record))}
    return {"credential": _credential(handle).encode(), **keys}


def test_deleting_the_account_with_a_device_offline_until_after_it(
    cloud: RunningCloud,
    fleet: Fleet,
    clock: FakeClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone", account_passphrase=ACCOUNT)
    laptop = fleet.add_device(ada, "laptop", account_passphrase=ACCOUNT)
    bob = fleet.add_user("bob")
    bobs = fleet.add_device(bob, "phone")
    bobs.agent.say("I like my bike.", "c1")
    bobs.agent.remember("I like my bike.", "c1")
    bobs.agent.sync()
    phone.agent.say(SECRET, "c1")
    record = phone.agent.remember(SECRET, "c1").record_id
    phone.agent.sync()
    laptop.agent.sync()  # the laptop holds the record and its keys
    laptop.go_offline()  # ... and stays away until after the deletion
    laptop.agent.say("My locker code is 4711.", "c2")  # queued there, never sent
    assert laptop.agent.pending_ops() > 0
    needles = _needles(laptop, record)
    before = scan_device_database(laptop.db_path, laptop.passphrase, needles)
    assert {h.needle for h in before.hits} >= {"key 0"}  # the scan can see the keys

    # a wrong passphrase: refused on the device (nothing sent), and by the cloud
    with pytest.raises(Refused, match="account passphrase is wrong"):
        phone.agent.delete_account("not the passphrase")
    untouched = take_digest(cloud.operator)
    wrong = strongauth.account_signing_key("not the passphrase", ada.space_id)
    proof = strongauth.prove_delete_account(wrong, ada.space_id, "req_aaaaaaaaaaaa")
    refused = httpx.post(
        f"{cloud.url}/v1/account/delete",
        json={
            "protocol_version": 2,
            "request_id": "req_aaaaaaaaaaaa",
            "proof": base64.b64encode(proof).decode(),
        },
        headers={"Authorization": f"Bearer {_credential(phone)}"},
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "strong_auth_required"
    assert "nothing was changed" in refused.json()["message"]
    assert compare(untouched, take_digest(cloud.operator), own=[]) == []
    assert cloud.operator.account_status(ada.space_id) is None

    others = take_digest(cloud.operator)
    result = phone.agent.delete_account(ACCOUNT)

    assert result.space_id == ada.space_id and result.confirmed
    assert result.pending == ((laptop.agent.device_id, "laptop"),)
    assert phone.agent.list_records() == [] and phone.agent.pending_ops() == 0
    status = cloud.operator.account_status(ada.space_id)
    assert status is not None and status.reason is EndReason.DELETED
    assert status.keys_destroyed_at == status.ended_at == clock.now
    assert [d.device_name for d in status.pending] == ["laptop"]
    assert compare(others, take_digest(cloud.operator), own=[ada.space_id]) == []
    argv = ["cloud", "account-status", ada.space_id]
    argv += ["--store", cloud.config.store_url, "--keys", str(cloud.config.key_store_path)]
    assert cli.main(argv) == 0
    shown = capsys.readouterr().out
    assert "pending devices: 1" in shown and "laptop" in shown and "phone" not in shown

    # days later the laptop comes back: it hears the end, wipes everything, confirms
    clock.advance(timedelta(days=3))
    laptop.go_online()
    with pytest.raises(AccountEnded) as ended:
        laptop.agent.sync()
    message = str(ended.value)
    assert f"space {ada.space_id} ended at" in message and "deleted the account" in message
    assert "queued change(s) never sent" in message and "the cloud was told" in message
    assert laptop.agent.list_records() == [] and laptop.agent.pending_ops() == 0
    after = scan_device_database(laptop.db_path, laptop.passphrase, needles)
    assert after.clean and after.pages > 0 and after.unreadable_pages == 0, after.hits
    status = cloud.operator.account_status(ada.space_id)
    assert status is not None and status.pending == ()
    # bob's memory is whole
    bobs.agent.sync()
    assert [v.text for v in bobs.agent.list_records()] == ["I like my bike."]


def test_the_service_closes_through_its_notice_period(
    tmp_path: Path,
    cloud: RunningCloud,
    fleet: Fleet,
    clock: FakeClock,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone", account_passphrase=ACCOUNT)
    laptop = fleet.add_device(ada, "laptop")
    closes_at = clock.now + timedelta(days=60)
    export_until = closes_at + timedelta(days=30)
    cloud.operator.announce_closing(closes_at, export_until)
    clock.advance(timedelta(minutes=1))  # the serving process re-reads the state

    # the notice period: everything works, and every answer says when it ends
    phone.agent.say(SECRET, "c1")
    phone.agent.remember(SECRET, "c1")
    report = phone.agent.sync()
    assert report.applied > 0 and report.push_held is None
    assert report.closing is not None
    assert parse_closing_header(report.closing) == (closes_at, export_until)
    health = httpx.get(f"{cloud.url}/v1/health")
    assert health.headers[CLOSING_HEADER] == report.closing
    assert httpx.get(f"{cloud.url}/v1/service").json()["mode"] == "closing"
    exports = tmp_path / "exports"
    exports.mkdir()
    during_notice = phone.agent.export(exports, ACCOUNT)  # export is open, as is all else
    assert SECRET in during_notice.package_path.read_text()
    laptop.close()  # the device CLI opens the laptop's files itself
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", laptop.passphrase)
    assert device_cli.main(["device", "sync", "--dir", str(laptop.directory)]) == 0
    out = capsys.readouterr().out
    assert f"Notice: the memsync service closes on {closes_at.isoformat()}" in out
    assert f"export stays open until {export_until.isoformat()}" in out
    laptop.reopen()

    # after closes_at: a push changes nothing and the ops stay queued; pulls still work
    clock.now = closes_at + timedelta(days=1)
    phone.agent.say("My locker code is 4711.", "c2")
    queued = phone.agent.pending_ops()
    report = phone.agent.sync()
    assert report.push_held is not None and "service_closed" not in report.push_held
    assert "export stays open until" in report.push_held
    assert report.pushed == 0 and phone.agent.pending_ops() == queued
    assert [v.text for v in laptop.agent.list_records()] == [SECRET]  # pulled before
    assert laptop.agent.sync().push_held is None  # nothing queued; the pull works
    # ... and export stays open until export_until: the whole memory, as it stood
    after_close = phone.agent.export(exports, ACCOUNT)
    assert SECRET in after_close.package_path.read_text()
    assert after_close.totals.records == during_notice.totals.records

    # after export_until: every account ended, every key destroyed, devices wipe
    clock.now = export_until
    with pytest.raises(AccountEnded, match="service shut down for region 'default'"):
        phone.agent.export(exports, ACCOUNT)  # nothing left to export: the device wipes
    assert sorted(p.name for p in exports.iterdir()) == sorted(
        p.name
        for p in (
            *[during_notice.package_path, during_notice.view_path],
            *[after_close.package_path, after_close.view_path],
        )
    )  # no partial file of the refused export
    assert phone.agent.list_records() == [] and phone.agent.pending_ops() == 0
    with pytest.raises(AccountEnded, match="service shut down"):
        laptop.agent.sync()
    status = cloud.operator.account_status(ada.space_id)
    assert status is not None and status.reason is EndReason.SERVICE_SHUTDOWN
    assert status.keys_destroyed_at is not None and status.pending == ()
    assert httpx.get(f"{cloud.url}/v1/service").json()["mode"] == "closed"
