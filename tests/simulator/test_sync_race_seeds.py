"""Seeded random runs that reproduce the two sync races of issue 19 (real cloud over
HTTP, real SQLCipher devices). Each FAILED before the fix and passes after it:

- ``BUG_1`` (seed 12): at step 62 a device behind a compacted feed remembers a record
  and syncs with each push delivered twice, hearing the second answer; it resyncs
  between its pushes. Before the fix it read the ``duplicate`` for its own new record
  as "the cloud forgot it" and shredded it: "every device that synced last equals the
  cloud's view" FAILED with "lifecycle permanently_forgotten, cloud active".
- ``BUG_2`` (seed 1): at step 13 another device forgets a shared record just before
  each of a syncing device's first two pushes. Before the fix the second push's
  ``409 pull_required`` (after the sync had already pulled) ended the sync:
  "every sync that reached the cloud completed without an error" FAILED.
- ``BUG_3`` (seed 147, 2 users, transport faults on 5 % of requests, none of the new
  actions): a device whose queued correction moved aside to v3 when it pulled another
  device's v2 corrects the record again in a stale edit. Before the fix the new version
  was numbered current + 1 (v3) and the run raised ``IntegrityError: UNIQUE constraint
  failed: record_versions.record_id, record_versions.version``.

The settings differ only in the rates; the same seed gives the same action log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.actions import Rates
from simulator.cloud_runner import RunningCloud
from simulator.random_run import RunSettings, run

pytestmark = pytest.mark.e2e

BUG_1 = RunSettings(
    devices=3,
    users=1,
    steps=100,
    seed=12,
    rates=Rates(forget_mid_sync=0.0, doubled=0.06, crash=0.01),
)
BUG_2 = RunSettings(
    devices=3, users=1, steps=80, seed=1, rates=Rates(forget_mid_sync=0.06, doubled=0.0, crash=0.01)
)

BUG_3 = RunSettings(
    devices=4,
    users=2,
    steps=100,
    seed=147,
    network_faults=0.05,
    rates=Rates(compact=0.0, twin=0.0, doubled=0.0, forget_mid_sync=0.0),
)


def _failures(settings: RunSettings, folder: Path) -> tuple[list[str], dict[str, int], list[str]]:
    with RunningCloud.sqlite(folder / "cloud") as cloud:
        report = run(settings, cloud, folder / "devices")
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    return failed, report.counts, report.log


def test_a_doubled_push_around_a_resync_keeps_the_devices_own_record(tmp_path: Path) -> None:
    failed, counts, log = _failures(BUG_1, tmp_path)
    assert failed == []
    racing = [line for line in log if "resynced between its pushes" in line]
    assert racing and racing[0].startswith("  62 doubled")  # the race this seed plays
    assert counts["resyncs"] >= 1 and counts["duplicates answered"] >= 1


def test_forgets_between_pull_and_push_never_end_a_sync_in_an_error(tmp_path: Path) -> None:
    failed, counts, log = _failures(BUG_2, tmp_path)
    assert failed == []
    assert log[12].startswith("  13 forget_mid_sync") and "(completed)" in log[12]
    assert counts["pushes that pulled again first"] >= 1


def test_a_stale_edit_after_a_version_moved_aside_takes_a_free_number(tmp_path: Path) -> None:
    failed, counts, _log = _failures(BUG_3, tmp_path)
    assert failed == []
    assert counts["stale edits"] >= 1
