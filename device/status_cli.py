"""``memsync device status``, and the first sync's progress bar.

Invariants:
- ``status`` prints ``DeviceAgent.sync_status`` (``--json``: the model's JSON); it
  reads only, offline unless ``--cloud`` asks the cloud for its count of this
  device's subset.
- The first sync (the device never synced) shows a ``rich`` progress bar on stderr,
  records on this device against the cloud's count of its subset (asked first; an
  unknown total shows a running count); stdout keeps the sync's usual report.
- The bar follows the change feed (``DeviceAgent.watch``): it moves as each pulled
  page commits, and its subscription ends with the sync, whatever the outcome.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the agent and the store load when a command runs
    from device.agent import DeviceAgent
    from device.changes import RecordEvent
    from device.views import SyncReport

Command = Callable[..., Any]
Open = Callable[[argparse.Namespace], "AbstractContextManager[DeviceAgent]"]
Emit = Callable[[argparse.Namespace, Any, str], None]


def sync(agent: DeviceAgent, *, progress: bool) -> SyncReport:
    """``agent.sync()``, with a progress bar on stderr when it is the first sync."""
    if not progress or not agent.sync_status().never_synced:
        return agent.sync()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    expected = agent.sync_status(ask_cloud=True).cloud_records
    console = Console(stderr=True)
    with Progress(
        TextColumn("First sync"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("records"),
        console=console,
    ) as bar:
        held = agent.sync_status().records_held
        task = bar.add_task("first sync", total=expected, completed=held)

        def moved(_event: RecordEvent) -> None:
            held = agent.sync_status().records_held
            # the cloud's count leaves out what this device pushes in the same sync
            bar.update(
                task, completed=held, total=None if expected is None else max(expected, held)
            )

        with agent.watch(moved):
            report = agent.sync()
        held = agent.sync_status().records_held
        bar.update(task, completed=held, total=max(expected or 0, held))
    return report


def register(command: Command, open_agent: Open, emit: Emit) -> None:
    """Add ``status`` to the ``device`` command group."""

    def status(args: argparse.Namespace) -> int:
        from device.sync_status import describe

        with open_agent(args) as agent:
            now = agent.sync_status(ask_cloud=args.cloud)
            emit(args, json.loads(now.model_dump_json()), describe(now))
        return 0

    p = command("status", status, "sync status: queued changes, last synced, first-sync progress")
    p.add_argument(
        "--cloud", action="store_true", help="ask the cloud how many records its subset holds"
    )
