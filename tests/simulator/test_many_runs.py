"""Many seeded runs in worker processes (``--runs R -j J``): each run is the single run
of its seed, the report adds them up, keeps every run's checks, and names each failing
seed with the command that plays it alone; what cannot be played is refused first.
Failures are faked only at the seam under test: the function that plays one run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import cli, many_runs
from simulator.actions import Rates
from simulator.cloud_runner import RunningCloud
from simulator.errors import InvalidRunSettings
from simulator.many_runs import RunJob, RunResult, play_many
from simulator.processes import SOURCE_ROOT
from simulator.random_run import RunSettings, run
from simulator.report import Check
from simulator.run_report import SESSIONS

SMALL = RunSettings(
    devices=2, users=1, steps=10, seed=40,
    rates=Rates(remember=0.35, offline=0.1, crash=0.15, forget=0.1, correct=0.1, concurrent=0.0,
                stale=0.05),
)  # fmt: skip
FAILING_SEED = 8


def fake_player(job: RunJob) -> RunResult:
    """Plays nothing: seed 8 fails a check, seed 9 raises, the others pass (10 sessions)."""
    seed = job.settings.seed
    if seed == FAILING_SEED + 1:
        raise RuntimeError(f"the run of seed {seed} broke on purpose")
    passed = seed != FAILING_SEED
    checks = [
        Check("an invariant", passed, "fine" if passed else "record r0 broke on purpose"),
        Check("another invariant", True, "fine"),
    ]
    return RunResult(seed, passed, 1.0, 10, {SESSIONS: 10, "synced": 3}, checks)


@pytest.mark.e2e
def test_runs_in_workers_add_up_and_each_is_the_single_run_of_its_seed(tmp_path: Path) -> None:
    report = play_many(SMALL, 3, 2, folder=tmp_path / "runs")
    assert report.ok, many_runs.render_text(report)
    assert [r.seed for r in report.results] == [40, 41, 42]
    assert report.sessions == sum(r.counts[SESSIONS] for r in report.results) > 0
    assert report.figures()["device_sessions"] == report.sessions
    assert report.figures()["sessions_per_minute"] > 0
    assert all(len(r.checks) == 10 and r.report is None for r in report.results)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "seed-40", "seed-41", "seed-42",
    ]  # fmt: skip
    with RunningCloud.sqlite(tmp_path / "alone" / "cloud") as cloud:
        alone = run(RunSettings(**{**SMALL.__dict__, "seed": 41}), cloud, tmp_path / "alone")
    assert alone.counts == report.results[1].counts  # the same run, played alone


def test_a_failing_run_is_named_by_its_seed_with_the_command_that_replays_it() -> None:
    rerun = "memsync simulate --devices 2 --users 1 --steps 10 --seed {seed}"
    report = play_many(
        RunSettings(devices=2, users=1, steps=10, seed=6), 5, 2, player=fake_player, rerun=rerun
    )
    assert not report.ok
    assert [r.seed for r in report.results] == [6, 7, 8, 9, 10]
    assert report.failing_seeds == [8, 9]
    assert report.sessions == 40  # the run that raised has none
    failed = report.results[3]
    assert failed.error is not None and "broke on purpose" in failed.error
    assert failed.checks[0].name == "the run played to its end" and not failed.checks[0].passed
    text = many_runs.render_text(report)
    assert "FAIL  an invariant: record r0 broke on purpose" in text
    assert "FAILED: seed 8; re-run it alone: memsync simulate --devices 2 --users 1 " \
        "--steps 10 --seed 8" in text  # fmt: skip
    assert "FAILED: seed 9;" in text and "RESULT: FAIL" in text
    assert "   FAIL      3/4      an invariant" in text  # 4 runs had it, 3 passed it
    data = report.to_json()
    assert data["failing_seeds"] == [8, 9] and data["ok"] is False
    assert data["rerun"][0].endswith("--seed 8")
    assert [c["verdict"] for c in data["runs"][2]["checks"]] == ["FAIL", "PASS"]
    assert data["counts"] == {SESSIONS: 40, "synced": 12}


def test_runs_can_be_played_until_they_hold_enough_sessions() -> None:
    report = play_many(
        RunSettings(seed=100), 50, 1, player=fake_player, until_sessions=35
    )  # 10 sessions each: four runs
    assert report.ok and report.runs == 4 and report.sessions == 40
    assert [r.seed for r in report.results] == [100, 101, 102, 103]
    shared = play_many(RunSettings(seed=100), 50, 2, player=fake_player, until_sessions=35)
    assert shared.ok and shared.sessions >= 35
    assert [r.seed for r in shared.results] == list(range(100, 100 + shared.runs))


def test_what_cannot_be_played_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidRunSettings, match="runs=0"):
        many_runs.check_many(RunSettings(), 0, 1, "sqlite")
    with pytest.raises(InvalidRunSettings, match="jobs=0"):
        many_runs.check_many(RunSettings(), 2, 0, "sqlite")
    url = "postgresql://postgres:secret@127.0.0.1:5432/somewhere"
    with pytest.raises(InvalidRunSettings, match="-j 2 with --store postgresql://") as refused:
        many_runs.check_many(RunSettings(), 4, 2, url)
    assert "secret" not in str(refused.value) and "-j 1" in str(refused.value)
    folder = tmp_path / "never"
    code = cli.main(["simulate", "--runs", "3", "-j", "2", "--store", url, "--dir", str(folder)])
    assert code == 2 and "use -j 1 there" in capsys.readouterr().err
    assert not folder.exists()


def test_the_cli_exits_1_and_names_the_failing_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(many_runs, "play", fake_player)
    args = ["--devices", "2", "--users", "1", "--steps", "4", "--seed", "7", "--runs", "2"]
    code = cli.main(["simulate", *args, "--crash-rate", "0.2", "--dir", str(tmp_path)])
    shown = capsys.readouterr().out
    assert code == 1
    assert (
        "FAILED: seed 8; re-run it alone: memsync simulate --devices 2 --users 1 --steps 4 "
        "--seed 8 --crash-rate 0.2" in shown
    )
    assert "RESULT: FAIL" in shown


@pytest.mark.e2e
def test_the_cli_plays_runs_in_workers_and_prints_them_as_json(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simulator.cli", "simulate", "--devices", "2", "--users", "1",
         "--steps", "6", "--seed", "3", "--runs", "2", "-j", "2", "--json",
         "--report", str(tmp_path / "report")],
        cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    printed = json.loads(done.stdout)
    assert printed["ok"] is True and printed["failing_seeds"] == []
    assert [r["seed"] for r in printed["runs"]] == [3, 4]
    sessions = sum(r["device_sessions"] for r in printed["runs"])
    assert printed["figures"]["device_sessions"] == sessions == printed["counts"][SESSIONS]
    assert printed["settings"]["embedder"] == "stub"
    saved = json.loads((tmp_path / "report" / "runs.json").read_text())
    assert saved["figures"]["device_sessions"] == sessions
    assert "RESULT: PASS" in (tmp_path / "report" / "runs.txt").read_text()


def test_the_device_kdf_count_is_a_setting_the_rerun_command_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--kdf-iterations`` reaches the run's settings, a failing seed's re-run command
    repeats it (the same seed must open its devices the same way), and a count out of
    range is refused before anything runs."""
    seen: list[int] = []

    def player(job: RunJob) -> RunResult:
        seen.append(job.settings.kdf_iterations)
        return fake_player(job)

    monkeypatch.setattr(many_runs, "play", player)
    args = ["--devices", "2", "--users", "1", "--steps", "4", "--seed", "7", "--runs", "2"]
    code = cli.main(["simulate", *args, "--kdf-iterations", "256000", "--dir", str(tmp_path)])
    shown = capsys.readouterr().out
    assert code == 1 and seen == [256_000, 256_000]
    assert "--seed 8 --kdf-iterations 256000" in shown
    assert "device KDF 256000 iteration(s)" in shown
    assert RunSettings().kdf_iterations == 64
    with pytest.raises(InvalidRunSettings, match="device KDF iterations 0: must be 1 to"):
        RunSettings(kdf_iterations=0).validate()
