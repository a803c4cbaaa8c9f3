"""The export package's models: what one JSON package holds, field by field.

Invariants:
- Every model is a frozen, keyword-only wire model that refuses unknown fields; the
  committed JSON Schema (``docs/export-package.schema.json``) is generated from them
  (``protocol.export.schema``) and a test fails when the two disagree.
- ``schema_version`` is in every package; a reader refuses a version it does not know.
  Writers write ``PACKAGE_SCHEMA_VERSION`` (2); readers read every version of
  ``READABLE_SCHEMA_VERSIONS``, a version-1 package as the version-2 package it would
  have been (``protocol.export.versions``).
- Every exported record version says who produced its words (``provenance``) and, when
  it is verified, who verified it (``verification``: the user, or independent sources),
  beside its content, which is exactly the content as sealed. When the content holds
  either field itself the two agree; content written before the fields existed holds
  neither, and the exporter read them from it (``protocol.provenance``).
- A package holds no secret: no credential, token, key, proof or enrollment code
  exists in any model here, so none can be exported.
- A permanently forgotten record is exported as its skeleton only (id, state, when).
- The sensitive section holds every record with a sensitive class in any version, and
  every episode such a record came from; the package says whether it was left out.
- A package file written by a device ends with ``signature`` after ``totals``
  (``protocol.export.signing``); the cloud's stream carries none.
- ``totals`` closes the package: a reader checks every count against what it read, so
  a package cut short or spliced is refused.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from protocol.export.signing import PackageSignature
from protocol.ids import DeviceId, RecordId, SpaceId
from protocol.model import (
    Episode,
    EpistemicState,
    LifecycleState,
    ProjectName,
    Provenance,
    RecordContent,
    Sensitivity,
    Skeleton,
    SourceId,
    UsageRestriction,
    Verification,
)
from protocol.provenance import provenance_of, verification_of
from protocol.wire import UtcDatetime, WireModel

FORMAT: Literal["memsync-export"] = "memsync-export"
PACKAGE_SCHEMA_VERSION: Literal[2] = 2  # the version every writer writes
READABLE_SCHEMA_VERSIONS = (1, 2)  # the versions a reader reads (1 through ``versions``)
EXPORT_ID_PATTERN = r"^exp_[a-z0-9]{8,64}$"
ExportId = Annotated[str, Field(pattern=EXPORT_ID_PATTERN)]
MAX_VERSIONS = 10_000


class Section(StrEnum):
    """The package's item sections, in the order they are written."""

    RECORDS = "records"
    BEHAVIOUR_RULES = "behaviour_rules"
    SKELETONS = "skeletons"
    EPISODES = "episodes"
    PROJECTS = "projects"
    CONNECTED_ACCOUNTS = "connected_accounts"
    DEVICES = "devices"
    TASKS = "tasks"
    SENSITIVE_RECORDS = "sensitive.records"
    SENSITIVE_EPISODES = "sensitive.episodes"


MAIN_SECTIONS = tuple(s for s in Section if not s.value.startswith("sensitive."))
SENSITIVE_SECTIONS = (Section.SENSITIVE_RECORDS, Section.SENSITIVE_EPISODES)


