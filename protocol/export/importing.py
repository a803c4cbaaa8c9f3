"""Importing an export package: what a device writes for it, decided purely.

Invariants:
- Imported text is data, never an instruction. A plan holds only episodes to log and
  records to infer; ``operations`` turns it into ``AddEpisode`` and ``Infer`` ops and
  nothing else (no project, rule, confirm, forget or any other kind). No field of the
  package can choose an op kind, a lifecycle, an epistemic state, a rule layer, an
  initiator, a receipt, a device or a space: the plan sets each of them itself.
- Every planned record is built from its record's CURRENT version and is observed,
  from source kind ``import``, in layer ``consolidated_fact`` (an accepted behaviour
  rule arrives as a plain fact candidate), never a preference (it becomes a personal
  fact; a custom type whose core no longer matches is dropped), written in the
  background, with exactly one observation (``import:<export id>``, at the import's
  time), no conflicts, no parents, no conversation and no "said at". The rules keep
  such a record a candidate ("imported, not verified") wherever it is applied.
- Every record and episode gets a NEW id from ``new_id``; no id of the package is
  ever reused, so an import never collides with or overwrites anything.
- A planned record's source episodes are the new ids of its original source episodes
  that the plan imports; when it imports none of them, the record gets one new import
  episode holding its own text, so no record rests on an episode the space lacks.
- Every imported episode is an ``import`` episode of ``IMPORT_CONVERSATION``, with
  source ``import:<export id>``, its text and the time it was typed.
- Skeletons, devices, connected accounts, tasks and projects are not memory content:
  they are counted as not imported, and nothing is written for them. (The rules do
  not refuse an inferred record naming a project the space lacks, and retrieval
  treats an unknown project as open, so no project is created either.)
- Sensitive classes: a record with a sensitive class in any version is sensitive
  wherever the package put it; with ``include_sensitive=False`` it, and the sensitive
  section's episodes, are left out (and counted).
- An import never undoes a permanent forget: a record or episode whose original id
  the device knows as permanently forgotten (``forgotten_records`` /
  ``forgotten_episodes``) is left out and counted under ``FORGOTTEN_SINCE``.
- A package naming one episode id twice is refused (``PackageError``), as
  ``ExportPackage`` itself refuses a record id twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence, Set
from datetime import datetime
from typing import Annotated

from pydantic import Field

from protocol.errors import PackageError
from protocol.export.package import ExportedRecord, ExportPackage, Section
from protocol.ids import EpisodeId, RecordId
from protocol.model import (
    ContentType,
    Episode,
    EpistemicState,
    Evidence,
    Initiator,
    Layer,
    Observation,
    RecordContent,
    SourceId,
    SourceKind,
    Text,
)
from protocol.operations import AddEpisode, Infer
from protocol.wire import UtcDatetime, WireModel

# The conversation every imported episode (a text dump or a package) is logged in.
IMPORT_CONVERSATION = "import"
NOT_IMPORTED = (
    Section.SKELETONS,
    Section.PROJECTS,
    Section.CONNECTED_ACCOUNTS,
    Section.DEVICES,
    Section.TASKS,
)
LEFT_OUT_SENSITIVE_RECORDS = "sensitive records left out"
LEFT_OUT_SENSITIVE_EPISODES = "sensitive episodes left out"


FORGOTTEN_SINCE = "permanently forgotten since the export"


def import_source(export_id: str) -> str:
    """The source id every imported episode and observation names."""
    return f"import:{export_id}"


class PlannedEpisode(WireModel):
    """An episode to log as an import: its new id, text and when it was typed."""

    episode_id: EpisodeId
    text: Text
    typed_at: UtcDatetime
    original_id: EpisodeId | None = None  # None: made for a record whose episodes are absent
    sensitive: bool = False


class PlannedRecord(WireModel):
    """A candidate to infer: its new id, its content, and where it came from."""

    record_id: RecordId
    original_id: RecordId
    section: Annotated[str, Field(min_length=1, max_length=32)]
    content: RecordContent


class ImportPlan(WireModel):
    """What a device writes for one package, and what it leaves out (``not_imported``:
    a reason -> how many items)."""

    export_id: Annotated[str, Field(min_length=1, max_length=80)]
    source_id: SourceId
    episodes: list[PlannedEpisode]
    records: list[PlannedRecord]
    not_imported: dict[str, Annotated[int, Field(ge=0)]]

    def episodes_of(self, record: PlannedRecord) -> list[PlannedEpisode]:
        wanted = set(record.content.source_episode_ids)
        return [e for e in self.episodes if e.episode_id in wanted]


def imported_content(
    record: ExportedRecord, *, source_episode_ids: Sequence[str], source_id: str, now: datetime
) -> RecordContent:
    """A candidate-to-be from ``record``'s current version (see the module's rules)."""
    current = record.current.content
    content_type = current.content_type
    if content_type is ContentType.PREFERENCE:
        content_type = ContentType.PERSONAL_FACT  # the rules refuse an imported preference
    custom = current.custom_type
    if custom is not None and custom.core is not content_type:
        custom = None
    return RecordContent(
        text=current.text,
        content_type=content_type,
        custom_type=custom,
        epistemic_state=EpistemicState.OBSERVED,
        layer=Layer.CONSOLIDATED_FACT,
        time_kind=current.time_kind,
        valid_from=current.valid_from,
        valid_until=current.valid_until,
        expected_end=current.expected_end,
        source_episode_ids=list(source_episode_ids),
        source_kind=SourceKind.IMPORT,
        evidence=Evidence(
            observations=[Observation(source_id=source_id, source_kind=SourceKind.IMPORT, at=now)]
        ),
        alternatives=current.alternatives,
        life_areas=current.life_areas,
        project=current.project,
        sensitivity=current.sensitivity,
        conversation_id=None,
        subject=current.subject,
        derived_from=[],
        said_at=None,
        background=True,
    )


def plan_import(
    package: ExportPackage,
    *,
    now: datetime,
    new_id: Callable[[str], str],
    include_sensitive: bool = True,
    forgotten_records: Set[str] = frozenset(),
    forgotten_episodes: Set[str] = frozenset(),
) -> ImportPlan:
    """What a device writes for ``package``: every wanted episode as an import episode,
    every wanted record (records, behaviour rules, sensitive records) as one candidate.
    A record or episode whose ORIGINAL id is in ``forgotten_records`` /
    ``forgotten_episodes`` (permanently forgotten since the export) is left out and
    counted under ``FORGOTTEN_SINCE``: an import never undoes a permanent forget.
    Raises ``PackageError`` naming an episode id the package holds twice."""
    source_id = import_source(package.export_id)
    not_imported: dict[str, int] = {}

    def skip(reason: str, count: int = 1) -> None:
        if count:
            not_imported[reason] = not_imported.get(reason, 0) + count

    for section in NOT_IMPORTED:
        skip(section.value, len(package.items(section)))

    sensitive_episodes = package.sensitive.episodes if package.sensitive is not None else []
    seen: set[str] = set()
    for episode in [*package.episodes, *sensitive_episodes]:
        if episode.id in seen:
            raise PackageError(
                f"episode {episode.id} appears twice in package {package.export_id}: "
                "an episode is written once"
            )
        seen.add(episode.id)

    episodes: list[PlannedEpisode] = []
    new_episode_of: dict[str, str] = {}

    def log(episode: Episode, sensitive: bool) -> None:
        if episode.id in forgotten_episodes:
            skip(FORGOTTEN_SINCE)
            return
        new = new_id("ep")
        new_episode_of[episode.id] = new
        episodes.append(
            PlannedEpisode(
                episode_id=new,
                text=episode.text,
                typed_at=episode.typed_at,
                original_id=episode.id,
                sensitive=sensitive,
            )
        )

    for episode in package.episodes:
        log(episode, False)
    if include_sensitive:
        for episode in sensitive_episodes:
            log(episode, True)
    else:
        skip(LEFT_OUT_SENSITIVE_EPISODES, len(sensitive_episodes))

    sections: list[tuple[Section, list[ExportedRecord]]] = [
        (Section.RECORDS, package.records),
        (Section.BEHAVIOUR_RULES, package.behaviour_rules),
        (Section.SENSITIVE_RECORDS, package.sensitive.records if package.sensitive else []),
    ]
    records: list[PlannedRecord] = []
    for section, held in sections:
        for record in held:
            if record.id in forgotten_records:
                skip(FORGOTTEN_SINCE)
                continue
            if record.sensitive and not include_sensitive:
                skip(LEFT_OUT_SENSITIVE_RECORDS)
                continue
            current = record.current.content
            sources = list(
                dict.fromkeys(
                    new_episode_of[e] for e in current.source_episode_ids if e in new_episode_of
                )
            )
            if not sources:
                made = PlannedEpisode(
                    episode_id=new_id("ep"),
                    text=current.text,
                    typed_at=now,
                    sensitive=record.sensitive,
                )
                episodes.append(made)
                sources = [made.episode_id]
            content = imported_content(
                record, source_episode_ids=sources, source_id=source_id, now=now
            )
            records.append(
                PlannedRecord(
                    record_id=new_id("rec"),
                    original_id=record.id,
                    section=section.value,
                    content=content,
                )
            )
    return ImportPlan(
        export_id=package.export_id,
        source_id=source_id,
        episodes=episodes,
        records=records,
        not_imported=not_imported,
    )


def operations(
    plan: ImportPlan, *, new_id: Callable[[str], str], at: datetime
) -> Iterator[AddEpisode | Infer]:
    """The plan as ops, episodes first: ``AddEpisode`` (an import episode) and ``Infer``
    (started by the assistant), and no other kind. A text holding a NUL raises the
    op's ``ValidationError`` (build every op before writing any)."""
    for episode in plan.episodes:
        yield AddEpisode(
            op_id=new_id("op"),
            made_at=at,
            initiated_by=Initiator.USER,
            episode_id=episode.episode_id,
            conversation_id=IMPORT_CONVERSATION,
            text=episode.text,
            typed_at=episode.typed_at,
            source_kind=SourceKind.IMPORT,
            source_id=plan.source_id,
        )
    for record in plan.records:
        yield Infer(
            op_id=new_id("op"),
            made_at=at,
            initiated_by=Initiator.ASSISTANT,
            record_id=record.record_id,
            content=record.content,
        )


