"""``memsync device`` commands of the device's account: init, enroll, account-key and
delete-account.

Invariants: a refused enrollment at ``init`` removes the database ``init`` just made;
the account passphrase comes from ``$MEMSYNC_ACCOUNT_PASSPHRASE`` or a prompt (the
current one, when changing it, from ``$MEMSYNC_CURRENT_ACCOUNT_PASSPHRASE``,
``--current-from-stdin`` or a prompt), never an argument; ``account-key set`` sets a key
when none is, checks the one set, takes one changed on another device (the cloud
confirms it), or changes it (the current passphrase proves it); ``delete-account``
requires ``--yes`` and the account passphrase.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from device.cli_common import (
    CliError,
    Command,
    Door,
    DoorHandler,
    Handler,
    account_passphrase,
    emit,
    passphrase,
)
from device.errors import DeviceError, Refused
from protocol.errors import ProtocolError

if TYPE_CHECKING:
    from device.agent import DeviceAgent


def _remove_database(directory: Path) -> None:
    from device.db import DB_FILENAME, KDF_SUFFIX

    for suffix in ("", "-wal", "-shm", KDF_SUFFIX):
        (directory / (DB_FILENAME + suffix)).unlink(missing_ok=True)


def _enroll_with(agent: DeviceAgent, code: str, cloud: str | None) -> tuple[str, str]:
    """Enroll, then register the account key if a passphrase is given; returns the device
    id and a note on the account key (a failed registration leaves the enrollment)."""
    account = account_passphrase(
        "Account passphrase (for export and forgetting whole areas; empty to skip): ",
        required=False,
    )
    device_id = agent.enroll(code, cloud)
    if not account:
        return device_id, (
            "; no account key set (needed for export and forgetting whole areas): "
            "memsync device account-key set"
        )
    try:
        agent.register_account(account)
    except (DeviceError, ProtocolError) as exc:
        return device_id, f"; the account key was not set ({exc}): memsync device account-key set"
    return device_id, "; account key set"


def _init(args: argparse.Namespace, door: Door) -> int:
    directory = Path(args.dir)
    agent = door.create(args, passphrase(confirm=True))
    note = ""
    with agent:
        device_id = None
        if args.code:
            try:
                device_id, note = _enroll_with(agent, args.code, None)
            except BaseException as exc:
                agent.close()
                _remove_database(directory)  # a refused enrollment leaves nothing behind
                if isinstance(exc, DeviceError | ProtocolError):
                    raise CliError(
                        f"{exc}; no device was created in {directory} (run init again "
                        "with a valid code)"
                    ) from exc
                raise
        data = {
            "directory": str(agent.directory),
            "device_id": device_id,
            "space_id": agent.space_id,
            "account_key_set": agent.account_key is not None,
        }
        text = f"Created device {args.name!r} in {agent.directory}"
        if device_id:
            text += f"; enrolled as {device_id} in space {agent.space_id}{note}"
        emit(args, data, text)
    return 0


def _enroll(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        device_id, note = _enroll_with(agent, args.code, args.cloud)
        data = {
            "device_id": device_id,
            "space_id": agent.space_id,
            "account_key_set": agent.account_key is not None,
        }
        emit(args, data, f"Enrolled as {device_id} in space {agent.space_id}{note}")
    return 0


CURRENT_ENV = "MEMSYNC_CURRENT_ACCOUNT_PASSPHRASE"
CURRENT_FLAG = "--current-from-stdin"
HOW_TO_CHANGE = (
    f"to change it, give the current one too ({CURRENT_FLAG}, ${CURRENT_ENV}, or at the "
    "prompt of a terminal)"
)
AFTER_A_CHANGE = (
    "The old passphrase no longer works, here or on any device. On each other device of "
    "this account run 'memsync device account-key set' with the new one (until then the "
    "cloud refuses what the old one proves there). Export packages written before stay "
    "readable as they are (signed by the old key); importing one back needs --unsigned-ok."
)


def _given_current(args: argparse.Namespace) -> str | None:
    """The current account passphrase when a script hands it in: the first line of
    stdin (``--current-from-stdin``) or ``$MEMSYNC_CURRENT_ACCOUNT_PASSPHRASE``."""
    if args.current_from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return os.environ.get(CURRENT_ENV)


def _asked_current(new: str) -> str:
    """The current passphrase asked at a terminal, once the new one is known to be new."""
    current = getpass.getpass("Current account passphrase (to change it): ")
    if getpass.getpass("Repeat the new account passphrase: ") != new:
        raise CliError("the two new account passphrases differ; nothing was changed")
    return current


def _account_key_set(args: argparse.Namespace, door: Door) -> int:
    """Set the account key (none set), check it (the same passphrase), take the one
    changed on another device (the cloud holds it), or change it (the current one given)."""
    with door.open(args) as agent:
        if agent.account_key is None:
            account = account_passphrase("Account passphrase: ", required=True)
            agent.register_account(account or "")
            data = {"space_id": agent.space_id, "account_key_set": True, "changed": True}
            emit(args, {**data, "outcome": "set"}, f"Account key set for space {agent.space_id}")
            return 0
        new = account_passphrase("Account passphrase (the one set, or a new one): ", required=True)
        new = new or ""
        current = _given_current(args)
        if current is None:
            try:
                learned = agent.learn_account_key(new)
            except Refused as exc:
                if not sys.stdin.isatty():
                    raise CliError(f"{exc}; {HOW_TO_CHANGE}") from exc
                current = _asked_current(new)
            else:
                data = {"space_id": agent.space_id, "account_key_set": True, "changed": learned}
                text = (
                    f"This device now uses the account passphrase changed on another device "
                    f"(space {agent.space_id})"
                    if learned
                    else "The account passphrase matches the account key already set; "
                    "nothing changed"
                )
                emit(args, {**data, "outcome": "learned" if learned else "unchanged"}, text)
                return 0
        change = agent.change_account_passphrase(current, new)
        data = {
            "space_id": change.space_id,
            "account_key_set": True,
            "changed": True,
            "outcome": "changed",
            "request_id": change.request_id,
        }
        text = f"The account passphrase of space {change.space_id} was changed. {AFTER_A_CHANGE}"
        emit(args, data, text)
    return 0


def _delete_account(args: argparse.Namespace, door: Door) -> int:
    if not args.yes:
        raise CliError(
            "deleting the account destroys all of its memory, in the cloud and on every "
            "device (changes not synced yet included), and cannot be undone; run again "
            "with --yes"
        )
    with door.open(args) as agent:
        account = account_passphrase("Account passphrase: ", required=True)
        result = agent.delete_account(account or "")
        told = "the cloud was told" if result.confirmed else "the cloud is told at the next call"
        text = (
            f"The account (space {result.space_id}) was deleted at {result.ended_at}: every "
            f"key of its memory is destroyed. This device wiped its copy ({result.wiped_records} "
            f"record(s), {result.wiped_queued} change(s) never synced) and {told}."
        )
        if result.pending:
            names = ", ".join(f"{name} ({device_id})" for device_id, name in result.pending)
            text += f"\nStill to wipe their copy when they next connect: {names}"
        emit(args, dataclasses.asdict(result), text)
    return 0


def register(command: Command, door: Door) -> None:
    """Add these commands to the ``device`` group (``device.cli.register``)."""

    def bind(handler: DoorHandler) -> Handler:
        return lambda args: handler(args, door)

    p = command("init", bind(_init), "create an encrypted device database (and enroll)")
    p.add_argument("--name", required=True)
    p.add_argument("--cloud", default=None, help="cloud URL")
    p.add_argument("--code", default=None, help="one-time enrollment code")
    p = command("enroll", bind(_enroll), "enroll this device with a one-time code (init made it)")
    p.add_argument("--code", required=True, help="one-time enrollment code")
    p.add_argument("--cloud", default=None, help="cloud URL (default: the one given at init)")
    p = command(
        "account-key", bind(_account_key_set), "set, check or change the account passphrase's key"
    )
    p.add_argument(
        "action",
        choices=["set"],
        help="set: register it; one already set is checked, or changed with the current one",
    )
    p.add_argument(
        CURRENT_FLAG,
        dest="current_from_stdin",
        action="store_true",
        help=f"changing it: the current passphrase is stdin's first line (or ${CURRENT_ENV})",
    )
    p = command(
        "delete-account",
        bind(_delete_account),
        "delete the whole account: every key of its memory is destroyed, on every device",
    )
    p.add_argument("--yes", action="store_true", help="required: this cannot be undone")
