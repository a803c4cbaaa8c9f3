"""The report of a random run: settings, log, counts, samples, forget timings, checks.

Invariants: a report is ``ok`` only when it has checks and every one passed. The JSON
form carries everything the text table and the plots show; ``outcome()`` is the part
the seed alone decides (log and counts, the device sessions among them), so two runs of
one seed can be compared; ``sessions_per_minute`` is a figure of the machine, not of
the seed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simulator.report import Check

SESSIONS = "device sessions"  # the count: syncs tried while the device reached the cloud


def per_minute(sessions: int, seconds: float) -> float | None:
    return round(60.0 * sessions / seconds, 1) if seconds > 0 else None


@dataclass(frozen=True)
class StepSample:
    step: int
    seconds: float
    queue_depth: dict[str, int]  # device label -> queued ops
    total_queue: int
    unsynced_devices: int
    offline_devices: int


@dataclass
class RunReport:
    settings: dict[str, Any]
    store: str
    log: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    samples: list[StepSample] = field(default_factory=list)
    forgets: list[dict[str, Any]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def outcome(self) -> dict[str, Any]:
        """What the seed decides: the action log and the outcome counts."""
        return {"log": list(self.log), "counts": dict(self.counts)}

    def figures(self) -> dict[str, Any]:
        shred = [f["seconds"] for f in self.forgets if f.get("seconds") is not None]
        steps = [
            f["shredded_step"] - f["committed_step"]
            for f in self.forgets
            if f.get("shredded_step") is not None and f.get("committed_step") is not None
        ]
        sessions = self.counts.get(SESSIONS, 0)
        return {
            "steps": max(0, len(self.samples) - 2),
            "seconds": self.seconds,
            "device_sessions": sessions,
            "sessions_per_minute": per_minute(sessions, self.seconds),
            "max_total_queue": max((s.total_queue for s in self.samples), default=0),
            "max_unsynced_devices": max((s.unsynced_devices for s in self.samples), default=0),
            "forgets": len(self.forgets),
            "forgets_fully_shredded": len(shred),
            "forget_to_shred_max_seconds": round(max(shred), 3) if shred else None,
            "forget_to_shred_max_steps": max(steps) if steps else None,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "settings": self.settings,
            "store": self.store,
            "figures": self.figures(),
            "counts": self.counts,
            "checks": [{**asdict(c), "verdict": c.verdict} for c in self.checks],
            "forgets": self.forgets,
            "samples": [asdict(s) for s in self.samples],
            "log": self.log,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=str)


def render_text(report: RunReport) -> str:
    """The text table: settings, key figures, counts, then PASS/FAIL per invariant."""
    s = report.settings
    lines = [
        f"memsync simulate: {s['devices']} device(s), {s['users']} user(s), {s['steps']} "
        f"step(s), seed {s['seed']}, store {report.store}",
        "rates: " + ", ".join(f"{k} {v:g}" for k, v in s["rates"].items()),
        "",
        "-- figures",
    ]
    for name, value in report.figures().items():
        lines.append(f"   {name:<30} {'-' if value is None else value}")
    lines.append("-- outcomes")
    for name, value in report.counts.items():
        lines.append(f"   {name:<30} {value}")
    width = max((len(c.name) for c in report.checks), default=10)
    lines.append("-- invariants")
    for check in report.checks:
        lines.append(f"   {check.verdict}  {check.name:<{width}}  {check.detail}")
    passed = sum(c.passed for c in report.checks)
    lines.append(f"   {passed} passed, {len(report.checks) - passed} failed")
    lines.append("RESULT: " + ("PASS" if report.ok else "FAIL"))
    return "\n".join(lines)


def write(report: RunReport, folder: Path) -> list[Path]:
    """report.json, report.txt and the three plots in ``folder``; returns the paths."""
    from simulator import plots

    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "report.json"
    json_path.write_text(report.dumps() + "\n")
    text_path = folder / "report.txt"
    text_path.write_text(render_text(report) + "\n\n-- log\n" + "\n".join(report.log) + "\n")
    return [json_path, text_path, *plots.write_all(report, folder)]
