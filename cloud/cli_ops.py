"""``memsync cloud users`` and ``memsync cloud devices``: what the operator may list.

Invariants:
- Only ids, the names given at ``add-user`` and ``enroll``, times and counts are shown,
  read from the store's plain columns (``cloud.store.sql_ops.space_list`` and the
  devices view of ``GET /v1/devices``); never a record, an episode or a credential.
- ``devices`` without ``--user`` lists every space's devices, each line naming its
  space; with ``--user`` (a name or a space id) only that space's, and an unknown user
  is refused naming it (exit 1). ``--json`` prints one JSON object.
- An unreachable or missing database is one line and exit 2 (``cloud.cli_common.fail``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from cloud.cli_common import fail, service_of
from cloud.errors import CloudError
from cloud.store.sql_ops import SpaceListRow
from protocol.messages import DeviceStatus


def register_ops(commands: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    users = commands.add_parser(
        "users", help="list users: space id, name, created, devices, revoked, ended"
    )
    common(users)
    users.add_argument("--json", action="store_true", help="print JSON")
    users.set_defaults(func=cmd_users)

    devices = commands.add_parser(
        "devices", help="list devices: id, name, enrolled, last seen, revoked, wiped"
    )
    common(devices)
    devices.add_argument("--user", default=None, help="only this user's (name or space id)")
    devices.add_argument("--json", action="store_true", help="print JSON")
    devices.set_defaults(func=cmd_devices)


def _space_json(row: SpaceListRow) -> dict[str, Any]:
    return {
        "space_id": row.space_id,
        "name": row.name,
        "created_at": row.created_at.isoformat(),
        "devices": row.devices,
        "revoked_devices": row.revoked,
        "ended_at": row.ended_at.isoformat() if row.ended_at else None,
        "end_reason": row.end_reason,
    }


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def cmd_users(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service, service.store.session() as s:
            spaces = s.space_list()
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps({"users": [_space_json(r) for r in spaces]}))
        return 0
    if not spaces:
        print("no users")
        return 0
    head = ["SPACE", "NAME", "CREATED", "DEVICES", "REVOKED", "ENDED"]
    _table(
        [head]
        + [
            [
                r.space_id,
                r.name,
                r.created_at.isoformat(timespec="seconds"),
                str(r.devices),
                str(r.revoked),
                f"{r.ended_at.isoformat(timespec='seconds')} ({r.end_reason})"
                if r.ended_at
                else "-",
            ]
            for r in spaces
        ]
    )
    return 0


def _ended(row: SpaceListRow) -> str:
    if row.ended_at is None:
        return "-"
    return f"{row.ended_at.isoformat(timespec='seconds')} ({row.end_reason})"


# the columns of ``devices``: the wire fields of GET /v1/devices, in their order
DEVICE_FIELDS = tuple(DeviceStatus.model_fields)


def cmd_devices(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            if args.user is not None:
                space_ids = [service.find_space(args.user)]
            else:
                with service.store.session() as s:
                    space_ids = [r.space_id for r in s.space_list()]
            listed = [
                {"space_id": space_id, **d.model_dump(mode="json")}
                for space_id in space_ids
                for d in service.devices(space_id).devices
            ]
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps({"devices": listed}))
        return 0
    if not listed:
        print("no devices")
        return 0
    columns = ("space_id", *DEVICE_FIELDS)
    head = [c.removesuffix("_at").replace("_", " ").upper() for c in columns]
    _table([head] + [[_cell(d.get(c)) for c in columns] for d in listed])
    return 0


def _cell(value: object) -> str:
    if value is None:
        return "-"
    text = str(value)
    return text[:19] if len(text) >= 19 and text[4:5] == "-" and text[10:11] == "T" else text
