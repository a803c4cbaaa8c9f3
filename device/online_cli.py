"""``memsync device`` commands that need the cloud or serve a page: sync, live, export
and ui.

Invariants: ``sync`` prints what it pushed, pulled, shredded and acknowledged, and the
closing notice when the cloud sends one (``closing_notice``); ``live`` runs until
``--seconds`` pass or Ctrl-C, one line per sync; ``export`` makes and checks its output
directory before asking anything and needs the account passphrase; ``ui`` serves the
inspector on 127.0.0.1 only and prints its one link.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from device import status_cli
from device.cli_common import (
    CliError,
    Command,
    Door,
    DoorHandler,
    Handler,
    account_passphrase,
    emit,
)

if TYPE_CHECKING:
    from device.live import LiveEvent

DEFAULT_WAIT = 20.0  # seconds a live pull waits: device.live.DEFAULT_WAIT (a test pins it)
# the most a cloud holds a live pull: protocol.messages.MAX_PULL_WAIT (a test pins it);
# written here so that building the parser builds no wire message
MAX_PULL_WAIT = 25.0


def closing_notice(header: str) -> str:
    """The sentence a user reads for a ``Memsync-Closing`` header."""
    from protocol.messages import parse_closing_header

    dates = parse_closing_header(header)
    if dates is None:
        return f"Notice: the memsync service is closing ({header})."
    closes_at, export_until = dates
    return (
        f"Notice: the memsync service closes on {closes_at.isoformat()}; export stays open "
        f"until {export_until.isoformat()}. After that all of your memory is made unreadable, "
        "as when you delete your account."
    )


def _sync(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        report = status_cli.sync(agent, progress=not args.json)
        text = (
            f"Pushed {report.pushed} (applied {report.applied}, duplicates {report.duplicates}, "
            f"refused {len(report.refused)}); pulled {report.pulled}; "
            f"shredded {len(report.shredded)}; acknowledged {len(report.acked)}"
        )
        if report.entered or report.left or report.left_later:
            text += (
                f"\nSubset: {len(report.entered)} record(s) came to this device, "
                f"{len(report.left)} left it (still in the cloud)"
            )
            if report.left_later:
                text += f", {len(report.left_later)} leave once their queued changes are sent"
        if report.push_held is not None:
            text += f"\nNothing was pushed; {agent.pending_ops()} change(s) stay queued: "
            text += report.push_held
        if report.closing is not None:
            text += "\n" + closing_notice(report.closing)
        emit(args, dataclasses.asdict(report), text)
    return 0


def _live(args: argparse.Namespace, door: Door) -> int:
    """Live sync until ``--seconds`` pass or Ctrl-C, printing what each sync applied."""
    ended = threading.Event()
    why: list[str] = []

    from device.live import NOTHING_NEW, LiveEventKind

    def show(event: LiveEvent) -> None:
        if event.kind is LiveEventKind.STOPPED:
            why.append(event.message)
            ended.set()
        if args.json:
            report = dataclasses.asdict(event.report) if event.report is not None else None
            line = {"kind": event.kind.value, "message": event.message, "report": report}
            print(json.dumps(line, default=str), flush=True)
        elif event.kind is not LiveEventKind.SYNCED or event.message != NOTHING_NEW:
            print(f"{event.kind.value}: {event.message}", flush=True)

    with door.open(args) as agent:
        agent.start_live(wait=args.wait, on_event=show)
        if not args.json:
            print("live: syncing as changes commit in the cloud (Ctrl-C stops)", flush=True)
        try:
            stopped_by_itself = ended.wait(args.seconds)  # None: until Ctrl-C
        except KeyboardInterrupt:
            stopped_by_itself = False
        finally:
            agent.stop_live()
    if stopped_by_itself:
        raise CliError(why[0] if why else "live sync stopped")
    return 0


def _export(args: argparse.Namespace, door: Door) -> int:
    from device.export import check_out_dir
    from protocol.export.package import Section

    try:  # issue 23: the folder is made if missing
        Path(args.out).expanduser().mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(
            f"export folder {str(args.out)[:200]!r} cannot be made: "
            f"{exc.strerror or exc}; nothing was exported"
        ) from exc
    out = check_out_dir(Path(args.out).expanduser())  # before any prompt or request
    with door.open(args) as agent:
        account = account_passphrase("Account passphrase: ", required=True)
        result = agent.export(out, account or "", include_sensitive=not args.without_sensitive)
    totals = {s.value: result.totals.of(s) for s in Section}
    data = {
        "export_id": result.export_id,
        "package": str(result.package_path),
        "view": str(result.view_path),
        "includes_sensitive": result.includes_sensitive,
        "totals": totals,
        "device_only": {
            "records": result.device_only_records,
            "episodes": result.device_only_episodes,
            "skeletons": result.device_only_skeletons,
        },
    }
    shown = [
        s for s in Section if result.includes_sensitive or not s.value.startswith("sensitive.")
    ]
    lines = [
        f"Exported {result.export_id}:",
        f"  package: {result.package_path}",
        f"  view:    {result.view_path}",
        *(f"  {s.value}: {totals[s.value]}" for s in shown),
    ]
    if not result.includes_sensitive:
        lines.append("  (sensitive classes were left out)")
    elif result.device_only_records or result.device_only_episodes:
        lines.append(
            f"  (this device added {result.device_only_records} record(s) and "
            f"{result.device_only_episodes} episode(s) it keeps only here)"
        )
    emit(args, data, "\n".join(lines))
    return 0


def _ui(args: argparse.Namespace, door: Door) -> int:
    from device.ui.server import serve_ui  # the web stack only for this command

    with door.open(args) as agent, serve_ui(agent, port=args.port) as ui:
        print(f"memsync inspector: {ui.url}", flush=True)
        if not args.no_open:
            door.open_browser(ui.url)
        with contextlib.suppress(KeyboardInterrupt):
            door.wait_for_interrupt()
    return 0


def register(command: Command, door: Door) -> None:
    """Add these commands to the ``device`` group (``device.cli.register``)."""

    def bind(handler: DoorHandler) -> Handler:
        return lambda args: handler(args, door)

    command("sync", bind(_sync), "push the queue, pull changes, acknowledge key destruction")
    p = command("export", bind(_export), "export all memory: a JSON package and a Markdown view")
    p.add_argument("--out", required=True, help="an existing directory for the two files")
    p.add_argument(
        "--without-sensitive", action="store_true", help="leave the sensitive classes out"
    )
    p = command(
        "live", bind(_live), "stay online: apply changes as the cloud makes them (Ctrl-C ends)"
    )
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    p.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT,
        help=f"seconds the cloud may hold each live pull (at most {MAX_PULL_WAIT:g})",
    )
    p = command(
        "ui", bind(_ui), "the inspector page, on 127.0.0.1 with a one-run token (Ctrl-C ends)",
        json_flag=False,
    )  # fmt: skip
    p.add_argument("--port", type=int, default=0, help="a port on 127.0.0.1 (0: a free one)")
    p.add_argument("--no-open", action="store_true", help="print the link, open no browser")
