"""The seeded random run: every invariant PASSes on both stores with real process
kills; the same seed gives the same log and counts; the CLI writes its report and
plots and exits non-zero when an invariant fails."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import cli, invariants, run_report
from simulator.actions import Rates, action_set, choose
from simulator.cloud_runner import RunningCloud
from simulator.driver import SYNCS_COMPLETED
from simulator.errors import InvalidRunSettings
from simulator.fleet import Fleet
from simulator.processes import SOURCE_ROOT
from simulator.random_run import RunSettings, run
from simulator.report import Check
from simulator.run_report import SESSIONS
from simulator.stores import cloud_for, clouds_for

pytestmark = pytest.mark.e2e

# Every fault is on and crashes are frequent; concurrent offline corrections have a run
# of their own below (this seed's run then also holds a stale edit).
FAULTY = Rates(
    remember=0.3, offline=0.1, crash=0.12, forget=0.1, correct=0.08, concurrent=0.0, stale=0.06
)
# One user with three devices that often correct the same record while offline.
RACING = Rates(
    remember=0.3, offline=0.05, crash=0.05, forget=0.05, correct=0.1, concurrent=0.2, stale=0.0,
    compact=0.0, twin=0.0, doubled=0.0, forget_mid_sync=0.0,
)  # fmt: skip
INVARIANT_NAMES = {
    invariants.CONVERGED,
    invariants.NOTHING_LOST,
    invariants.APPLIED_ONCE,
    invariants.FORGOTTEN_GONE,
    invariants.PENDING_EXACT,
    invariants.CONFLICTS_KEPT,
    invariants.STALE_REFUSED,
    "walls: every other space unchanged",
    "every device online and quiet at the end",
    SYNCS_COMPLETED,
}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return "sqlite"
    new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
    return new_database()


def _bystander(cloud: RunningCloud, folder: Path) -> None:
    fleet = Fleet(cloud, folder)
    phone = fleet.add_device(fleet.add_user("bystander"), "phone")
    phone.agent.say("My friend Bystander lives in Cork.", "c1")
    record = phone.agent.remember("My friend Bystander lives in Cork.", "c1").record_id
    phone.agent.sync()
    phone.agent.forget_permanently(record)
    phone.agent.say("My friend Onlooker lives in Nara.", "c2")
    phone.agent.remember("My friend Onlooker lives in Nara.", "c2")
    phone.agent.sync()
    fleet.close()


def test_a_seeded_run_with_real_kills_passes_every_invariant(store: str, tmp_path: Path) -> None:
    with cloud_for(store, tmp_path / "cloud") as cloud:
        _bystander(cloud, tmp_path / "bystander")  # a space the run must leave as it is
        report = run(RunSettings(devices=3, users=2, steps=24, seed=1, rates=FAULTY), cloud,
                     tmp_path / "devices")  # fmt: skip
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert report.ok, "\n".join(failed)
    assert {c.name for c in report.checks} == INVARIANT_NAMES
    walls = next(c for c in report.checks if c.name.startswith("walls"))
    assert "1 other space(s) unchanged" in walls.detail
    counts = report.counts
    assert counts.get("killed at push_answered", 0) >= 1  # real SIGKILLs, both points
    assert counts.get("killed at pull_answered", 0) >= 1
    assert counts.get("stale edits", 0) >= 1
    assert report.figures()["forgets_fully_shredded"] >= 1
    assert len(report.samples) == 24 + 2  # before the first step, each step, the end


def test_a_seeded_run_of_concurrent_corrections_keeps_and_flags_them(
    store: str, tmp_path: Path
) -> None:
    with cloud_for(store, tmp_path / "cloud") as cloud:
        report = run(RunSettings(devices=3, users=1, steps=20, seed=1, rates=RACING), cloud,
                     tmp_path / "devices")  # fmt: skip
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert report.ok, "\n".join(failed)
    assert report.counts.get("concurrent edits", 0) >= 3
    kept = next(c for c in report.checks if c.name == invariants.CONFLICTS_KEPT)
    assert kept.passed and "kept and flagged" in kept.detail


# Every fault at once: transport faults on every request stream, skewed clocks,
# partitions and cloud restarts mid-request, besides kills and races.
EVERYTHING = Rates(
    remember=0.25, offline=0.08, crash=0.06, forget=0.08, correct=0.06, concurrent=0.06,
    stale=0.04, partition=0.06, restart=0.05,
)  # fmt: skip


def test_a_run_under_every_fault_passes_every_invariant(store: str, tmp_path: Path) -> None:
    """On PostgreSQL the store is served by two real cloud processes, devices spread
    across both, and a restart kills and restarts the process a device talks to."""
    settings = RunSettings(
        devices=4, users=2, steps=30, seed=2, rates=EVERYTHING, network_faults=0.15,
        clock_skew_hours=6,
    )  # fmt: skip
    processes = 1 if store == "sqlite" else 2
    with clouds_for(store, tmp_path / "cloud", processes) as cloud:
        report = run(settings, cloud, tmp_path / "devices")
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    assert report.ok, "\n".join(failed)
    counts = report.counts
    assert counts.get("cloud restarts mid-request", 0) >= 1
    assert counts.get("partitions", 0) >= 1
    assert counts.get("network faults injected", 0) >= 5
    assert counts.get("killed at push_answered", 0) >= 1
    assert report.settings["network_faults"] == 0.15


def _outcome(seed: int, steps: int, folder: Path, embedder: str = "stub") -> dict[str, object]:
    with RunningCloud.sqlite(folder / "cloud") as cloud:
        report = run(RunSettings(devices=3, users=2, steps=steps, seed=seed, rates=FAULTY,
                                 embedder=embedder), cloud, folder / "devices")  # fmt: skip
    assert report.ok
    return report.outcome()


# The golden run (tests/golden/simulator/random_run_seed11.json): every rate not named
# here is 0, so actions added later leave its choices as they were.
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "simulator" / "random_run_seed11.json"
GOLDEN_RATES = {
    "remember": 0.25, "offline": 0.08, "crash": 0.08, "forget": 0.08, "correct": 0.06,
    "concurrent": 0.06, "stale": 0.05, "partition": 0.05,
}  # fmt: skip


def test_a_seeded_run_plays_as_before_issue_19(tmp_path: Path) -> None:
    """Kills through the fork server, the stub embedder, devices reread only when their
    database changed: the run plays exactly the log and counts the code before issue 19
    played for this seed, and counts its device sessions."""
    rates = Rates(**{**dict.fromkeys(Rates().as_dict(), 0.0), **GOLDEN_RATES})
    settings = RunSettings(devices=4, users=2, steps=70, seed=11, rates=rates,
                           network_faults=0.1, clock_skew_hours=2)  # fmt: skip
    assert settings.embedder == "stub"  # the random run's default
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        report = run(settings, cloud, tmp_path / "devices")
    assert report.ok, [f"{c.name}: {c.detail}" for c in report.checks if not c.passed]
    golden = json.loads(GOLDEN.read_text())
    counts = dict(report.counts)
    sessions = counts.pop(SESSIONS)
    assert report.log == golden["log"]
    assert counts == golden["counts"]
    assert counts["killed at push_answered"] + counts["killed at pull_answered"] >= 4
    assert sessions == 31  # seed-decided, like every count
    figures = report.figures()
    assert figures["device_sessions"] == 31 and figures["sessions_per_minute"] > 0
    assert "sessions_per_minute" in run_report.render_text(report)


def test_the_embedder_changes_nothing_a_run_decides(tmp_path: Path) -> None:
    assert _outcome(3, 12, tmp_path / "model", embedder="model") == _outcome(
        3, 12, tmp_path / "stub"
    )


def test_the_same_seed_gives_the_same_log_and_counts(tmp_path: Path) -> None:
    first = _outcome(3, 12, tmp_path / "a")
    again = _outcome(3, 12, tmp_path / "b")
    other = _outcome(4, 12, tmp_path / "c")
    assert first == again
    assert first["log"] != other["log"]


def _memsync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simulator.cli", *args],
        cwd=SOURCE_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_cli_takes_every_fault(store: str, tmp_path: Path) -> None:
    clouds = "1" if store == "sqlite" else "2"
    done = _memsync(
        "simulate", "--devices", "3", "--users", "1", "--steps", "12", "--seed", "2",
        "--network-faults", "0.2", "--clock-skew", "3", "--partition-rate", "0.1",
        "--restart-rate", "0.1", "--clouds", clouds, "--store", store,
        "--dir", str(tmp_path / "run"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    printed = json.loads(done.stdout)
    assert printed["ok"] is True
    assert printed["settings"]["clock_skew_hours"] == 3.0
    assert printed["settings"]["rates"]["restart"] == 0.1
    refused = _memsync("simulate", "--steps", "1", "--clouds", "0", "--dir", str(tmp_path / "x"))
    assert refused.returncode == 2 and "clouds=0" in refused.stderr


def test_the_cli_writes_json_text_and_three_plots(store: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = _memsync(
        "simulate", "--devices", "2", "--users", "1", "--steps", "10", "--seed", "5",
        "--concurrent-rate", "0.08", "--crash-rate", "0.1", "--store", store,
        "--dir", str(tmp_path / "run"), "--report", str(out), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    printed = json.loads(done.stdout)
    assert printed["ok"] is True
    assert {c["name"] for c in printed["checks"]} == INVARIANT_NAMES
    assert all(c["verdict"] == "PASS" for c in printed["checks"])
    assert printed["settings"]["seed"] == 5 and len(printed["log"]) == 10 + 1
    saved = json.loads((out / "report.json").read_text())
    assert saved["counts"] == printed["counts"] and saved["log"] == printed["log"]
    if store != "sqlite":
        assert printed["store"].startswith("postgresql://") and "@" not in printed["store"]
    table = (out / "report.txt").read_text()
    assert "RESULT: PASS" in table and f"PASS  {invariants.FORGOTTEN_GONE}" in table
    for name in ("queue_depth.png", "unsynced_devices.png", "forget_to_shred.png"):
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000, name


def test_the_cli_exits_1_when_an_invariant_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_args: object) -> list[Check]:
        return [Check("an invariant", False, "record r0 broke on purpose")]

    monkeypatch.setattr(invariants, "check_all", broken)
    code = cli.main(["simulate", "--devices", "1", "--users", "1", "--steps", "2",
                     "--dir", str(tmp_path)])  # fmt: skip
    shown = capsys.readouterr().out
    assert code == 1
    assert "FAIL  an invariant" in shown and "record r0 broke on purpose" in shown
    assert "RESULT: FAIL" in shown


def test_bad_settings_are_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "never"
    code = cli.main(["simulate", "--steps", "3", "--crash-rate", "0.9", "--forget-rate", "0.5",
                     "--dir", str(folder)])  # fmt: skip
    assert code == 2
    assert "the rates sum to 2.030" in capsys.readouterr().err
    assert not folder.exists()
    code = cli.main(["simulate", "--scenario", "writing", "--seed", "3"])
    assert code == 2 and "give one or the other" in capsys.readouterr().err
    code = cli.main(["simulate", "--steps", "1", "--store", "mysql://x", "--dir", str(folder)])
    assert code == 2 and "store 'mysql://x'" in capsys.readouterr().err


_rate = st.floats(min_value=-0.5, max_value=1.5, allow_nan=False)


@given(st.lists(_rate, min_size=7, max_size=7))
def test_rates_are_per_step_probabilities(values: list[float]) -> None:
    rates = Rates(*values)
    settings = RunSettings(rates=rates)
    every = list(rates.as_dict().values())  # the rates not given keep their defaults
    valid = all(0 <= v <= 1 for v in every) and sum(every) <= 1 + 1e-9
    if valid:
        settings.validate()
        assert sum(a.rate for a in action_set(rates)) == pytest.approx(1.0)
    else:
        with pytest.raises(InvalidRunSettings, match="rate"):
            settings.validate()


@given(seed=st.integers(0, 2**32), zero=st.sampled_from(list(Rates().as_dict())))
def test_choices_follow_the_seed_and_never_pick_a_zero_rate(seed: int, zero: str) -> None:
    actions = action_set(Rates(**{zero: 0.0}))
    picks = [choose(actions, random.Random(seed)).name for _ in range(1)]
    rng_a, rng_b = random.Random(seed), random.Random(seed)
    first = [choose(actions, rng_a).name for _ in range(50)]
    assert first == [choose(actions, rng_b).name for _ in range(50)]
    assert zero not in first and picks[0] == first[0]
