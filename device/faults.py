"""A test fault hook: the device process kills itself (SIGKILL) at a named point.

Invariant: nothing happens unless ``MEMSYNC_DEVICE_CRASH_AT`` names a point; an unknown
point is an error at once, never silently ignored. Never set it in production: it
exists so tests can kill a real device process exactly between the server's commit
and the device's own receipt transaction (``push_answered``), between a pulled page
and its local commit (``pull_answered``), between a resync's last page and its final
transaction (``resync_pulled``), or inside a shred between a record's rows and its
data keys (``shred_keys_next``, ``device.shred``).
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "MEMSYNC_DEVICE_CRASH_AT"
CRASH_POINTS = ("push_answered", "pull_answered", "resync_pulled", "shred_keys_next")


def reached(point: str) -> None:
    """Called by the sync code at ``point``; kills this process if the env says so."""
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    if wanted not in CRASH_POINTS:
        raise ValueError(f"{CRASH_ENV}={wanted!r}: expected one of {CRASH_POINTS}")
    if wanted == point:
        os.kill(os.getpid(), signal.SIGKILL)
