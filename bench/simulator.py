"""The simulator at scale (issue 19): seeded random runs until they hold 10,000 device
sessions, in worker processes, with every invariant checked on every run.

Invariant: nothing here asserts a timing. The figures are what the runs did and how
long they took on this machine: device sessions (``simulator.random_run``: syncs tried
while the device reached the cloud), wall seconds, sessions per minute, and each
check's tally over the runs; a failing run is named by its seed. Beside it, measured
in the same process on the same seeds, the baseline: runs played one at a time in one
process, kills by plain subprocesses (``forkserver.disabled``), devices on the real
model and with SQLCipher's default passphrase stretching, i.e. the paths issue 19
replaced (its cheaper reads between steps stay on).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any

from rich.table import Table

from device.db import DEFAULT_KDF_ITERATIONS
from simulator import forkserver, many_runs
from simulator.actions import Rates
from simulator.random_run import RunSettings

# Faults on top of the random run's default rates, where the run has them: transport
# faults on every request (dropped, timed out, duplicated, replayed later) and the
# operator compacting a space's feed.
EXTRA_RATES = {"compact": 0.02}
NETWORK_FAULTS = 0.05


def bench_settings(steps: int, seed: int = 0) -> RunSettings:
    names = {f.name for f in fields(Rates)}
    extra = {k: v for k, v in EXTRA_RATES.items() if k in names and getattr(Rates(), k) == 0}
    return RunSettings(
        devices=4, users=2, steps=steps, seed=seed, rates=Rates(**extra),
        network_faults=NETWORK_FAULTS,
    )  # fmt: skip


@dataclass(frozen=True)
class Workload:
    sessions: int  # play runs until they hold this many device sessions
    steps: int  # per run
    baseline_runs: int  # runs of the same seeds played the old way, for the ratio


FULL = Workload(sessions=10_000, steps=100, baseline_runs=6)
SMOKE = Workload(sessions=40, steps=12, baseline_runs=1)


def jobs() -> int:
    return max(2, os.cpu_count() or 1)


def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of every child it has waited
    for, the workers and their kills' processes included once they ended."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _summary(report: many_runs.ManyReport, cpu_seconds: float) -> dict[str, Any]:
    figures = report.figures()
    sessions = figures["device_sessions"]
    return {
        **figures,
        "cpu_seconds": round(cpu_seconds, 1),
        "cpu_ms_per_session": round(1000 * cpu_seconds / sessions, 1) if sessions else None,
        "ok": report.ok,
        "failing_seeds": report.failing_seeds,
        "checks": {
            name: {"runs_passed": passed, "runs": seen}
            for name, (passed, seen) in report.check_tally().items()
        },
        "counts": report.counts(),
    }


def measure(smoke: bool) -> dict[str, Any]:
    """Play the workload (and its baseline); figures as a dict for results.json. Every
    run's files are in a temporary folder of its own, removed when it ends."""
    workload = SMOKE if smoke else FULL
    settings = bench_settings(workload.steps)
    before = _cpu_seconds()
    scaled = many_runs.play_many(
        settings, many_runs.MAX_RUNS, jobs(), until_sessions=workload.sessions,
        rerun=_rerun(settings),
    )  # fmt: skip
    scaled_cpu = _cpu_seconds() - before
    before = _cpu_seconds()
    with forkserver.disabled():
        baseline = many_runs.play_many(
            replace(settings, embedder="model", kdf_iterations=DEFAULT_KDF_ITERATIONS),
            workload.baseline_runs,
            1,
        )
    baseline_cpu = _cpu_seconds() - before
    fast, slow = scaled.figures()["sessions_per_minute"], baseline.figures()["sessions_per_minute"]
    return {
        "settings": {**settings.as_dict(), "seed": f"{settings.seed} on"},
        "workload": {"sessions_wanted": workload.sessions, "jobs": jobs()},
        "scaled": _summary(scaled, scaled_cpu),
        "baseline": {
            "how": "one process, runs one after another, kills by plain subprocesses, "
            "devices on the real model, SQLCipher's default PBKDF2 iterations",
            **_summary(baseline, baseline_cpu),
        },
        "ratio_sessions_per_minute": fast / slow if fast and slow else None,
    }


def _rerun(settings: RunSettings) -> str:
    from simulator.cli import RATE_FLAGS

    rates = " ".join(
        f"{RATE_FLAGS[name]} {value:g}" for name, value in settings.rates.as_dict().items()
        if value != getattr(Rates(), name)
    )  # fmt: skip
    return (
        f"memsync simulate --devices {settings.devices} --users {settings.users} --steps "
        f"{settings.steps} --seed {{seed}} --network-faults {settings.network_faults:g} {rates}"
    ).strip()


def render(result: dict[str, Any]) -> Table:
    s = result["settings"]
    scaled, baseline = result["scaled"], result["baseline"]
    table = Table(
        title=f"simulator at scale: runs of {s['devices']} devices, {s['users']} users, "
        f"{s['steps']} steps, network faults {s['network_faults']:g}, until "
        f"{result['workload']['sessions_wanted']:,} device sessions"
    )
    for col in ("mode", "workers", "runs", "device sessions", "wall s", "sessions/min",
                "CPU ms/session", "invariants"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("mode", "invariants") else "right")
    for name, part in (("scaled", scaled), ("baseline", baseline)):
        verdict = (
            f"PASS ({part['runs_passed']}/{part['runs_played']} runs)"
            if part["ok"]
            else f"FAIL: seeds {part['failing_seeds']}"
        )
        table.add_row(
            name,
            str(part["jobs"]),
            str(part["runs_played"]),
            f"{part['device_sessions']:,}",
            f"{part['wall_seconds']:,.1f}",
            f"{part['sessions_per_minute'] or 0:,.1f}",
            f"{part['cpu_ms_per_session'] or 0:,.0f}",
            verdict,
        )
    ratio = result["ratio_sessions_per_minute"]
    cpu = (
        baseline["cpu_ms_per_session"] / scaled["cpu_ms_per_session"]
        if scaled["cpu_ms_per_session"] and baseline["cpu_ms_per_session"]
        else None
    )
    table.add_row(
        "ratio", "", "", "", "", f"{ratio:.2f}x" if ratio else "-",
        f"{cpu:.2f}x less" if cpu else "-", "",
    )  # fmt: skip
    return table


def verdict(result: dict[str, Any]) -> str:
    """One line: sessions, wall time, sessions/minute and the invariants' outcome."""
    scaled = result["scaled"]
    outcome = (
        f"every invariant PASSED on all {scaled['runs_played']} runs"
        if scaled["ok"]
        else f"FAILED on seed(s) {scaled['failing_seeds']}"
    )
    return (
        f"simulator: {scaled['device_sessions']:,} device sessions in "
        f"{scaled['wall_seconds']:,.1f} s ({scaled['sessions_per_minute']:,.1f} sessions/min, "
        f"{scaled['jobs']} workers); {outcome}"
    )
