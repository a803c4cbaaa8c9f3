"""Crashes by real process kills: a device's sync run in a subprocess that SIGKILLs
itself at an exact point of the sync code.

Invariants: the in-process agent is closed before the subprocess opens the device's
database, and a fresh agent is opened on the same folder afterwards (with the same
transport, so the handle's fault state carries over), whatever happened in between.
The kill is the device's own test hook (``device.faults``, env ``MEMSYNC_DEVICE_CRASH_AT``):
``push_answered`` lands between the server's commit and the local receipt transaction,
``pull_answered`` before a pulled page commits. A process that did not die by SIGKILL
is an error naming the device, the point and how it ended (``CrashPointNotReached``
when it finished its sync without reaching the point).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from device.faults import CRASH_ENV, CRASH_POINTS
from simulator.errors import (
    CrashPointNotReached,
    DeviceNotReady,
    ProcessDidNotDie,
    UnknownCrashPoint,
)
from simulator.fleet import DeviceHandle

# The folder that holds the ``simulator`` package: the subprocess imports this code.
SOURCE_ROOT = Path(__file__).resolve().parents[1]
SYNC_TIMEOUT_SECONDS = 120


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
    """``memsync device sync --dir directory`` as a real subprocess (kill hook optional)."""
    env = {**os.environ, "MEMSYNC_PASSPHRASE": passphrase}
    env.pop(CRASH_ENV, None)
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SOURCE_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return subprocess.run(
        [sys.executable, "-m", "simulator.cli", "device", "sync", "--dir", str(directory)],
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
