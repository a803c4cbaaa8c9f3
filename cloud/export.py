"""Building one space's export package as a stream of ``layout.Item``s.

Invariants:
- Everything is read through one store snapshot (``RecordStore.snapshot``), in keyset
  pages of ``PAGE`` rows in id order, so the package is one consistent state of the
  space and memory stays flat in the number of records and episodes: one page of rows
  (with their opened version chains) at a time, plus the ids of the few items that are
  written later (accepted behaviour rules, sensitive records, the episodes sensitive
  records came from) and one entry per connected source.
- Sections come in ``Section`` order. A record that is not permanently forgotten is
  exported with its whole version chain opened; a forgotten one as its skeleton only
  (id and when); an episode whose key a forget names is left out (it is forgotten).
- Every exported record version states who produced its words and who verified it
  (``ExportedVersion.of``: the content's own fields, or, for content written before it
  held them, what ``protocol.provenance`` reads from it): the package is schema 2.
- A record with a sensitive class in any version goes to the sensitive section only,
  and so does every episode such a record names as a source; with
  ``include_sensitive=False`` both are left out entirely, and so are those episodes'
  connected sources.
- Never silently incomplete: a live record version or an episode whose data key is
  missing from the key store, or whose content does not open, raises
  ``ExportIncomplete`` naming the item and the reason; it is never skipped.
- The package depends on the store, the export id and the time handed in, never on
  the cloud's configuration (region, process): it is the same package everywhere.
- No secret enters the package: device rows carry names and times only (no credential
  hash, no public key); no key, proof or enrollment code is read at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel

from cloud.errors import ExportIncomplete, StoreError
from cloud.store.base import EpisodeRow, RecordRow, StoreSession, VersionRow
from cloud.vault import Vault
from protocol.export.layout import Item, write_package
from protocol.export.package import (
    ConnectedAccount,
    ExportedDevice,
    ExportedProject,
    ExportedRecord,
    ExportedVersion,
    PackageHeader,
    Section,
)
from protocol.messages import EpisodeContent
from protocol.model import (
    Episode,
    Layer,
    LifecycleState,
    RecordContent,
    Skeleton,
    SourceKind,
)

PAGE = 500  # rows per keyset page
_Content = TypeVar("_Content", bound=BaseModel)
_Row = TypeVar("_Row")


def _keyset_pages(
    fetch: Callable[[str | None], list[_Row]], key: Callable[[_Row], str]
) -> Iterator[list[_Row]]:
    """Every page ``fetch(after)`` gives, each after the last key of the one before,
    until an empty page."""
    after: str | None = None
    while rows := fetch(after):
        yield rows
        after = key(rows[-1])


@dataclass
class _Source:
    first: datetime
    last: datetime
    episodes: int = 0


@dataclass
class _Later:
    """What the records pass leaves for later sections: ids only."""

    rules: list[str] = field(default_factory=list)
    sensitive: list[str] = field(default_factory=list)
    sensitive_episodes: set[str] = field(default_factory=set)


class PackageBuilder:
    """The items of one space's package, read inside one snapshot session ``s``."""

    def __init__(
        self,
        s: StoreSession,
        vault: Vault,
        space_id: str,
        *,
        page: int = PAGE,
        forgotten_now: Callable[[set[str]], set[str]] | None = None,
    ) -> None:
        """``forgotten_now(key_ids)`` says which of them a forget names in the store's
        current state (outside the snapshot); it only sharpens the reason of a failure."""
        self.s = s
        self.vault = vault
        self.space_id = space_id
        self.page = page
        self.forgotten_now = forgotten_now

    def lines(self, header: PackageHeader) -> Iterator[str]:
        """The package text, line by line (``protocol.export.layout.write_package``)."""
        if header.space_id != self.space_id:
            raise ValueError(f"header of space {header.space_id}, builder of {self.space_id}")
        return write_package(header, self.items(header.includes_sensitive))

    def items(self, include_sensitive: bool) -> Iterator[Item]:
        later = _Later()
        yield from self._records(later)
        yield from self._by_ids(later.rules, Section.BEHAVIOUR_RULES)
        yield from self._skeletons()
        sources: dict[str, _Source] = {}
        yield from self._episodes(later.sensitive_episodes, include_sensitive, sources)
        yield from self._projects()
        for source_id in sorted(sources):
            found = sources[source_id]
            yield Item(
                Section.CONNECTED_ACCOUNTS,
                ConnectedAccount(
                    source_id=source_id,
                    first_episode_at=found.first,
                    latest_episode_at=found.last,
                    episodes=found.episodes,
                ),
            )
        yield from self._devices()
        # tasks: memsync runs no tasks, so the section is always empty
        if include_sensitive:
            yield from self._by_ids(later.sensitive, Section.SENSITIVE_RECORDS)
            for chunk in _chunks(sorted(later.sensitive_episodes), self.page):
                rows = self.s.episodes(self.space_id, chunk)
                for episode in self._open_episodes([rows[e] for e in chunk if e in rows]):
                    yield Item(Section.SENSITIVE_EPISODES, episode)

    # --- records -----------------------------------------------------------------------

    def _record_pages(self, *, forgotten: bool) -> Iterator[list[RecordRow]]:
        return _keyset_pages(
            lambda after: self.s.records_page(self.space_id, after, self.page, forgotten=forgotten),
            lambda row: row.record_id,
        )

    def _records(self, later: _Later) -> Iterator[Item]:
        for rows in self._record_pages(forgotten=False):
            for record in self._open_records(rows):
                if record.sensitive:
                    later.sensitive.append(record.id)
                    for version in record.versions:
                        later.sensitive_episodes.update(version.content.source_episode_ids)
                elif _accepted_rule(record):
                    later.rules.append(record.id)
                else:
                    yield Item(Section.RECORDS, record)

    def _by_ids(self, record_ids: list[str], section: Section) -> Iterator[Item]:
        for chunk in _chunks(record_ids, self.page):
            rows = self.s.records(self.space_id, chunk)
            for record in self._open_records([rows[r] for r in chunk if r in rows]):
                yield Item(section, record)

    def _open_records(self, rows: list[RecordRow]) -> list[ExportedRecord]:
        chains = self.s.versions_of(self.space_id, [r.record_id for r in rows])
        keys = {v.key_id for chain in chains.values() for v in chain}
        deks, _forgotten = self._deks(keys)
        out: list[ExportedRecord] = []
        for row in rows:
            chain = chains.get(row.record_id, [])
            if not chain:
                raise ExportIncomplete(
                    f"record {row.record_id}: no version of it is in the record store"
                )
            versions = [self._version(row.record_id, v, deks) for v in chain]
            out.append(
                ExportedRecord(
                    id=row.record_id,
                    lifecycle_state=LifecycleState(row.lifecycle),
                    created_at=row.created_at,
                    current_version=row.current_version,
                    usage_restriction=row.restriction(),
                    superseded_by_record=row.superseded_by,
                    conflicts_with=row.conflict_ids(),
                    versions=versions,
                )
            )
        return out

    def _version(
        self, record_id: str, row: VersionRow, deks: dict[str, bytes | str]
    ) -> ExportedVersion:
        what = f"record {record_id} v{row.version}"
        content = self._open(
            what, deks[row.key_id], "record", record_id, row.version, row.sealed_content,
            RecordContent,
        )  # fmt: skip
        return ExportedVersion.of(  # with who produced the words and who verified them
            version=row.version,
            supersedes=row.supersedes,
            recorded_at=row.recorded_at,
            content=content,
        )

    def _open(
        self,
        what: str,
        dek: bytes | str,
        kind: str,
        item_id: str,
        version: int,
        sealed: bytes,
        model: type[_Content],
    ) -> _Content:
        """Open one sealed item with its DEK; ``ExportIncomplete`` naming ``what`` when
        there is no DEK (``dek`` says why) or the content does not open."""
        if isinstance(dek, str):
            raise ExportIncomplete(f"{what}: {dek}")
        try:
            return Vault.open_with(dek, self.space_id, kind, item_id, version, sealed, model)
        except StoreError as exc:
            raise ExportIncomplete(f"{what}: its content does not open ({exc})") from exc

    def _deks(self, key_ids: set[str]) -> tuple[dict[str, bytes | str], set[str]]:
        """Each key's DEK or why there is none (a forget names it; the key store lacks
        it), and the keys a forget names."""
        forgotten = self.s.forgotten_key_ids(self.space_id, key_ids)
        found: dict[str, bytes | str] = dict(self.vault.data_keys(self.s, self.space_id, key_ids))
        missing = key_ids - found.keys() - forgotten
        since = self.forgotten_now(missing) if missing and self.forgotten_now else set()
        for key_id in key_ids - found.keys():
            if key_id in forgotten:
                found[key_id] = f"a forget names its data key {key_id}"
            elif key_id in since:
                found[key_id] = (
                    f"it was forgotten after the export began and its data key {key_id} is "
                    "destroyed, so the package cannot be completed as of its start"
                )
            else:
                found[key_id] = (
                    f"its data key {key_id} is missing from the key store "
                    f"{self.vault.key_store.path}"
                )
        return found, forgotten

    def _skeletons(self) -> Iterator[Item]:
        for rows in self._record_pages(forgotten=True):
            for row in rows:
                if row.forgotten_at is None:
                    raise ExportIncomplete(
                        f"record {row.record_id} is permanently forgotten but has no time"
                    )
                yield Item(
                    Section.SKELETONS, Skeleton(id=row.record_id, forgotten_at=row.forgotten_at)
                )

    # --- episodes ----------------------------------------------------------------------

    def _episodes(
        self, sensitive: set[str], include_sensitive: bool, sources: dict[str, _Source]
    ) -> Iterator[Item]:
        pages = _keyset_pages(
            lambda after: self.s.episodes_page(self.space_id, after, self.page),
            lambda row: row.episode_id,
        )
        for rows in pages:
            for episode in self._open_episodes(rows):
                is_sensitive = episode.id in sensitive
                if include_sensitive or not is_sensitive:
                    _count_source(sources, episode)
                if not is_sensitive:
                    yield Item(Section.EPISODES, episode)

    def _open_episodes(self, rows: Iterable[EpisodeRow]) -> list[Episode]:
        """The episodes among ``rows`` that are not forgotten, opened (in order)."""
        rows = list(rows)
        deks, forgotten = self._deks({r.key_id for r in rows})
        out: list[Episode] = []
        for row in rows:
            if row.key_id in forgotten:
                continue  # forgotten: its key is (being) destroyed; a skeleton stands for it
            content = self._open(
                f"episode {row.episode_id}", deks[row.key_id], "episode", row.episode_id, 1,
                row.sealed_content, EpisodeContent,
            )  # fmt: skip
            out.append(
                Episode(
                    id=row.episode_id,
                    conversation_id=content.conversation_id,
                    text=content.text,
                    typed_at=row.typed_at,
                    source_kind=content.source_kind,
                    source_id=content.source_id,
                )
            )
        return out

    # --- the rest ------------------------------------------------------------------------

    def _projects(self) -> Iterator[Item]:
        projects = self.s.projects(self.space_id)
        for name in sorted(projects):
            row = projects[name]
            yield Item(
                Section.PROJECTS,
                ExportedProject(name=row.name, open=row.open, updated_at=row.updated_at),
            )

    def _devices(self) -> Iterator[Item]:
        for row in self.s.device_history(self.space_id):
            yield Item(
                Section.DEVICES,
                ExportedDevice(
                    device_id=row.device_id,
                    name=row.name,
                    enrolled_at=row.enrolled_at,
                    revoked_at=row.revoked_at,
                ),
            )


def _accepted_rule(record: ExportedRecord) -> bool:
    return (
        record.lifecycle_state is LifecycleState.ACTIVE
        and record.current.content.layer is Layer.BEHAVIOUR_RULE
    )


def _count_source(sources: dict[str, _Source], episode: Episode) -> None:
    if episode.source_kind is not SourceKind.CONNECTED_SOURCE or episode.source_id is None:
        return
    found = sources.get(episode.source_id)
    if found is None:
        found = sources[episode.source_id] = _Source(episode.typed_at, episode.typed_at)
    found.first = min(found.first, episode.typed_at)
    found.last = max(found.last, episode.typed_at)
    found.episodes += 1


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
