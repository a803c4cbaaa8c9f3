"""Importing a memsync export package into this device.

Invariants:
- A package is read whole, refused or accepted before anything is written: a file
  that is not a file or not readable, larger than ``MAX_PACKAGE_BYTES`` (checked by
  its size before reading and again while reading), not UTF-8, not JSON, holding a key
  twice, nested too deeply, not a memsync package, of a schema version it does not
  read (it reads 1 and 2; a version-1 package as version 2, ``protocol.export.versions``),
  invalid
  for the package's models, with totals that disagree, or already imported (the
  ledger) raises an ``ImportRefused`` naming the file and the reason, and changes
  nothing.
- Everything a valid package brings is written in ONE local transaction, through the
  normal local write path (``apply_local``): the plan's episodes are logged and its
  records queued as ``Infer`` ops, so they push like any op and the rules keep them
  candidates "imported, not verified". Every op is built before the transaction opens;
  a refusal of any op rolls back the whole import.
- The ledger row (export id, when, counts) commits in that same transaction, so an
  export id is imported into a device at most once; and a record whose words this
  device already holds (any record it can read, ``held_words``) is not imported again,
  so a second export of the same memory adds nothing either.
- A record or episode this device knows as permanently forgotten (a skeleton, a
  forgotten episode) is not imported: an old package never undoes a permanent forget.
- A record of a class the user keeps on this device stays on this device, and so does
  every episode such a record rests on (``keep_on_device``), exactly as for what the
  user types. So does every record the package's signed trailer marks device-only
  (it was device-only where it was exported), whatever this device keeps.
- A signed package is checked over every line before it is parsed; a signature that
  does not verify refuses the file (``PackageTampered``) naming the first bad line and
  item. A package unsigned or signed by another account is refused
  (``PackageNotSigned``) unless ``allow_unsigned``; the report's ``origin`` says which.
- Nothing imported is ever an instruction, a behaviour rule or training data
  (``protocol.export.importing``; ``docs/import.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from device import batch, candidates, store
from device.db import Database
from device.errors import (
    NotAPackage,
    PackageAlreadyImported,
    PackageInvalid,
    PackageMalformed,
    PackageNotSigned,
    PackageTampered,
    PackageTooLarge,
    PackageTotalsMismatch,
    PackageUnreadable,
    PackageVersionUnsupported,
)
from device.views import ImportReport, LocalResult
from protocol.errors import PackageError
from protocol.export import signing
from protocol.export.importing import (
    ImportPlan,
    operations,
    plan_import,
    same_words,
    without_held,
)
from protocol.export.package import FORMAT, ExportPackage
from protocol.export.versions import check_version, known_versions, upgrade_package
from protocol.model import LifecycleState
from protocol.operations import AddEpisode, AnyOperation

MAX_PACKAGE_BYTES = 64 * 1024 * 1024
FORGOTTEN = LifecycleState.FORGOTTEN.value
SNIFF_BYTES = 4096

Apply = Callable[[AnyOperation, bool | None], LocalResult]


def looks_like_package(path: Path) -> bool:
    """Whether ``import`` should read ``path`` as a package: its first non-blank
    character opens a JSON object or array. (Such a file that is not a memsync package
    is refused, never imported as text.) An unreadable file reads as not a package;
    the text import then names why."""
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return False
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[:1] in (b"{", b"[")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def read_bytes(path: Path, max_bytes: int = MAX_PACKAGE_BYTES) -> bytes:
    """The file's bytes, refused when it is not a readable file or too large."""
    try:
        if not path.is_file():
            raise PackageUnreadable(path, "it is not a file")
        size = path.stat().st_size
        if size > max_bytes:
            raise PackageTooLarge(
                path, f"it is {size} bytes; a package may be at most {max_bytes} bytes"
            )
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise PackageUnreadable(path, f"it cannot be read: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:  # it grew after its size was read
        raise PackageTooLarge(
            path, f"it holds more than {max_bytes} bytes; a package may be at most that"
        )
    return data


def parse_package(path: Path, data: bytes) -> ExportPackage:
    """The package in ``data`` (the bytes of ``path``), or an ``ImportRefused``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackageMalformed(
            path, f"it is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    try:
        raw = json.loads(text.removeprefix("\ufeff"), object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise PackageMalformed(path, "its JSON is nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        raise PackageMalformed(
            path, f"it is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except ValueError as exc:
        raise PackageMalformed(path, f"it is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise NotAPackage(
            path, f"it is JSON but not a memsync export package (format is not {FORMAT!r})"
        )
    version = raw.get("schema_version")
    try:
        check_version(version)
    except PackageError as exc:
        raise PackageVersionUnsupported(
            path,
            f"it has schema version {version!r}; this memsync reads schema versions "
            f"{known_versions()}",
        ) from exc
    try:
        if version == 1:
            raw = upgrade_package(raw)  # read as the version-2 package it would have been
        return ExportPackage.model_validate(raw)
    except PackageError as exc:
        raise PackageInvalid(path, str(exc)) from exc
    except RecursionError:
        raise PackageMalformed(path, "its JSON is nested too deeply to read") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        if "totals say" in message:
            raise PackageTotalsMismatch(path, message) from exc
        raise PackageInvalid(path, f"at {where!r}: {message}" if where else message) from exc


def read_package_file(path: Path, max_bytes: int = MAX_PACKAGE_BYTES) -> ExportPackage:
    return read_signed_package(path, max_bytes)[0]


ORIGIN_THIS_ACCOUNT = "signed by this account"
ORIGIN_OTHER_ACCOUNT = "signed by another account"
ORIGIN_UNSIGNED = "unsigned"


def read_signed_package(
    path: Path, max_bytes: int = MAX_PACKAGE_BYTES
) -> tuple[ExportPackage, signing.PackageSignature | None]:
    """The package at ``path`` and its checked signature (None: it has none). A
    signature that does not verify over every line refuses the file, naming the first
    line (and item) that differs from what was signed."""
    data = read_bytes(path, max_bytes)
    try:
        parts = signing.split(data)
        if parts.signature is not None:
            signing.verify(parts.body, parts.signature)
    except PackageError as exc:
        raise PackageTampered(path, str(exc)) from exc
    return parse_package(path, parts.body), parts.signature


def origin_of(signature: signing.PackageSignature | None, account_key: bytes | None) -> str:
    if signature is None:
        return ORIGIN_UNSIGNED
    if signing.signed_by(signature, account_key):
        return ORIGIN_THIS_ACCOUNT
    return ORIGIN_OTHER_ACCOUNT


def held_words(db: Database) -> set[str]:
    """The words (``same_words``) of every record this device can read, whatever its
    lifecycle: a fact held, a candidate waiting or a record the user said not to use is
    not imported again as a new candidate."""
    ids = [str(r[0]) for r in db.all("SELECT record_id FROM records ORDER BY record_id")]
    return {
        same_words(c.content.text)
        for c in batch.candidates(db, ids, {}).values()
        if c.content is not None
    }


def forgotten_ids(db: Database) -> tuple[set[str], set[str]]:
    """The records (skeletons) and episodes this device knows as permanently forgotten:
    an old package holding them must not bring their words back."""
    records = {
        str(r[0]) for r in db.all("SELECT record_id FROM records WHERE lifecycle = ?", (FORGOTTEN,))
    }
    episodes = {str(r[0]) for r in db.all("SELECT episode_id FROM forgotten_episodes")}
    return records, episodes


def already_imported(db: Database, export_id: str) -> str | None:
    """When ``export_id`` was imported into this device, or None."""
    row = db.one("SELECT imported_at FROM imported_packages WHERE export_id = ?", (export_id,))
    return None if row is None else str(row[0])


def import_package(
    db: Database,
    path: Path,
    *,
    now: datetime,
    new_id: Callable[[str], str],
    apply: Apply,
    include_sensitive: bool = True,
    allow_unsigned: bool = False,
    max_bytes: int = MAX_PACKAGE_BYTES,
) -> ImportReport:
    """Import the package at ``path`` (see the module's invariants)."""
    package, signature = read_signed_package(path, max_bytes)
    origin = origin_of(signature, store.get_meta(db).account_key)
    if origin != ORIGIN_THIS_ACCOUNT and not allow_unsigned:
        why = (
            "it carries no signature (an older package, one from elsewhere, or a file "
            "cut short or re-written)"
            if signature is None
            else "it is signed by another account, not this device's"
        )
        raise PackageNotSigned(
            path, f"{why}; import it only if you trust it, with --unsigned-ok (allow_unsigned)"
        )
    marked = set(signature.device_only) if signature is not None else set()
    when = already_imported(db, package.export_id)
    if when is not None:
        raise PackageAlreadyImported(
            path, f"export {package.export_id} was already imported into this device on {when}"
        )
    try:
        forgotten_records, forgotten_episodes = forgotten_ids(db)
        plan = plan_import(
            package,
            now=now,
            new_id=new_id,
            include_sensitive=include_sensitive,
            forgotten_records=forgotten_records,
            forgotten_episodes=forgotten_episodes,
        )
        plan = without_held(plan, held_words(db))
        ops = list(operations(plan, new_id=new_id, at=now))
    except PackageError as exc:
        raise PackageInvalid(path, str(exc)) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(item)"
        raise PackageInvalid(
            path, f"an item cannot be imported, at {where!r}: {first['msg']}"
        ) from exc
    kept = candidates.device_only_classes(db)
    local_records = {
        r.record_id
        for r in plan.records
        if r.content.sensitivity in kept or r.original_id in marked
    }
    local_episodes = {
        episode
        for r in plan.records
        if r.record_id in local_records
        for episode in r.content.source_episode_ids
    } | {e.episode_id for e in plan.episodes if e.original_id in marked}
    with db.atomic():
        for op in ops:
            if isinstance(op, AddEpisode):
                apply(op, op.episode_id in local_episodes)
            else:
                apply(op, True if op.record_id in local_records else None)
        db.execute(
            "INSERT INTO imported_packages (export_id, imported_at, episodes, records, "
            "not_imported) VALUES (?, ?, ?, ?, ?)",
            (
                plan.export_id,
                now.isoformat(),
                len(plan.episodes),
                len(plan.records),
                json.dumps(plan.not_imported, sort_keys=True),
            ),
        )
    return _report(path, plan, local_records, origin)


def _report(path: Path, plan: ImportPlan, local_records: set[str], origin: str) -> ImportReport:
    return ImportReport(
        path=str(path),
        kind="package",
        export_id=plan.export_id,
        episode_ids=tuple(e.episode_id for e in plan.episodes),
        record_ids=tuple(r.record_id for r in plan.records),
        not_imported=tuple(sorted(plan.not_imported.items())),
        device_only=tuple(r.record_id for r in plan.records if r.record_id in local_records),
        origin=origin,
    )
