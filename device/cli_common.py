"""What every ``memsync device`` command module shares: reading passphrases, printing
an answer, the door to the agent.

Invariants: passphrases come from the environment or a prompt, never an argument (so
they stay out of shell history); every answer goes through ``emit``: JSON under
``--json``, else the sentence; a refusal the CLI itself makes is a ``CliError`` (one
line on stderr, exit 2). Nothing here imports the agent or the store: command modules
open a device only through their ``Door``, whose calls ``device.cli`` resolves when a
command runs (so tests can replace them).
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the agent and the store load when a command runs
    from device.agent import DeviceAgent
    from device.listing import Records
    from device.views import LocalResult, RecordView

Handler = Callable[[argparse.Namespace], int]
Command = Callable[..., Any]  # device.cli's ``command(name, handler, help, json_flag=)``


class CliError(Exception):
    pass


@dataclass(frozen=True, kw_only=True)
class Door:
    """How a command reaches its device and the user's desktop: open a device (or only
    its records), create one, wait for Ctrl-C, open a link in the browser."""

    open: Callable[[argparse.Namespace], DeviceAgent]
    read: Callable[[argparse.Namespace], Records]  # ``device.listing``: no agent
    create: Callable[[argparse.Namespace, str], DeviceAgent]
    wait_for_interrupt: Callable[[], None]
    open_browser: Callable[[str], object]


DoorHandler = Callable[[argparse.Namespace, Door], int]


def default_dir() -> Path:
    return Path(os.environ.get("MEMSYNC_DEVICE_DIR") or Path.home() / ".memsync" / "device")


def passphrase(confirm: bool = False) -> str:
    env = os.environ.get("MEMSYNC_PASSPHRASE")
    if env is not None:
        return env
    first = getpass.getpass("Device passphrase: ")
    if confirm and getpass.getpass("Repeat the passphrase: ") != first:
        raise CliError("the two passphrases differ; nothing was created")
    return first


def account_passphrase(prompt: str, *, required: bool) -> str | None:
    env = os.environ.get("MEMSYNC_ACCOUNT_PASSPHRASE")
    if env is not None:
        return env
    if not required and not sys.stdin.isatty():
        return None
    answer = getpass.getpass(prompt)
    return answer or (None if not required else answer)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


def show_result(args: argparse.Namespace, result: LocalResult) -> None:
    data = dataclasses.asdict(result)
    data["receipt"] = result.receipt.model_dump(mode="json") if result.receipt else None
    from protocol.operations import EffectKind  # lazily: a read-only command never needs it

    text = result.message
    created = result.receipt is not None and result.receipt.effect is EffectKind.CREATED
    if created or result.artifact_id:
        text += f" ({result.record_id or result.artifact_id}, pending sync)"
    emit(args, data, text)


def when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CliError(f"{text!r} is not an ISO time (e.g. 2026-09-21T08:30:00+00:00)") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def view_line(v: RecordView) -> str:
    if v.is_skeleton:
        return f"{v.record_id}  permanently forgotten at {v.forgotten_at}"
    flags = [v.lifecycle, f"v{v.version}", v.sync_state]
    if v.usage_restriction:
        flags.append(v.usage_restriction)
    if v.time_kind:
        flags.append(v.time_kind)
    if v.layer == "behaviour_rule":
        flags.append("behaviour rule")
    if v.background:
        flags.append("learned in the background")
    if v.device_only:
        flags.append("this device only")
    note = f" ({v.refusal_reason})" if v.refusal_reason else ""
    return f"{v.record_id}  [{', '.join(flags)}{note}]  {v.line or v.text}"


def show_views(args: argparse.Namespace, views: Sequence[RecordView], empty: str) -> None:
    lines = [view_line(v) for v in views]
    emit(args, [dataclasses.asdict(v) for v in views], "\n".join(lines) or empty)
