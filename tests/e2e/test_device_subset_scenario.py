"""The device-subset scenario (``memsync simulate --scenario device-subset``, part of
``make demo``) end to end on SQLite and PostgreSQL: a phone and a laptop under
different budgets, eviction read from the phone's decrypted pages, an offline search
that says it looked only at the phone, an online one that says what came from the
cloud, and a pin that brings a record back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cloud.config import CloudConfig
from simulator.cloud_runner import RunningCloud
from simulator.report import ScenarioReport
from simulator.scenarios import device_subset

pytestmark = pytest.mark.e2e

EXPECTED_CHECKS = {
    "the phone holds what its policy says and nothing else",
    "the laptop still holds every record",
    "what left the phone is gone from its database and WAL (decrypted pages)",
    "leaving is not forgetting: live in the cloud, no skeleton, nothing pending",
    "offline, the answer says it searched only the phone",
    "online, the answer says which records came from the cloud",
    "a pinned record comes back whole",
}


def _passes(report: ScenarioReport) -> None:
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert not failed, failed
    assert {c.name for c in report.checks} == EXPECTED_CHECKS and report.ok


def test_device_subset_scenario_passes_every_check(cloud: RunningCloud, tmp_path: Path) -> None:
    _passes(device_subset.run(cloud, tmp_path / "devices", lambda state: None))


@pytest.mark.postgres
def test_device_subset_scenario_on_postgresql(
    postgres_database: Callable[[], str], tmp_path: Path
) -> None:
    config = CloudConfig(store_url=postgres_database(), key_store_path=tmp_path / "keys.db")
    with RunningCloud(config) as cloud:
        _passes(device_subset.run(cloud, tmp_path / "devices", lambda state: None))
