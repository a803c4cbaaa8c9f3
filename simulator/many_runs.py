"""Many seeded random runs, played by worker processes: ``memsync simulate --runs R -j J``.

Invariants:
- Run ``i`` is exactly the single run of seed ``K + i`` (``K`` the given seed) with the
  same other settings: its own cloud (its own store files; its own cloud processes with
  ``--clouds``), its own fleet and folder, nothing shared with another run but the code.
  So a failing run is re-run alone with ``--seed`` and plays the same log.
- ``jobs`` worker processes (spawned, so each starts clean) play the runs; each worker
  installs one fork server for all its runs' kills. With one job the runs are played
  one after another in this process.
- A PostgreSQL store is one database: runs played at once there would change spaces
  while another run's walls check reads them, so more than one job is refused on it;
  one after another, each run's walls check also covers the runs before it.
- The report is ``ok`` only when every run was played and passed every check; a run
  that raised is a failed run carrying its error. Every run's checks are kept; the seed
  of every failing run is named.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from simulator import forkserver
from simulator.errors import InvalidRunSettings
from simulator.random_run import RunSettings, run
from simulator.report import Check
from simulator.run_report import SESSIONS, RunReport, per_minute
from simulator.stores import SQLITE, check_store, clouds_for, describe_store

MAX_RUNS = 100_000
MAX_JOBS = 64
Progress = Callable[[int, int], None]  # (runs done, runs in all)


@dataclass(frozen=True)
class RunJob:
    """What a worker needs to play one run."""

    settings: RunSettings
    store: str
    clouds: int
    folder: Path | None  # where the run keeps its files; None: a temporary folder


@dataclass
class RunResult:
    """One run's outcome, as the aggregate keeps it."""

    seed: int
    ok: bool
    seconds: float
    sessions: int
    counts: dict[str, int]
    checks: list[Check]
    error: str | None = None  # the run raised: the end of its traceback
    report: RunReport | None = None  # the whole report, kept for a failing run only

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


