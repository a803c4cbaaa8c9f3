"""The run's plots as PNG files (matplotlib, Agg backend: no display needed).

Invariant: each plot is drawn from the report's samples and forget timings only, so a
report read back from JSON would draw the same figures.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported: no display is ever needed

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from simulator.run_report import RunReport

FILES = ("queue_depth.png", "unsynced_devices.png", "forget_to_shred.png")


def queue_depth(report: RunReport, path: Path) -> Path:
    steps = [s.step for s in report.samples]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(steps, [s.total_queue for s in report.samples], label="all devices", linewidth=2)
    devices = sorted({d for s in report.samples for d in s.queue_depth})
    for device in devices:
        depth = [s.queue_depth.get(device, 0) for s in report.samples]
        ax.plot(steps, depth, label=device, linewidth=1, alpha=0.7)
    ax.set(title="Queued operations per step", xlabel="step", ylabel="queued ops")
    ax.legend(fontsize="small", ncol=2)
    return _save(fig, path)


def unsynced_devices(report: RunReport, path: Path) -> Path:
    steps = [s.step for s in report.samples]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.step(steps, [s.unsynced_devices for s in report.samples], where="post", label="unsynced")
    ax.step(steps, [s.offline_devices for s in report.samples], where="post", label="offline")
    ax.set(title="Devices not in sync per step", xlabel="step", ylabel="devices")
    ax.legend(fontsize="small")
    return _save(fig, path)


def forget_to_shred(report: RunReport, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    done = [f for f in report.forgets if f.get("seconds") is not None]
    if done:
        labels = [f"{f['record_id']} (step {f['committed_step']})" for f in done]
        bars = ax.bar(labels, [f["seconds"] for f in done])
        for bar, f in zip(bars, done, strict=True):
            steps = f["shredded_step"] - f["committed_step"]
            ax.annotate(f"{steps} step(s)", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize="x-small")  # fmt: skip
        ax.tick_params(axis="x", labelrotation=45, labelsize="small")
    else:
        ax.text(0.5, 0.5, "no forget in this run", ha="center", va="center")
    ax.set(
        title="Time from a forget's commit to the last device shredding",
        ylabel="seconds",
    )
    return _save(fig, path)


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return path


def write_all(report: RunReport, folder: Path) -> list[Path]:
    draw = (queue_depth, unsynced_devices, forget_to_shred)
    return [f(report, folder / name) for f, name in zip(draw, FILES, strict=True)]
