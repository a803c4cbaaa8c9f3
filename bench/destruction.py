"""Applying 1,000 key-destruction events on a device holding 100k records (issue 6).

``measure(service, spaces, n_forget)`` takes spaces built by ``bench.spaces.prepare``
(a real device caught up in each). For each, the first ``n_forget`` records are
forgotten permanently on the cloud's push path (a push of another device that holds
nothing, batches of 500:
skeletons, key-destruction events naming this device as pending, keys destroyed after
commit); then the device syncs once and that sync is timed: it pulls the events, shreds
each record with its episode and keys and every derived row (secure delete), rewrites
its FTS index, checkpoints the WAL and acknowledges every event. Reported per size: the
cloud's forget time, the device's apply time and per event, the database size (file +
WAL, each) before and after, and the ratio of apply times largest / smallest.

Invariants: nothing here asserts a timing; the timed sync must shred and acknowledge
exactly ``n_forget`` records and leave nothing pending in the cloud, or it is an error
naming the space.
"""

from __future__ import annotations

import time
from typing import Any

from bench.spaces import SpaceWithDevice, db_bytes, forget_ops, headless_device, push_checked
from cloud.service import CloudService

FORGET_OP_BASE = 10**12  # op numbers above every memory op (2 per record)
MB = 1_000_000


class DestructionIncomplete(RuntimeError):
    """The device did not shred and acknowledge every forgotten record."""


def _one(service: CloudService, prepared: SpaceWithDevice, n_forget: int) -> dict[str, Any]:
    space = prepared.space
    before = db_bytes(prepared.agent)
    # a device holding nothing forgets (the writer holds what it pushed, and would have
    # to pull its own events before pushing again)
    forgetter = headless_device(service, space.space_id, "forgetter")
    start = time.perf_counter()
    push_checked(
        service, space.space_id, forgetter, forget_ops(space.tag, range(n_forget), FORGET_OP_BASE)
    )
    cloud_s = time.perf_counter() - start
    prepared.log.entries.clear()
    start = time.perf_counter()
    report = prepared.agent.sync()
    apply_s = time.perf_counter() - start
    after = db_bytes(prepared.agent)
    device_id = prepared.agent.device_id
    pending = [
        f
        for f in service.pending(space.space_id).forgets
        if any(p.device_id == device_id for p in f.pending)
    ]
    if len(report.shredded) != n_forget or len(report.acked) != n_forget or pending:
        raise DestructionIncomplete(
            f"space {space.space_id} ({space.records} records): the device shredded "
            f"{len(report.shredded)} and acknowledged {len(report.acked)} of {n_forget} "
            f"forgotten records; {len(pending)} forget(s) still pending on it in the cloud"
        )
    return {
        "records": space.records,
        "forgotten": n_forget,
        "cloud_forget_s": cloud_s,
        "device_apply_s": apply_s,
        "device_ms_per_event": 1000 * apply_s / n_forget,
        "pull_requests": len(prepared.log.seconds("/v1/pull")),
        "ack_requests": len(prepared.log.seconds("/v1/ack")),
        "db_file_mb_before": before[0] / MB,
        "db_wal_mb_before": before[1] / MB,
        "db_file_mb_after": after[0] / MB,
        "db_wal_mb_after": after[1] / MB,
        "setup_cloud_build_s": space.build_s,
        "setup_device_catch_up_s": prepared.catch_up_s,
    }


def measure(service: CloudService, spaces: list[SpaceWithDevice], n_forget: int) -> dict[str, Any]:
    """Per space size (keyed by record count), and the ratio of apply times."""
    out: dict[str, Any] = {str(p.space.records): _one(service, p, n_forget) for p in spaces}
    sizes = sorted(p.space.records for p in spaces)
    out["ratio_apply"] = (
        out[str(sizes[-1])]["device_apply_s"] / out[str(sizes[0])]["device_apply_s"]
    )
    return out