@dataclass
class ManyReport:
    settings: dict[str, Any]  # of the first run (its seed is the first seed)
    runs: int
    jobs: int
    store: str
    results: list[RunResult] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the whole, workers' start included
    rerun: str = "memsync simulate ... --seed {seed}"  # how to re-run one seed alone
    sessions_wanted: int | None = None  # played until the runs held this many sessions

    @property
    def ok(self) -> bool:
        played = len(self.results) == self.runs and all(r.ok for r in self.results)
        wanted = self.sessions_wanted is None or self.sessions >= self.sessions_wanted
        return played and wanted

    @property
    def sessions(self) -> int:
        return sum(r.sessions for r in self.results)

    @property
    def failing_seeds(self) -> list[int]:
        return [r.seed for r in self.results if not r.ok]

    def counts(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for result in self.results:
            for name, n in result.counts.items():
                total[name] = total.get(name, 0) + n
        return dict(sorted(total.items()))

    def check_tally(self) -> dict[str, tuple[int, int]]:
        """check name -> (runs that passed it, runs that had it)."""
        tally: dict[str, tuple[int, int]] = {}
        for result in self.results:
            for check in result.checks:
                passed, seen = tally.get(check.name, (0, 0))
                tally[check.name] = (passed + check.passed, seen + 1)
        return tally

    def rerun_for(self, seed: int) -> str:
        return self.rerun.replace("{seed}", str(seed))

    def figures(self) -> dict[str, Any]:
        seconds = [r.seconds for r in self.results]
        return {
            "runs": self.runs,
            "runs_played": len(self.results),
            "runs_passed": sum(r.ok for r in self.results),
            "jobs": self.jobs,
            "device_sessions": self.sessions,
            "device_sessions_wanted": self.sessions_wanted,
            "wall_seconds": round(self.seconds, 1),
            "sessions_per_minute": per_minute(self.sessions, self.seconds),
            "run_seconds_median": _median(seconds),
            "run_seconds_max": round(max(seconds), 3) if seconds else None,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "settings": self.settings,
            "store": self.store,
            "figures": self.figures(),
            "failing_seeds": self.failing_seeds,
            "rerun": [self.rerun_for(seed) for seed in self.failing_seeds],
            "counts": self.counts(),
            "runs": [
                {
                    "seed": r.seed,
                    "ok": r.ok,
                    "seconds": r.seconds,
                    "device_sessions": r.sessions,
                    "error": r.error,
                    "counts": r.counts,
                    "checks": [{**asdict(c), "verdict": c.verdict} for c in r.checks],
                }
                for r in self.results
            ],
        }


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    middle = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return round(middle, 3)


def seeds(first: int, runs: int) -> list[int]:
    return [first + i for i in range(runs)]


def check_many(settings: RunSettings, runs: int, jobs: int, store: str) -> None:
    """Refuse what cannot be played, before any run starts (names the value)."""
    settings.validate()
    check_store(store)
    if not 1 <= runs <= MAX_RUNS:
        raise InvalidRunSettings(f"runs={runs}: play 1 to {MAX_RUNS} runs")
    if not 1 <= jobs <= MAX_JOBS:
        raise InvalidRunSettings(f"jobs={jobs}: use 1 to {MAX_JOBS} worker processes")
    if jobs > 1 and store != SQLITE:
        raise InvalidRunSettings(
            f"-j {jobs} with --store {describe_store(store)}: runs played at once on one "
            "PostgreSQL database change their spaces while another run's walls check reads "
            "every space, so that check would fail; use -j 1 there (the runs then play one "
            "after another, each walls check covering the runs before it)"
        )


def play(job: RunJob) -> RunResult:
    """Play one run in this process: a cloud of its own, started and stopped here."""
    seed = job.settings.seed
    started = time.monotonic()
    with _run_folder(job.folder, seed) as folder:
        try:
            with clouds_for(job.store, folder / "cloud", job.clouds) as cloud:
                report = run(job.settings, cloud, folder / "devices")
        except Exception as exc:  # the run could not finish: a failed run, named
            tail = "".join(traceback.format_exception(exc))[-2000:]
            return RunResult(seed, False, round(time.monotonic() - started, 3), 0, {}, [
                Check("the run played to its end", False, f"{type(exc).__name__}: {exc}")
            ], error=tail)  # fmt: skip
    return RunResult(
        seed=seed,
        ok=report.ok,
        seconds=report.seconds,
        sessions=report.counts.get(SESSIONS, 0),
        counts=dict(report.counts),
        checks=list(report.checks),
        report=None if report.ok else report,
    )


@contextlib.contextmanager
def _run_folder(folder: Path | None, seed: int) -> Iterator[Path]:
    """The run's folder: ``<folder>/seed-<K>`` (kept), or a temporary one (removed)."""
    if folder is not None:
        path = folder / f"seed-{seed}"
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    temporary = Path(tempfile.mkdtemp(prefix=f"memsync-sim-{seed}-"))
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _start_worker() -> None:
    forkserver.install_for_process()


def play_many(
    settings: RunSettings,
    runs: int,
    jobs: int,
    *,
    store: str = SQLITE,
    clouds: int = 1,
    folder: Path | None = None,
    progress: Progress | None = None,
    player: Callable[[RunJob], RunResult] | None = None,
    rerun: str = "memsync simulate ... --seed {seed}",
    until_sessions: int | None = None,
) -> ManyReport:
    """Play ``runs`` runs (seeds ``settings.seed`` on) with ``jobs`` worker processes.
    With ``until_sessions``, ``runs`` is the most to play: seeds are started in order
    until the runs played so far hold that many device sessions (runs already started
    are played out and kept). ``player`` plays one run (default ``play``; a test may
    give another, picklable, one)."""
    check_many(settings, runs, jobs, store)
    if until_sessions is not None and until_sessions < 1:
        raise InvalidRunSettings(f"until_sessions={until_sessions}: must be 1 or more")
    report = ManyReport(
        settings=settings.as_dict(), runs=runs, jobs=jobs, store=describe_store(store),
        rerun=rerun, sessions_wanted=until_sessions,
    )  # fmt: skip
    todo = (
        RunJob(replace(settings, seed=s), store, clouds, folder) for s in seeds(settings.seed, runs)
    )

    def enough() -> bool:
        return until_sessions is not None and report.sessions >= until_sessions

    started = time.monotonic()
    for done, result in enumerate(_played(todo, jobs, player or play, enough), start=1):
        report.results.append(result)
        if progress is not None:
            progress(done, runs)
    report.results.sort(key=lambda r: r.seed)
    report.seconds = time.monotonic() - started
    if until_sessions is not None:
        report.runs = len(report.results)
    return report


def _failed(job: RunJob, exc: BaseException) -> RunResult:
    """A run whose worker did not answer (the worker process died, say)."""
    return RunResult(job.settings.seed, False, 0.0, 0, {}, [
        Check("the run played to its end", False, f"{type(exc).__name__}: {exc}")
    ], error=str(exc))  # fmt: skip


def _played(
    todo: Iterator[RunJob],
    jobs: int,
    player: Callable[[RunJob], RunResult],
    enough: Callable[[], bool],
) -> Iterator[RunResult]:
    """Each run's result as it ends; a new run starts only while ``enough()`` is false
    (asked after the caller took the results before), at most ``jobs`` at a time."""
    if jobs == 1:
        with forkserver.serving():
            for job in todo:
                if enough():
                    return
                yield player(job)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_start_worker
    ) as pool:
        running: dict[Future[RunResult], RunJob] = {}
        broken: list[BaseException] = []
        yield_later: list[RunResult] = []

        def start_more() -> None:
            while not broken and len(running) < jobs and not enough():
                job = next(todo, None)
                if job is None:
                    return
                try:
                    running[pool.submit(player, job)] = job
                except BrokenProcessPool as exc:  # a worker died: start nothing more
                    broken.append(exc)
                    yield_later.append(_failed(job, exc))

        start_more()
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                try:
                    yield future.result()
                except Exception as exc:  # the worker itself died: a failed run
                    yield _failed(job, exc)
            start_more()
        yield from yield_later  # the run that could not start; the rest never did


