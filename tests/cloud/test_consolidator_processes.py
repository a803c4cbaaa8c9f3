"""Real ``memsync cloud worker`` processes against one store, one of them killed mid-job
(SIGKILL through the test fault hook): every candidate becomes exactly one record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from cloud.config import CloudConfig
from cloud.consolidator.scheduler import CRASH_ENV, run_forever
from cloud.consolidator.stopping import StopSignals
from cloud.consolidator.worker import Consolidator
from cloud.detector import default_detector
from cloud.service import SYSTEM_ACTOR, CloudService
from cloud.store import schema as t
from cloud.store.base import WorkItemRow
from protocol.model import EpistemicState
from protocol.operations import Receipt, ReceiptStatus
from tests.cloud.conftest import MASTER_KEY, Ops, applied, feed, new_user, push

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["Ana", "Ben", "Carla", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jo", "Kim", "Lea"]
CITIES = ["Lisbon", "Porto", "Berlin", "Oslo", "Rome", "Paris", "Vienna", "Prague"]
CITIES += ["Madrid", "Dublin", "Zurich", "Athens"]
SENTENCES = [f"My friend {n} lives in {c}." for n, c in zip(NAMES, CITIES, strict=True)]
LEASE = "2"
DEADLINE = 90.0
RUNNING = "session-end every"  # the worker's line once its scheduler runs


@pytest.fixture
def cloud(store_url: str, tmp_path: Path) -> Iterator[CloudService]:
    config = CloudConfig(
        store_url=store_url, key_store_path=tmp_path / "keys" / "keys.db", master_key=MASTER_KEY
    )
    service = CloudService(config)
    try:
        yield service
    finally:
        service.close()


def _worker(
    cloud: CloudService, name: str, *extra: str, crash: str | None = None
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    env["MEMSYNC_MASTER_KEY"] = MASTER_KEY.hex()
    if crash is not None:
        env[CRASH_ENV] = crash
    argv = [
        sys.executable, "-m", "simulator.cli", "cloud", "worker",
        "--store", cloud.config.store_url, "--keys", str(cloud.config.key_store_path),
        "--worker-id", name, "--lease-seconds", LEASE, *extra,
    ]  # fmt: skip
    log = open(_log_path(cloud, name), "wb")  # noqa: SIM115
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def _log_path(cloud: CloudService, name: str) -> Path:
    """Where the worker ``name`` writes its log."""
    return cloud.key_store_path.parent / f"{name}.log"


def _log(cloud: CloudService, name: str) -> str:
    return _log_path(cloud, name).read_text()


def _items(cloud: CloudService, space: str) -> list[WorkItemRow]:
    with cloud.store.session() as s:
        return s.work_items(space, "candidate", ("waiting", "done", "dropped"))


def _system_receipts(cloud: CloudService) -> list[Receipt]:
    with cloud.store.engine.connect() as conn:
        rows = conn.execute(
            select(t.applied_ops.c.receipt).where(t.applied_ops.c.device_id == SYSTEM_ACTOR)
        )
        return [Receipt.model_validate_json(r[0]) for r in rows]


def _candidates(ops: Ops, episodes: int) -> list[dict[str, object]]:
    """Episodes of two sentences each, both marked as candidates, in three conversations
    that then end: one work item per sentence."""
    raw = []
    for n in range(episodes):
        episode = f"ep_proc{n:06d}"
        conversation = f"conv-{n % 3}"
        raw.append(ops.episode(episode, f"{SENTENCES[2 * n]} {SENTENCES[2 * n + 1]}", conversation))
        for sentence in (0, 1):
            raw.append(
                {
                    **ops._base("mark_candidate", "assistant"),
                    "episode_id": episode,
                    "sentence": sentence,
                    "content_type": "relationship",
                    "sensitivity": "normal",
                    "time_kind": "permanent",
                    "score": 0.9,
                    "model_id": "device@test",
                }
            )
    ends = range(min(episodes, 3))
    return raw + [{**ops._base("end_session"), "conversation_id": f"conv-{c}"} for c in ends]


def test_a_killed_worker_loses_nothing_and_doubles_nothing(
    cloud: CloudService, ops: Ops, tmp_path: Path
) -> None:
    assert all(d.candidate for d in default_detector().detect(SENTENCES))  # precondition
    phone, laptop = new_user(cloud, "alice", "phone", "laptop")
    raw = _candidates(ops, 6)
    applied(push(cloud, phone, *raw))

    # a worker claims four items, writes the first, and is killed (SIGKILL) right after
    doomed = _worker(cloud, "doomed", "--once", "--batch", "4", crash="apply")
    assert doomed.wait(timeout=DEADLINE) == -signal.SIGKILL
    after_crash = _items(cloud, phone.space_id)
    assert Counter(i.state for i in after_crash) == {"done": 1, "waiting": 11}
    orphaned = [i for i in after_crash if i.state == "waiting" and i.lease_owner == "doomed"]
    assert len(orphaned) == 3  # leased to a dead worker until the lease expires

    # two workers run together; the dead worker's items come back when its leases expire
    survivors = [
        _worker(cloud, name, "--batch", "3", "--interval", "0.2") for name in ("left", "right")
    ]
    try:
        deadline = time.monotonic() + DEADLINE
        while any(i.state == "waiting" for i in _items(cloud, phone.space_id)) or not all(
            RUNNING in _log(cloud, name) for name in ("left", "right")
        ):  # the work done, and both workers running, so each is stopped between items
            assert time.monotonic() < deadline, "the survivors did not finish the work in time"
            assert all(p.poll() is None for p in survivors), "a surviving worker exited"
            time.sleep(0.2)
    finally:
        for process in survivors:
            process.send_signal(signal.SIGTERM)
        codes = []
        for process in survivors:
            try:
                codes.append(process.wait(timeout=30))
            except subprocess.TimeoutExpired:
                process.kill()
                codes.append(process.wait())
    assert codes == [0, 0]  # SIGTERM stops a worker cleanly between items

    final = _items(cloud, phone.space_id)
    assert {i.state for i in final} == {"done"}
    record_ids = [i.record_id for i in final]
    assert None not in record_ids and len(set(record_ids)) == 12  # one record per candidate
    taken_over = {i.key: i for i in final}
    assert all(taken_over[i.key].attempts >= 2 for i in orphaned)

    applied_receipts = [r for r in _system_receipts(cloud) if r.status is ReceiptStatus.APPLIED]
    assert Counter(r.record_id for r in applied_receipts) == {rid: 1 for rid in record_ids}

    learned = feed(cloud, laptop)
    texts = Counter(c.text for c in learned.versions.values())
    assert texts == {sentence: 1 for sentence in SENTENCES}  # none lost, none doubled
    assert all(c.epistemic_state is EpistemicState.SAID for c in learned.versions.values())
    assert all(learned.states[rid].lifecycle_state.value == "active" for rid in record_ids)
    logs = {p.name: p.read_text() for p in tmp_path.rglob("*.log")}
    assert "test fault hook" in logs["doomed.log"]


@pytest.fixture
def stop() -> Iterator[StopSignals]:
    signals = StopSignals()  # in the main thread, as the worker makes it
    try:
        yield signals
    finally:
        signals.close()


def test_a_stop_asked_for_while_the_worker_loads_ends_it_before_any_claim(
    cloud: CloudService, ops: Ops, stop: StopSignals
) -> None:
    """A SIGTERM before the scheduler runs (the worker still loading its model) is kept,
    not fatal: run_forever takes it and returns at once; nothing is claimed."""
    phone, _laptop = new_user(cloud, "alice", "phone", "laptop")
    applied(push(cloud, phone, *_candidates(ops, 1)))
    before = _items(cloud, phone.space_id)
    assert [i.state for i in before] == ["waiting", "waiting"]
    os.kill(os.getpid(), signal.SIGTERM)  # the default action would end pytest itself
    consolidator = Consolidator(cloud, worker_id="early", lease_seconds=60)  # loading
    assert stop.pending()
    run_forever(consolidator, stop, session_end_seconds=0.05)  # returns: no scheduler
    assert _items(cloud, phone.space_id) == before  # nothing claimed, nothing written


def test_a_running_worker_stops_on_sigterm_after_its_work(
    cloud: CloudService, ops: Ops, stop: StopSignals
) -> None:
    """The SIGTERM reaches the worker waiting in another thread (the kernel may hand it
    to any thread); the jobs stop and run_forever returns."""
    phone, _laptop = new_user(cloud, "alice", "phone", "laptop")
    applied(push(cloud, phone, *_candidates(ops, 1)))
    consolidator = Consolidator(cloud, worker_id="steady", lease_seconds=60)
    thread = threading.Thread(
        target=run_forever, args=(consolidator, stop), kwargs={"session_end_seconds": 0.05}
    )
    thread.start()
    deadline = time.monotonic() + DEADLINE
    while any(i.state == "waiting" for i in _items(cloud, phone.space_id)):
        assert time.monotonic() < deadline, "the worker did not consolidate in time"
        assert thread.is_alive()
        time.sleep(0.05)
    assert not stop.pending()
    os.kill(os.getpid(), signal.SIGTERM)
    thread.join(timeout=DEADLINE)
    assert not thread.is_alive(), "run_forever did not return after SIGTERM"
    assert {i.state for i in _items(cloud, phone.space_id)} == {"done"}
