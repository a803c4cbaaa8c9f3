"""Syncing the full record: versions, state (the server wins), artifacts, projects, and
key destruction of a derivation closure on another device."""

from __future__ import annotations

from device.agent import DeviceAgent
from protocol.model import ArtifactKind, LifeArea
from protocol.operations import RefusalCode
from tests.device.conftest import PASSPHRASE, MakeAgent
from tests.device.fake_cloud import FakeCloud
from tests.device.sqlcipher_pages import decrypted_pages
from tests.device.test_memory_ops import observed, told


def pair(make_agent: MakeAgent, cloud: FakeCloud) -> tuple[DeviceAgent, DeviceAgent]:
    phone = make_agent("phone", seed=1, cloud=cloud)
    laptop = make_agent("laptop", seed=2, cloud=cloud)
    phone.enroll(cloud.new_code())
    laptop.enroll(cloud.new_code())
    return phone, laptop


def test_correction_and_state_reach_the_other_device(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    phone, laptop = pair(make_agent, cloud)
    record = told(phone, "My favorite color is blue.")
    phone.sync()
    laptop.sync()
    phone.say("My favorite color is orange.", "c2")
    phone.correct(record, "My favorite color is orange.", "c2")
    phone.set_project("Thesis", True)
    phone.restrict_usage(record, project="Thesis")
    phone.sync()
    assert phone.pending_ops() == 0
    laptop.sync()
    [view] = laptop.what_do_you_know()
    assert (view.text, view.version, view.usage_restriction) == (
        "My favorite color is orange.", 2, "only for Thesis",
    )  # fmt: skip
    assert laptop.recall("favorite color") == []
    assert [h.text for h in laptop.recall("favorite color", project="Thesis")] == [
        "My favorite color is orange."
    ]
    assert [v.version for v in laptop.record_history(record)] == [1, 2]


def test_pulled_record_state_overrides_local_state(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    phone, laptop = pair(make_agent, cloud)
    record = told(phone, "I drink my coffee iced.")
    phone.sync()
    laptop.sync()
    phone.dont_use(record)
    phone.sync()
    assert [v.lifecycle for v in laptop.what_do_you_know()] == ["active"]  # not synced yet
    laptop.sync()
    assert [v.lifecycle for v in laptop.what_do_you_know()] == ["not_in_use"]
    assert laptop.recall("coffee") == []
    # a local change the cloud refuses is undone by the state the cloud sends back
    laptop.use_again(record)
    assert laptop.recall("coffee")
    cloud.refuse_next["use_again"] = (RefusalCode.WRONG_STATE, "the cloud says no")
    report = laptop.sync()
    assert [code for _, code, _ in report.refused] == ["wrong_state"]
    [view] = laptop.what_do_you_know()
    assert view.lifecycle == "not_in_use" and laptop.recall("coffee") == []


def test_forgotten_closure_is_shredded_on_the_other_device(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    phone, laptop = pair(make_agent, cloud)
    root = told(phone, "I grew up in Duluth.")
    episode = phone.say("Another trip north.", "c2")
    derived = phone.infer(observed(episode, "Visits Zorbleton often.", derived_from=[root]))
    artifact = phone.add_artifact(ArtifactKind.EMBEDDING, [root], "Quuxville vector 0.1 0.2")
    assert artifact.artifact_id is not None
    phone.sync()
    laptop.sync()
    assert laptop.artifact_ids() == [artifact.artifact_id]
    deks = [
        *laptop.data_keys_for(root),
        *laptop.data_keys_for(derived.record_id),
        *laptop.data_keys_for_artifact(artifact.artifact_id),
    ]
    assert len(deks) == 5
    phone.forget_permanently(root)
    phone.sync()
    report = laptop.sync()
    assert set(report.shredded) == {root, derived.record_id}
    assert laptop.artifact_ids() == []
    assert all(v.is_skeleton for v in laptop.what_do_you_know())
    pages = decrypted_pages(laptop.db_path, PASSPHRASE)
    for secret in [*deks, b"Duluth", b"Zorbleton", b"Quuxville", b"quuxville"]:
        assert not any(secret in p for p in pages), secret
    assert cloud.pending_for(root) == set()


def test_forget_area_on_one_device_reaches_the_other(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    phone, laptop = pair(make_agent, cloud)
    phone.register_account("account words")
    health = told(phone, "My blood type is O negative.", life_areas=[LifeArea.HEALTH])
    kept = told(phone, "My name is Ada.")
    phone.sync()
    laptop.sync()
    phone.forget_area(LifeArea.HEALTH, "account words")
    phone.sync()
    laptop.sync()
    views = {v.record_id: v for v in laptop.what_do_you_know()}
    assert views[health].is_skeleton and views[kept].text == "My name is Ada."
