"""The ``memsync device`` command group.

Invariants: every command names its device directory (``--dir``, default
``$MEMSYNC_DEVICE_DIR`` or ``~/.memsync/device``) and takes the passphrase from
``$MEMSYNC_PASSPHRASE`` or a prompt (never an argument, so it stays out of shell
history); errors print one clear line on stderr and exit 2, without a traceback;
``forget`` is permanent and asks for confirmation unless ``--yes``.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from device.agent import DeviceAgent
from device.errors import DeviceError
from protocol.errors import ProtocolError

Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    pass


def default_dir() -> Path:
    return Path(os.environ.get("MEMSYNC_DEVICE_DIR") or Path.home() / ".memsync" / "device")


def _passphrase(confirm: bool = False) -> str:
    env = os.environ.get("MEMSYNC_PASSPHRASE")
    if env is not None:
        return env
    first = getpass.getpass("Device passphrase: ")
    if confirm and getpass.getpass("Repeat the passphrase: ") != first:
        raise CliError("the two passphrases differ; nothing was created")
    return first


def _open(args: argparse.Namespace) -> DeviceAgent:
    return DeviceAgent.open(Path(args.dir), _passphrase())


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


def _init(args: argparse.Namespace) -> int:
    agent = DeviceAgent.create(
        Path(args.dir), _passphrase(confirm=True), device_name=args.name, cloud_url=args.cloud
    )
    with agent:
        device_id = agent.enroll(args.code) if args.code else None
        data = {
            "directory": str(agent.directory),
            "device_id": device_id,
            "space_id": agent.space_id,
        }
        text = f"Created device {args.name!r} in {agent.directory}"
        if device_id:
            text += f"; enrolled as {device_id} in space {agent.space_id}"
        _emit(args, data, text)
    return 0


def _say(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        episode_id = agent.say(args.text, args.conversation)
        _emit(args, {"episode_id": episode_id}, f"Logged episode {episode_id}")
    return 0


def _remember(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        result = agent.remember(args.text, args.conversation)
        _emit(
            args,
            dataclasses.asdict(result),
            f"Remembered as {result.record_id} (pending sync)",
        )
    return 0


def _recall(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        hits = agent.recall(args.query, limit=args.limit)
        lines = [f"{h.record_id}  {h.line}" for h in hits] or ["Nothing found."]
        _emit(args, [dataclasses.asdict(h) for h in hits], "\n".join(lines))
    return 0


def _list(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        views = agent.list_records()
        lines = []
        for v in views:
            if v.is_skeleton:
                lines.append(f"{v.record_id}  permanently forgotten at {v.forgotten_at}")
            else:
                note = f" ({v.refusal_reason})" if v.refusal_reason else ""
                lines.append(
                    f"{v.record_id}  {v.lifecycle} {v.epistemic_state} v{v.version} "
                    f"[{v.sync_state}{note}]  {v.text}"
                )
        _emit(args, [dataclasses.asdict(v) for v in views], "\n".join(lines) or "No records.")
    return 0


def _forget(args: argparse.Namespace) -> int:
    if not args.permanent:
        raise CliError(
            "only permanent forgetting exists so far; run again with --permanent "
            "(it destroys the record's keys and cannot be undone)"
        )
    with _open(args) as agent:
        if not args.yes:
            answer = input(
                f"Permanently forget {args.record_id}? This cannot be undone. Type 'yes': "
            )
            if answer.strip().lower() != "yes":
                raise CliError(f"not confirmed; record {args.record_id} was not changed")
        result = agent.forget_permanently(args.record_id)
        _emit(
            args,
            dataclasses.asdict(result),
            "Permanently forgotten; it cannot be brought back.",
        )
    return 0


def _sync(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        report = agent.sync()
        text = (
            f"Pushed {report.pushed} (applied {report.applied}, duplicates {report.duplicates}, "
            f"refused {len(report.refused)}); pulled {report.pulled}; "
            f"shredded {len(report.shredded)}; acknowledged {len(report.acked)}"
        )
        _emit(args, dataclasses.asdict(report), text)
    return 0


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

    p = command("init", _init, "create an encrypted device database (and enroll)")
    p.add_argument("--name", required=True)
    p.add_argument("--cloud", default=None, help="cloud URL")
    p.add_argument("--code", default=None, help="one-time enrollment code")
    p = command("say", _say, "log what the user typed")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    p = command("remember", _remember, "keep one whole typed sentence")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    p = command("recall", _recall, "find remembered sentences by word")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=5)
    command("list", _list, "list records, including forgotten skeletons")
    p = command("forget", _forget, "forget a record permanently")
    p.add_argument("record_id")
    p.add_argument("--permanent", action="store_true", help="required: destroy its keys")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    command("sync", _sync, "push the queue, pull changes, acknowledge key destruction")
    return device


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memsync")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
