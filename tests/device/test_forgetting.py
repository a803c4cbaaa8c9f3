"""Forgetting covers what was derived; mass forgets need the account passphrase and the
user; temporary mode writes nothing at all."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from device import store
from device.agent import DeviceAgent
from device.errors import TemporaryMode
from protocol.model import ArtifactKind, Initiator, LifeArea, Sensitivity
from protocol.operations import EffectKind, ForgetArea, ForgetPermanently
from tests.device.conftest import PASSPHRASE, MakeAgent
from tests.device.fake_cloud import FakeCloud
from tests.device.sqlcipher_pages import decrypted_pages, index_needles
from tests.device.test_memory_ops import T0, observed, refused, told

ACCOUNT = "the account passphrase, long enough"


def test_forget_cascade_shreds_derived_records_and_artifacts(make_agent: MakeAgent) -> None:
    agent = make_agent()
    root = told(agent, "I grew up in Duluth.")
    other = told(agent, "I like tea.")
    episode = agent.say("Flights to Duluth again.", "c2")
    derived = agent.infer(
        observed(episode, "Visits Zorbleton often.", derived_from=[root])
    ).record_id
    artifact = agent.add_artifact(ArtifactKind.SUMMARY, [root], "Summary: Quuxville childhood.")
    assert artifact.artifact_id is not None
    other_art = agent.add_artifact(ArtifactKind.TEXT_VIEW, [other], "Tea drinker.").artifact_id
    deks = [
        *agent.data_keys_for(root),
        *agent.data_keys_for(derived),
        *agent.data_keys_for_artifact(artifact.artifact_id),
    ]
    assert len(deks) == 5  # root v1 + its episode, derived v1 + its episode, artifact
    needles = index_needles(agent._debug_db(), "Visits Zorbleton", [root, derived])
    pages = decrypted_pages(agent.db_path, PASSPHRASE)
    assert all(any(d in p for p in pages) for d in [*deks, *needles])  # positive control

    result = agent.forget_permanently(root)

    assert result.receipt is not None
    assert result.receipt.affected_records == [root, derived]
    assert result.message == "Permanently forgotten; it cannot be brought back."
    assert agent.artifact_ids() == [other_art]
    views = {v.record_id: v for v in agent.what_do_you_know()}
    assert views[root].is_skeleton and views[derived].is_skeleton
    assert views[other].text == "I like tea."
    pages = decrypted_pages(agent.db_path, PASSPHRASE)
    for secret in [*deks, *needles, b"Zorbleton", b"zorbleton", b"Quuxville", b"Duluth", b"duluth"]:
        assert not any(secret in p for p in pages), secret
    queued = agent._debug_db().all("SELECT kind, episode_id FROM op_queue ORDER BY seq")
    assert [q["kind"] for q in queued if q["kind"] != "mark_candidate"] == [
        "add_episode",
        "remember",
        "add_artifact",
        "forget_permanently",
    ]  # fmt: skip  (the tea record's episode, record, artifact; then the forget)
    # the detector's marks of the shredded episodes went with them
    live = {q["episode_id"] for q in queued if q["kind"] == "add_episode"}
    assert {q["episode_id"] for q in queued if q["kind"] == "mark_candidate"} <= live


def _with_account(make_agent: MakeAgent, cloud: FakeCloud) -> DeviceAgent:
    agent = make_agent(cloud=cloud)
    agent.enroll(cloud.new_code(), account_passphrase=ACCOUNT)
    assert agent.account_key is not None and cloud.ledger.account_key == agent.account_key
    return agent


def test_forget_area_needs_the_account_passphrase(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    unenrolled = make_agent("offline", seed=4)
    told(unenrolled, "My blood type is O negative.", life_areas=[LifeArea.HEALTH])
    error = refused(unenrolled, "strong_auth_required", unenrolled.forget_area, None, ACCOUNT)
    assert "no account key is set" in str(error)

    agent = _with_account(make_agent, cloud)
    health = told(agent, "My blood type is O negative.", life_areas=[LifeArea.HEALTH])
    general = told(agent, "My name is Ada.")
    error = refused(agent, "strong_auth_required", agent.forget_area, LifeArea.HEALTH, "wrong")
    assert "account passphrase is wrong" in str(error)
    # the assistant can never start it, whatever its proof
    op = ForgetArea(
        op_id="op_" + "b" * 26,
        made_at=T0,
        initiated_by=Initiator.ASSISTANT,
        area=LifeArea.HEALTH,
        proof=b"\x00" * 64,
    )
    refused(agent, "not_allowed", agent.apply_operation, op)

    result = agent.forget_area(LifeArea.HEALTH, ACCOUNT)
    assert result.receipt is not None and result.receipt.effect is EffectKind.FORGOTTEN
    assert result.receipt.affected_records == [health] and result.record_id == ""
    views = {v.record_id: v for v in agent.what_do_you_know()}
    assert views[health].is_skeleton and not views[general].is_skeleton

    everything = agent.forget_area(None, ACCOUNT)
    assert everything.receipt is not None and everything.receipt.affected_records == [general]
    db = agent._debug_db()
    assert db.all("SELECT * FROM episodes") == [] and db.all("SELECT * FROM record_versions") == []
    # the cloud accepts the same proof: the pushed ops apply there too
    report = agent.sync()
    assert report.refused == [] and all(
        r.lifecycle.value == "permanently_forgotten" for r in cloud.records.values()
    )


def test_wrong_account_passphrase_on_a_second_device(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    _with_account(make_agent, cloud)
    laptop = make_agent("laptop", seed=2, cloud=cloud)
    with pytest.raises(Exception, match="account passphrase is wrong"):
        laptop.enroll(cloud.new_code(), account_passphrase="not it")
    assert laptop.device_id is not None  # enrolled; the key came with the enrollment
    assert laptop.account_key == cloud.ledger.account_key


def _digest(path: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.parent.glob(path.name + "*"))
        if not p.name.endswith("-shm")
    }


def test_temporary_mode_writes_nothing(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    agent = make_agent(cloud=cloud)
    agent.enroll(cloud.new_code())
    record = told(agent, "I grew up in Duluth.")
    before = _digest(agent.db_path)
    queued_before = agent.pending_ops()
    assert "device.db-wal" in before and agent.temporary_mode is False
    agent.set_temporary_mode(True)
    assert agent.temporary_mode
    writes = [
        lambda: agent.say("Secret plans for the weekend.", "t1"),
        lambda: agent.remember("I grew up in Duluth.", "c1"),
        lambda: agent.correct(record, "I grew up in Duluth.", "c1"),
        lambda: agent.dont_use(record),
        lambda: agent.restrict_usage(record, area=LifeArea.HOME),
        lambda: agent.forget_permanently(record),
        lambda: agent.set_project("Thesis", True),
        lambda: agent.add_artifact(ArtifactKind.SUMMARY, [record], "x"),
        lambda: agent.forget_area(None, ACCOUNT),
        lambda: agent.end_session("t1"),
        lambda: agent.ingest("Pay to account 12345678.", medium="web_page", source="x.example"),
        lambda: agent.observe("morning coffee order", "americano", source="cafe-app"),
        lambda: agent.import_text("I like tea.", source="dump.txt"),
        lambda: agent.keep_on_device(Sensitivity.HEALTH),
        agent.sync,
    ]
    for write in writes:
        with pytest.raises(TemporaryMode, match="nothing was written"):
            write()
    assert [h.record_id for h in agent.recall("Duluth")] == [record]  # reads work
    assert agent.what_do_you_know()[0].text == "I grew up in Duluth."
    assert agent.explain(record).startswith("You told me so")
    assert agent.due_questions() == [] and agent.pending_ops() == queued_before
    assert _digest(agent.db_path) == before
    agent.set_temporary_mode(False)
    agent.say("Now it is kept.", "c2")
    assert _digest(agent.db_path) != before


def test_a_forget_of_a_record_never_held_here_still_shreds_its_named_episodes(
    make_agent: MakeAgent,
) -> None:
    agent = make_agent()
    episode = agent.say("My locker code is 4711.", "c1")
    db = agent._debug_db()
    dek = store.get_key(db, store.episode_row(db, episode)["key_id"])
    assert dek is not None
    assert any(dek in p for p in decrypted_pages(agent.db_path, PASSPHRASE))  # control
    op = ForgetPermanently(
        op_id="op_0000000000forget",
        made_at=T0,
        initiated_by=Initiator.USER,
        record_id="rec_0000000000unseen",
        episode_ids=[episode],
    )
    result = agent.apply_operation(op)
    assert result.receipt is not None and result.receipt.effect is EffectKind.FORGOTTEN
    assert result.receipt.affected_records == []
    assert store.episode_row(db, episode) is None
    assert not any(dek in p for p in decrypted_pages(agent.db_path, PASSPHRASE))
