"""Device sync processes through the fork server: each is a separate real process that
opens the device's files, a kill is still the device's own SIGKILL at the exact point,
``kill_during_sync`` still refuses and reports as with a plain subprocess, calls are
safe from any thread, the device's stub embedder goes with it into the process, and
without a fork server the same call is a plain subprocess."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator import forkserver
from simulator.cloud_runner import RunningCloud
from simulator.errors import CrashPointNotReached, ProcessDidNotDie
from simulator.fleet import DeviceHandle, Fleet
from simulator.processes import SOURCE_ROOT, kill_during_sync, sync_in_a_process, syncs_started
from simulator.stub_embedder import STUB, STUB_MODEL_ID

pytestmark = pytest.mark.e2e

SENTENCES = [f"My neighbour number {i} keeps bees on the roof." for i in range(4)]


@pytest.fixture(scope="module")
def fork_server() -> Iterator[forkserver.ForkServer]:
    with forkserver.serving() as server:
        yield server


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    with RunningCloud.sqlite(tmp_path / "cloud") as running:
        yield running


def _phone_with_queue(fleet: Fleet) -> tuple[DeviceHandle, list[str]]:
    phone = fleet.add_device(fleet.add_user("ada"), "phone")
    records = []
    for i, sentence in enumerate(SENTENCES):
        phone.agent.say(sentence, f"c{i}")
        records.append(phone.agent.remember(sentence, f"c{i}").record_id)
    return phone, records


def test_a_kill_through_the_fork_server_is_a_real_sigkill_between_commit_and_receipt(
    fork_server: forkserver.ForkServer, cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    phone, records = _phone_with_queue(fleet)
    queued = phone.agent.pending_ops()
    served = fork_server.served

    killed = kill_during_sync(phone, "push_answered")

    assert fork_server.served == served + 1  # the fork server ran it, not a subprocess
    assert killed.returncode == -signal.SIGKILL and killed.point == "push_answered"
    space = phone.user.space_id
    for record in records:  # the cloud committed the push ...
        assert cloud.operator.record_status(space, record).version == 1
    assert phone.agent.pending_ops() == queued  # ... and the device stored no receipt
    report = phone.agent.sync()
    assert report.duplicates == queued and report.refused == []  # replayed ...
    for record in records:  # ... and not applied again
        assert cloud.operator.record_status(space, record).version == 1
    fleet.close()


def test_a_kill_before_a_pulled_page_commits_leaves_nothing_half_applied(
    fork_server: forkserver.ForkServer, cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    phone, _ = _phone_with_queue(fleet)
    phone.agent.sync()
    laptop = fleet.add_device(phone.user, "laptop")
    served = fork_server.served

    killed = kill_during_sync(laptop, "pull_answered")

    assert fork_server.served == served + 1
    assert killed.returncode == -signal.SIGKILL
    assert laptop.agent.list_records() == []
    laptop.agent.sync()
    assert sorted(v.text for v in laptop.agent.list_records()) == sorted(SENTENCES)
    fleet.close()


def test_kill_during_sync_still_says_when_the_process_did_not_die_at_the_point(
    fork_server: forkserver.ForkServer, cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    laptop = fleet.add_device(fleet.add_user("ada"), "laptop")
    served = fork_server.served
    # nothing queued: the push never reaches its point, the sync finishes (exit 0)
    with pytest.raises(CrashPointNotReached, match="without reaching 'push_answered'"):
        kill_during_sync(laptop, "push_answered")
    # the cloud is down: the process ends with an error, not by SIGKILL
    cloud.stop()
    with pytest.raises(ProcessDidNotDie, match=r"ended with code [1-9]"):
        kill_during_sync(laptop, "pull_answered")
    cloud.start()
    assert fork_server.served == served + 2
    assert laptop.agent.sync().pushed == 0  # reopened after each, and it works
    fleet.close()


def test_sync_processes_run_from_other_threads_at_once_and_take_the_stub_embedder(
    fork_server: forkserver.ForkServer, cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices", embedder=STUB)
    phone, records = _phone_with_queue(fleet)
    phone.agent.sync()
    laptop = fleet.add_device(phone.user, "laptop")
    tablet = fleet.add_device(phone.user, "tablet")
    laptop.close()
    tablet.close()
    results: dict[str, int] = {}
    callers: dict[str, int] = {}

    def sync(handle: DeviceHandle) -> None:
        done = sync_in_a_process(handle.directory, handle.passphrase, None)
        results[handle.name] = done.returncode
        callers[handle.name] = threading.get_ident()

    threads = [threading.Thread(target=sync, args=(h,)) for h in (laptop, tablet)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == {"laptop": 0, "tablet": 0}
    assert threading.get_ident() not in callers.values()  # called from other threads
    assert syncs_started(laptop.directory) == 1 and syncs_started(tablet.directory) == 1
    for handle in (laptop, tablet):
        handle.reopen()
        assert {v.record_id for v in handle.agent.list_records()} == set(records)
        models = handle.agent._debug_db().all("SELECT DISTINCT model_id FROM record_vectors")
        assert [row[0] for row in models] == [STUB_MODEL_ID]  # the process used the stub
    fleet.close()


def test_without_a_fork_server_the_same_kill_is_a_plain_subprocess(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    phone, _ = _phone_with_queue(fleet)
    queued = phone.agent.pending_ops()
    with forkserver.disabled():
        refusing = forkserver.current()
        assert refusing is not None
        killed = kill_during_sync(phone, "push_answered")
        assert refusing.served == 0
    assert killed.returncode == -signal.SIGKILL
    assert phone.agent.sync().duplicates == queued
    fleet.close()


def test_a_closed_fork_server_is_gone_and_refuses_new_requests(tmp_path: Path) -> None:
    server = forkserver.ForkServer()
    server.start()
    assert server.running
    server.close()
    assert not server.running
    with pytest.raises(forkserver.ForkServerUnavailable, match="closed"):
        server.sync(tmp_path, dict(os.environ), "model", 10)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfd_open")
def test_the_fork_server_ends_when_the_process_that_started_it_ends() -> None:
    code = (
        "from simulator import forkserver\n"
        "server = forkserver.ForkServer()\n"
        "server.start()\n"
        "print(server._process.pid, flush=True)\n"
        "import os; os._exit(0)\n"  # no close, no atexit: the process just ends
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=SOURCE_ROOT, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    pid = int(done.stdout.strip())
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone
    try:
        ready, _, _ = select.select([handle], [], [], 60)  # readable once it has exited
    finally:
        os.close(handle)
    assert ready, f"the fork server {pid} outlived the process that started it"