ALREADY_HELD = "already on this device (the same words)"


def same_words(text: str) -> str:
    """What makes two statements the same for an import: their words, case-folded,
    whitespace and final punctuation aside."""
    return " ".join(text.casefold().split()).rstrip(".!?;, ")


def without_held(plan: ImportPlan, held: Set[str]) -> ImportPlan:
    """``plan`` without the records whose words (``same_words``) the device already holds
    or that an earlier record of the plan brings, and without the episodes only those
    records rested on (an episode no record cites stays); each record left out is
    counted under ``ALREADY_HELD``. A package whose words are all held adds nothing."""
    seen = set(held)
    kept: list[PlannedRecord] = []
    left: list[PlannedRecord] = []
    for record in plan.records:
        words = same_words(record.content.text)
        (left if words in seen else kept).append(record)
        seen.add(words)
    if not left:
        return plan
    cited = {e for r in kept for e in r.content.source_episode_ids}
    gone = {e for r in left for e in r.content.source_episode_ids}
    episodes = [e for e in plan.episodes if e.episode_id in cited or e.episode_id not in gone]
    not_imported = dict(plan.not_imported)
    not_imported[ALREADY_HELD] = not_imported.get(ALREADY_HELD, 0) + len(left)
    return plan.model_copy(
        update={"records": kept, "episodes": episodes, "not_imported": not_imported}
    )
