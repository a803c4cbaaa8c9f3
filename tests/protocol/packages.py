"""Export packages for import tests, written by the real ``protocol.export.layout``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from protocol.export.layout import Item, write_package
from protocol.export.package import (
    ConnectedAccount,
    ExportedDevice,
    ExportedProject,
    ExportedRecord,
    ExportedVersion,
    ExportPackage,
    PackageHeader,
    Section,
    TaskEntry,
)
from protocol.ids import make_id
from protocol.model import (
    Episode,
    LifecycleState,
    RecordContent,
    Skeleton,
    SourceKind,
)
from protocol.wire import WireModel

EXPORTED_AT = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)
EXPORT_ID = "exp_" + "a1" * 8
SPACE_ID = "sp_" + "b2" * 8


def rid(n: int) -> str:
    return make_id("rec", n.to_bytes(10, "big"))


def eid(n: int) -> str:
    return make_id("ep", n.to_bytes(10, "big"))


def episode(n: int, text: str, *, kind: SourceKind = SourceKind.USER_STATEMENT) -> Episode:
    return Episode(
        id=eid(n),
        conversation_id="c1",
        text=text,
        typed_at=EXPORTED_AT - timedelta(days=30, minutes=n),
        source_kind=kind,
        source_id=None if kind is SourceKind.USER_STATEMENT else "somewhere",
    )


def record(
    n: int,
    *contents: dict[str, Any],
    state: LifecycleState = LifecycleState.ACTIVE,
    current: int | None = None,
) -> ExportedRecord:
    """A record whose versions hold ``contents`` (oldest first); each content names at
    least ``text`` and ``source_episode_ids``."""
    versions = [
        ExportedVersion.of(
            version=i,
            supersedes=i - 1 if i > 1 else None,
            recorded_at=EXPORTED_AT - timedelta(days=20 - i),
            content=RecordContent.model_validate(c),
        )
        for i, c in enumerate(contents, start=1)
    ]
    return ExportedRecord(
        id=rid(n),
        lifecycle_state=state,
        created_at=EXPORTED_AT - timedelta(days=20),
        current_version=current or len(versions),
        versions=versions,
    )


def package_text(
    *,
    records: Sequence[ExportedRecord] = (),
    behaviour_rules: Sequence[ExportedRecord] = (),
    skeletons: Sequence[Skeleton] = (),
    episodes: Sequence[Episode] = (),
    projects: Sequence[ExportedProject] = (),
    accounts: Sequence[ConnectedAccount] = (),
    devices: Sequence[ExportedDevice] = (),
    tasks: Sequence[TaskEntry] = (),
    sensitive_records: Sequence[ExportedRecord] = (),
    sensitive_episodes: Sequence[Episode] = (),
    includes_sensitive: bool = True,
    export_id: str = EXPORT_ID,
) -> str:
    header = PackageHeader(
        export_id=export_id,
        exported_at=EXPORTED_AT,
        space_id=SPACE_ID,
        includes_sensitive=includes_sensitive,
    )
    sections: list[tuple[Section, Sequence[WireModel]]] = [
        (Section.RECORDS, records),
        (Section.BEHAVIOUR_RULES, behaviour_rules),
        (Section.SKELETONS, skeletons),
        (Section.EPISODES, episodes),
        (Section.PROJECTS, projects),
        (Section.CONNECTED_ACCOUNTS, accounts),
        (Section.DEVICES, devices),
        (Section.TASKS, tasks),
        (Section.SENSITIVE_RECORDS, sensitive_records),
        (Section.SENSITIVE_EPISODES, sensitive_episodes),
    ]
    items = [Item(section, model) for section, models in sections for model in models]
    return "".join(write_package(header, items))


def package(**kwargs: Any) -> ExportPackage:
    return ExportPackage.model_validate_json(package_text(**kwargs))


def edited(text: str, **changes: Any) -> str:
    """The package ``text`` as JSON, with top-level ``changes`` applied."""
    raw = json.loads(text)
    raw.update(changes)
    return json.dumps(raw)


def others() -> dict[str, Any]:
    """One of each item that is not memory content."""
    return {
        "skeletons": [Skeleton(id=rid(900), forgotten_at=EXPORTED_AT - timedelta(days=3))],
        "projects": [
            ExportedProject(name="renovation", open=False, updated_at=EXPORTED_AT),
            ExportedProject(name="thesis", open=True, updated_at=EXPORTED_AT),
        ],
        "accounts": [
            ConnectedAccount(
                source_id="calendar:work",
                first_episode_at=EXPORTED_AT - timedelta(days=90),
                latest_episode_at=EXPORTED_AT,
                episodes=3,
            )
        ],
        "devices": [
            ExportedDevice(
                device_id=make_id("dev", b"device-0001"),
                name="phone",
                enrolled_at=EXPORTED_AT - timedelta(days=100),
            )
        ],
        "tasks": [TaskEntry(id="t1", title="book flights", state="done", started_at=EXPORTED_AT)],
    }
