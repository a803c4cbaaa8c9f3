"""The ``memsync device`` command group: its parser, and the door its commands open a
device through.

Invariants: every command names its device directory (``--dir``, default
``$MEMSYNC_DEVICE_DIR`` or ``~/.memsync/device``) and takes the passphrase from
``$MEMSYNC_PASSPHRASE`` or a prompt (never an argument, so it stays out of shell
history); the account passphrase likewise (``$MEMSYNC_ACCOUNT_PASSPHRASE`` or a
prompt); errors print one clear line on stderr and exit 2, without a traceback; every
data-printing command takes ``--json``. The commands live in one module per concern:
``account_cli`` (init, enroll, account-key, delete-account), ``memory_cli`` (the
writes), ``reading_cli`` (the reads), ``forget_cli`` (forget, pending), ``online_cli``
(sync, live, export, ui), ``subset_cli`` and ``status_cli``; each reaches its device
only through the ``Door`` built here, whose calls look up ``_open``, ``_read``, ``_create`` and
``_wait_for_interrupt`` in this module when a command runs (tests replace them). The
agent, the store and the sync client load only when a command runs.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from device import (
    account_cli,
    forget_cli,
    memory_cli,
    online_cli,
    reading_cli,
    status_cli,
    subset_cli,
)
from device.cli_common import CliError, Door, Handler, default_dir, emit
from device.cli_common import passphrase as _passphrase
from device.errors import DeviceError
from device.online_cli import DEFAULT_WAIT, closing_notice
from protocol.errors import ProtocolError

if TYPE_CHECKING:  # the agent, the store and the sync client load when a command runs
    from device.agent import DeviceAgent
    from device.listing import Records

__all__ = ["DEFAULT_WAIT", "CliError", "closing_notice", "main", "register"]


def _open(args: argparse.Namespace) -> DeviceAgent:
    from device.agent import DeviceAgent

    return DeviceAgent.open(Path(args.dir), _passphrase())


def _read(args: argparse.Namespace) -> Records:
    from device.listing import open_records

    return open_records(Path(args.dir), _passphrase())


def _create(args: argparse.Namespace, passphrase: str) -> DeviceAgent:
    from device.agent import DeviceAgent

    return DeviceAgent.create(
        Path(args.dir), passphrase, device_name=args.name, cloud_url=args.cloud
    )


def _wait_for_interrupt() -> None:
    """Serve until Ctrl-C (tests replace this to stop at once)."""
    import threading

    threading.Event().wait()


def _door() -> Door:
    """The door every command opens its device through: each call looks its function
    up in this module when it runs."""
    return Door(
        open=lambda args: _open(args),
        read=lambda args: _read(args),
        create=lambda args, passphrase: _create(args, passphrase),
        wait_for_interrupt=lambda: _wait_for_interrupt(),
        open_browser=lambda url: webbrowser.open(url),
    )


def _guard(handler: Handler) -> Handler:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (DeviceError, ProtocolError, CliError) as exc:
            print(f"memsync device: error: {exc}", file=sys.stderr)
            return 2
        except (EOFError, KeyboardInterrupt):
            print("memsync device: cancelled; nothing was changed", file=sys.stderr)
            return 2

    return run


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``device`` command group to a parent parser's subparsers."""
    device: argparse.ArgumentParser = subparsers.add_parser(
        "device", help="the offline device core"
    )
    commands = device.add_subparsers(dest="device_command", required=True)

    def command(name: str, handler: Handler, help_text: str, *, json_flag: bool = True) -> Any:
        parser = commands.add_parser(name, help=help_text)
        parser.add_argument(
            "--dir", default=str(default_dir()), help="device directory (MEMSYNC_DEVICE_DIR)"
        )
        if json_flag:
            parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(func=_guard(handler))
        return parser

    door = _door()
    for group in (account_cli, memory_cli, reading_cli, forget_cli, online_cli):
        group.register(command, door)
    subset_cli.register(command, door.open, emit)
    status_cli.register(command, door.open, emit)
    return device


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memsync")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
