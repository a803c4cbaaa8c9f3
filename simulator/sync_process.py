"""One device sync in a process of its own: what ``memsync device sync --dir`` runs.

Invariants: the sync is the device CLI's own (``memsync device sync --dir``, the
passphrase from ``$MEMSYNC_PASSPHRASE``, the kill hook from ``$MEMSYNC_DEVICE_CRASH_AT``);
the only thing added is the device's embedder when the simulator gave it the stub, so
a process never mixes the real model's vectors into a stub device (nor needs the model
files). Used by the fork server's children and, as ``python -m simulator.sync_process``,
by the plain-subprocess fallback, so both run the same code.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from device import search
from device.db import DB_FILENAME
from simulator.stub_embedder import EMBEDDERS, STUB


def run_sync(directory: Path, embedder: str) -> int:
    """Sync the device in ``directory`` through the CLI; its exit code."""
    if embedder not in EMBEDDERS:
        raise ValueError(f"embedder {embedder!r}: expected one of {EMBEDDERS}")
    if embedder == "stub":
        search.assign_embedder(directory / DB_FILENAME, STUB)
    from simulator.cli import main

    return main(["device", "sync", "--dir", str(directory)])


def embedder_of(directory: Path) -> str:
    """How the device in ``directory`` embeds in this process: ``stub`` or ``model``."""
    return "stub" if search.assigned_embedder(directory / DB_FILENAME) is STUB else "model"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator.sync_process")
    parser.add_argument("--dir", type=Path, required=True, help="the device's folder")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="model")
    args = parser.parse_args(argv)
    return run_sync(args.dir, args.embedder)


if __name__ == "__main__":
    raise SystemExit(main())
