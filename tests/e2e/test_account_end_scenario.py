"""The account-end scenario (``memsync simulate --scenario account-end``, part of
``make demo``) end to end on SQLite and PostgreSQL: export with strong authentication,
import into a held-back account as candidates, deletion with the laptop offline until
after it, the laptop's wipe, and forensic scans of every copy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cloud.config import CloudConfig
from simulator.cloud_runner import RunningCloud
from simulator.report import ScenarioReport
from simulator.scenarios import account_end

pytestmark = pytest.mark.e2e

EXPECTED_CHECKS = {
    "an export needs the account passphrase (nothing written without it)",
    "the package holds the whole memory in the open schema, with a readable view",
    "everything imported is a candidate, imported, not verified (device and cloud)",
    "the cloud reports the offline laptop pending",
    "the laptop wiped itself and nothing is pending",
    "phone database and WAL hold no trace (decrypted pages)",
    "laptop database and WAL hold no trace (decrypted pages)",
    "cloud record store holds no trace",
    "cloud key store holds none of the account's keys",
    "only skeletons remain of the account; the other account is untouched",
}


def _passes(report: ScenarioReport) -> None:
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert not failed, failed
    assert {c.name for c in report.checks} == EXPECTED_CHECKS and report.ok


def test_account_end_scenario_passes_every_check(cloud: RunningCloud, tmp_path: Path) -> None:
    _passes(account_end.run(cloud, tmp_path / "devices", lambda state: None))


@pytest.mark.postgres
def test_account_end_scenario_on_postgresql(
    postgres_database: Callable[[], str], tmp_path: Path
) -> None:
    config = CloudConfig(store_url=postgres_database(), key_store_path=tmp_path / "keys.db")
    with RunningCloud(config) as cloud:
        _passes(account_end.run(cloud, tmp_path / "devices", lambda state: None))
