"""``memsync device forget`` and ``pending``: forgetting permanently, and the forgets
some device of the account has not confirmed.

Invariants: ``forget`` is permanent and asks "This cannot be undone. Type 'yes'" unless
``--yes``; for one record the prompt is preceded by its words and the account's other
devices that may still hold it (offline: said so); a whole area or all memory needs the
account passphrase; records holding the same words are named and forgotten only when
asked (``--same-words`` or a second "yes").
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from device.cli_common import (
    CliError,
    Command,
    Door,
    DoorHandler,
    Handler,
    account_passphrase,
    emit,
    show_result,
)
from device.errors import DeviceError
from protocol.model import LifeArea

if TYPE_CHECKING:
    from device.agent import DeviceAgent
    from device.views import RecordView


def _confirm_permanent(args: argparse.Namespace, what: str) -> None:
    if args.yes:
        return
    answer = input(f"Permanently forget {what}? This cannot be undone. Type 'yes': ")
    if answer.strip().lower() != "yes":
        raise CliError(f"not confirmed; {what} was not changed")


def _same_words(view: RecordView | None, views: Sequence[RecordView]) -> list[RecordView]:
    """The other readable, unforgotten records whose words are the named record's
    (``protocol.export.importing.same_words``: case, spacing, final stop aside)."""
    from protocol.export.importing import same_words  # only a forget needs the import code

    if view is None or not view.text:
        return []
    words = same_words(view.text)
    return [
        v
        for v in views
        if v.record_id != view.record_id
        and v.text
        and not v.is_skeleton
        and same_words(v.text) == words
    ]


def _forget_preview(agent: DeviceAgent, record_id: str, view: RecordView | None) -> str:
    """What a permanent forget would destroy: the words, and the other devices of the
    account that may hold them (asked of the cloud; offline, said so)."""
    words = (view.text or "(no readable words)") if view is not None else "(not on this device)"
    lines = [f"{record_id}: {words[:300]!r}" if view and view.text else f"{record_id}: {words}"]
    if agent.device_id is None:
        lines.append("This device is not enrolled: no other device holds it.")
        return "\n".join(lines)
    try:
        others = [
            d.name
            for d in agent.devices()
            if d.device_id != agent.device_id and d.revoked_at is None and d.wiped_at is None
        ]
    except DeviceError:
        lines.append("The cloud cannot be reached now: other devices drop it when they sync.")
        return "\n".join(lines)
    if others:
        lines.append(f"Other devices that may hold it until they sync: {', '.join(others)}.")
    else:
        lines.append("No other device of this account holds it.")
    return "\n".join(lines)


def _forget(args: argparse.Namespace, door: Door) -> int:
    if args.area or args.all:
        if args.record_id:
            raise CliError("give a record id, or --area/--all, not both")
        area = LifeArea(args.area) if args.area else None
        what = f"all memory in {area.value}" if area else "ALL memory"
        with door.open(args) as agent:
            _confirm_permanent(args, what)
            account = account_passphrase("Account passphrase: ", required=True)
            show_result(args, agent.forget_area(area, account or ""))
        return 0
    if not args.record_id:
        raise CliError("name a record id, or --area AREA, or --all")
    if not args.permanent:
        raise CliError(
            "forgetting one record is permanent: run again with --permanent (it destroys "
            "the record's keys and cannot be undone); to stop using it, use dont-use"
        )
    with door.open(args) as agent:
        views = agent.list_records()
        view = next((v for v in views if v.record_id == args.record_id), None)
        twins = _same_words(view, views)
        if not args.yes:
            print(_forget_preview(agent, args.record_id, view))
            if twins:
                print(f"{len(twins)} other record(s) hold the same words:")
                print("\n".join(f"  {v.record_id}: {(v.text or '')[:120]!r}" for v in twins))
        _confirm_permanent(args, args.record_id)
        also = [v.record_id for v in twins] if args.same_words else []
        if twins and not args.yes and not args.same_words:
            answer = input(f"Forget those {len(twins)} too? Type 'yes' (anything else: no): ")
            also = [v.record_id for v in twins] if answer.strip().lower() == "yes" else []
        show_result(args, agent.forget_permanently(args.record_id))
        for other in also:
            show_result(args, agent.forget_permanently(other))
        if twins and not also and not args.json:
            print(f"Kept {len(twins)} record(s) with the same words: {twins[0].record_id} ...")
    return 0


def _pending(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        forgets = agent.pending_forgets()
    data = [f.model_dump(mode="json") for f in forgets]
    lines = [
        f"{f.record_id or 'all memory'} (forgotten {f.forgotten_at:%Y-%m-%d %H:%M} UTC): "
        f"still on {', '.join(d.device_name for d in f.pending)}"
        for f in forgets
    ]
    emit(args, data, "\n".join(lines) or "No forget is pending: every device has confirmed.")
    return 0


def register(command: Command, door: Door) -> None:
    """Add these commands to the ``device`` group (``device.cli.register``)."""

    def bind(handler: DoorHandler) -> Handler:
        return lambda args: handler(args, door)

    areas = [a.value for a in LifeArea]
    p = command("forget", bind(_forget), "forget a record, a life area or all memory permanently")
    p.add_argument("record_id", nargs="?")
    p.add_argument("--permanent", action="store_true", help="required for one record")
    p.add_argument("--area", default=None, choices=areas, help="forget a whole life area")
    p.add_argument("--all", action="store_true", help="forget all memory")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--same-words",
        action="store_true",
        help="also forget the other records holding the same words",
    )
    p = command("pending", bind(_pending), "forgets some device of the account has not confirmed")
