"""The device's side of its subset: eviction removes like a forget but leaves no
skeleton, never loses a queued operation, never touches a device-only record; uses
are counted for the next pull; a model change is rebuilt in the background and one
ranking never mixes two models' vectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from device import search, store
from device import subset as device_subset
from device.agent import DeviceAgent
from device.db import Database
from protocol.model import Sensitivity
from tests.device.conftest import reopen
from tests.device.fake_cloud import FakeCloud

MakeAgent = Callable[..., DeviceAgent]

NAMES = ("records", "record_versions", "record_search", "record_vectors", "subject_index")


def rows_naming(db: Database, record_id: str) -> dict[str, int]:
    return {
        t: db.one(f"SELECT count(*) FROM {t} WHERE record_id = ?", (record_id,))[0] for t in NAMES
    }


def sent(agent: DeviceAgent) -> None:
    """As if the queue had been pushed and every receipt stored."""
    db = agent._debug_db()
    with db.atomic():
        for row in store.queue_batch(db, 10_000):
            store.dequeue(db, row["op_id"])


def told(agent: DeviceAgent, text: str, conversation: str = "c1") -> tuple[str, str]:
    episode = agent.say(text, conversation)
    record = agent.remember(text, conversation).record_id
    assert record is not None
    return record, episode


def test_an_evicted_record_leaves_no_row_no_key_and_no_skeleton(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record, episode = told(agent, "I live in Porto.")
    kept, _ = told(agent, "I play the cello on Sundays.")
    sent(agent)
    db = agent._debug_db()
    keys = {r["key_id"] for r in store.versions_of(db, record)}
    keys.add(store.episode_row(db, episode)["key_id"])
    assert all(n > 0 for t, n in rows_naming(db, record).items() if t != "subject_index")
    with db.atomic():
        assert device_subset.leave(db, record, [episode], [], "2026-03-02T00:00:00+00:00")
    assert rows_naming(db, record) == dict.fromkeys(NAMES, 0)
    assert store.episode_row(db, episode) is None
    assert not keys & agent.data_key_ids()
    # no tombstone: leaving is not forgetting, and the record may come back
    assert not store.episode_forgotten(db, episode)
    assert db.one("SELECT count(*) FROM forgotten_episodes")[0] == 0
    assert [v.record_id for v in agent.what_do_you_know()] == [kept]
    assert [h.record_id for h in agent.recall("Where do I live?")] != [record]


def test_a_record_with_a_queued_change_leaves_only_after_it_is_sent(
    make_agent: MakeAgent,
) -> None:
    agent = make_agent()
    record, episode = told(agent, "I live in Porto.")
    db = agent._debug_db()
    with db.atomic():
        assert not device_subset.leave(db, record, [episode], [], "2026-03-02T00:00:00+00:00")
    assert device_subset.deferred(db) == [record]
    assert agent.holds(record) and store.queue_count(db) > 0  # nothing lost
    with db.atomic():
        assert device_subset.evict_deferred(db) == []  # still queued
    sent(agent)
    with db.atomic():
        assert device_subset.evict_deferred(db) == [record]
    assert not agent.holds(record) and device_subset.deferred(db) == []


def test_entering_again_cancels_a_deferred_leave(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record, _ = told(agent, "I live in Porto.")
    db = agent._debug_db()
    with db.atomic():
        device_subset.leave(db, record, [], [], "2026-03-02T00:00:00+00:00")
        device_subset.entered(db, record, "pinned", "2026-03-02T00:01:00+00:00")
    sent(agent)
    with db.atomic():
        assert device_subset.evict_deferred(db) == []
    assert agent.holds(record) and agent.held_because(record) == "pinned"


def test_a_device_only_record_is_never_evicted(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    agent = make_agent(cloud=cloud)
    agent.enroll(cloud.new_code())
    agent.keep_on_device(Sensitivity.HEALTH)
    agent.say_detected("I take insulin every morning.", "c1")
    [local] = agent.end_session("c1")[1:]
    sent(agent)
    db = agent._debug_db()
    with db.atomic():
        assert not device_subset.leave(db, local.record_id, [], [], "2026-03-02T00:00:00+00:00")
    assert agent.holds(local.record_id) and device_subset.deferred(db) == []


def test_retrieval_counts_uses_for_the_next_pull_but_not_in_temporary_mode(
    make_agent: MakeAgent,
) -> None:
    agent = make_agent()
    record, _ = told(agent, "I live in Porto.")
    db = agent._debug_db()
    agent.recall("Where do I live?")
    agent.recall("Porto")
    [use] = device_subset.unreported(db)
    assert (use.record_id, use.uses) == (record, 2)
    agent.set_temporary_mode(True)
    agent.recall("Porto")
    agent.set_temporary_mode(False)
    with db.atomic():
        device_subset.mark_reported(db, [use])
    assert device_subset.unreported(db) == []


class _OtherModel:
    """Another embedding model: the same sentences, other (reversed) vectors."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.model_id = "other-model@000000000000"

    def embed(self, texts: list[str]) -> Any:
        return self.real.embed(texts)[:, ::-1].copy()


