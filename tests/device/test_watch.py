"""The change feed, watched queries and SyncStatus (issue 23 item 5).

Local writes on a real SQCipher device; pulled changes from the real cloud (FastAPI
under uvicorn on loopback, SQLite store) through two devices of one user. Clocks are
injected (``TickingClock``); nothing sleeps.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from device import store
from device.agent import DeviceAgent
from device.changes import (
    Cause,
    RecordAdded,
    RecordChanged,
    RecordEvent,
    RecordEvicted,
    RecordForgotten,
    event_for,
)
from device.errors import Offline
from device.sync_status import Connection
from device.views import RecallHit
from protocol.model import LifecycleState
from protocol.subset import SubsetBudget, SubsetPolicy
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet
from tests.device.conftest import MakeAgent, TickingClock

PORTO = "I live in Porto."
LISBON = "I live in Lisbon now."
CELLO = "I play the cello on Sundays."
TYPED = f"{PORTO} {CELLO}"


def _of(events: list[RecordEvent], record_id: str) -> list[RecordEvent]:
    return [e for e in events if e.record_id == record_id]


def _ids(hits: list[RecallHit]) -> list[str]:
    return [h.record_id for h in hits]


# --- local writes -----------------------------------------------------------------------


def test_each_local_write_tells_its_event_after_commit(make_agent: MakeAgent) -> None:
    clock = TickingClock()
    agent = make_agent(clock=clock)
    seen: list[RecordEvent] = []
    agent.watch(seen.append)
    agent.say(TYPED, "c1")
    assert seen == []  # an episode and its candidates are not records
    porto = agent.remember(PORTO, "c1").record_id
    added = _of(seen, porto)
    assert len(added) == 1 and isinstance(added[0], RecordAdded)
    assert (added[0].version, added[0].cause, added[0].lifecycle) == (
        1, Cause.LOCAL, LifecycleState.ACTIVE,
    )  # fmt: skip
    assert added[0].at < clock.now  # read from the injected clock

    seen.clear()
    agent.say(LISBON, "c1")
    agent.correct(porto, LISBON, "c1")
    [changed] = _of(seen, porto)
    assert isinstance(changed, RecordChanged) and changed.version == 2
    assert "version" in changed.changed and changed.cause is Cause.LOCAL

    seen.clear()
    agent.dont_use(porto)
    [off] = seen
    assert isinstance(off, RecordChanged) and off.changed == ("lifecycle",)
    assert off.lifecycle is LifecycleState.NOT_IN_USE

    seen.clear()
    agent.forget_permanently(porto)
    [gone] = _of(seen, porto)
    assert isinstance(gone, RecordForgotten) and gone.version == 2


def test_a_forgotten_records_event_carries_no_words(make_agent: MakeAgent) -> None:
    agent = make_agent()
    seen: list[RecordEvent] = []
    agent.watch(seen.append)
    agent.say(TYPED, "c1")
    cello = agent.remember(CELLO, "c1").record_id
    agent.forget_permanently(cello)
    [gone] = [e for e in seen if isinstance(e, RecordForgotten)]
    assert gone.record_id == cello
    dumped = gone.model_dump_json()
    assert "cello" not in dumped.lower() and "Sundays" not in dumped
    assert set(json.loads(dumped)) == {"record_id", "version", "cause", "at", "kind"}
    with pytest.raises(ValueError):  # no field to put words in
        RecordForgotten.model_validate({**json.loads(dumped), "text": CELLO})


def test_a_rolled_back_write_tells_nothing(
    make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent()
    seen: list[RecordEvent] = []
    agent.watch(seen.append)
    agent.say(TYPED, "c1")

    def fail(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk full while storing the receipt")

    monkeypatch.setattr("device.local.catalog.store_local_receipt", fail)
    with pytest.raises(Exception, match="disk full"):
        agent.remember(PORTO, "c1")  # the record was inserted, then rolled back
    assert seen == [] and agent.held_records() == set()
    monkeypatch.undo()

    db = agent._debug_db()
    rid = "rec_" + "a" * 26
    with db.atomic():
        with pytest.raises(RuntimeError), db.atomic():  # a savepoint that rolls back
            store.insert_record(
                db, record_id=rid, lifecycle="active", current_version=1, sync_state="pending"
            )
            raise RuntimeError("undone")
        assert db.in_transaction  # the outer transaction goes on, and commits
    assert seen == []
    with pytest.raises(RuntimeError), db.atomic():
        store.insert_record(
            db, record_id=rid, lifecycle="active", current_version=1, sync_state="pending"
        )
        raise RuntimeError("undone")
    assert seen == []
    with db.atomic():
        store.insert_record(
            db, record_id=rid, lifecycle="active", current_version=1, sync_state="pending"
        )
        assert seen == []  # not before the commit
    assert [(type(e), e.record_id) for e in seen] == [(RecordAdded, rid)]


def test_a_callback_that_raises_breaks_neither_the_write_nor_the_others(
    make_agent: MakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    agent = make_agent()

    def broken(event: RecordEvent) -> None:
        raise ValueError(f"app bug on {event.record_id}")

    agent.watch(broken)
    seen: list[RecordEvent] = []
    subscription = agent.watch(seen.append)
    agent.say(TYPED, "c1")
    with caplog.at_level(logging.ERROR, logger="device.changes"):
        porto = agent.remember(PORTO, "c1").record_id
    assert agent.holds(porto) and [e.record_id for e in seen] == [porto]
    assert "a change listener raised" in caplog.text
    subscription.cancel()
    agent.dont_use(porto)
    assert len(seen) == 1  # cancelled: told nothing more


def test_the_change_feed_queues_events_for_a_reader(make_agent: MakeAgent) -> None:
    agent = make_agent()
    feed = agent.changes()
    agent.say(TYPED, "c1")
    porto = agent.remember(PORTO, "c1").record_id
    cello = agent.remember(CELLO, "c1").record_id
    assert [e.record_id for e in feed.drain()] == [porto, cello]
    assert feed.drain() == [] and feed.get(timeout=0) is None
    agent.dont_use(porto)
    feed.close()
    agent.use_again(porto)  # after close: not queued
    assert [(e.kind, e.record_id) for e in feed] == [("changed", porto)]  # then it ends


def test_another_thread_iterates_the_feed_until_it_is_closed(make_agent: MakeAgent) -> None:
    import threading

    agent = make_agent()
    feed = agent.changes()
    read: list[RecordEvent] = []
    reader = threading.Thread(target=lambda: read.extend(feed), name="app reader")
    reader.start()  # blocks on the feed: no event yet
    agent.say(TYPED, "c1")
    written = [agent.remember(s, "c1").record_id for s in (PORTO, CELLO)]
    feed.close()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert [e.record_id for e in read] == written


# --- the classification rule --------------------------------------------------------------

_rows = st.none() | st.tuples(
    st.sampled_from([s.value for s in LifecycleState]),
    st.none() | st.integers(1, 3),
    st.none() | st.integers(1, 3),
    st.tuples(st.none() | st.just("work"), st.none() | st.just("p")),
    st.none() | st.just("rec_other"),
    st.sampled_from(["[]", '["rec_x"]']),
)
FORGOTTEN = LifecycleState.FORGOTTEN.value
AT = datetime.fromisoformat("2026-03-01T09:30:00+00:00")


@given(before=_rows, after=_rows, cause=st.sampled_from(list(Cause)))
def test_event_for_follows_the_table(before: object, after: object, cause: Cause) -> None:
    event = event_for("rec_a", before, after, cause, AT)  # type: ignore[arg-type]
    held_before = before is not None and before[0] != FORGOTTEN  # type: ignore[index]
    held_after = after is not None and after[0] != FORGOTTEN  # type: ignore[index]
    if not held_before:
        assert (event is None) == (not held_after)
        assert event is None or isinstance(event, RecordAdded)
    elif after is None:
        assert isinstance(event, RecordEvicted)
    elif not held_after:
        assert isinstance(event, RecordForgotten)
    elif before == after:
        assert event is None
    else:
        assert isinstance(event, RecordChanged) and event.changed
    if event is not None:
        assert (event.record_id, event.cause, event.at) == ("rec_a", cause, AT)


# --- watched queries -------------------------------------------------------------------------


def test_a_watched_query_reruns_and_drops_a_forgotten_record(make_agent: MakeAgent) -> None:
    agent = make_agent()
    answers: list[list[RecallHit]] = []
    watch = agent.watch_query("where do I live?", answers.append, limit=3)
    assert answers == [[]] and watch.runs == 1  # the first answer is always told
    agent.say(TYPED, "c1")
    porto = agent.remember(PORTO, "c1").record_id
    assert porto in _ids(answers[-1]) and watch.results == answers[-1]
    told = len(answers)
    agent.set_project("garden", open=True)  # no record moved: no re-run at all
    assert watch.runs == told
    agent.forget_permanently(porto)
    assert porto not in _ids(answers[-1]) and len(answers) == told + 1
    watch.cancel()
    agent.say(LISBON, "c2")  # the forget shredded the episode of c1 with the record
    agent.remember(LISBON, "c2")
    assert len(answers) == told + 1  # cancelled


def test_a_rerun_with_the_same_answer_calls_nothing_back(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(TYPED, "c1")
    porto = agent.remember(PORTO, "c1").record_id
    answers: list[list[RecallHit]] = []
    watch = agent.watch_query("where do I live?", answers.append, limit=1)
    assert _ids(answers[0]) == [porto]
    cello = agent.remember(CELLO, "c1").record_id  # a change: re-run, same answer
    assert watch.runs == 2 and len(answers) == 1
    agent.dont_use(porto)  # the hit is no longer usable: dropped
    assert porto not in _ids(answers[-1]) and len(answers) == 2
    assert cello  # (held, just not what this query asks for first)


# --- pulled changes and SyncStatus against the real cloud -----------------------------


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with RunningCloud.sqlite(tmp_path / "cloud") as running:
        made = Fleet(running, tmp_path / "devices", clock=TickingClock())
        try:
            yield made
        finally:
            made.close()


def test_pulled_changes_tell_added_changed_forgotten_evicted(fleet: Fleet) -> None:
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    phone.agent.say(TYPED, "c1")
    porto = phone.agent.remember(PORTO, "c1").record_id
    cello = phone.agent.remember(CELLO, "c1").record_id
    phone.agent.sync()

    feed = laptop.agent.changes()
    answers: list[list[RecallHit]] = []
    laptop.agent.watch_query("where do I live?", answers.append, limit=1)
    assert answers == [[]]
    laptop.agent.sync()
    pulled = feed.drain()
    assert all(e.cause is Cause.PULLED for e in pulled)
    for rid in (porto, cello):
        first = _of(pulled, rid)[0]
        assert isinstance(first, RecordAdded), pulled
    assert _ids(answers[-1]) == [porto]

    phone.agent.say(LISBON, "c1")
    phone.agent.correct(porto, LISBON, "c1")
    phone.agent.sync()
    laptop.agent.sync()
    changed = _of(feed.drain(), porto)
    assert changed and all(isinstance(e, RecordChanged) for e in changed)
    assert changed[-1].version == 2 and changed[-1].cause is Cause.PULLED
    assert answers[-1][0].text == LISBON

    phone.agent.forget_permanently(porto)
    phone.agent.sync()
    laptop.agent.sync()
    [gone] = _of(feed.drain(), porto)
    assert isinstance(gone, RecordForgotten) and gone.cause is Cause.PULLED
    assert "Lisbon" not in gone.model_dump_json() and "Porto" not in gone.model_dump_json()
    assert porto not in _ids(answers[-1])

    laptop.agent.set_subset_policy(SubsetPolicy(budget=SubsetBudget(max_records=0)))
    laptop.agent.sync()
    [left] = _of(feed.drain(), cello)
    assert isinstance(left, RecordEvicted) and left.cause is Cause.PULLED
    assert not laptop.agent.holds(cello)


def test_sync_status_before_and_after_a_sync_with_queued_ops(fleet: Fleet) -> None:
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    phone.agent.say(TYPED, "c1")
    phone.agent.remember(PORTO, "c1")
    phone.agent.remember(CELLO, "c1")
    queued = phone.agent.pending_ops()
    before = phone.agent.sync_status()
    assert queued >= 3 and before.queued_ops == queued
    assert before.oldest_queued_at is not None
    assert (before.last_synced_at, before.cursor, before.connection) == (
        None, None, Connection.UNKNOWN,
    )  # fmt: skip
    assert before.first_sync is not None and not before.first_sync.in_progress
    assert before.first_sync.received == before.records_held == 2
    assert before.cloud_records is None and before.lag is None

    clock_before = phone.clock()
    phone.agent.sync()
    after = phone.agent.sync_status(ask_cloud=True)
    assert after.queued_ops == 0 and after.oldest_queued_at is None
    assert after.last_synced_at is not None and after.last_synced_at > clock_before
    assert after.connection is Connection.ONLINE and after.last_error is None
    assert after.first_sync is None and after.cursor is not None
    assert (after.cloud_records, after.records_held, after.lag) == (2, 2, 0)

    # offline: the sync fails, says why, and stores nothing
    phone.agent.say(LISBON, "c2")
    phone.transport.online = False
    with pytest.raises(Offline):
        phone.agent.sync()
    down = phone.agent.sync_status()
    assert down.connection is Connection.OFFLINE and down.last_error is not None
    assert "Offline" in down.last_error
    assert down.queued_ops == phone.agent.pending_ops() > 0
    assert down.last_synced_at == after.last_synced_at
    phone.transport.online = True

    # a laptop's first sync: in progress while its pages commit, counted against the cloud's
    laptop = fleet.add_device(ada, "laptop")
    assert laptop.agent.sync_status(ask_cloud=True).first_sync is not None
    during: list[tuple[bool, bool, int, int | None]] = []

    def note(_event: RecordEvent) -> None:
        status = laptop.agent.sync_status()
        assert status.first_sync is not None
        first = status.first_sync
        during.append((status.syncing, first.in_progress, first.received, first.expected))

    with laptop.agent.watch(note):
        laptop.agent.sync()
    assert during and all(syncing and progress for syncing, progress, _, _ in during)
    assert during[-1][2:] == (2, 2)
    assert laptop.agent.sync_status().first_sync is None

    # the time of the last sync survives a restart
    phone.agent.close()
    reopened = DeviceAgent.open(phone.agent.directory, phone.passphrase)
    try:
        assert reopened.sync_status().last_synced_at == after.last_synced_at
        assert reopened.sync_status().connection is Connection.UNKNOWN
    finally:
        reopened.close()


def test_a_device_that_is_not_enrolled_says_so(make_agent: MakeAgent) -> None:
    agent = make_agent()
    status = agent.sync_status(ask_cloud=True)  # nothing to ask: no error
    assert status.connection is Connection.NOT_ENROLLED and status.first_sync is None


# --- the CLI: status, and the first sync's progress bar ------------------------------


def test_cli_status_and_the_first_syncs_progress_bar(
    fleet: Fleet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from device import cli

    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    phone.agent.say(TYPED, "c1")
    phone.agent.remember(PORTO, "c1")
    phone.agent.remember(CELLO, "c1")
    phone.agent.sync()

    monkeypatch.setenv("MEMSYNC_PASSPHRASE", "laptop pass'phrase")
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", "")
    monkeypatch.setenv("MEMSYNC_DEVICE_DIR", str(tmp_path / "laptop"))

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(["device", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    code_ = fleet.cloud.operator.new_enrollment_code(ada.space_id)
    url = fleet.cloud.urls[0]
    assert run("init", "--name", "laptop", "--cloud", url, "--code", code_)[0] == 0
    code, out, _ = run("status")
    assert code == 0 and "Last synced: never" in out and "First sync: not done yet" in out
    code, out, _ = run("status", "--json")
    never = json.loads(out)
    assert never["last_synced_at"] is None and never["first_sync"]["expected"] is None

    code, out, err = run("sync")
    assert code == 0 and "pulled" in out
    assert "First sync" in err and "2/2" in err  # the bar, on stderr
    code, out, err = run("sync")
    assert code == 0 and "First sync" not in err  # only the first shows it

    code, out, _ = run("status", "--cloud", "--json")
    status = json.loads(out)
    assert (status["queued_ops"], status["first_sync"], status["connection"]) == (0, None, "online")
    assert (status["records_held"], status["cloud_records"], status["lag"]) == (2, 2, 0)
    assert status["last_synced_at"] is not None
    code, out, _ = run("status")
    assert "Last synced: 20" in out and "Queued changes: 0" in out
    assert "Connection: unknown" in out  # a new process has not called the cloud yet


def test_a_revoked_devices_wipe_tells_each_record_evicted(fleet: Fleet) -> None:
    from device.errors import DeviceRevoked

    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    phone.agent.say(TYPED, "c1")
    held = {phone.agent.remember(s, "c1").record_id for s in (PORTO, CELLO)}
    phone.agent.sync()
    seen: list[RecordEvent] = []
    phone.agent.watch(seen.append)
    assert phone.agent.device_id is not None
    fleet.cloud.operator.revoke_device(ada.space_id, phone.agent.device_id)
    with pytest.raises(DeviceRevoked):
        phone.agent.sync()
    assert {e.record_id for e in seen} == held
    assert all(isinstance(e, RecordEvicted) and e.cause is Cause.PULLED for e in seen)
    assert phone.agent.held_records() == set()
    assert phone.agent.sync_status().connection is Connection.NOT_ENROLLED
