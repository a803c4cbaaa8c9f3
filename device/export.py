"""Receiving and writing one export: the cloud's sealed package, opened on this device
and written as the package file and its Markdown view.

Invariants:
- Nothing is asked of the cloud before the output directory is checked and the
  account passphrase has been checked locally against the stored account key
  (``device.account.signing_key``); a refusal there writes nothing and sends nothing.
- The stream is read once, in flat memory: every line of the package is validated
  (``protocol.export.layout.read_package``) and written at once to the package file
  (through ``layout.write_package``, so the file is always in the canonical layout)
  and to the Markdown view (``protocol.export.view.render_markdown``); at most a few
  items are held at a time.
- Both files are written under ``.partial`` names, created with mode 0600 (they hold
  the user's memory in the clear), fsynced, and renamed to their final names only
  after the stream ended with its final chunk and the totals checked. On any error —
  a cut stream, an error chunk, a chunk that does not open, a bad item, a header for
  another export or space, a full disk — both partial files are deleted and
  ``ExportFailed`` names the export id and the reason: a partial package never looks
  like a whole one.
- Device-only classes never reached the cloud, so its package lacks them: when the
  sensitive section is included, this device's device-only records (whole version
  chains) are added after the cloud's sensitive records, its device-only episodes
  after the cloud's sensitive episodes, and skeletons of its forgotten device-only
  records after the cloud's skeletons. Left out with the sensitive section; never
  added twice if the cloud already sent one.
- The package file is signed with the account key (``protocol.export.signing``): every
  line is chained into the trailer, which also lists the device-only items this device
  added, so an importer can keep them device-only and can refuse an edited file.
- The package file is always the current schema version (2): a cloud that still sends
  version 1 is read as version 2 (``read_package``), and the device-only record versions
  carry their provenance and verification as the cloud's do (``ExportedVersion.of``).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from device import account, keys, store
from device.client import CloudClient
from device.db import Database
from device.errors import DeviceError, ExportDirectoryInvalid, ExportFailed, NotEnrolled
from protocol import strongauth
from protocol.errors import PackageError, ProtocolError, SealError
from protocol.export.layout import Item, lines_of, read_package, write_package
from protocol.export.package import (
    ExportedRecord,
    ExportedVersion,
    PackageHeader,
    Section,
    Totals,
)
from protocol.export.signing import Signer, close_signed
from protocol.export.stream import MEDIA_TYPE, open_stream
from protocol.export.view import render_markdown
from protocol.ids import make_id
from protocol.messages import ExportRequest
from protocol.model import Episode, LifecycleState, Skeleton, UsageRestriction
from protocol.wire import WireModel

PARTIAL = ".partial"
FILE_MODE = 0o600
EXPORT_PATH = "/v1/export"
EXPORT_TIMEOUT = 120.0  # seconds between bytes: the cloud may wait for a store first

OpenKey = Callable[[bytes], bytes]
RandomBytes = Callable[[int], bytes]


@dataclass(frozen=True, slots=True)
class ExportResult:
    """One export, written whole: where its two files are and what they hold."""

    export_id: str
    package_path: Path
    view_path: Path
    includes_sensitive: bool
    totals: Totals
    device_only_records: int  # added by this device to the sensitive section
    device_only_episodes: int
    device_only_skeletons: int


def package_name(export_id: str) -> str:
    return f"memsync-export-{export_id}.json"


def view_name(export_id: str) -> str:
    return f"memsync-export-{export_id}.md"


def check_out_dir(out_dir: Path) -> Path:
    """The output directory, refused (``ExportDirectoryInvalid``) unless it exists and
    is a directory this process may write in."""
    path = Path(out_dir)
    if not path.exists():
        raise ExportDirectoryInvalid(path, "the directory does not exist")
    if not path.is_dir():
        raise ExportDirectoryInvalid(path, "it is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ExportDirectoryInvalid(path, "the directory is not writable")
    return path


def export(
    db: Database,
    cloud: Callable[[], CloudClient],
    out_dir: Path,
    account_passphrase: str,
    *,
    include_sensitive: bool,
    random_bytes: RandomBytes,
) -> ExportResult:
    """Ask the cloud for an export of this device's space and write it in ``out_dir``.

    The directory and the passphrase are checked before anything is sent (``cloud`` is
    only called then); a refusal before the stream raises the client's error
    (``StrongAuthRequired``, ``ExportIdUsed``, ``ExportUnavailable``, ``Offline``...),
    anything wrong after it began ``ExportFailed``; either way no file is left."""
    out = check_out_dir(out_dir)
    meta = store.get_meta(db)
    key = account.signing_key(account_passphrase, meta.space_id, meta.account_key)
    if meta.space_id is None or meta.credential is None:
        raise NotEnrolled(
            f"device {meta.device_name!r} is not enrolled (or was revoked); an export "
            "comes from the cloud, so enroll it first"
        )
    export_id = make_id("exp", random_bytes(16))
    request = ExportRequest(
        export_id=export_id,
        include_sensitive=include_sensitive,
        proof=strongauth.prove_export(key, meta.space_id, export_id, include_sensitive),
    )
    private_key = keys.load_private_key(meta.private_key)

    def open_key(sealed: bytes) -> bytes:  # the stream key, sealed to this device's key
        return keys.open_sealed_answer(private_key, sealed)

    expected = Expected(export_id, meta.space_id, include_sensitive)
    extra = DeviceOnly(db) if include_sensitive else None
    client = cloud()
    with client.post_stream(
        EXPORT_PATH, request, media_type=MEDIA_TYPE, timeout=EXPORT_TIMEOUT
    ) as chunks:
        return receive(chunks, expected, open_key, out, extra, sign_with=key)


# --- device-only items ---------------------------------------------------------------


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _record_of(db: Database, row: Any) -> ExportedRecord:
    record_id = str(row["record_id"])
    versions = []
    for version in store.versions_of(db, record_id):
        try:
            content = store.open_version(db, version)
        except (LookupError, SealError) as exc:
            raise PackageError(
                f"device-only record {record_id} version {version['version']} cannot be "
                f"read on this device ({exc})"
            ) from exc
        versions.append(
            ExportedVersion.of(
                version=int(version["version"]),
                supersedes=version["supersedes"],
                recorded_at=_when(version["recorded_at"]),
                content=content,
            )
        )
    if not versions:
        raise PackageError(f"device-only record {record_id} has no version on this device")
    area, project = row["usage_area"], row["usage_project"]
    usage = UsageRestriction(area=area, project=project) if area or project else None
    return ExportedRecord(
        id=record_id,
        lifecycle_state=LifecycleState(row["lifecycle"]),
        created_at=versions[0].recorded_at,
        current_version=int(row["current_version"] or versions[-1].version),
        usage_restriction=usage,
        superseded_by_record=row["superseded_by"],
        conflicts_with=store.conflicts_of(row),
        versions=versions,
    )


def _episode_of(db: Database, row: Any) -> Episode:
    episode_id = str(row["episode_id"])
    try:
        content = store.open_episode(db, row)
    except (LookupError, SealError) as exc:
        raise PackageError(
            f"device-only episode {episode_id} cannot be read on this device ({exc})"
        ) from exc
    return Episode(
        id=episode_id,
        conversation_id=content.conversation_id,
        text=content.text,
        typed_at=_when(row["typed_at"]),
        source_kind=content.source_kind,
        source_id=content.source_id,
    )


class DeviceOnly:
    """This device's device-only items, read one at a time when they are written.

    Only their ids are held; ids the cloud's package already carries are skipped."""

    def __init__(self, db: Database) -> None:
        self._db = db
        forgotten = LifecycleState.FORGOTTEN.value
        self.record_ids = [
            str(r[0])
            for r in db.all(
                "SELECT record_id FROM records WHERE device_only = 1 AND lifecycle != ? "
                "ORDER BY rowid",
                (forgotten,),
            )
        ]
        self.skeleton_ids = [
            str(r[0])
            for r in db.all(
                "SELECT record_id FROM records WHERE device_only = 1 AND lifecycle = ? "
                "ORDER BY rowid",
                (forgotten,),
            )
        ]
        self.episode_ids = [
            str(r[0])
            for r in db.all(
                "SELECT episode_id FROM episodes WHERE device_only = 1 ORDER BY typed_at, rowid"
            )
        ]
        self._ids = {*self.record_ids, *self.skeleton_ids, *self.episode_ids}
        self.sent_by_cloud: set[str] = set()
        self.added: dict[Section, int] = {}
        self.added_ids: list[str] = []  # device-only records and episodes written

    def saw(self, item: Item) -> None:
        """Note a cloud item that is one of this device's own (never added twice)."""
        item_id = getattr(item.model, "id", None)
        if isinstance(item_id, str) and item_id in self._ids:
            self.sent_by_cloud.add(item_id)

    def items(self, section: Section) -> Iterator[WireModel]:
        """The device-only items of ``section`` the cloud did not send, read one by one."""
        if section is Section.SENSITIVE_RECORDS:
            for record_id in self.record_ids:
                row = store.record_row(self._db, record_id)
                if record_id in self.sent_by_cloud or row is None:
                    continue
                yield self._count(section, _record_of(self._db, row))
        elif section is Section.SENSITIVE_EPISODES:
            for episode_id in self.episode_ids:
                row = store.episode_row(self._db, episode_id)
                if episode_id in self.sent_by_cloud or row is None:
                    continue
                yield self._count(section, _episode_of(self._db, row))
        elif section is Section.SKELETONS:
            for record_id in self.skeleton_ids:
                row = store.record_row(self._db, record_id)
                if record_id in self.sent_by_cloud or row is None or not row["forgotten_at"]:
                    continue
                skeleton = Skeleton(id=record_id, forgotten_at=_when(row["forgotten_at"]))
                yield self._count(section, skeleton)

    def _count(self, section: Section, model: WireModel) -> WireModel:
        self.added[section] = self.added.get(section, 0) + 1
        if section is not Section.SKELETONS:
            self.added_ids.append(str(model.model_dump(include={"id"})["id"]))
        return model


