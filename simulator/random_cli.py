"""``memsync simulate --devices N --users U --steps S --seed K``: the random run's CLI.

Invariants: settings are validated before anything starts; the progress bar goes to
stderr and only when stderr is a terminal and ``--json`` is off, so stdout carries
exactly the text table or the JSON; the exit code is 0 when every invariant passed,
1 when any failed. ``--runs 1`` (the default) is the single run, exactly as without
the flag; ``--runs R`` (with ``-j J`` workers) is ``simulator.many_runs``, and its
report names every failing seed with the command that re-runs it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

from simulator import many_runs, run_report
from simulator.actions import Rates
from simulator.random_run import Progress, RunSettings, run
from simulator.stores import SQLITE, check_store, clouds_for, describe_store


def settings_from(args: argparse.Namespace) -> RunSettings:
    defaults = RunSettings()
    given = {
        f.name: getattr(args, f"{f.name}_rate")
        for f in fields(Rates)
        if getattr(args, f"{f.name}_rate", None) is not None
    }
    return RunSettings(
        devices=defaults.devices if args.devices is None else args.devices,
        users=defaults.users if args.users is None else args.users,
        steps=defaults.steps if args.steps is None else args.steps,
        seed=defaults.seed if args.seed is None else args.seed,
        rates=Rates(**given),
        network_faults=(
            defaults.network_faults if args.network_faults is None else args.network_faults
        ),
        clock_skew_hours=defaults.clock_skew_hours if args.clock_skew is None else args.clock_skew,
        embedder=defaults.embedder if args.embedder is None else args.embedder,
        kdf_iterations=(
            defaults.kdf_iterations if args.kdf_iterations is None else args.kdf_iterations
        ),
    )


@contextlib.contextmanager
def _progress_bar(enabled: bool, steps: int, what: str = "simulating") -> Iterator[Progress | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task(what, total=steps)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def random_run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    settings.validate()
    check_store(args.store)
    runs = 1 if args.runs is None else args.runs
    jobs = 1 if args.jobs is None else args.jobs
    if runs != 1 or jobs != 1:
        return _many(args, settings, runs, jobs)
    show_bar = not args.json and sys.stderr.isatty()
    with contextlib.ExitStack() as stack:
        folder = args.dir
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memsync-sim-")))
        folder.mkdir(parents=True, exist_ok=True)
        clouds = 1 if args.clouds is None else args.clouds
        cloud = clouds_for(
            args.store, folder / "cloud", clouds, killable=settings.rates.restart > 0
        )
        stack.enter_context(cloud)
        if not args.json:
            print(
                f"cloud listening on {', '.join(cloud.urls)} (store: "
                f"{describe_store(args.store)}); devices in {folder}",
                flush=True,
            )
        progress = stack.enter_context(_progress_bar(show_bar, settings.steps))
        report = run(settings, cloud, folder / "devices", progress=progress)
    if args.report is not None:
        written = run_report.write(report, args.report)
        if not args.json:
            print("report written: " + ", ".join(str(p) for p in written))
    if args.json:
        print(report.dumps())
    else:
        print(run_report.render_text(report))
    return 0 if report.ok else 1


def rerun_command(args: argparse.Namespace, settings: RunSettings) -> str:
    """The command that plays one of the runs alone (``{seed}`` in place of its seed)."""
    from simulator.cli import RATE_FLAGS

    parts = ["memsync simulate", f"--devices {settings.devices}", f"--users {settings.users}",
             f"--steps {settings.steps}", "--seed {seed}"]  # fmt: skip
    for name, flag in RATE_FLAGS.items():
        value = getattr(args, f"{name}_rate", None)
        if value is not None:
            parts.append(f"{flag} {value:g}")
    if settings.network_faults:
        parts.append(f"--network-faults {settings.network_faults:g}")
    if settings.clock_skew_hours:
        parts.append(f"--clock-skew {settings.clock_skew_hours:g}")
    if args.clouds not in (None, 1):
        parts.append(f"--clouds {args.clouds}")
    if args.store != SQLITE:
        parts.append(f"--store {describe_store(args.store)}")
    if settings.embedder != RunSettings().embedder:
        parts.append(f"--embedder {settings.embedder}")
    if settings.kdf_iterations != RunSettings().kdf_iterations:
        parts.append(f"--kdf-iterations {settings.kdf_iterations}")
    return " ".join(parts)


def _many(args: argparse.Namespace, settings: RunSettings, runs: int, jobs: int) -> int:
    many_runs.check_many(settings, runs, jobs, args.store)
    show_bar = not args.json and sys.stderr.isatty()
    if not args.json:
        print(
            f"{runs} run(s), seeds {settings.seed}..{settings.seed + runs - 1}, in {jobs} "
            f"worker(s) (store: {describe_store(args.store)})"
            + (f"; runs in {args.dir}" if args.dir is not None else ""),
            flush=True,
        )
    with _progress_bar(show_bar, runs, "runs") as progress:
        report = many_runs.play_many(
            settings,
            runs,
            jobs,
            store=args.store,
            clouds=1 if args.clouds is None else args.clouds,
            folder=args.dir,
            progress=progress,
            rerun=rerun_command(args, settings),
        )
    if args.report is not None:
        written = many_runs.write(report, args.report)
        if not args.json:
            print("report written: " + ", ".join(str(p) for p in written))
    if args.json:
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        print(many_runs.render_text(report))
    return 0 if report.ok else 1