class ExportedVersion(WireModel):
    """One version of a record's chain, opened: its content exactly as sealed, and beside
    it who produced the words and who verified them (null when the version is not
    verified), always stated, whatever the content holds (schema 2 on)."""

    version: Annotated[int, Field(ge=1)]
    supersedes: Annotated[int, Field(ge=1)] | None = None
    recorded_at: UtcDatetime
    content: RecordContent
    provenance: Annotated[
        Provenance,
        Field(
            description="Who produced the version's words: the content's own provenance, or, "
            "for content written before it held one, read from its source kind, state and "
            "evidence. Producer user means a sentence the user typed."
        ),
    ]
    verification: Annotated[
        Verification | None,
        Field(
            description="Who made the version verified: the user (confirmed it) or "
            "independent sources (corroborated it, not confirmed by the user); null when "
            "the version is not verified."
        ),
    ]

    @classmethod
    def of(
        cls,
        *,
        version: int,
        recorded_at: datetime,
        content: RecordContent,
        supersedes: int | None = None,
    ) -> ExportedVersion:
        """The version with its provenance and verification: the content's own, or, for
        content written before it held them, read from it (``protocol.provenance``)."""
        return cls(
            version=version,
            supersedes=supersedes,
            recorded_at=recorded_at,
            content=content,
            provenance=provenance_of(content),
            verification=verification_of(content),
        )

    @model_validator(mode="after")
    def _stated(self) -> ExportedVersion:
        content = self.content
        if content.provenance is not None and content.provenance != self.provenance:
            raise ValueError(
                f"version {self.version}: its provenance differs from the one its content holds"
            )
        verified = content.epistemic_state is EpistemicState.VERIFIED
        if verified and self.verification is None:
            raise ValueError(f"version {self.version} is verified but does not say who verified it")
        if not verified and self.verification is not None:
            raise ValueError(
                f"version {self.version} is {content.epistemic_state.value}, not verified, "
                "but has a verification"
            )
        if (
            verified
            and content.verification is not None
            and content.verification != self.verification
        ):
            raise ValueError(
                f"version {self.version}: its verification differs from the one its content holds"
            )
        return self


class ExportedRecord(WireModel):
    """A record that is not forgotten, with its whole version chain (oldest first)."""

    id: RecordId
    lifecycle_state: LifecycleState
    created_at: UtcDatetime
    current_version: Annotated[int, Field(ge=1)]
    usage_restriction: UsageRestriction | None = None
    superseded_by_record: RecordId | None = None
    conflicts_with: list[RecordId] = []
    versions: Annotated[list[ExportedVersion], Field(min_length=1, max_length=MAX_VERSIONS)]

    @model_validator(mode="after")
    def _chain(self) -> ExportedRecord:
        if self.lifecycle_state is LifecycleState.FORGOTTEN:
            raise ValueError(f"record {self.id} is permanently forgotten: export its skeleton")
        numbers = [v.version for v in self.versions]
        if numbers != sorted(set(numbers)):
            raise ValueError(f"record {self.id}: versions {numbers} are not in order")
        if self.current_version not in numbers:
            raise ValueError(
                f"record {self.id}: current version {self.current_version} is not in its chain"
            )
        return self

    @property
    def current(self) -> ExportedVersion:
        return next(v for v in self.versions if v.version == self.current_version)

    @property
    def sensitive(self) -> bool:
        return any(v.content.sensitivity is not Sensitivity.NORMAL for v in self.versions)


class ExportedProject(WireModel):
    name: ProjectName
    open: bool
    updated_at: UtcDatetime


class ConnectedAccount(WireModel):
    """A connected source memory was fed from, and what memsync could do with it.
    Never a secret or token: memsync keeps none (the source's app holds them)."""

    source_id: SourceId
    kind: Literal["connected_source"] = "connected_source"
    capabilities: list[Literal["read"]] = ["read"]
    first_episode_at: UtcDatetime
    latest_episode_at: UtcDatetime
    episodes: Annotated[int, Field(ge=0)]


class ExportedDevice(WireModel):
    """An enrolled device (no credential, no key). When it last reached the cloud is
    not exported: it is a liveness stamp, not the user's data, and it would make two
    exports of the same memory differ."""

    device_id: DeviceId
    name: Annotated[str, Field(min_length=1, max_length=64)]
    enrolled_at: UtcDatetime
    revoked_at: UtcDatetime | None = None


class TaskEntry(WireModel):
    """One task the assistant ran. memsync itself runs no tasks, so its packages hold
    none; the section is in the schema for producers that do."""

    id: Annotated[str, Field(min_length=1, max_length=128)]
    title: Annotated[str, Field(min_length=1, max_length=500)]
    state: Literal["done", "failed", "cancelled", "running"]
    started_at: UtcDatetime
    ended_at: UtcDatetime | None = None


