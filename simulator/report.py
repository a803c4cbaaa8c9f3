"""Scenario reports: the state after each step, and PASS/FAIL per check.

Invariant: a report is ``ok`` only if it has at least one check and every check passed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"


@dataclass(frozen=True)
class StepState:
    step: str
    devices: list[dict[str, Any]]
    pending: list[dict[str, Any]]


@dataclass
class ScenarioReport:
    scenario: str
    steps: list[StepState] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def check(self, name: str, passed: bool, detail: str) -> Check:
        result = Check(name, bool(passed), detail)
        self.checks.append(result)
        return result

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "ok": self.ok,
            "steps": [asdict(s) for s in self.steps],
            "checks": [{**asdict(c), "verdict": c.verdict} for c in self.checks],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=str)


def render_step(state: StepState) -> str:
    lines = [f"== {state.step}"]
    for device in state.devices:
        records = ", ".join(f"{r['record_id']}:{r['state']}" for r in device["records"]) or "none"
        lines.append(
            f"   {device['name']:<7} {'online ' if device['online'] else 'offline'}"
            f"  queued ops: {device['queued_ops']}  records: {records}"
        )
    if state.pending:
        for forget in state.pending:
            names = ", ".join(forget["pending_devices"]) or "none"
            lines.append(f"   cloud: forget of {forget['record_id']} pending on: {names}")
    else:
        lines.append("   cloud: nothing pending")
    return "\n".join(lines)


def render_checks(report: ScenarioReport) -> str:
    width = max((len(c.name) for c in report.checks), default=10)
    lines = [f"-- checks ({report.scenario})"]
    for check in report.checks:
        lines.append(f"   {check.verdict}  {check.name:<{width}}  {check.detail}")
    passed = sum(c.passed for c in report.checks)
    lines.append(f"   {passed} passed, {len(report.checks) - passed} failed")
    return "\n".join(lines)
