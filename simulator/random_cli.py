"""``memsync simulate --devices N --users U --steps S --seed K``: the random run's CLI.

Invariants: settings are validated before anything starts; the progress bar goes to
stderr and only when stderr is a terminal and ``--json`` is off, so stdout carries
exactly the text table or the JSON; the exit code is 0 when every invariant passed,
1 when any failed.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

from simulator import run_report
from simulator.actions import Rates
from simulator.random_run import Progress, RunSettings, run
from simulator.stores import check_store, clouds_for, describe_store


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
    )


@contextlib.contextmanager
def _progress_bar(enabled: bool, steps: int) -> Iterator[Progress | None]:
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
        task = bar.add_task("simulating", total=steps)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def random_run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    settings.validate()
    check_store(args.store)
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