def test_a_new_model_is_rebuilt_in_the_background_and_never_mixed(
    make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent()
    records = [told(agent, text)[0] for text in ("I live in Porto.", "I play the cello.")]
    told(agent, "My locker code is 4417.")
    db = agent._debug_db()
    assert search.vector_hits(db, "Where do I live?")
    other = _OtherModel(search.default_embedder())
    monkeypatch.setattr(search, "default_embedder", lambda: other)
    # the old model's vectors are never ranked beside the new one's: none are used
    assert search.vector_hits(db, "Where do I live?") == {}
    # opening the device does not re-embed everything (that waits for the background)
    agent.close()
    agent = reopen(agent)
    db = agent._debug_db()
    assert len(search.stale(db)) == 3
    assert agent.rebuild_vectors(limit=2, batch=1) == 2
    models = {r[0] for r in db.all("SELECT model_id FROM record_vectors")}
    assert len(models) == 2 and other.model_id in models
    # mid-rebuild, the ranking holds only records that have the new model's vector
    assert set(search.vector_hits(db, "Where do I live?")) <= {
        r[0]
        for r in db.all(
            "SELECT record_id FROM record_vectors WHERE model_id = ?", (other.model_id,)
        )
    }
    assert agent.rebuild_vectors() == 1
    assert {r[0] for r in db.all("SELECT model_id FROM record_vectors")} == {other.model_id}
    assert set(records) <= set(search.vector_hits(db, "Where do I live?"))
    agent.close()


def test_the_whole_store_is_scanned_for_stale_vectors_once_per_process_and_model(
    make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After each sync the agent rebuilds vectors another model made. Once a scan found
    every vector current, later syncs skip the scan (a full read of every record, which
    grew with the store): every write since indexed in its own transaction. A model
    change scans again and still rebuilds everything."""
    agent = make_agent()
    told(agent, "I live in Porto.")
    scans: list[int] = []
    real_stale = search.stale

    def counted(db: Database, *args: Any, **kwargs: Any) -> list[tuple[str, int]]:
        found = real_stale(db, *args, **kwargs)
        if not args and not kwargs.get("record_ids"):
            scans.append(len(found))
        return found

    monkeypatch.setattr(search, "stale", counted)
    assert agent.rebuild_vectors() == 0 and scans == [0]
    told(agent, "I play the cello.")  # indexed in its own transaction
    assert agent.rebuild_vectors() == 0 and scans == [0]  # no second scan
    db = agent._debug_db()
    assert real_stale(db) == []  # and, indeed, nothing was stale
    other = _OtherModel(search.default_embedder())
    monkeypatch.setattr(search, "default_embedder", lambda: other)
    assert agent.rebuild_vectors() == 2 and scans == [0, 2]
    assert {r[0] for r in db.all("SELECT model_id FROM record_vectors")} == {other.model_id}
    assert agent.rebuild_vectors() == 0 and scans == [0, 2]
    agent.close()
