"""Sync against a fake cloud at the transport seam: enroll, push/receipts, crash
recovery by receipts, pull, key destruction + ack (and its retry), pull-first on 409."""

from __future__ import annotations

import httpx
import pytest

from device.agent import DeviceAgent
from device.errors import ChangeDoesNotOpen, NotEnrolled, Offline, ServerRefused
from protocol.operations import RefusalCode
from protocol.version import PROTOCOL_VERSION
from tests.device.conftest import PASSPHRASE, MakeAgent, reopen
from tests.device.fake_cloud import FakeCloud
from tests.device.sqlcipher_pages import decrypted_pages

TYPED = "My favorite number is not 1729. I grew up in Duluth."


def enrolled(
    make_agent: MakeAgent, cloud: FakeCloud, name: str = "phone", seed: int = 1
) -> DeviceAgent:
    agent = make_agent(name, seed=seed, cloud=cloud)
    agent.enroll(cloud.new_code())
    return agent


def test_enroll_stores_identity_and_every_request_is_versioned(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    agent = enrolled(make_agent, cloud)
    assert agent.device_id is not None and agent.device_id.startswith("dev_")
    assert agent.space_id == cloud.space_id
    agent.say(TYPED, "c1")
    agent.sync()
    assert cloud.paths() == ["/v1/enroll", "/v1/push", "/v1/pull"]
    assert all(body.get("protocol_version") == PROTOCOL_VERSION for _, body in cloud.requests)


def test_sync_needs_enrollment_and_bad_code_is_refused(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    agent = make_agent(cloud=cloud)
    with pytest.raises(NotEnrolled):
        agent.sync()
    with pytest.raises(ServerRefused) as caught:
        agent.enroll("code-unknown-000")
    assert caught.value.code == "enrollment_refused" and caught.value.status == 403
    assert agent.device_id is None


def test_push_drains_queue_with_receipts_and_another_device_pulls(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    phone = enrolled(make_agent, cloud)
    marks = len(phone.say_detected(TYPED, "c1").candidates)
    record = phone.remember("I grew up in Duluth.", "c1").record_id
    report = phone.sync()
    assert (report.pushed, report.applied, report.refused) == (2 + marks, 2 + marks, [])
    assert phone.pending_ops() == 0
    assert phone.list_records()[0].sync_state == "synced"
    db = phone._debug_db()
    statuses = [r["receipt_json"] for r in db.all("SELECT receipt_json FROM receipts")]
    assert len(statuses) == 2 + marks and all('"applied"' in s for s in statuses)
    # own changes come back in the pull (episode, version, state): held already, so
    # nothing is rewritten and no key is added
    assert report.pulled == 3 and len(phone.data_key_ids()) == 2

    laptop = enrolled(make_agent, cloud, "laptop", seed=2)
    laptop.sync()
    [hit] = laptop.recall("duluth")
    assert hit.record_id == record
    assert hit.line == (
        'On 2026-03-01 at 09:30 you wrote: "I grew up in Duluth."  '
        "[personal_fact | said | You told me]"
    )
    assert laptop.list_records()[0].sync_state == "synced"
    # the pulled episode backs a local "said" check on the laptop too
    assert laptop.remember("My favorite number is not 1729.", "c1").record_id


def test_offline_keeps_queue(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    phone = enrolled(make_agent, cloud)
    marks = len(phone.say_detected(TYPED, "c1").candidates)
    cloud.fail_before.append("/v1/push")
    with pytest.raises(Offline, match="cannot reach the cloud"):
        phone.sync()
    assert phone.pending_ops() == 1 + marks and cloud.episodes == {}
    phone.sync()
    assert phone.pending_ops() == 0 and len(cloud.episodes) == 1


def test_crash_after_server_commit_replays_as_duplicate(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    phone = enrolled(make_agent, cloud)
    ops = 2 + len(phone.say_detected(TYPED, "c1").candidates)
    phone.remember("I grew up in Duluth.", "c1")
    cloud.fail_after.append("/v1/push")  # server commits, the answer is lost
    with pytest.raises(Offline):
        phone.sync()
    assert cloud.applied_effects == ops and phone.pending_ops() == ops
    phone._debug_db().conn.close()  # the process dies here; the agent is discarded

    again = reopen(phone, cloud)
    report = again.sync()
    assert report.duplicates == ops and report.applied == ops and report.refused == []
    assert again.pending_ops() == 0
    assert cloud.applied_effects == ops  # exactly one effect each
    assert len(cloud.records) == 1 and len(cloud.episodes) == 1
    receipts = again._debug_db().all("SELECT receipt_json FROM receipts")
    assert all('"original_status":"applied"' in r["receipt_json"] for r in receipts)
    assert again.list_records()[0].sync_state == "synced"
    again.close()


def test_refused_receipt_marks_record_and_hides_it(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    phone = enrolled(make_agent, cloud)
    phone.say(TYPED, "c1")
    record = phone.remember("I grew up in Duluth.", "c1").record_id
    cloud.refuse_next["remember"] = (RefusalCode.NOT_SAID, "the cloud says no")
    report = phone.sync()
    assert [(code, reason) for _, code, reason in report.refused] == [
        ("not_said", "the cloud says no")
    ]
    [view] = phone.list_records()
    assert (view.record_id, view.sync_state) == (record, "refused")
    assert view.refusal_reason == "not_said: the cloud says no"
    assert phone.recall("duluth") == []
    assert phone.pending_ops() == 0


def _forgotten_elsewhere(
    make_agent: MakeAgent, cloud: FakeCloud
) -> tuple[DeviceAgent, DeviceAgent, str, list[bytes]]:
    phone = enrolled(make_agent, cloud)
    laptop = enrolled(make_agent, cloud, "laptop", seed=2)
    phone.say(TYPED, "c1")
    record = phone.remember("I grew up in Duluth.", "c1").record_id
    phone.sync()
    laptop.sync()
    deks = laptop.data_keys_for(record)
    assert len(deks) == 2 and laptop.recall("duluth")
    pages = decrypted_pages(laptop.db_path, PASSPHRASE)  # positive control for the scans
    assert all(any(d in page for page in pages) for d in deks)
    phone.forget_permanently(record)
    phone.sync()
    assert cloud.records[record].lifecycle.value == "permanently_forgotten"
    return phone, laptop, record, deks


def test_pull_key_destruction_shreds_and_acks(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    _, laptop, record, deks = _forgotten_elsewhere(make_agent, cloud)
    assert laptop.device_id in cloud.pending_for(record)
    report = laptop.sync()
    assert report.shredded == [record] and report.acked == [1]
    assert laptop.device_id not in cloud.pending_for(record)
    assert laptop.data_keys_for(record) == []
    held = laptop._debug_db().all("SELECT dek FROM data_keys")
    assert not {bytes(r["dek"]) for r in held} & set(deks)
    assert laptop.recall("duluth") == []
    [skeleton] = laptop.list_records()
    assert skeleton.is_skeleton and skeleton.text is None and skeleton.sync_state == "synced"
    assert laptop._debug_db().all("SELECT * FROM pending_acks") == []
    # neither the live rows nor free pages nor the WAL hold the keys or the words
    pages = decrypted_pages(laptop.db_path, PASSPHRASE)
    for secret in [*deks, b"duluth", b"Duluth"]:
        assert not any(secret in page for page in pages), secret


def test_lost_ack_is_sent_again_first(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    _, laptop, record, _ = _forgotten_elsewhere(make_agent, cloud)
    cloud.fail_before.append("/v1/ack")
    with pytest.raises(Offline):
        laptop.sync()
    assert laptop.data_keys_for(record) == []  # shredded and committed before the ack
    assert [r["event_id"] for r in laptop._debug_db().all("SELECT * FROM pending_acks")] == [1]
    assert laptop.device_id in cloud.pending_for(record)
    cloud.requests.clear()
    report = laptop.sync()
    assert cloud.paths()[0] == "/v1/ack" and report.acked == [1]
    assert laptop.device_id not in cloud.pending_for(record)
    assert laptop._debug_db().all("SELECT * FROM pending_acks") == []


def test_pull_required_then_push(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    _, laptop, record, _ = _forgotten_elsewhere(make_agent, cloud)
    laptop.say("A new thought.", "c9")
    cloud.requests.clear()
    report = laptop.sync()
    assert report.pull_required
    assert cloud.paths() == ["/v1/push", "/v1/pull", "/v1/ack", "/v1/push", "/v1/pull"]
    assert report.applied == 1 and laptop.pending_ops() == 0
    assert laptop.data_keys_for(record) == []


def test_offline_record_citing_forgotten_episode_is_refused(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    _, laptop, record, _ = _forgotten_elsewhere(make_agent, cloud)
    # while offline the laptop keeps another sentence of the episode that is now forgotten
    other = laptop.remember("My favorite number is not 1729.", "c1").record_id
    report = laptop.sync()
    assert report.pull_required and report.shredded == [record]
    # the forgotten source episode went with the key destruction, so the cloud refuses
    # the record naming it; its own sealed text stays local, marked refused
    views = {v.record_id: v for v in laptop.list_records()}
    assert views[record].is_skeleton
    assert views[other].sync_state == "refused"
    assert (views[other].refusal_reason or "").startswith("unknown_episode")
    assert laptop.recall("duluth") == [] and laptop.recall("1729") == []


def test_change_that_does_not_open_is_not_applied(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    phone = enrolled(make_agent, cloud)
    laptop = enrolled(make_agent, cloud, "laptop", seed=2)
    phone.say(TYPED, "c1")
    record = phone.remember("I grew up in Duluth.", "c1").record_id
    phone.sync()
    cloud.tamper_pull = True
    with pytest.raises(ChangeDoesNotOpen, match=f"record {record} v1"):
        laptop.sync()
    db = laptop._debug_db()
    assert db.one("SELECT pull_cursor FROM meta")[0] is None
    assert db.all("SELECT * FROM episodes") == [] and laptop.list_records() == []
    cloud.tamper_pull = False
    laptop.sync()
    assert laptop.recall("duluth")


def test_http_errors_are_mapped(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    phone = enrolled(make_agent, cloud)
    phone.say(TYPED, "c1")
    cloud.devices.clear()  # credential revoked
    with pytest.raises(ServerRefused) as caught:
        phone.sync()
    assert (caught.value.code, caught.value.status) == ("unauthorized", 401)

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    other = make_agent("other", seed=5, cloud=FakeCloud())
    other._transport = httpx.MockTransport(broken)
    with pytest.raises(Exception, match="HTTP 502 with a body that is not JSON"):
        other.enroll("code-whatever-1")