class PackageHeader(WireModel):
    """What opens a package."""

    format: Literal["memsync-export"] = FORMAT
    schema_version: Literal[2] = PACKAGE_SCHEMA_VERSION
    export_id: ExportId
    exported_at: UtcDatetime
    space_id: SpaceId
    includes_sensitive: bool


class Totals(WireModel):
    """What closes a package: how many items each section holds."""

    records: Annotated[int, Field(ge=0)] = 0
    behaviour_rules: Annotated[int, Field(ge=0)] = 0
    skeletons: Annotated[int, Field(ge=0)] = 0
    episodes: Annotated[int, Field(ge=0)] = 0
    projects: Annotated[int, Field(ge=0)] = 0
    connected_accounts: Annotated[int, Field(ge=0)] = 0
    devices: Annotated[int, Field(ge=0)] = 0
    tasks: Annotated[int, Field(ge=0)] = 0
    sensitive_records: Annotated[int, Field(ge=0)] = 0
    sensitive_episodes: Annotated[int, Field(ge=0)] = 0

    @staticmethod
    def field_of(section: Section) -> str:
        return section.value.replace(".", "_")

    def of(self, section: Section) -> int:
        count: int = getattr(self, self.field_of(section))
        return count


class SensitivePart(WireModel):
    """The sensitive classes, apart, so the user can leave them out."""

    records: list[ExportedRecord] = []
    episodes: list[Episode] = []


class ExportPackage(PackageHeader):
    """A whole package, as one JSON document (the schema's root): the header's fields,
    then every section, then the totals."""

    records: list[ExportedRecord] = []
    behaviour_rules: list[ExportedRecord] = []
    skeletons: list[Skeleton] = []
    episodes: list[Episode] = []
    projects: list[ExportedProject] = []
    connected_accounts: list[ConnectedAccount] = []
    devices: list[ExportedDevice] = []
    tasks: list[TaskEntry] = []
    sensitive: SensitivePart | None = None
    totals: Totals
    # a package file's trailer (issue 22): the account's signature over every line; it
    # is checked over the file's bytes (``protocol.export.signing.verify``), not here
    signature: PackageSignature | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ExportPackage:
        if self.includes_sensitive != (self.sensitive is not None):
            raise ValueError(
                "includes_sensitive says "
                f"{self.includes_sensitive} but the sensitive section is "
                f"{'present' if self.sensitive is not None else 'absent'}"
            )
        for section in Section:
            got = len(self.items(section))
            want = self.totals.of(section)
            if got != want:
                raise ValueError(
                    f"section {section.value} holds {got} item(s) but totals say {want}: "
                    "the package is incomplete or was altered"
                )
        ids = [r.id for r in self.all_records()] + [s.id for s in self.skeletons]
        if len(ids) != len(set(ids)):
            twice = sorted(i for i, n in Counter(ids).items() if n > 1)
            raise ValueError(f"record id(s) {', '.join(twice)} appear twice in the package")
        return self

    def items(self, section: Section) -> list[object]:
        if section in SENSITIVE_SECTIONS:
            if self.sensitive is None:
                return []
            return list(getattr(self.sensitive, section.value.split(".", 1)[1]))
        return list(getattr(self, section.value))

    def all_records(self) -> list[ExportedRecord]:
        sensitive = self.sensitive.records if self.sensitive is not None else []
        return [*self.records, *self.behaviour_rules, *sensitive]


ITEM_MODELS: dict[Section, type[WireModel]] = {
    Section.RECORDS: ExportedRecord,
    Section.BEHAVIOUR_RULES: ExportedRecord,
    Section.SKELETONS: Skeleton,
    Section.EPISODES: Episode,
    Section.PROJECTS: ExportedProject,
    Section.CONNECTED_ACCOUNTS: ConnectedAccount,
    Section.DEVICES: ExportedDevice,
    Section.TASKS: TaskEntry,
    Section.SENSITIVE_RECORDS: ExportedRecord,
    Section.SENSITIVE_EPISODES: Episode,
}