def render_text(report: ManyReport) -> str:
    """The aggregate table: one line per run, each check's tally, figures, the verdict."""
    s = report.settings
    first, last = s["seed"], s["seed"] + report.runs - 1
    lines = [
        f"memsync simulate: {report.runs} run(s) of {s['devices']} device(s), {s['users']} "
        f"user(s), {s['steps']} step(s); seeds {first}..{last}; {report.jobs} worker(s); "
        f"store {report.store}; embedder {s.get('embedder', 'model')}; device KDF "
        f"{s.get('kdf_iterations', 256_000)} iteration(s)",
        "rates: " + ", ".join(f"{k} {v:g}" for k, v in s["rates"].items()),
        "",
        "-- runs",
        f"   {'seed':>8}  {'sessions':>8}  {'seconds':>8}  result",
    ]
    for r in report.results:
        lines.append(
            f"   {r.seed:>8}  {r.sessions:>8}  {r.seconds:>8.1f}  {'PASS' if r.ok else 'FAIL'}"
        )
        for check in r.failures():
            lines.append(f"             FAIL  {check.name}: {check.detail}")
    lines.append("-- invariants (runs passed / runs)")
    for name, (passed, seen) in report.check_tally().items():
        verdict = "PASS" if passed == seen == len(report.results) else "FAIL"
        lines.append(f"   {verdict}  {passed:>5}/{seen:<5}  {name}")
    lines.append("-- figures")
    for name, value in report.figures().items():
        lines.append(f"   {name:<30} {'-' if value is None else value}")
    lines.append("-- outcomes (all runs)")
    for name, value in report.counts().items():
        lines.append(f"   {name:<30} {value}")
    for seed in report.failing_seeds:
        lines.append(f"FAILED: seed {seed}; re-run it alone: {report.rerun_for(seed)}")
    if len(report.results) < report.runs:
        lines.append(f"FAILED: only {len(report.results)} of {report.runs} run(s) were played")
    if report.sessions_wanted is not None and report.sessions < report.sessions_wanted:
        lines.append(
            f"FAILED: {report.sessions} device session(s), fewer than the "
            f"{report.sessions_wanted} wanted"
        )
    lines.append("RESULT: " + ("PASS" if report.ok else "FAIL"))
    return "\n".join(lines)


def write(report: ManyReport, folder: Path) -> list[Path]:
    """runs.json and runs.txt in ``folder``, and each failing run's whole report (its
    JSON, table with log, and plots) in ``folder/seed-<K>``; returns the paths."""
    from simulator import run_report

    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "runs.json"
    json_path.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    text_path = folder / "runs.txt"
    text_path.write_text(render_text(report) + "\n")
    written = [json_path, text_path]
    for result in report.results:
        if result.report is not None:
            written.extend(run_report.write(result.report, folder / f"seed-{result.seed}"))
    return written
