"""``memsync cloud account-status / delete-account / close / service-status /
enforce-closing``: the end of an account and the service's closing, as the operator runs
them (``cloud.account_end``, ``cloud.closing``), registered by ``cloud.cli``.

Invariants:
- ``delete-account`` destroys nothing without ``--yes``: without it, it names what would
  be destroyed (records in use, devices that must wipe) and exits 1.
- A time is ISO 8601 with a time zone (``--on``, ``--export-until``), read as UTC; a
  naive or malformed one is refused naming the flag, before the service is opened.
- A bad setting or a store that cannot be opened is one line and exit 2
  (``cloud.cli_common.fail``); ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from cloud.account_end import AccountEnd, EndReason
from cloud.cli_common import common, fail, service_of
from cloud.errors import CloudError
from protocol.messages import ServiceMode, ServiceStatus


def register_end(commands: Any) -> None:
    """The end of an account and the service's closing (``cloud.account_end``,
    ``cloud.closing``)."""
    status = commands.add_parser(
        "account-status",
        help="whether a user's account ended, and which devices have not wiped their copy",
    )
    common(status)
    status.add_argument("user", help="user name or space id (an ended account: its id)")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_account_status)

    delete = commands.add_parser(
        "delete-account",
        help="end a user's account: every key of its memory is destroyed (cannot be undone)",
    )
    common(delete)
    delete.add_argument("user", help="user name or space id")
    delete.add_argument("--yes", action="store_true", help="required: this cannot be undone")
    delete.add_argument("--json", action="store_true", help="print JSON")
    delete.set_defaults(func=cmd_delete_account)

    close = commands.add_parser(
        "close",
        help="announce the service's shutdown for a date (or --cancel it); export stays "
        "open until --export-until, then every account ends",
    )
    common(close)
    when = close.add_mutually_exclusive_group(required=True)
    when.add_argument("--on", help="when the service closes, ISO 8601 with a time zone")
    when.add_argument("--cancel", action="store_true", help="call off an announced closing")
    close.add_argument(
        "--export-until", default=None, help="until when export stays open (default: --on)"
    )
    close.add_argument("--json", action="store_true", help="print JSON")
    close.set_defaults(func=cmd_close)

    service_status = commands.add_parser(
        "service-status", help="the service's region and whether it is closing"
    )
    common(service_status)
    service_status.add_argument("--json", action="store_true", help="print JSON")
    service_status.set_defaults(func=cmd_service_status)

    enforce = commands.add_parser(
        "enforce-closing",
        help="once the service is closed (after --export-until), end every account now",
    )
    common(enforce)
    enforce.add_argument("--json", action="store_true", help="print JSON")
    enforce.set_defaults(func=cmd_enforce_closing)


def _end_json(end: AccountEnd) -> dict[str, Any]:
    return {
        "space_id": end.space_id,
        "ended": True,
        "ended_at": end.ended_at.isoformat(),
        "reason": end.reason.value,
        "keys_destroyed_at": end.keys_destroyed_at.isoformat() if end.keys_destroyed_at else None,
        "pending": [d.model_dump(mode="json") for d in end.pending],
    }


def _print_end(end: AccountEnd) -> None:
    destroyed = end.keys_destroyed_at.isoformat() if end.keys_destroyed_at else "not yet (retried)"
    print(f"space:           {end.space_id}")
    print(f"ended at:        {end.ended_at.isoformat()}")
    print(f"why:             {end.reason.value}")
    print(f"keys destroyed:  {destroyed}")
    if not end.pending:
        print("pending devices: none (every device confirmed it wiped its copy)")
        return
    print(f"pending devices: {len(end.pending)} (they wipe their copy when they next connect)")
    width = max(len(d.device_name) for d in end.pending)
    for device in end.pending:
        print(f"  {device.device_name:<{width}}  {device.device_id}")


def cmd_account_status(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            space_id = service.find_space(args.user)
            end = service.account_status(space_id)
    except CloudError as exc:
        return fail(exc)
    if end is None:
        if args.json:
            print(json.dumps({"space_id": space_id, "ended": False}))
        else:
            print(f"the account {args.user} ({space_id}) has not ended; its memory is in use")
        return 0
    if args.json:
        print(json.dumps(_end_json(end)))
    else:
        _print_end(end)
    return 0


def cmd_delete_account(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            space_id = service.find_space(args.user)
            if not args.yes:
                with service.store.session() as s:
                    records = len(s.live_records(space_id))
                    devices = len(s.pending_devices(space_id))
                return fail(
                    CloudError(
                        f"deleting the account {args.user} ({space_id}) destroys every key of "
                        f"its memory ({records} record(s) in use, every episode and derived "
                        f"item) and cannot be undone; its {devices} device(s) wipe their "
                        "copies when they next connect. Run again with --yes"
                    )
                )
            end = service.end_space(space_id, EndReason.DELETED)
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps(_end_json(end)))
    else:
        print(f"the account {args.user} ended: every key of its memory is destroyed")
        _print_end(end)
    return 0


def _when(flag: str, value: str) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{flag} {value!r}: not an ISO 8601 time ({exc})") from exc
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{flag} {value!r}: give a time zone (e.g. 2027-03-01T00:00:00Z)")
    return at.astimezone(UTC)


def _print_status(status: ServiceStatus) -> None:
    print(f"region:       {status.region}")
    print(f"mode:         {status.mode.value}")
    if status.closes_at is not None:
        announced = status.announced_at.isoformat() if status.announced_at else "?"
        export_until = status.export_until or status.closes_at
        print(f"announced at: {announced}")
        print(f"closes at:    {status.closes_at.isoformat()}")
        print(f"export until: {export_until.isoformat()}")


def cmd_close(args: argparse.Namespace) -> int:
    try:
        closes_at = None if args.cancel else _when("--on", args.on)
        export_until = (
            None if args.export_until is None else _when("--export-until", args.export_until)
        )
        if args.cancel and export_until is not None:
            raise ValueError("--export-until goes with --on, not with --cancel")
    except ValueError as exc:
        return fail(exc)
    try:
        with service_of(args) as service:
            if closes_at is None:
                status = service.cancel_closing()
            else:
                status = service.announce_closing(closes_at, export_until)
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(status.model_dump_json())
        return 0
    if closes_at is None:
        print("the closing of the service is cancelled")
    else:
        print(
            "the service is closing: everything works until it closes; export stays open "
            "until the export date; then every account ends and its keys are destroyed"
        )
    _print_status(status)
    return 0


def cmd_service_status(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            status = service.service_status()
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(status.model_dump_json())
    else:
        _print_status(status)
    return 0


def cmd_enforce_closing(args: argparse.Namespace) -> int:
    try:
        # a service ends every account at start-up once closed; this runs it again
        with service_of(args) as service:
            service.enforce_closing()
            status = service.service_status()
            with service.store.session() as s:
                left = len(s.space_ids())
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps({"mode": status.mode.value, "open_accounts": left}))
        return 0
    if status.mode is not ServiceMode.CLOSED:
        print(f"the service is {status.mode.value}, not closed: no account was ended")
    else:
        print(f"the service is closed: every account has ended ({left} still open)")
    return 0
