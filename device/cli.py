"""The ``memsync device`` command group.

Invariants: every command names its device directory (``--dir``, default
``$MEMSYNC_DEVICE_DIR`` or ``~/.memsync/device``) and takes the passphrase from
``$MEMSYNC_PASSPHRASE`` or a prompt (never an argument, so it stays out of shell
history); the account passphrase likewise (``$MEMSYNC_ACCOUNT_PASSPHRASE`` or a
prompt); errors print one clear line on stderr and exit 2, without a traceback;
``forget`` is permanent and asks for confirmation unless ``--yes``; ``confirm`` of words
that are not the user's (a source, an import) or read as an instruction prints the
source and a plain warning and confirms only after a second step (typing ``confirm``,
or ``--from-source-ok``), otherwise exits 2 with nothing changed; ``waiting`` prints
why each item waits; ``export`` checks
its output directory before asking anything and needs the account passphrase;
``delete-account`` requires ``--yes`` and the account passphrase; ``ui`` serves the
inspector on 127.0.0.1 only and prints its one link; every write
prints the sentence its receipt gives; every data-printing command takes ``--json``;
``status`` and the first sync's progress bar live in ``device.status_cli``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import getpass
import json
import os
import sys
import threading
import webbrowser
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from device import status_cli, subset_cli
from device.errors import DeviceError
from protocol.errors import ProtocolError
from protocol.export.package import Section
from protocol.messages import MAX_PULL_WAIT, parse_closing_header
from protocol.model import ContentType, LifeArea, Sensitivity, TimeKind
from protocol.operations import EffectKind
from protocol.provenance import EXTERNAL_MEDIA

if TYPE_CHECKING:  # the agent, the store and the sync client load when a command runs
    from device.agent import DeviceAgent
    from device.live import LiveEvent
    from device.views import LocalResult, RecallHit, RecordView

DEFAULT_WAIT = 20.0  # seconds a live pull waits: device.live.DEFAULT_WAIT (a test pins it)

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
    from device.agent import DeviceAgent

    return DeviceAgent.open(Path(args.dir), _passphrase())


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str))
    else:
        print(text)


def _account_passphrase(prompt: str, *, required: bool) -> str | None:
    env = os.environ.get("MEMSYNC_ACCOUNT_PASSPHRASE")
    if env is not None:
        return env
    if not required and not sys.stdin.isatty():
        return None
    answer = getpass.getpass(prompt)
    return answer or (None if not required else answer)


def _result(args: argparse.Namespace, result: LocalResult) -> None:
    data = dataclasses.asdict(result)
    data["receipt"] = result.receipt.model_dump(mode="json") if result.receipt else None
    text = result.message
    created = result.receipt is not None and result.receipt.effect is EffectKind.CREATED
    if created or result.artifact_id:
        text += f" ({result.record_id or result.artifact_id}, pending sync)"
    _emit(args, data, text)


def _create(args: argparse.Namespace, passphrase: str) -> DeviceAgent:
    from device.agent import DeviceAgent

    return DeviceAgent.create(
        Path(args.dir), passphrase, device_name=args.name, cloud_url=args.cloud
    )


def _remove_database(directory: Path) -> None:
    from device.db import DB_FILENAME, KDF_SUFFIX

    for suffix in ("", "-wal", "-shm", KDF_SUFFIX):
        (directory / (DB_FILENAME + suffix)).unlink(missing_ok=True)


def _enroll_with(agent: DeviceAgent, code: str, cloud: str | None) -> tuple[str, str]:
    """Enroll, then register the account key if a passphrase is given; returns the device
    id and a note on the account key (a failed registration leaves the enrollment)."""
    account = _account_passphrase(
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


def _init(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    agent = _create(args, _passphrase(confirm=True))
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
        _emit(args, data, text)
    return 0


def _enroll(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        device_id, note = _enroll_with(agent, args.code, args.cloud)
        data = {
            "device_id": device_id,
            "space_id": agent.space_id,
            "account_key_set": agent.account_key is not None,
        }
        _emit(args, data, f"Enrolled as {device_id} in space {agent.space_id}{note}")
    return 0


def _account_key_set(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        had = agent.account_key is not None
        account = _account_passphrase("Account passphrase: ", required=True)
        agent.register_account(account or "")
        text = (
            "The account passphrase matches the account key already set; nothing changed"
            if had
            else f"Account key set for space {agent.space_id}"
        )
        _emit(args, {"space_id": agent.space_id, "account_key_set": True, "changed": not had}, text)
    return 0


def _temporary(args: argparse.Namespace, agent: DeviceAgent) -> None:
    if getattr(args, "temporary", False):
        agent.set_temporary_mode(True)


def _say(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        if args.temporary:
            _emit(args, {"episode_id": None, "temporary": True},
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
        _emit(args, data, "\n".join(lines))
    return 0


def _end_session(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        results = agent.end_session(args.conversation)
        local = results[1:]
        text = f"Conversation {args.conversation!r} ended; its candidates will be consolidated."
        if local:
            text += f" {len(local)} kept on this device became candidates for you to confirm."
        _emit(args, {"op_ids": [r.op_id for r in results]}, text)
    return 0


def _ingest(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    with _open(args) as agent:
        episode_id = agent.ingest(text, medium=args.medium, source=args.source)
        _emit(
            args,
            {"episode_id": episode_id},
            f"Logged {args.medium.replace('_', ' ')} from {args.source} as episode {episode_id}; "
            "it can only become candidates, never a rule or an instruction.",
        )
    return 0


def _observe(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        episode_id = agent.observe(args.subject, args.value, source=args.source)
        _emit(args, {"episode_id": episode_id}, f"Logged behaviour event {episode_id}")
    return 0


def _import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    from device.importing import ORIGIN_THIS_ACCOUNT, looks_like_package

    if not path.is_file() or looks_like_package(path):  # a missing file: refused by name
        with _open(args) as agent:
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
        _emit(args, data, "\n".join(lines))
        return 0
    text = path.read_text(encoding="utf-8")
    with _open(args) as agent:
        results = agent.import_text(text, source=args.source or path.name)
        _emit(
            args,
            {"kind": "text", "record_ids": [r.record_id for r in results]},
            f"Imported {path} as a text file: {len(results)} statement(s) as candidates: "
            "imported, not verified.",
        )
    return 0


DEVICE_ONLY_WARNING = (
    "Records in {cls} will be kept ONLY on this device. They are never sent to the cloud, "
    "not even encrypted, and have no backup: if you lose this device, you lose them."
)


def _keep_on_device(args: argparse.Namespace) -> int:
    cls = Sensitivity(args.sensitivity)
    warning = DEVICE_ONLY_WARNING.format(cls=cls.value.replace("_", " "))
    if not args.yes:
        print(warning)
        if input("Keep them only here? [y/N] ").strip().lower() not in ("y", "yes"):
            raise CliError("nothing was changed")
    with _open(args) as agent:
        agent.keep_on_device(cls)
        _emit(args, {"device_only": sorted(c.value for c in agent.device_only_classes())},
              warning)  # fmt: skip
    return 0


def _rules(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _views(args, agent.rules(), "No behaviour rules.")
    return 0


def _rule(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        if args.action == "revise":
            if not args.text:
                raise CliError("revise needs the rule's new words")
            result = agent.revise_rule(args.record_id, args.text)
        else:
            result = getattr(agent, f"{args.action}_rule")(args.record_id)
        _result(args, result)
    return 0


def _learned(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _views(args, agent.recently_learned(args.days), "Nothing learned recently.")
    return 0


def _waiting(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        views = agent.waiting_for_confirmation()
        lines = []
        for v in views:
            lines.append(_view_line(v))
            lines += [f"  waits because: {why}" for why in v.waits_because]
            if v.confirm_warning is not None:
                lines.append(
                    f"  confirming it takes a second step: `confirm {v.record_id}` shows "
                    "where it comes from and asks again"
                )
        _emit(args, [dataclasses.asdict(v) for v in views],
              "\n".join(lines) or "Nothing is waiting for you.")  # fmt: skip
    return 0


FROM_SOURCE_FLAG = "--from-source-ok"
SECOND_STEP_WORD = "confirm"


def _confirm(args: argparse.Namespace) -> int:
    """Confirm a candidate; one whose words are not the user's (or read as an
    instruction) first shows its source and the warning and asks again, unless
    ``--from-source-ok``."""
    with _open(args) as agent:
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
        _result(args, agent.confirm(args.record_id))
    return 0


def _remember(args: argparse.Namespace) -> int:
    with _open(args) as agent:
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
            valid_until=_when(args.valid_until) if args.valid_until else None,
        )
        _result(args, result)
    return 0


def _when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CliError(f"{text!r} is not an ISO time (e.g. 2026-09-21T08:30:00+00:00)") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _hit_lines(hits: Sequence[RecallHit]) -> str:
    return (
        "\n".join(
            f"{h.record_id}  {h.line}" + ("  (from the cloud)" if h.from_cloud else "")
            for h in hits
        )
        or "Nothing found."
    )


def _recall(args: argparse.Namespace) -> int:
    with _open(args) as agent:
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
        _emit(
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


def _view_line(v: RecordView) -> str:
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


def _views(args: argparse.Namespace, views: Sequence[RecordView], empty: str) -> None:
    lines = [_view_line(v) for v in views]
    _emit(args, [dataclasses.asdict(v) for v in views], "\n".join(lines) or empty)


def _list(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _views(args, agent.list_records(), "No records.")
    return 0


def _know(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _views(args, agent.what_do_you_know(), "I don't know anything about you yet.")
    return 0


def _as_of(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _views(args, agent.as_of(_when(args.time)), "Memory held nothing then.")
    return 0


def _history(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        versions = agent.record_history(args.record_id)
        lines = [f"v{v.version}  {v.recorded_at}  [{v.note}]  {v.text}" for v in versions]
        _emit(
            args,
            [dataclasses.asdict(v) for v in versions],
            "\n".join(lines) or f"{args.record_id} has no readable versions.",
        )
    return 0


def _explain(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        sentence = agent.explain(args.record_id)
        _emit(args, {"record_id": args.record_id, "explanation": sentence}, sentence)
    return 0


def _questions(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        due = agent.due_questions()
        lines = [f"{rid}  {question}" for rid, question in due]
        _emit(
            args,
            [{"record_id": rid, "question": q} for rid, q in due],
            "\n".join(lines) or "No questions.",
        )
    return 0


def _confirm_permanent(args: argparse.Namespace, what: str) -> None:
    if args.yes:
        return
    answer = input(f"Permanently forget {what}? This cannot be undone. Type 'yes': ")
    if answer.strip().lower() != "yes":
        raise CliError(f"not confirmed; {what} was not changed")


def _forget(args: argparse.Namespace) -> int:
    if args.area or args.all:
        if args.record_id:
            raise CliError("give a record id, or --area/--all, not both")
        area = LifeArea(args.area) if args.area else None
        what = f"all memory in {area.value}" if area else "ALL memory"
        with _open(args) as agent:
            _confirm_permanent(args, what)
            account = _account_passphrase("Account passphrase: ", required=True)
            _result(args, agent.forget_area(area, account or ""))
        return 0
    if not args.record_id:
        raise CliError("name a record id, or --area AREA, or --all")
    if not args.permanent:
        raise CliError(
            "forgetting one record is permanent: run again with --permanent (it destroys "
            "the record's keys and cannot be undone); to stop using it, use dont-use"
        )
    with _open(args) as agent:
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
        _result(args, agent.forget_permanently(args.record_id))
        for other in also:
            _result(args, agent.forget_permanently(other))
        if twins and not also and not args.json:
            print(f"Kept {len(twins)} record(s) with the same words: {twins[0].record_id} ...")
    return 0


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


def _pending(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        forgets = agent.pending_forgets()
    data = [f.model_dump(mode="json") for f in forgets]
    lines = [
        f"{f.record_id or 'all memory'} (forgotten {f.forgotten_at:%Y-%m-%d %H:%M} UTC): "
        f"still on {', '.join(d.device_name for d in f.pending)}"
        for f in forgets
    ]
    _emit(args, data, "\n".join(lines) or "No forget is pending: every device has confirmed.")
    return 0


def _record_command(method: str) -> Handler:
    def run(args: argparse.Namespace) -> int:
        with _open(args) as agent:
            _result(args, getattr(agent, method)(args.record_id))
        return 0

    return run


def _correct(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _result(args, agent.correct(args.record_id, args.text, args.conversation))
    return 0


def _only_use_for(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        area = LifeArea(args.area) if args.area else None
        _result(args, agent.restrict_usage(args.record_id, area=area, project=args.project))
    return 0


def _still(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _result(args, agent.reaffirm(args.record_id, still_true=args.yes_still))
    return 0


def _project(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        _result(args, agent.set_project(args.name, open=args.open))
    return 0


def _sync(args: argparse.Namespace) -> int:
    with _open(args) as agent:
        report = status_cli.sync(agent, progress=not args.json)
        text = (
            f"Pushed {report.pushed} (applied {report.applied}, duplicates {report.duplicates}, "
            f"refused {len(report.refused)}); pulled {report.pulled}; "
            f"shredded {len(report.shredded)}; acknowledged {len(report.acked)}"
        )
        if report.entered or report.left or report.left_later:
            text += (
                f"\nSubset: {len(report.entered)} record(s) came to this device, "
                f"{len(report.left)} left it (still in the cloud)"
            )
            if report.left_later:
                text += f", {len(report.left_later)} leave once their queued changes are sent"
        if report.push_held is not None:
            text += f"\nNothing was pushed; {agent.pending_ops()} change(s) stay queued: "
            text += report.push_held
        if report.closing is not None:
            text += "\n" + closing_notice(report.closing)
        _emit(args, dataclasses.asdict(report), text)
    return 0


def closing_notice(header: str) -> str:
    """The sentence a user reads for a ``Memsync-Closing`` header."""
    dates = parse_closing_header(header)
    if dates is None:
        return f"Notice: the memsync service is closing ({header})."
    closes_at, export_until = dates
    return (
        f"Notice: the memsync service closes on {closes_at.isoformat()}; export stays open "
        f"until {export_until.isoformat()}. After that all of your memory is made unreadable, "
        "as when you delete your account."
    )


def _delete_account(args: argparse.Namespace) -> int:
    if not args.yes:
        raise CliError(
            "deleting the account destroys all of its memory, in the cloud and on every "
            "device (changes not synced yet included), and cannot be undone; run again "
            "with --yes"
        )
    with _open(args) as agent:
        account = _account_passphrase("Account passphrase: ", required=True)
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
        _emit(args, dataclasses.asdict(result), text)
    return 0


def _live(args: argparse.Namespace) -> int:
    """Live sync until ``--seconds`` pass or Ctrl-C, printing what each sync applied."""
    ended = threading.Event()
    why: list[str] = []

    from device.live import NOTHING_NEW, LiveEventKind

    def show(event: LiveEvent) -> None:
        if event.kind is LiveEventKind.STOPPED:
            why.append(event.message)
            ended.set()
        if args.json:
            report = dataclasses.asdict(event.report) if event.report is not None else None
            line = {"kind": event.kind.value, "message": event.message, "report": report}
            print(json.dumps(line, default=str), flush=True)
        elif event.kind is not LiveEventKind.SYNCED or event.message != NOTHING_NEW:
            print(f"{event.kind.value}: {event.message}", flush=True)

    with _open(args) as agent:
        agent.start_live(wait=args.wait, on_event=show)
        if not args.json:
            print("live: syncing as changes commit in the cloud (Ctrl-C stops)", flush=True)
        try:
            stopped_by_itself = ended.wait(args.seconds)  # None: until Ctrl-C
        except KeyboardInterrupt:
            stopped_by_itself = False
        finally:
            agent.stop_live()
    if stopped_by_itself:
        raise CliError(why[0] if why else "live sync stopped")
    return 0


def _export(args: argparse.Namespace) -> int:
    from device.export import check_out_dir

    try:  # issue 23: the folder is made if missing
        Path(args.out).expanduser().mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(
            f"export folder {str(args.out)[:200]!r} cannot be made: "
            f"{exc.strerror or exc}; nothing was exported"
        ) from exc
    out = check_out_dir(Path(args.out).expanduser())  # before any prompt or request
    with _open(args) as agent:
        account = _account_passphrase("Account passphrase: ", required=True)
        result = agent.export(out, account or "", include_sensitive=not args.without_sensitive)
    totals = {s.value: result.totals.of(s) for s in Section}
    data = {
        "export_id": result.export_id,
        "package": str(result.package_path),
        "view": str(result.view_path),
        "includes_sensitive": result.includes_sensitive,
        "totals": totals,
        "device_only": {
            "records": result.device_only_records,
            "episodes": result.device_only_episodes,
            "skeletons": result.device_only_skeletons,
        },
    }
    shown = [
        s for s in Section if result.includes_sensitive or not s.value.startswith("sensitive.")
    ]
    lines = [
        f"Exported {result.export_id}:",
        f"  package: {result.package_path}",
        f"  view:    {result.view_path}",
        *(f"  {s.value}: {totals[s.value]}" for s in shown),
    ]
    if not result.includes_sensitive:
        lines.append("  (sensitive classes were left out)")
    elif result.device_only_records or result.device_only_episodes:
        lines.append(
            f"  (this device added {result.device_only_records} record(s) and "
            f"{result.device_only_episodes} episode(s) it keeps only here)"
        )
    _emit(args, data, "\n".join(lines))
    return 0


def _wait_for_interrupt() -> None:
    """Serve until Ctrl-C (tests replace this to stop at once)."""
    threading.Event().wait()


def _ui(args: argparse.Namespace) -> int:
    from device.ui.server import serve_ui  # the web stack only for this command

    with _open(args) as agent, serve_ui(agent, port=args.port) as ui:
        print(f"memsync inspector: {ui.url}", flush=True)
        if not args.no_open:
            webbrowser.open(ui.url)
        with contextlib.suppress(KeyboardInterrupt):
            _wait_for_interrupt()
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

    areas = [a.value for a in LifeArea]
    p = command("init", _init, "create an encrypted device database (and enroll)")
    p.add_argument("--name", required=True)
    p.add_argument("--cloud", default=None, help="cloud URL")
    p.add_argument("--code", default=None, help="one-time enrollment code")
    p = command("enroll", _enroll, "enroll this device with a one-time code (init made it)")
    p.add_argument("--code", required=True, help="one-time enrollment code")
    p.add_argument("--cloud", default=None, help="cloud URL (default: the one given at init)")
    p = command("account-key", _account_key_set, "set the account passphrase's key later")
    p.add_argument("action", choices=["set"], help="set: register it (checks a key already set)")
    sensitive = [s.value for s in Sensitivity if s is not Sensitivity.NORMAL]
    p = command("say", _say, "log what the user typed; the detector marks memory candidates")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    p.add_argument("--sensitivity", default=None, choices=sensitive, help="a class you know")
    p.add_argument("--temporary", action="store_true", help="temporary mode: write nothing")
    p = command("end-session", _end_session, "a conversation ended: consolidate its candidates")
    p.add_argument("--conversation", required=True)
    p = command("ingest", _ingest, "log external content (it only ever becomes candidates)")
    p.add_argument("text", help="the content, or - to read it from stdin")
    p.add_argument("--medium", required=True, choices=list(EXTERNAL_MEDIA))
    p.add_argument("--source", required=True, help="where it came from (URL, message id)")
    p = command("observe", _observe, "log one behaviour event from an app")
    p.add_argument("subject", help='what it is about, e.g. "morning coffee order"')
    p.add_argument("value", help='what happened, e.g. "americano"')
    p.add_argument("--source", required=True, help="the app or service that saw it")
    p = command(
        "import", _import,
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
    p = command("keep-on-device", _keep_on_device, "keep a sensitive class only on this device")
    p.add_argument("sensitivity", choices=sensitive)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    command("rules", _rules, "behaviour rules: proposed, accepted, undone")
    p = command("rule", _rule, "accept, reject, revise or undo a behaviour rule")
    p.add_argument("action", choices=["accept", "reject", "revise", "undo"])
    p.add_argument("record_id")
    p.add_argument("text", nargs="?", default=None, help="the new words (revise)")
    p = command("learned", _learned, '"recently learned": what background consolidation wrote')
    p.add_argument("--days", type=int, default=7)
    command("waiting", _waiting, "candidates waiting for your confirmation")
    p = command("remember", _remember, "keep one whole typed sentence")
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
    p = command("recall", _recall, "retrieve memory for a question, by meaning, offline")
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
    command("list", _list, "list records, including forgotten skeletons")
    command("know", _know, "what do you know about me? (everything, inferences included)")
    p = command("forget", _forget, "forget a record, a life area or all memory permanently")
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
    p = command("pending", _pending, "forgets some device of the account has not confirmed")
    p = command("correct", _correct, "that's wrong: a new version in your own typed words")
    p.add_argument("record_id")
    p.add_argument("text")
    p.add_argument("--conversation", required=True)
    for name, method, help_text in (
        ("dont-use", "dont_use", "know it, but don't use it (reversible)"),
        ("use-again", "use_again", "use a record again"),
    ):
        p = command(name, _record_command(method), help_text)
        p.add_argument("record_id")
    p = command(
        "confirm", _confirm,
        "confirm a candidate: it becomes active and verified (words that are not yours: "
        "shows the source and a warning, and asks again)",
    )  # fmt: skip
    p.add_argument("record_id")
    p.add_argument(
        FROM_SOURCE_FLAG, dest="from_source_ok", action="store_true",
        help="the second step, for scripts: confirm words that come from a source or an "
        "import, or read as an instruction, without asking",
    )  # fmt: skip
    p = command("only-use-for", _only_use_for, "only use a record for one area or project")
    p.add_argument("record_id")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--area", default=None, choices=areas)
    target.add_argument("--project", default=None)
    target.add_argument("--clear", action="store_true", help="lift the restriction")
    p = command("still", _still, 'answer "Still doing this?"')
    p.add_argument("record_id")
    answer = p.add_mutually_exclusive_group(required=True)
    answer.add_argument("--yes", dest="yes_still", action="store_true")
    answer.add_argument("--no", dest="yes_still", action="store_false")
    p = command("explain", _explain, "how do you know this?")
    p.add_argument("record_id")
    p = command("history", _history, "a record's version chain")
    p.add_argument("record_id")
    p = command("as-of", _as_of, "what memory said at a time")
    p.add_argument("time", help="ISO time")
    command("questions", _questions, '"Still doing this?" questions that are due')
    p = command("project", _project, "open or close a project")
    p.add_argument("name")
    state = p.add_mutually_exclusive_group(required=True)
    state.add_argument("--open", dest="open", action="store_true")
    state.add_argument("--close", dest="open", action="store_false")
    command("sync", _sync, "push the queue, pull changes, acknowledge key destruction")
    p = command("export", _export, "export all memory: a JSON package and a Markdown view")
    p.add_argument("--out", required=True, help="an existing directory for the two files")
    p.add_argument(
        "--without-sensitive", action="store_true", help="leave the sensitive classes out"
    )
    p = command(
        "delete-account",
        _delete_account,
        "delete the whole account: every key of its memory is destroyed, on every device",
    )
    p.add_argument("--yes", action="store_true", help="required: this cannot be undone")
    p = command("live", _live, "stay online: apply changes as the cloud makes them (Ctrl-C ends)")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    p.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT,
        help=f"seconds the cloud may hold each live pull (at most {MAX_PULL_WAIT:g})",
    )
    p = command(
        "ui", _ui, "the inspector page, on 127.0.0.1 with a one-run token (Ctrl-C ends)",
        json_flag=False,
    )  # fmt: skip
    p.add_argument("--port", type=int, default=0, help="a port on 127.0.0.1 (0: a free one)")
    p.add_argument("--no-open", action="store_true", help="print the link, open no browser")
    subset_cli.register(command, _open, _emit)
    status_cli.register(command, _open, _emit)
    return device


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memsync")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
