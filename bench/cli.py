"""The CLI a new user meets (issue 23): wall time of ``memsync --help`` and ``memsync
device list`` on a small device, each a fresh process, beside ``python -c pass`` (the
floor: starting an interpreter at all).

``measure(folder, smoke)`` makes one device (a few remembered sentences) with the real
entry, then times each command line ``runs`` times (5; 2 in the smoke) and reports the
median and the minimum in seconds. The goals (issue 23): ``device list`` <= 0.5 s,
``--help`` <= 0.3 s on the project's machine; the table shows them beside the figures.

Invariants: nothing here asserts a timing; the commands are the console entry's own
(``python -m memsync``, which is what the ``memsync`` script calls), with this checkout
on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"help": 0.3, "device_list": 0.5}
SENTENCES = ("I grew up in Duluth.", "I like green tea.", "My sister lives in Oslo.")


def _env(folder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MEMSYNC_PASSPHRASE": "bench cli passphrase",
        "MEMSYNC_DEVICE_DIR": str(folder / "device"),
    }


def _run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, capture_output=True, timeout=300)
    return time.perf_counter() - start


def measure(folder: Path, smoke: bool) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    env = _env(folder)
    entry = [sys.executable, "-m", "memsync"]
    _run([*entry, "device", "init", "--name", "bench"], env)
    sentences = SENTENCES[:1] if smoke else SENTENCES
    for text in sentences:
        _run([*entry, "device", "say", text, "--conversation", "c1"], env)
        _run([*entry, "device", "remember", text, "--conversation", "c1"], env)
    runs = 2 if smoke else 5
    lines = {
        "python_pass": [sys.executable, "-c", "pass"],
        "help": [*entry, "--help"],
        "device_list": [*entry, "device", "list"],
    }
    result: dict[str, Any] = {"runs": runs, "records": len(sentences), "goals_s": GOALS}
    for name, argv in lines.items():
        times = [_run(argv, env) for _ in range(runs)]
        result[name] = {"median_s": statistics.median(times), "min_s": min(times)}
    return result


def render(cli: dict[str, Any]) -> Table:
    table = Table(
        title=f"the CLI's wall time per call (fresh process, median of {cli['runs']}; "
        f"a device of {cli['records']} records)"
    )
    for col in ("command", "median s", "min s", "goal s"):
        table.add_column(col, justify="left" if col == "command" else "right")
    names = {"python_pass": "python -c pass (floor)", "help": "memsync --help"}
    names["device_list"] = "memsync device list"
    for key, label in names.items():
        goal = cli["goals_s"].get(key)
        table.add_row(
            label,
            f"{cli[key]['median_s']:.3f}",
            f"{cli[key]['min_s']:.3f}",
            "" if goal is None else f"{goal:.1f}",
        )
    return table
