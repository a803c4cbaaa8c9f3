"""End to end: real uvicorn on loopback, real devices on SQCipher, over httpx."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from cloud.config import CloudConfig
from protocol.version import SUPPORTED_VERSIONS
from simulator.cloud_runner import RunningCloud
from simulator.report import StepState
from simulator.scenarios import forget_propagation

pytestmark = pytest.mark.e2e

EXPECTED_CHECKS = {
    "laptop sees the memory",
    "scanner control: phone keys visible before forget",
    "cloud reports phone pending after forget",
    "nothing pending after phone reconnects",
    "cloud keeps only a skeleton",
    "every device agrees with the cloud",
    "phone shows a skeleton and recalls nothing",
    "laptop shows a skeleton and recalls nothing",
    "phone database and WAL hold no trace (decrypted pages)",
    "laptop database and WAL hold no trace (decrypted pages)",
    "cloud record store holds no trace",
    "cloud key store holds none of its keys",
}


def test_forget_propagation_scenario_passes_every_check(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    steps: list[StepState] = []
    report = forget_propagation.run(cloud, tmp_path / "devices", steps.append)
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert not failed, failed
    assert {c.name for c in report.checks} == EXPECTED_CHECKS
    assert report.ok
    after_forget = next(s for s in steps if s.step.startswith("5."))
    assert after_forget.pending[0]["pending_devices"] == ["phone"]
    assert steps[-1].pending == []


def test_cloud_is_really_listening_on_loopback(cloud: RunningCloud) -> None:
    assert cloud.url.startswith("http://127.0.0.1:")
    response = httpx.get(f"{cloud.url}/v1/health")
    assert response.status_code == 200
    assert response.json()["supported_versions"] == list(SUPPORTED_VERSIONS)


@pytest.mark.postgres
def test_forget_propagation_on_postgresql(
    postgres_database: Callable[[], str], tmp_path: Path
) -> None:
    config = CloudConfig(store_url=postgres_database(), key_store_path=tmp_path / "keys.db")
    with RunningCloud(config) as cloud:
        report = forget_propagation.run(cloud, tmp_path / "devices", lambda state: None)
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert not failed, failed
    assert {c.name for c in report.checks} == EXPECTED_CHECKS
