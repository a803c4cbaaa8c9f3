"""``memsync device`` commands that write memory: say, end-session, ingest, observe,
import, keep-on-device, remember, correct, dont-use, use-again, only-use-for, confirm,
still, project and rule.

Invariants: every write prints the sentence its receipt gives (``cli_common.result``);
``confirm`` of words that are not the user's (a source, an import) or read as an
instruction prints the source and a plain warning and confirms only after a second step
(typing ``confirm``, or ``--from-source-ok``), otherwise exits 2 with nothing changed;
``keep-on-device`` warns that losing the device loses the class, and asks.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from device.cli_common import (
    CliError,
    Command,
    Door,
    DoorHandler,
    Handler,
    emit,
    show_result,
    when,
)
from protocol.model import ContentType, LifeArea, Sensitivity, TimeKind
from protocol.provenance import EXTERNAL_MEDIA

if TYPE_CHECKING:
    from device.agent import DeviceAgent


DEVICE_ONLY_WARNING = (
    "Records in {cls} will be kept ONLY on this device. They are never sent to the cloud, "
    "not even encrypted, and have no backup: if you lose this device, you lose them."
)


FROM_SOURCE_FLAG = "--from-source-ok"


SECOND_STEP_WORD = "confirm"


def _temporary(args: argparse.Namespace, agent: DeviceAgent) -> None:
    if getattr(args, "temporary", False):
        agent.set_temporary_mode(True)


def _record_command(method: str) -> DoorHandler:
    def run(args: argparse.Namespace, door: Door) -> int:
        with door.open(args) as agent:
            show_result(args, getattr(agent, method)(args.record_id))
        return 0

    return run


def _say(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        if args.temporary:
            emit(args, {"episode_id": None, "temporary": True},
                  "Temporary mode: nothing was logged or written.")  # fmt: skip
            return 0
        said = agent.say_detected(
            args.text,
            args.conversation,
            sensitivity=Sensitivity(args.sensitivity) if args.sensitivity else None,
        )
        lines = [f"Logged episode {said.episode_id}"]
        for s in said.sentences:
            if s.candidate:
                sensitive = "" if s.sensitivity == "normal" else f", sensitive: {s.sensitivity}"
                lines.append(
                    f"  memory candidate ({s.content_type}, {s.time_kind}{sensitive}, "
                    f"score {s.score:.2f}): {s.text}"
                )
            else:
                lines.append(f"  not a candidate (score {s.score:.2f}): {s.text}")
        if said.device_only:
            lines.append("  kept only on this device: it is never sent to the cloud")
        lines.append("Nothing was written as a memory yet; candidates are consolidated in the "
                     "background (or say `remember` to keep a sentence now).")  # fmt: skip
        data = {
            "episode_id": said.episode_id,
            "device_only": said.device_only,
            "model_id": said.model_id,
            "sentences": [dataclasses.asdict(s) for s in said.sentences],
        }
        emit(args, data, "\n".join(lines))
    return 0


def _end_session(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        results = agent.end_session(args.conversation)
        local = results[1:]
        text = f"Conversation {args.conversation!r} ended; its candidates will be consolidated."
        if local:
            text += f" {len(local)} kept on this device became candidates for you to confirm."
        emit(args, {"op_ids": [r.op_id for r in results]}, text)
    return 0


def _ingest(args: argparse.Namespace, door: Door) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    with door.open(args) as agent:
        episode_id = agent.ingest(text, medium=args.medium, source=args.source)
        emit(
            args,
            {"episode_id": episode_id},
            f"Logged {args.medium.replace('_', ' ')} from {args.source} as episode {episode_id}; "
            "it can only become candidates, never a rule or an instruction.",
        )
    return 0


def _observe(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        episode_id = agent.observe(args.subject, args.value, source=args.source)
        emit(args, {"episode_id": episode_id}, f"Logged behaviour event {episode_id}")
    return 0


def _import(args: argparse.Namespace, door: Door) -> int:
    path = Path(args.file)
    from device.importing import ORIGIN_THIS_ACCOUNT, looks_like_package

    if not path.is_file() or looks_like_package(path):  # a missing file: refused by name
        with door.open(args) as agent:
            report = agent.import_package(
                path,
                include_sensitive=not args.without_sensitive,
                allow_unsigned=args.unsigned_ok,
            )
        skipped = ", ".join(f"{n} {what}" for what, n in report.not_imported) or "nothing"
        lines = [
            f"Imported {path} as a memsync export package ({report.export_id}): "
            f"{len(report.record_ids)} record(s) as candidates: imported, not verified; "
            f"{len(report.episode_ids)} episode(s) logged as imports.",
            f"Not imported (not memory content): {skipped}.",
        ]
        if report.device_only:
            lines.append(f"{len(report.device_only)} record(s) kept only on this device.")
        if report.origin != ORIGIN_THIS_ACCOUNT:
            lines.append(f"The package is {report.origin}: imported from elsewhere, as asked.")
        data = dataclasses.asdict(report)
        emit(args, data, "\n".join(lines))
        return 0
    text = path.read_text(encoding="utf-8")
    with door.open(args) as agent:
        results = agent.import_text(text, source=args.source or path.name)
        emit(
            args,
            {"kind": "text", "record_ids": [r.record_id for r in results]},
            f"Imported {path} as a text file: {len(results)} statement(s) as candidates: "
            "imported, not verified.",
        )
    return 0


def _keep_on_device(args: argparse.Namespace, door: Door) -> int:
    cls = Sensitivity(args.sensitivity)
    warning = DEVICE_ONLY_WARNING.format(cls=cls.value.replace("_", " "))
    if not args.yes:
        print(warning)
        if input("Keep them only here? [y/N] ").strip().lower() not in ("y", "yes"):
            raise CliError("nothing was changed")
    with door.open(args) as agent:
        agent.keep_on_device(cls)
        emit(args, {"device_only": sorted(c.value for c in agent.device_only_classes())},
              warning)  # fmt: skip
    return 0


def _rule(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        if args.action == "revise":
            if not args.text:
                raise CliError("revise needs the rule's new words")
            result = agent.revise_rule(args.record_id, args.text)
        else:
            result = getattr(agent, f"{args.action}_rule")(args.record_id)
        show_result(args, result)
    return 0


def _confirm(args: argparse.Namespace, door: Door) -> int:
    """Confirm a candidate; one whose words are not the user's (or read as an
    instruction) first shows its source and the warning and asks again, unless
    ``--from-source-ok``."""
    with door.open(args) as agent:
        view = next((v for v in agent.what_do_you_know() if v.record_id == args.record_id), None)
        if view is not None and view.confirm_warning is not None and view.lifecycle == "candidate":
            lines = [f"{args.record_id}: {view.line or view.text}"]
            if view.source:
                lines.append(f"Source: {view.source}")
            if view.source_reference:
                lines.append(f"Full reference: {view.source_reference}")
            lines.append(view.confirm_warning)
            print("\n".join(lines), file=sys.stderr if args.json else sys.stdout)
            if not args.from_source_ok:
                where = f" from {view.source}" if view.source else ""
                refusal = (
                    f"not confirmed; {args.record_id} was not changed (to confirm it{where}, "
                    f"type '{SECOND_STEP_WORD}' at the prompt or run again with "
                    f"{FROM_SOURCE_FLAG})"
                )
                try:
                    answer = input(f"Confirm it{where}? Type '{SECOND_STEP_WORD}': ")
                except EOFError:
                    raise CliError(refusal) from None
                if answer.strip().lower() != SECOND_STEP_WORD:
                    raise CliError(refusal)
        show_result(args, agent.confirm(args.record_id))
    return 0


def _remember(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        _temporary(args, agent)
        areas = [LifeArea(a) for a in args.area] or [LifeArea.GENERAL]
        result = agent.remember(
            args.text,
            args.conversation,
            content_type=ContentType(args.type) if args.type else None,
            time_kind=TimeKind(args.time_kind),
            life_areas=areas,
            project=args.project,
            sensitivity=Sensitivity(args.sensitivity),
            subject=args.subject,
            valid_until=when(args.valid_until) if args.valid_until else None,
        )
        show_result(args, result)
    return 0


def _correct(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        show_result(args, agent.correct(args.record_id, args.text, args.conversation))
    return 0


def _only_use_for(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        area = LifeArea(args.area) if args.area else None
        show_result(args, agent.restrict_usage(args.record_id, area=area, project=args.project))
    return 0


def _still(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        show_result(args, agent.reaffirm(args.record_id, still_true=args.yes_still))
    return 0


def _project(args: argparse.Namespace, door: Door) -> int:
    with door.open(args) as agent:
        show_result(args, agent.set_project(args.name, open=args.open))
    return 0


def register(command: Command, door: Door) -> None:
    """Add these commands to the ``device`` group (``device.cli.register``)."""

    def bind(handler: DoorHandler) -> Handler:
        return lambda args: handler(args, door)

    areas = [a.value for a in LifeArea]
    sensitive = [s.value for s in Sensitivity if s is not Sensitivity.NORMAL]
    p = command("say", bind(_say), "log what the user typed; the detector marks memory candidates")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    p.add_argument("--sensitivity", default=None, choices=sensitive, help="a class you know")
    p.add_argument("--temporary", action="store_true", help="temporary mode: write nothing")
    p = command(
        "end-session", bind(_end_session), "a conversation ended: consolidate its candidates"
    )
    p.add_argument("--conversation", required=True)
    p = command("ingest", bind(_ingest), "log external content (it only ever becomes candidates)")
    p.add_argument("text", help="the content, or - to read it from stdin")
    p.add_argument("--medium", required=True, choices=list(EXTERNAL_MEDIA))
    p.add_argument("--source", required=True, help="where it came from (URL, message id)")
    p = command("observe", bind(_observe), "log one behaviour event from an app")
    p.add_argument("subject", help='what it is about, e.g. "morning coffee order"')
    p.add_argument("value", help='what happened, e.g. "americano"')
    p.add_argument("--source", required=True, help="the app or service that saw it")
    p = command(
        "import", bind(_import),
        "import a text file or a memsync export package: candidates, imported, not verified",
    )  # fmt: skip
    p.add_argument("file")
    p.add_argument("--source", default=None, help="a text file's source name")
    p.add_argument(
        "--unsigned-ok", action="store_true",
        help="import a package not signed by this account (unsigned or from elsewhere)",
    )  # fmt: skip
    p.add_argument(
        "--without-sensitive", action="store_true",
        help="a package: leave its sensitive classes out",
    )  # fmt: skip
    p = command(
        "keep-on-device", bind(_keep_on_device), "keep a sensitive class only on this device"
    )
    p.add_argument("sensitivity", choices=sensitive)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p = command("rule", bind(_rule), "accept, reject, revise or undo a behaviour rule")
    p.add_argument("action", choices=["accept", "reject", "revise", "undo"])
    p.add_argument("record_id")
    p.add_argument("text", nargs="?", default=None, help="the new words (revise)")
    p = command("remember", bind(_remember), "keep one whole typed sentence")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    p.add_argument(
        "--type",
        default=None,
        choices=[c.value for c in ContentType],
        help="content type (default: what the detector reads from the sentence)",
    )
    p.add_argument("--area", action="append", default=[], choices=areas, help="repeatable")
    p.add_argument("--project", default=None)
    p.add_argument("--time-kind", default="permanent", choices=[t.value for t in TimeKind])
    p.add_argument("--sensitivity", default="normal", choices=[s.value for s in Sensitivity])
    p.add_argument("--subject", default=None, help="what it is about (same subject: newer wins)")
    p.add_argument("--valid-until", default=None, help="ISO time")
    p.add_argument("--temporary", action="store_true", help="temporary mode: write nothing")
    p = command("correct", bind(_correct), "that's wrong: a new version in your own typed words")
    p.add_argument("record_id")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    for name, method, help_text in (
        ("dont-use", "dont_use", "know it, but don't use it (reversible)"),
        ("use-again", "use_again", "use a record again"),
    ):
        p = command(name, bind(_record_command(method)), help_text)
        p.add_argument("record_id")
    p = command(
        "confirm", bind(_confirm),
        "confirm a candidate: it becomes active and verified (words that are not yours: "
        "shows the source and a warning, and asks again)",
    )  # fmt: skip
    p.add_argument("record_id")
    p.add_argument(
        FROM_SOURCE_FLAG, dest="from_source_ok", action="store_true",
        help="the second step, for scripts: confirm words that come from a source or an "
        "import, or read as an instruction, without asking",
    )  # fmt: skip
    p = command("only-use-for", bind(_only_use_for), "only use a record for one area or project")
    p.add_argument("record_id")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--area", default=None, choices=areas)
    target.add_argument("--project", default=None)
    target.add_argument("--clear", action="store_true", help="lift the restriction")
    p = command("still", bind(_still), 'answer "Still doing this?"')
    p.add_argument("record_id")
    answer = p.add_mutually_exclusive_group(required=True)
    answer.add_argument("--yes", dest="yes_still", action="store_true")
    answer.add_argument("--no", dest="yes_still", action="store_false")
    p = command("project", bind(_project), "open or close a project")
    p.add_argument("name")
    state = p.add_mutually_exclusive_group(required=True)
    state.add_argument("--open", dest="open", action="store_true")
    state.add_argument("--close", dest="open", action="store_false")
