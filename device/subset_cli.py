"""``memsync device subset | pin | unpin | reindex``: see and change what this device keeps.

The subset is chosen by the cloud (``protocol.subset``); these commands read it and
change its rules, budget and pins there. What enters and leaves arrives with the next
``memsync device sync``: a record that leaves is removed from this device (keys and
every derived row) but stays in the cloud, never forgotten.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.model import LifeArea
from protocol.subset import RULE_FLAGS, SubsetBudget, SubsetPolicy, SubsetRules

if TYPE_CHECKING:
    from device.agent import DeviceAgent

Opener = Callable[[argparse.Namespace], "DeviceAgent"]
Emit = Callable[[argparse.Namespace, Any, str], None]


def _describe(view: Any) -> str:
    from device.subset import describe  # the store and the shredder load when a command runs

    return describe(view)


_RULE_NUMBERS = ("upcoming_days", "frequent_uses", "recent_days")


def _changed(args: argparse.Namespace, policy: SubsetPolicy) -> SubsetPolicy | None:
    rules: dict[str, Any] = {}
    for name in RULE_FLAGS:
        value = getattr(args, name)
        if value is not None:
            rules[name] = value
    for name in _RULE_NUMBERS:
        value = getattr(args, name)
        if value is not None:
            rules[name] = value
    if args.all_areas:
        rules["areas"] = None
    elif args.area:
        rules["areas"] = [LifeArea(a) for a in args.area]
    budget: dict[str, Any] = {}
    if args.max_records is not None:
        budget["max_records"] = args.max_records
    if args.max_bytes is not None:
        budget["max_bytes"] = args.max_bytes
    if not rules and not budget:
        return None
    return SubsetPolicy(
        rules=SubsetRules.model_validate({**policy.rules.model_dump(), **rules}),
        budget=SubsetBudget.model_validate({**policy.budget.model_dump(), **budget}),
    )


def register(command: Callable[..., Any], open_agent: Opener, emit: Emit) -> None:
    """Add the subset commands through ``device.cli``'s ``command`` helper."""

    def subset(args: argparse.Namespace) -> int:
        with open_agent(args) as agent:
            view = agent.subset()
            policy = _changed(args, view.policy)
            if policy is not None:
                view = agent.set_subset_policy(policy)
            emit(args, view.model_dump(mode="json"), _describe(view))
        return 0

    def pin(pinned: bool) -> Callable[[argparse.Namespace], int]:
        def run(args: argparse.Namespace) -> int:
            with open_agent(args) as agent:
                view = agent.pin(args.record_id, pinned=pinned)
                said = "pinned to" if pinned else "unpinned from"
                emit(
                    args,
                    view.model_dump(mode="json"),
                    f"{args.record_id} {said} this device; it arrives or leaves at the next "
                    f"sync.\n{_describe(view)}",
                )
            return 0

        return run

    def reindex(args: argparse.Namespace) -> int:
        with open_agent(args) as agent:
            n = agent.rebuild_vectors()
            emit(args, {"rebuilt": n}, f"Rebuilt {n} vector(s) with the current model.")
        return 0

    p = command("subset", subset, "what this device keeps: show it, or change rules and budget")
    p.add_argument("--max-records", type=int, default=None)
    p.add_argument("--max-bytes", type=int, default=None)
    for name in RULE_FLAGS:
        flag = name.replace("_", "-")
        group = p.add_mutually_exclusive_group()
        group.add_argument(f"--{flag}", dest=name, action="store_true", default=None)
        group.add_argument(f"--no-{flag}", dest=name, action="store_false")
    for name in _RULE_NUMBERS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=None)
    areas = p.add_mutually_exclusive_group()
    areas.add_argument(
        "--area",
        action="append",
        default=[],
        choices=[a.value for a in LifeArea],
        help="an area this device is for (repeatable)",
    )
    areas.add_argument("--all-areas", action="store_true", help="the device is for every area")
    p = command("pin", pin(True), "keep a record on this device whatever the rules say")
    p.add_argument("record_id")
    p = command("unpin", pin(False), "let the rules decide again for a pinned record")
    p.add_argument("record_id")
    command("reindex", reindex, "rebuild vectors an older embedding model made")
