"""The page's set-at-a-time rows (``device.sync_rows``) against the per-change oracle.

A phone makes a random history (new records, corrections, lifecycle and usage changes,
artifacts, forgets) in two rounds; two fresh laptops sync after each round: one applies
each pulled page as it comes (its rows read and written set-at-a-time), the other
applies every change as a page of its own (a page of one change queues at most one
record's rows, the per-change path). Every table they share must hold exactly the same
rows, so a batched decision that missed an earlier change of its page (read-your-writes),
wrote a row in a different order, or merged an insert and an update wrongly fails here.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest

from device import store
from device.agent import DeviceAgent
from device.db import Database
from device.errors import Refused
from device.sync import SyncSession
from device.sync_rows import PageRows
from protocol.messages import PullResponse
from protocol.model import ArtifactKind, LifeArea
from tests.device.conftest import MakeAgent
from tests.device.fake_cloud import FakeCloud

TABLES = {
    "records": "record_id",
    "record_versions": "record_id, version",
    "data_keys": "key_id",
    "episodes": "episode_id",
    "forgotten_episodes": "episode_id",
    "record_events": "seq",
    "derivations": "parent_id, child_kind, child_id",
    "artifacts": "artifact_id",
    "subject_index": "record_id, subject_key",
    "record_search": "record_id",
}
WORDS = "beehive cello lighthouse lapsang dinghy Bergen Quillby Petrel Varnholm".split()


ROWIDS = {"records", "record_versions", "data_keys", "episodes", "artifacts"}


def _rows(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the shared tables, with its rowid where the table has one (the
    order rows were inserted in is part of what must match). The fake cloud seals each
    pull afresh, so a sealed column is compared as what it opens to."""
    rows = {
        table: [
            tuple(row)
            for row in db.all(
                f"SELECT {'rowid, ' if table in ROWIDS else ''}* FROM {table} ORDER BY {order}"
            )
        ]
        for table, order in TABLES.items()
    }
    for table, opened in (
        ("record_versions", lambda r: store.open_version(db, r)),
        ("episodes", lambda r: store.open_episode(db, r)),
        ("artifacts", lambda r: None),
    ):
        full = db.all(f"SELECT rowid, * FROM {table} ORDER BY {TABLES[table]}")
        rows[table] = [
            tuple(opened(row) if isinstance(v, bytes) else v for v in tuple(row)) for row in full
        ]
    return rows


def _history(phone: DeviceAgent, rng: random.Random, records: list[str], steps: int) -> None:
    for step in range(steps):
        conversation = f"c{rng.randrange(4)}"
        text = f"I like the {rng.choice(WORDS)} near {rng.choice(WORDS)} number {step}."
        live = [r for r in records if r]
        kind = rng.choice(["new", "new", "correct", "dont_use", "restrict", "forget", "artifact"])
        if kind == "new" or not live:
            phone.say(text, conversation)
            record = phone.remember(text, conversation).record_id
            assert record is not None
            records.append(record)
        elif kind == "correct":
            phone.say(text, conversation)
            phone.correct(rng.choice(live), text, conversation)
        elif kind == "dont_use":
            with contextlib.suppress(Refused):  # already not in use
                phone.dont_use(rng.choice(live))
        elif kind == "restrict":
            phone.restrict_usage(rng.choice(live), area=rng.choice(list(LifeArea)))
        elif kind == "artifact":
            phone.add_artifact(ArtifactKind.SUMMARY, [rng.choice(live)], text)
        else:
            gone = rng.choice(live)
            phone.forget_permanently(gone)
            records[records.index(gone)] = ""


def _one_change_a_page(monkeypatch: pytest.MonkeyPatch, agent_name: str) -> None:
    real = SyncSession._apply_page

    def apply(self: SyncSession, page: PullResponse, *, resyncing: bool) -> None:
        if store_name(self) != agent_name or len(page.changes) <= 1:
            return real(self, page, resyncing=resyncing)
        for change in page.changes:
            one = PullResponse(changes=[change], cursor=page.cursor, has_more=page.has_more)
            real(self, one, resyncing=resyncing)
        return None

    monkeypatch.setattr(SyncSession, "_apply_page", apply)


def store_name(session: SyncSession) -> str:
    return str(session.db.one("SELECT device_name FROM meta")[0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_set_at_a_time_pages_leave_the_rows_one_change_pages_leave(
    make_agent: MakeAgent, cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    phone = make_agent("phone", seed=1, cloud=cloud)
    phone.enroll(cloud.new_code())
    batched = make_agent("batched", seed=2, cloud=cloud)
    batched.enroll(cloud.new_code())
    single = make_agent("single", seed=3, cloud=cloud)
    single.enroll(cloud.new_code())
    _one_change_a_page(monkeypatch, "single")
    records: list[str] = []
    for steps in (14, 10):
        _history(phone, rng, records, steps)
        phone.sync()
        batched.sync()
        single.sync()
        got, want = _rows(batched._debug_db()), _rows(single._debug_db())
        for table in TABLES:
            assert got[table] == want[table], table
    assert _rows(batched._debug_db())["records"]


def test_a_record_stated_in_the_page_that_brought_it_is_one_insert(
    make_agent: MakeAgent, cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read-your-writes: the version's new row and its state are one INSERT, and no
    UPDATE of records is issued for a record the page itself inserted."""
    phone = make_agent("phone", seed=1, cloud=cloud)
    phone.enroll(cloud.new_code())
    for i in range(3):
        phone.say(f"I keep bees number {i}.", "c")
        phone.remember(f"I keep bees number {i}.", "c")
    phone.sync()
    laptop = make_agent("laptop", seed=2, cloud=cloud)
    laptop.enroll(cloud.new_code())
    seen: list[str] = []
    real = PageRows.flush

    def flush(self: PageRows) -> None:
        seen.extend(f"{len(self._new_records)} new, {len(self._states)} updated" for _ in [0])
        real(self)

    monkeypatch.setattr(PageRows, "flush", flush)
    laptop.sync()
    assert "3 new, 0 updated" in seen
    rows = laptop._debug_db().all("SELECT lifecycle, sync_state FROM records")
    assert sorted(tuple(r) for r in rows) == [("active", "synced")] * 3


def test_a_version_queued_after_the_cache_was_dropped_keeps_the_held_ones_known(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    """After ``forget`` (a rare path ran) a queued version must not hide the versions
    the store holds: a later change naming one is held, not inserted twice."""
    phone = make_agent("phone", seed=1, cloud=cloud)
    phone.enroll(cloud.new_code())
    phone.say("I keep bees.", "c")
    record = phone.remember("I keep bees.", "c").record_id
    assert record is not None
    phone.sync()
    db = phone._debug_db()
    with db.atomic():
        rows = PageRows(db)
        rows.forget()
        row = store.version_row(db, record, 1)
        rows.insert_version(
            record, 2, (1, "stated", "2026-03-01T09:30:00+00:00", "sp", row["key_id"], b"x")
        )
        assert rows.version_held(record, 1)
        assert rows.version_held(record, 2)