EXTRA_SECTIONS = (Section.SKELETONS, Section.SENSITIVE_RECORDS, Section.SENSITIVE_EPISODES)


def merged(items: Iterable[Item], extra: DeviceOnly | None) -> Iterator[Item]:
    """The cloud's items in section order, with this device's device-only items after
    the cloud's items of their section (``extra`` None: none are added)."""
    order = list(Section)
    done = 0  # sections before order[done] have had their extras

    def close_until(index: int) -> Iterator[Item]:
        nonlocal done
        while done < index:
            section = order[done]
            done += 1
            if extra is not None and section in EXTRA_SECTIONS:
                for model in extra.items(section):
                    yield Item(section, model)

    for item in items:
        yield from close_until(order.index(item.section))
        if extra is not None:
            extra.saw(item)
        yield item
    yield from close_until(len(order))


# --- receiving -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expected:
    """What the package's header must say."""

    export_id: str
    space_id: str
    includes_sensitive: bool


def _check_header(header: PackageHeader, expected: Expected) -> None:
    if header.export_id != expected.export_id:
        raise PackageError(f"the package is for export {header.export_id}")
    if header.space_id != expected.space_id:
        raise PackageError(
            f"the package is of space {header.space_id}, this device's space is {expected.space_id}"
        )
    if header.includes_sensitive != expected.includes_sensitive:
        asked = "with" if expected.includes_sensitive else "without"
        raise PackageError(
            f"the export was asked {asked} the sensitive section, but the package says "
            f"includes_sensitive={header.includes_sensitive}"
        )


