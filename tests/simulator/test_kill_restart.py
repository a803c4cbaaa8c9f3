"""With one cloud, a random run's restarts are real SIGKILLs of a real cloud process
(issue 19): the CLI's store helper serves even ``--clouds 1`` from a ``memsync cloud
serve`` process when the run restarts its cloud, and every restart kills it."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.actions import Rates
from simulator.cloud_processes import CloudProcesses
from simulator.cloud_runner import RunningCloud
from simulator.random_run import RunSettings, run
from simulator.stores import clouds_for

pytestmark = pytest.mark.e2e


def test_one_killable_cloud_is_a_real_process(tmp_path: Path) -> None:
    assert isinstance(clouds_for("sqlite", tmp_path / "a", 1), RunningCloud)
    killable = clouds_for("sqlite", tmp_path / "b", 1, killable=True)
    assert isinstance(killable, CloudProcesses) and len(killable.processes) == 1


def test_restarts_with_one_cloud_are_sigkills(tmp_path: Path) -> None:
    cloud = clouds_for("sqlite", tmp_path / "cloud", 1, killable=True)
    assert isinstance(cloud, CloudProcesses)
    settings = RunSettings(devices=2, users=1, steps=16, seed=3, rates=Rates(restart=0.25))
    with cloud:
        report = run(settings, cloud, tmp_path / "devices")
        kills = cloud.processes[0].kills
    assert report.ok, [c for c in report.checks if not c.passed]
    restarts = report.counts.get("cloud restarts mid-request", 0)
    assert restarts >= 1 and kills == restarts
