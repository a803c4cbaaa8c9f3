"""A seeded random run: S steps over U users with N devices, then the invariants.

Invariants: every choice comes from one ``random.Random(seed)`` and sentences from a
generator seeded by the same seed, so the same settings give the same action log and
the same outcome counts (ids and timings differ; they are never in the log or counts).
Settings are checked before a cloud, user or device exists. The run's users are its
own (server-assigned spaces, names unique to the run); before the first of them
exists the walls digest of every other space is taken. At the end every device is
brought online and synced until a round changes nothing, then every invariant and the
walls are checked. Per step the run samples queue depth per device and in total and
the number of unsynced devices (queue not empty, or its cursor behind its space),
reading each device afresh only when its database changed (``simulator.observe``), and
the cloud only when its store changed (``cloud_view.StepReads``).

A **device session** is one sync a device tries while it reaches the cloud: an
in-process sync made online (``Driver.sync``: a sync step, the sync of a stale edit or
of a restart, each device's sync in the final rounds) and every sync run in a process
of its own (a kill, or any action's sync process). Offline tries are not sessions.
The run counts them (``counts["device sessions"]``; ``sessions_per_minute`` in the
figures). Devices embed with the stub embedder unless ``embedder="model"``: nothing a
run does depends on vectors (it never recalls), so the log and counts are the same.
Device databases stretch their passphrase with ``kdf_iterations`` PBKDF2 iterations
(default 64; SQLCipher's own default is 256,000): a run never guesses passphrases, and
every other part of the encryption, the forensic scan's page-by-page decryption
included, is unchanged.
Kills go through a fork server for the run (started on the first kill), unless one is
installed already (a worker of many runs installs one for all its runs).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from cloud.service import decode_cursor
from device.db import MAX_KDF_ITERATIONS
from simulator import forkserver, processes
from simulator.actions import Rates, RunContext, action_set, choose
from simulator.cloud_processes import CloudProcesses
from simulator.cloud_runner import RunningCloud
from simulator.cloud_view import StepReads
from simulator.driver import Driver
from simulator.errors import InvalidRunSettings
from simulator.fleet import DeviceHandle
from simulator.observe import device_key, pull_cursor, queued_ops
from simulator.report import Check
from simulator.run_report import RunReport, StepSample
from simulator.sealed import SealedFleet
from simulator.sentences import SentenceMaker
from simulator.stores import describe_store
from simulator.stub_embedder import EMBEDDERS, STUB
from simulator.trace import RunTrace
from simulator.transport import RandomFaults

# a run's device databases: cheap to open, every other part of SQLCipher as a user's
SIMULATION_KDF_ITERATIONS = 64

Progress = Callable[[int, int], None]  # (steps done, steps in all)
MAX_QUIET_ROUNDS = 8
MAX_SKEW_HOURS = 72.0


@dataclass(frozen=True)
class RunSettings:
    devices: int = 4
    users: int = 2
    steps: int = 60
    seed: int = 0
    rates: Rates = field(default_factory=Rates)
    network_faults: float = 0.0  # per-request probability of a transport fault per device
    clock_skew_hours: float = 0.0  # each device's clock is off by up to this, either way
    embedder: str = "stub"  # what devices embed with: the stub, or the real "model"
    # PBKDF2 iterations of each device database's passphrase (device.db.DEFAULT_KDF_ITERATIONS
    # is what a user's device uses)
    kdf_iterations: int = SIMULATION_KDF_ITERATIONS

    def validate(self) -> None:
        if self.users < 1:
            raise InvalidRunSettings(f"users={self.users}: a run needs at least one user")
        if self.devices < self.users:
            raise InvalidRunSettings(
                f"devices={self.devices}, users={self.users}: every user needs a device"
            )
        if self.steps < 0:
            raise InvalidRunSettings(f"steps={self.steps}: must be 0 or more")
        if not 0.0 <= self.network_faults <= 1.0:
            raise InvalidRunSettings(
                f"network faults {self.network_faults}: a per-request probability, 0 to 1"
            )
        if not 0.0 <= self.clock_skew_hours <= MAX_SKEW_HOURS:
            raise InvalidRunSettings(
                f"clock skew {self.clock_skew_hours} h: must be 0 to {MAX_SKEW_HOURS} hours"
            )
        if not 1 <= self.kdf_iterations <= MAX_KDF_ITERATIONS:
            raise InvalidRunSettings(
                f"device KDF iterations {self.kdf_iterations}: must be 1 to {MAX_KDF_ITERATIONS}"
            )
        if self.embedder not in EMBEDDERS:
            raise InvalidRunSettings(
                f"embedder {self.embedder!r}: expected one of {', '.join(EMBEDDERS)}"
            )
        for name, rate in self.rates.as_dict().items():
            if not 0.0 <= rate <= 1.0:
                raise InvalidRunSettings(f"{name} rate {rate}: must be between 0 and 1")
        total = sum(self.rates.as_dict().values())
        if total > 1.0 + 1e-9:
            raise InvalidRunSettings(
                f"the rates sum to {total:.3f} ({self.rates.as_dict()}); they are per-step "
                "probabilities and must sum to at most 1 (the rest of each step is a sync)"
            )

    def as_dict(self) -> dict[str, Any]:
        return {
            "devices": self.devices,
            "users": self.users,
            "steps": self.steps,
            "seed": self.seed,
            "rates": {**self.rates.as_dict(), "sync": _sync_rate(self.rates)},
            "network_faults": self.network_faults,
            "clock_skew_hours": self.clock_skew_hours,
            "embedder": self.embedder,
            "kdf_iterations": self.kdf_iterations,
        }


def _sync_rate(rates: Rates) -> float:
    return round(max(0.0, 1.0 - sum(rates.as_dict().values())), 6)


def _build_fleet(fleet: SealedFleet, settings: RunSettings) -> list[DeviceHandle]:
    """Users u0..u(U-1); devices spread round-robin, named d0, d1, ... per user, each
    with its clock skew and its own seeded stream of network faults (from streams of
    their own, so the actions' choices do not depend on them)."""
    users = [fleet.add_user(f"u{i}") for i in range(settings.users)]
    skews = random.Random(f"skew:{settings.seed}")
    handles = []
    for n in range(settings.devices):
        user = users[n % settings.users]
        hours = settings.clock_skew_hours
        skew = timedelta(hours=skews.uniform(-hours, hours)) if hours else timedelta(0)
        plan = (
            RandomFaults(random.Random(f"net:{settings.seed}:{n}"), rate=settings.network_faults)
            if settings.network_faults
            else None
        )
        handles.append(fleet.add_device(user, f"d{len(user.devices)}", clock_skew=skew, plan=plan))
    return handles


def _unsynced(fleet: SealedFleet, handles: list[DeviceHandle]) -> int:
    last = StepReads(fleet.cloud.operator).last_seqs(u.space_id for u in fleet.users.values())
    count = 0
    for handle in handles:
        behind = decode_cursor(pull_cursor(handle)) < last[handle.user.space_id]
        if behind or queued_ops(handle):
            count += 1
    return count


def _sample(ctx: RunContext, fleet: SealedFleet, step: int, elapsed: float) -> StepSample:
    labels = ctx.device_labels
    queues = {labels[device_key(h)]: queued_ops(h) for h in ctx.devices}
    return StepSample(
        step=step,
        seconds=round(elapsed, 3),
        queue_depth=queues,
        total_queue=sum(queues.values()),
        unsynced_devices=_unsynced(fleet, ctx.devices),
        offline_devices=sum(not h.online for h in ctx.devices),
    )


def run(
    settings: RunSettings,
    cloud: RunningCloud | CloudProcesses,
    root: Path,
    *,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> RunReport:
    """Play the run against a started ``cloud`` with devices under ``root``."""
    settings.validate()
    with forkserver.serving():
        return _play(settings, cloud, root, progress, clock)


def _play(
    settings: RunSettings,
    cloud: RunningCloud | CloudProcesses,
    root: Path,
    progress: Progress | None,
    clock: Callable[[], float],
) -> RunReport:
    started = clock()
    embedder = STUB if settings.embedder == "stub" else None
    fleet = SealedFleet(cloud, root, embedder=embedder, kdf_iterations=settings.kdf_iterations)
    report = RunReport(settings=settings.as_dict(), store=describe_store(cloud.config.store_url))
    try:
        handles = _build_fleet(fleet, settings)
        trace = RunTrace()
        driver = Driver(fleet, trace, clock=clock)
        ctx = RunContext(
            driver=driver,
            rng=random.Random(settings.seed),
            sentences=SentenceMaker(settings.seed),
            devices=handles,
        )
        actions = action_set(settings.rates)
        report.samples.append(_sample(ctx, fleet, 0, clock() - started))
        for step in range(1, settings.steps + 1):
            driver.step = step
            action = choose(actions, ctx.rng)
            line = action.perform(ctx)
            report.log.append(f"{step:>4} {action.name:<10} {line}")
            driver.observe()
            report.samples.append(_sample(ctx, fleet, step, clock() - started))
            if progress is not None:
                progress(step, settings.steps)
        driver.step = settings.steps + 1
        rounds = driver.sync_until_quiet(MAX_QUIET_ROUNDS)
        report.samples.append(_sample(ctx, fleet, settings.steps + 1, clock() - started))
        report.log.append(
            f"   end: every device online; quiet after {rounds} sync round(s)"
            if rounds is not None
            else f"   end: still busy after {MAX_QUIET_ROUNDS} sync rounds"
        )
        faults = sum(len(h.transport.log) for h in handles)
        if faults:
            ctx.count("network faults injected", faults)
        in_processes = sum(processes.syncs_started(h.directory) for h in handles)
        ctx.count("device sessions", driver.sessions + in_processes)
        report.counts = dict(sorted(ctx.counts.items()))
        report.forgets = [
            {**t.__dict__, "record_id": ctx.label(t.record_id)} for t in driver.timings()
        ]
        report.checks.append(
            Check(
                "every device online and quiet at the end",
                rounds is not None,
                f"quiet after {rounds} round(s)"
                if rounds is not None
                else f"still pushing or pulling after {MAX_QUIET_ROUNDS} rounds",
            )
        )
        report.checks.extend(_relabel(driver.checks(), ctx))
        report.checks.append(fleet.walls())
        report.seconds = round(clock() - started, 3)
    finally:
        fleet.close()
    return report


def _relabel(checks: list[Check], ctx: RunContext) -> list[Check]:
    """Add run labels (r3, u0/d1) beside ids in the details, for a readable report."""
    names = {device_key(h): ctx.name(h) for h in ctx.devices}
    out = []
    for check in checks:
        detail = check.detail
        for record_id, label in ctx.labels.items():
            detail = detail.replace(record_id, f"{label}[{record_id}]")
        for key, label in names.items():
            detail = detail.replace(key, label)
        out.append(Check(check.name, check.passed, detail))
    return out
