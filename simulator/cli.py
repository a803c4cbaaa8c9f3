"""The ``memsync`` command: cloud, device, simulate and demo.

Invariant: every command that prints data takes ``--json``; errors go to stderr with
exit code 2 and no traceback; a scenario exits non-zero when any check fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cloud import cli as cloud_cli
from device import cli as device_cli
from simulator.report import Check, ScenarioReport, StepState, render_checks, render_step

SCENARIOS = ("forget-propagation", "writing")


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
        help="play a scenario against a real cloud on loopback and check the invariants",
        description="Start a cloud on 127.0.0.1, play a scenario with real devices, "
        "print the state after each step and PASS/FAIL per check.",
    )
    simulate.add_argument("--scenario", choices=SCENARIOS, default="forget-propagation")
    simulate.add_argument(
        "--store",
        default="sqlite",
        help="'sqlite' (a temp folder, the default) or a postgresql:// URL of an empty database",
    )
    simulate.add_argument("--dir", type=Path, help="keep devices and cloud files here")
    simulate.add_argument("--json", action="store_true", help="print the report as JSON")
    simulate.set_defaults(func=_simulate)

    demo = sub.add_parser(
        "demo",
        help="the main job: the forget-propagation and writing scenarios on an embedded "
        "SQLite cloud",
    )
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.set_defaults(func=_simulate, scenario="all", store="sqlite", dir=None)
    return parser


def run_scenario(
    scenario: str, store: str, folder: Path, emit: object = None, quiet: bool = False
) -> ScenarioReport:
    from cloud.config import CloudConfig
    from simulator.cloud_runner import RunningCloud
    from simulator.scenarios import forget_propagation, writing

    cloud_dir = folder / "cloud"
    if store == "sqlite":
        cloud = RunningCloud.sqlite(cloud_dir)
    else:
        cloud_dir.mkdir(parents=True, exist_ok=True)
        cloud = RunningCloud(CloudConfig(store_url=store, key_store_path=cloud_dir / "keys.db"))

    def show(state: StepState) -> None:
        if not quiet:
            print(render_step(state), flush=True)

    plays = {"forget-propagation": forget_propagation.run, "writing": writing.run}
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


def _simulate(args: argparse.Namespace) -> int:
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
