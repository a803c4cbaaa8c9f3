"""What every scenario shares: playing it on a fleet, and the state a step shows.

Invariant: a scenario's fleet is closed whatever happens; a step's state is read from
the devices' own stores at that moment.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from simulator.report import ScenarioReport, StepState

Emit = Callable[[StepState], None]
Body = Callable[[Fleet, ScenarioReport, Emit], None]


def play(name: str, body: Body, cloud: RunningCloud, root: Path, emit: Emit) -> ScenarioReport:
    """Play ``body`` against ``cloud`` with devices under ``root``; return its report."""
    report = ScenarioReport(name)
    fleet = Fleet(cloud, root)
    try:
        body(fleet, report, emit)
    finally:
        fleet.close()
    return report


def device_state(handle: DeviceHandle) -> dict[str, Any]:
    return {
        "name": handle.name,
        "online": handle.online,
        "queued_ops": handle.agent.pending_ops(),
        "records": [
            {"record_id": view.record_id, "state": view.lifecycle_state.value}
            for view in handle.agent.list_records()
        ],
    }
