"""``memsync device`` commands that read memory: list, know, rules, learned, waiting,
recall, explain, history, as-of and questions.

Invariants: they only read (``recall --temporary`` and ``recall --cloud`` aside, which
write nothing either); every line is labelled as the agent's views label it; ``waiting``
says in words why each item waits; every command takes ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from device.cli_common import (
    Command,
    Door,
    DoorHandler,
    Handler,
    emit,
    show_views,
    view_line,
    when,
)
from device.memory_cli import _temporary
from protocol.model import LifeArea, Sensitivity

if TYPE_CHECKING:
    from device.views import RecallHit


def _hit_lines(hits: Sequence[RecallHit]) -> str:
    return (
        "\n".join(
            f"{h.record_id}  {h.line}" + ("  (from the cloud)" if h.from_cloud else "")
            for h in hits
        )
        or "Nothing found."
    )


def _rules(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        show_views(args, agent.rules(), "No behaviour rules.")
    return 0


def _learned(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        show_views(args, agent.recently_learned(args.days), "Nothing learned recently.")
    return 0


def _waiting(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        views = agent.waiting_for_confirmation()
        lines = []
        for v in views:
            lines.append(view_line(v))
            lines += [f"  waits because: {why}" for why in v.waits_because]
            if v.confirm_warning is not None:
                lines.append(
                    f"  confirming it takes a second step: `confirm {v.record_id}` shows "
                    "where it comes from and asks again"
                )
        emit(args, [dataclasses.asdict(v) for v in views],
              "\n".join(lines) or "Nothing is waiting for you.")  # fmt: skip
    return 0


def _recall(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        _temporary(args, agent)
        answer = (agent.retrieve_from_cloud if args.cloud else agent.retrieve)(
            args.query,
            limit=args.limit,
            area=LifeArea(args.area) if args.area else None,
            project=args.project,
            personalized=not args.no_personalization,
            factual=args.factual,
            consents=[Sensitivity(c) for c in args.consent],
        )
        text = _hit_lines(answer.hits)
        if args.block and answer.block:
            text = answer.block
        emit(
            args,
            {
                "query": args.query,
                "scope": answer.scope,
                "note": answer.note,
                "factual": answer.factual,
                "hits": [dataclasses.asdict(h) for h in answer.hits],
                "block": answer.block,
            },
            f"{text}\n({answer.note})",
        )
    return 0


def _list(args: argparse.Namespace, door: Door) -> int:
    with contextlib.closing(door.read(args)) as device:
        show_views(args, device.list_records(), "No records.")
    return 0


def _know(args: argparse.Namespace, door: Door) -> int:
    with contextlib.closing(door.read(args)) as device:
        show_views(args, device.what_do_you_know(), "I don't know anything about you yet.")
    return 0


def _as_of(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        show_views(args, agent.as_of(when(args.time)), "Memory held nothing then.")
    return 0


def _history(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        versions = agent.record_history(args.record_id)
        lines = [f"v{v.version}  {v.recorded_at}  [{v.note}]  {v.text}" for v in versions]
        emit(
            args,
            [dataclasses.asdict(v) for v in versions],
            "\n".join(lines) or f"{args.record_id} has no readable versions.",
        )
    return 0


def _explain(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        sentence = agent.explain(args.record_id)
        emit(args, {"record_id": args.record_id, "explanation": sentence}, sentence)
    return 0


def _questions(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        due = agent.due_questions()
        lines = [f"{rid}  {question}" for rid, question in due]
        emit(
            args,
            [{"record_id": rid, "question": q} for rid, q in due],
            "\n".join(lines) or "No questions.",
        )
    return 0


def register(command: Command, door: Door) -> None:
    """Add these commands to the ``device`` group (``device.cli.register``)."""

    def bind(handler: DoorHandler) -> Handler:
        return lambda args: handler(args, door)

    areas = [a.value for a in LifeArea]
    command("rules", bind(_rules), "behaviour rules: proposed, accepted, undone")
    p = command(
        "learned", bind(_learned), '"recently learned": what background consolidation wrote'
    )
    p.add_argument("--days", type=int, default=7)
    command("waiting", bind(_waiting), "candidates waiting for your confirmation")
    p = command("recall", bind(_recall), "retrieve memory for a question, by meaning, offline")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--area", default=None, choices=areas)
    p.add_argument("--project", default=None)
    p.add_argument("--no-personalization", action="store_true", help="retrieve no memory")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument(
        "--factual",
        dest="factual",
        action="store_true",
        default=None,
        help="a question about the world: leave your opinions out",
    )
    kind.add_argument(
        "--personal",
        dest="factual",
        action="store_false",
        help="a question about you: opinions may be used",
    )
    p.add_argument(
        "--consent",
        action="append",
        default=[],
        choices=[s.value for s in Sensitivity if s is not Sensitivity.NORMAL],
        help="allow a sensitive class for this answer (repeatable)",
    )
    p.add_argument("--block", action="store_true", help="print the marked data block")
    p.add_argument("--temporary", action="store_true", help="temporary mode: write nothing")
    p.add_argument(
        "--cloud",
        action="store_true",
        help="online: search the whole space in the cloud, not only this device",
    )
    command("list", bind(_list), "list records, including forgotten skeletons")
    command("know", bind(_know), "what do you know about me? (everything, inferences included)")
    p = command("explain", bind(_explain), "how do you know this?")
    p.add_argument("record_id")
    p = command("history", bind(_history), "a record's version chain")
    p.add_argument("record_id")
    p = command("as-of", bind(_as_of), "what memory said at a time")
    p.add_argument("time", help="ISO time")
    command("questions", bind(_questions), '"Still doing this?" questions that are due')
