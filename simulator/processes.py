"""Crashes by real process kills: a device's sync run in a process of its own that
SIGKILLs itself at an exact point of the sync code.

Invariants: the in-process agent is closed before the subprocess opens the device's
database, and a fresh agent is opened on the same folder afterwards (with the same
transport, so the handle's fault state carries over), whatever happened in between.
The kill is the device's own test hook (``device.faults``, env ``MEMSYNC_DEVICE_CRASH_AT``):
``push_answered`` lands between the server's commit and the local receipt transaction,
``pull_answered`` before a pulled page commits. A process that did not die by SIGKILL
is an error naming the device, the point and how it ended (``CrashPointNotReached``
when it finished its sync without reaching the point).

``sync_in_a_process`` is the one way to run a device sync in a separate real process
(it opens the device's database files itself); it is safe from any thread. It goes
through this process's fork server when one is installed (``simulator.forkserver``:
no interpreter start per sync) and otherwise, or when the fork server cannot take
the request, starts ``python -m simulator.sync_process``; both run what
``memsync device sync --dir`` runs, with the device's embedder (the stub, when its
fleet gave it that).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from device.faults import CRASH_ENV, CRASH_POINTS
from simulator import forkserver
from simulator.errors import (
    CrashPointNotReached,
    DeviceNotReady,
    ProcessDidNotDie,
    UnknownCrashPoint,
)
from simulator.fleet import DeviceHandle
from simulator.sync_process import embedder_of

# The folder that holds the ``simulator`` package: the subprocess imports this code.
SOURCE_ROOT = Path(__file__).resolve().parents[1]
SYNC_TIMEOUT_SECONDS = 120

_started: Counter[str] = Counter()  # device folder -> sync processes started for it
_started_lock = threading.Lock()


def syncs_started(directory: Path) -> int:
    """How many sync processes ``sync_in_a_process`` started for the device folder."""
    with _started_lock:
        return _started[str(Path(directory).resolve())]


@dataclass(frozen=True)
class Killed:
    """How a device process ended: always by SIGKILL at ``point`` when returned."""

    device: str
    point: str
    returncode: int
    stderr: str


def sync_in_a_process(
    directory: Path, passphrase: str, crash_at: str | None
) -> subprocess.CompletedProcess[str]:
    """``memsync device sync --dir directory`` in a real process of its own (kill hook
    optional): forked by the fork server when one is installed, else a subprocess."""
    env = {**os.environ, "MEMSYNC_PASSPHRASE": passphrase}
    env.pop(CRASH_ENV, None)
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    embedder = embedder_of(directory)
    with _started_lock:
        _started[str(Path(directory).resolve())] += 1
    server = forkserver.current()
    if server is not None:
        try:
            return server.sync(directory, env, embedder, SYNC_TIMEOUT_SECONDS)
        except forkserver.ForkServerUnavailable:
            pass  # nothing ran: a plain subprocess runs it instead
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SOURCE_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    command = [sys.executable, "-m", "simulator.sync_process", "--dir", str(directory)]
    return subprocess.run(
        [*command, "--embedder", embedder],
        cwd=SOURCE_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SYNC_TIMEOUT_SECONDS,
        check=False,
    )


def kill_during_sync(handle: DeviceHandle, point: str) -> Killed:
    """Close ``handle``'s agent, run its sync in a process killed at ``point``, reopen.

    The device must be online (the subprocess reaches the cloud over plain HTTP). After
    the call ``handle.agent`` is a new agent on the same database and transport.
    """
    if point not in CRASH_POINTS:
        raise UnknownCrashPoint(
            f"crash point {point!r} for device {handle.name!r}: expected one of {CRASH_POINTS}"
        )
    if not handle.online:
        raise DeviceNotReady(
            f"device {handle.user.name}/{handle.name} is offline; a crash during sync needs "
            "it online (nothing was changed)"
        )
    directory = handle.agent.directory
    handle.close()
    try:
        done = sync_in_a_process(directory, handle.passphrase, point)
    finally:
        handle.reopen()  # the same files, transport and clock
    who = f"{handle.user.name}/{handle.name}"
    if done.returncode == 0:
        raise CrashPointNotReached(
            f"device {who}: the sync process finished without reaching {point!r} "
            f"({done.stdout.strip()[-300:]})"
        )
    if done.returncode != -signal.SIGKILL:
        raise ProcessDidNotDie(
            f"device {who}: the sync process was to SIGKILL itself "
            f"at {point!r} but ended with code {done.returncode}: {done.stderr.strip()[-500:]}"
        )
    return Killed(who, point, done.returncode, done.stderr)
