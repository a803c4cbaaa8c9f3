"""The writing scenario (``memsync simulate --scenario writing``, part of ``make demo``)
end to end: real uvicorn on loopback, real SQLCipher devices, the consolidator worker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cloud.config import CloudConfig
from simulator import cli
from simulator.cloud_runner import RunningCloud
from simulator.report import ScenarioReport
from simulator.scenarios import writing

pytestmark = pytest.mark.e2e

EXPECTED_CHECKS = {
    "only the user's own statement is a candidate",
    "nothing is written as a record during the conversation",
    "the health detail is kept on the phone",
    "the laptop learned the statement: active, said, learned in the background",
    "neither the quoted colleague nor the question became a memory",
    "the page never became a rule or an active memory",
    "the kept health detail is a candidate on the phone only",
    "the cloud's record store and key store hold nothing of it",
    "every device agrees with the cloud on what they share",
}


def _passes(report: ScenarioReport) -> None:
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert not failed, failed
    assert {c.name for c in report.checks} == EXPECTED_CHECKS and report.ok


def test_writing_scenario_passes_every_check(cloud: RunningCloud, tmp_path: Path) -> None:
    _passes(writing.run(cloud, tmp_path / "devices", lambda state: None))


@pytest.mark.postgres
def test_writing_scenario_on_postgresql(
    postgres_database: Callable[[], str], tmp_path: Path
) -> None:
    config = CloudConfig(store_url=postgres_database(), key_store_path=tmp_path / "keys.db")
    with RunningCloud(config) as cloud:
        _passes(writing.run(cloud, tmp_path / "devices", lambda state: None))


def test_demo_plays_every_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "--scenario", "writing", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "RESULT: PASS" in out and "-- checks (writing)" in out
    assert cli.main(["demo", "--json"]) == 0
    report = capsys.readouterr().out
    assert (
        '"scenario": "forget-propagation + writing + account-end + device-subset"' in report
        and '"ok": true' in report
    )