class _Partial:
    """A file being written under a ``.partial`` name (mode 0600)."""

    def __init__(self, final: Path) -> None:
        self.final = final
        self.path = final.with_name("." + final.name + PARTIAL)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        os.fchmod(fd, FILE_MODE)  # whatever the umask
        self.file = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def finish(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()

    def discard(self) -> None:
        if not self.file.closed:
            self.file.close()
        self.path.unlink(missing_ok=True)


def receive(
    chunks: Iterable[bytes],
    expected: Expected,
    open_key: OpenKey,
    out_dir: Path,
    extra: DeviceOnly | None,
    *,
    sign_with: SigningKey | None = None,
) -> ExportResult:
    """Open the sealed stream ``chunks`` and write the package and its view in
    ``out_dir`` (see the module's invariants). Raises ``ExportFailed``."""
    export_id = expected.export_id
    package_path = out_dir / package_name(export_id)
    view_path = out_dir / view_name(export_id)
    partials: list[_Partial] = []
    renamed: list[Path] = []  # final names this call made, undone if a later step fails
    try:
        if package_path.exists() or view_path.exists():
            raise PackageError(f"{package_path.name} or {view_path.name} already exists")
        package = _Partial(package_path)
        partials.append(package)
        view = _Partial(view_path)
        partials.append(view)
        signer = Signer(sign_with) if sign_with is not None else None
        totals = _write(chunks, expected, open_key, package, view, extra, signer)
        package.finish()
        view.finish()
        for partial in (view, package):  # the package last: it is whole or absent
            os.replace(partial.path, partial.final)
            partials.remove(partial)
            renamed.append(partial.final)
        _sync_dir(out_dir)
    except (PackageError, ProtocolError, DeviceError, OSError, ValueError) as exc:
        _discard(partials, renamed)
        raise ExportFailed(export_id, _reason(exc)) from exc
    except BaseException:
        _discard(partials, renamed)
        raise
    added = extra.added if extra is not None else {}
    return ExportResult(
        export_id=export_id,
        package_path=package_path,
        view_path=view_path,
        includes_sensitive=expected.includes_sensitive,
        totals=totals,
        device_only_records=added.get(Section.SENSITIVE_RECORDS, 0),
        device_only_episodes=added.get(Section.SENSITIVE_EPISODES, 0),
        device_only_skeletons=added.get(Section.SKELETONS, 0),
    )


def _write(
    chunks: Iterable[bytes],
    expected: Expected,
    open_key: OpenKey,
    package: _Partial,
    view: _Partial,
    extra: DeviceOnly | None,
    signer: Signer | None,
) -> Totals:
    """One pass: the Markdown renderer pulls the events; every item it pulls is also
    queued for the package writer, which drains the queue after each Markdown line."""
    events = read_package(lines_of(open_stream(chunks, expected.export_id, open_key)))
    header = next(events)
    if not isinstance(header, PackageHeader):  # read_package yields the header first
        raise PackageError("the package does not open with its header")
    _check_header(header, expected)
    counts = dict.fromkeys(Section, 0)
    queue: deque[Item] = deque()
    cloud_totals: list[Totals] = []

    def cloud_items() -> Iterator[Item]:
        for event in events:
            if isinstance(event, Item):
                yield event
            elif isinstance(event, Totals):
                cloud_totals.append(event)  # read_package checked it against the items

    def tap() -> Iterator[PackageHeader | Item | Totals]:
        yield header
        for item in merged(cloud_items(), extra):
            counts[item.section] += 1
            queue.append(item)
            yield item
        if not cloud_totals:
            raise PackageError("the package ended without its totals")
        yield Totals(**{Totals.field_of(s): n for s, n in counts.items()})

    def items() -> Iterator[Item]:
        for line in render_markdown(tap()):
            view.file.write(line)
            while queue:
                yield queue.popleft()
        while queue:
            yield queue.popleft()

    last: str | None = None
    for line in write_package(header, items()):
        if last is not None:
            package.file.write(last)
        last = line
        if signer is not None:
            signer.add(line)
    if last is None:
        raise PackageError("the package writer wrote nothing")
    if signer is None:
        package.file.write(last)
    else:
        device_only = extra.added_ids if extra is not None else []
        closing, trailer = close_signed(last, signer.trailer(device_only))
        package.file.write(closing)
        package.file.write(trailer)
    return Totals(**{Totals.field_of(s): n for s, n in counts.items()})


def _discard(partials: list[_Partial], renamed: list[Path]) -> None:
    for partial in partials:
        partial.discard()
    for path in renamed:
        path.unlink(missing_ok=True)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, DeviceError):
        return f"writing the files failed: {exc.strerror or exc}"
    return str(exc)
