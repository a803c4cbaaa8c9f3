"""The ``memsync`` command: cloud, device, simulate and demo.

Invariant: every command that prints data takes ``--json``; errors go to stderr with
exit code 2 and no traceback; a scenario or a random run exits non-zero (1) when any
check fails. ``simulate`` plays a named scenario (``--scenario``) or a seeded random
run (``--devices/--users/--steps/--seed``), never both.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cloud import cli as cloud_cli
from device import cli as device_cli
from simulator.actions import Rates
from simulator.errors import SimulatorError
from simulator.report import Check, ScenarioReport, StepState, render_checks, render_step
from simulator.stores import check_store, cloud_for
from simulator.stub_embedder import EMBEDDERS

SCENARIOS = ("forget-propagation", "writing", "account-end", "device-subset")
RATE_FLAGS = {
    "remember": "--remember-rate",
    "offline": "--offline-rate",
    "crash": "--crash-rate",
    "forget": "--forget-rate",
    "correct": "--correct-rate",
    "concurrent": "--concurrent-rate",
    "stale": "--stale-edit-rate",
    "partition": "--partition-rate",
    "restart": "--restart-rate",
    "compact": "--compact-rate",
    "twin": "--twin-sync-rate",
    "doubled": "--doubled-push-rate",
    "forget_mid_sync": "--forget-mid-sync-rate",
}
RATE_HELP = {
    "remember": "a device remembering a sentence the user typed",
    "offline": "a device going offline or coming back",
    "crash": "a device killed (SIGKILL, a real process) during a sync",
    "forget": "a device forgetting a record permanently",
    "correct": "a device correcting a record",
    "concurrent": "two devices of a user correcting the same record while offline",
    "stale": "an offline device editing a record another device just forgot",
    "partition": "a random group of devices cut off from the cloud together, or the cut healed",
    "restart": "the cloud process a device talks to killed and restarted after it committed "
    "the device's push (or answered its pull) and before the device heard",
    "compact": "the operator compacting a user's change feed (devices behind it resync)",
    "twin": "a device syncing in two processes at once (a real second sync process)",
    "doubled": "a device's pushes each delivered twice after its feed is compacted, "
    "the device hearing the second answer (a retrying proxy)",
    "forget_mid_sync": "another device forgetting a shared record just before each of a "
    "syncing device's first two pushes",
}
RANDOM_RUN_ARGS = (
    "devices",
    "users",
    "steps",
    "seed",
    "report",
    "network_faults",
    "clock_skew",
    "clouds",
    "runs",
    "jobs",
    "embedder",
    "kdf_iterations",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memsync",
        description="Offline-first sync engine for a personal assistant's long-term memory.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    cloud_cli.register(sub)
    device_cli.register(sub)

    simulate = sub.add_parser(
        "simulate",
        help="play a scenario or a seeded random run against a real cloud on loopback and "
        "check the invariants",
        description="Start a cloud on 127.0.0.1 and play either a named scenario "
        "(--scenario) or a seeded random run of real devices (--devices/--users/--steps/"
        "--seed with per-step rates), then print PASS/FAIL per invariant. Exits 1 when "
        "any invariant fails.",
    )
    simulate.add_argument("--scenario", choices=SCENARIOS, default=None)
    simulate.add_argument(
        "--store",
        default="sqlite",
        help="'sqlite' (files in --dir or a temp folder, the default) or a postgresql:// URL "
        "of an existing database (an empty one, or one whose other spaces the run must "
        "leave unchanged: the walls check proves it did)",
    )
    simulate.add_argument("--dir", type=Path, help="keep devices and cloud files here")
    simulate.add_argument("--json", action="store_true", help="print the report as JSON")
    run = simulate.add_argument_group("random run (any of these selects it)")
    run.add_argument("--devices", type=int, help="devices in all (default 4)")
    run.add_argument("--users", type=int, help="users, devices spread among them (default 2)")
    run.add_argument("--steps", type=int, help="random steps before the final sync (default 60)")
    run.add_argument("--seed", type=int, help="the seed: same seed, same log (default 0)")
    defaults = Rates()
    for name, flag in RATE_FLAGS.items():
        run.add_argument(
            flag,
            dest=f"{name}_rate",
            type=float,
            default=None,
            metavar="P",
            help=f"per-step probability of {RATE_HELP[name]} (default {getattr(defaults, name)})",
        )
    run.add_argument(
        "--network-faults",
        type=float,
        metavar="P",
        help="per-request probability, on each device, of a transport fault: a dropped "
        "request or answer, a timeout, a duplicated delivery or a stale replay (default 0)",
    )
    run.add_argument(
        "--clock-skew",
        type=float,
        metavar="HOURS",
        help="each device's clock is off by up to this many hours, either way (default 0)",
    )
    run.add_argument(
        "--clouds",
        type=int,
        metavar="N",
        help="serve the store from N real 'memsync cloud serve' processes, devices spread "
        "across them (default 1: one server in this process)",
    )
    run.add_argument(
        "--report", type=Path, metavar="DIR", help="write report.json, report.txt and PNGs here"
    )
    run.add_argument(
        "--runs",
        type=int,
        metavar="R",
        help="play R independent runs, seeds K, K+1, ... (K from --seed), each with its own "
        "cloud and fleet, and report them together (default 1: one run, as without it)",
    )
    run.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="J",
        help="play the runs in J worker processes (default 1; SQLite stores only)",
    )
    run.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        help="what devices embed with: 'stub' (hashed words, the default: a random run "
        "never recalls) or 'model' (the real sentence model)",
    )
    run.add_argument(
        "--kdf-iterations",
        type=int,
        metavar="N",
        help="PBKDF2 iterations of each device database's passphrase (default 64: a run "
        "never guesses passphrases; 256000 is what a user's device uses)",
    )
    simulate.set_defaults(func=_simulate)

    demo = sub.add_parser(
        "demo",
        help="the main job: the forget-propagation, writing, account-end and device-subset "
        "scenarios on an "
        "embedded SQLite cloud",
    )
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.set_defaults(func=_simulate, scenario="all", store="sqlite", dir=None)
    return parser


def run_scenario(
    scenario: str, store: str, folder: Path, emit: object = None, quiet: bool = False
) -> ScenarioReport:
    from simulator.scenarios import account_end, device_subset, forget_propagation, writing

    cloud = cloud_for(store, folder / "cloud")

    def show(state: StepState) -> None:
        if not quiet:
            print(render_step(state), flush=True)

    plays = {
        "forget-propagation": forget_propagation.run,
        "writing": writing.run,
        "account-end": account_end.run,
        "device-subset": device_subset.run,
    }
    names = list(plays) if scenario == "all" else [scenario]
    with cloud:
        if not quiet:
            print(f"cloud listening on {cloud.url} (store: {store}); devices in {folder}")
        reports = [plays[name](cloud, folder / "devices" / name, show) for name in names]
    if len(reports) == 1:
        return reports[0]
    combined = ScenarioReport(" + ".join(r.scenario for r in reports))
    for r in reports:
        combined.steps.extend(r.steps)
        combined.checks.extend(
            Check(f"{r.scenario}: {c.name}", c.passed, c.detail) for c in r.checks
        )
    return combined


def _is_random_run(args: argparse.Namespace) -> bool:
    given = [getattr(args, name, None) for name in RANDOM_RUN_ARGS]
    rates = [getattr(args, f"{name}_rate", None) for name in RATE_FLAGS]
    return any(v is not None for v in [*given, *rates])


def _simulate(args: argparse.Namespace) -> int:
    try:
        if _is_random_run(args):
            if args.scenario is not None:
                raise SimulatorError(
                    f"--scenario {args.scenario} plays a fixed scenario; --devices/--users/"
                    "--steps/--seed/--report and the rates select a random run: give one or "
                    "the other"
                )
            from simulator.random_cli import random_run

            return random_run(args)
        return _scenario(args)
    except SimulatorError as exc:
        print(f"memsync simulate: error: {exc}", file=sys.stderr)
        return 2


def _scenario(args: argparse.Namespace) -> int:
    args.scenario = args.scenario or "forget-propagation"
    check_store(args.store)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        report = run_scenario(args.scenario, args.store, args.dir, quiet=args.json)
    else:
        with tempfile.TemporaryDirectory(prefix="memsync-sim-") as tmp:
            report = run_scenario(args.scenario, args.store, Path(tmp), quiet=args.json)
    if args.json:
        print(report.dumps())
    else:
        print(render_checks(report))
        print("RESULT:", "PASS" if report.ok else "FAIL")
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
