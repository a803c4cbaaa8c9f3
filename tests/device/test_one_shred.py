"""One shred procedure on the device (issue 24 item 3): every forget, pulled destruction,
resync removal, eviction and wipe goes through ``device.shred.destroy``, and no SQL
outside it deletes content or keys (``retire_version`` aside: it replaces a provisional
version by the cloud's, and forgets nothing).

The spy wraps ``shred.destroy``; a guard on ``Database.execute`` fails any DELETE of a
content or key table that runs while no ``destroy`` (or ``retire_version``) is on the
stack, so a path that shredded by itself would fail here even if it never called the
spy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from device import shred, store
from device import subset as device_subset
from device.db import Database
from device.errors import AccountEnded
from device.sync_state import SyncState
from tests.device.conftest import MakeAgent
from tests.device.fake_cloud import FakeCloud
from tests.device.test_account_end import ACCOUNT, EndingCloud
from tests.device.test_memory_ops import told
from tests.device.test_subset_device import sent
from tests.device.test_subset_device import told as told_with_episode

_CONTENT = re.compile(
    r"^\s*DELETE FROM (data_keys|record_versions|episodes|artifacts|records)\b", re.IGNORECASE
)


@dataclass
class Spy:
    targets: list[shred.Target] = field(default_factory=list)
    depth: int = 0
    outside: list[str] = field(default_factory=list)

    def kinds(self) -> list[str]:
        return [type(t).__name__ for t in self.targets]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    seen = Spy()
    real_destroy, real_retire = shred.destroy, shred.retire_version
    real_execute = Database.execute

    def destroy(db: Database, target: shred.Target) -> int:
        seen.targets.append(target)
        seen.depth += 1
        try:
            return real_destroy(db, target)
        finally:
            seen.depth -= 1

    def retire(db: Database, record_id: str, version: int) -> None:
        seen.depth += 1
        try:
            real_retire(db, record_id, version)
        finally:
            seen.depth -= 1

    def execute(self: Database, sql: str, params: Any = ()) -> Any:
        if seen.depth == 0 and _CONTENT.match(sql):
            seen.outside.append(sql.strip()[:80])
        return real_execute(self, sql, params)

    monkeypatch.setattr(shred, "destroy", destroy)
    monkeypatch.setattr(shred, "retire_version", retire)
    monkeypatch.setattr(Database, "execute", execute)
    yield seen
    assert seen.outside == [], f"content deleted outside shred.destroy: {seen.outside}"


def _enrolled(make_agent: MakeAgent, cloud: Any, name: str, seed: int) -> Any:
    agent = make_agent(name, seed=seed, cloud=cloud)
    agent.enroll(cloud.new_code())
    return agent


def test_a_local_forget_and_the_pulled_destruction_go_through_destroy(
    make_agent: MakeAgent, cloud: FakeCloud, spy: Spy
) -> None:
    phone = _enrolled(make_agent, cloud, "phone", 1)
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    record = told(phone, "I grew up in Duluth.")
    phone.sync()
    laptop.sync()
    assert laptop.recall("duluth") and spy.targets == []

    phone.forget_permanently(record)
    [local] = spy.targets
    assert isinstance(local, shred.Forget) and local.record_ids == (record,)
    assert local.sync_state is SyncState.PENDING
    phone.sync()  # its own pull brings the destruction back: shredded again, harmlessly

    before = len(spy.targets)
    laptop.sync()
    pulled = spy.targets[before:]
    assert [type(t) for t in pulled] == [shred.Forget]
    [destruction] = pulled
    assert isinstance(destruction, shred.Forget) and destruction.record_ids == (record,)
    assert destruction.sync_state is SyncState.SYNCED and destruction.key_ids
    assert laptop.recall("duluth") == []


def test_a_derived_record_goes_before_the_one_it_came_from(
    make_agent: MakeAgent, spy: Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent()
    root = told(agent, "I grew up in Duluth.")
    order: list[str] = []
    real = shred._shred_record

    def shred_record(db: Database, record_id: str, **kw: Any) -> shred.Shredded:
        order.append(record_id)
        return real(db, record_id, **kw)

    monkeypatch.setattr(shred, "_shred_record", shred_record)
    db = agent._debug_db()
    with db.atomic():
        shred.destroy(
            db,
            shred.Forget(
                record_ids=(root, "rec_derived_1", "rec_derived_2"),
                at="2026-03-02T00:00:00+00:00",
                sync_state=SyncState.PENDING,
            ),
        )
    assert order == ["rec_derived_2", "rec_derived_1", root]


def test_eviction_goes_through_destroy(make_agent: MakeAgent, spy: Spy) -> None:
    agent = make_agent()
    record, episode = told_with_episode(agent, "I live in Porto.")
    db = agent._debug_db()
    with db.atomic():  # queued: it may not leave yet, and nothing is removed
        assert not device_subset.leave(db, record, [episode], [], "2026-03-02T00:00:00+00:00")
    assert spy.kinds() == ["Evict"] and store.version_row(db, record, 1) is not None
    sent(agent)
    with db.atomic():
        assert device_subset.evict_deferred(db) == [record]
    assert spy.kinds() == ["Evict", "Evict"] and store.record_row(db, record) is None


def test_a_wipe_goes_through_destroy(make_agent: MakeAgent, cloud: FakeCloud, spy: Spy) -> None:
    ending = EndingCloud(cloud)
    agent = make_agent("phone", seed=1, cloud=ending)
    agent.enroll(cloud.new_code(), account_passphrase=ACCOUNT)
    told(agent, "I hide the jam jar behind the flour.")
    agent.sync()
    ending.ended = "the account ended at 2026-03-02T12:00:00+00:00: deleted"
    with pytest.raises(AccountEnded):
        agent.sync()
    assert spy.kinds()[-1] == "Wipe"
    assert agent.data_key_ids() == set()
