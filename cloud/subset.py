"""The device subset on the cloud: choosing what each device keeps, and telling it.

Invariants:
- The cloud chooses with ``protocol.subset.choose`` from facts it reads from the store
  and the key store (never from a device's claim): each live record's shape (type,
  layer, time, areas, usage restriction), its size, its uses; plus the device's policy
  and pins. Only protocol-3 devices have a subset; older ones mirror the whole space.
- ``subset_members`` is the cloud's model of what the device holds: what it chose,
  plus what the device wrote itself (on its first choice: what it was sent before).
  Every change to it is logged (``subset_log``, a gen that only grows) in the same
  transaction, so the device hears every enter and every leave exactly in order; a
  pull names the last gen it applied (in its cursor), which confirms it and lets the
  cloud drop the holdings of what left. A pull from the start (a resync) is sent the
  log not yet confirmed and the feed of every member from the start; it writes
  nothing of the subset but a choice that is due, so a replayed pull changes nothing.
- Uses are each device's running counts, only ever raised, added up per record.
- A forgotten record leaves ``subset_members`` silently: its key-destruction event
  tells the device, and a forget is never disguised as a leave nor a leave as a forget.
- The facts cache is only a cache: it is refreshed from the store (records whose
  state changed after the seq it was read at) before every choice, so any number of
  cloud processes choose alike. It journals which records each refresh changed.
- Each device's choice is kept in this process (``protocol.subset_incremental``) and
  brought up to date from the journal, its pins, the space's uses and the clock; it is
  built afresh from every fact when there is none, when its policy changed, when the
  device has no subset state yet, or when the journal no longer reaches back to it. So
  a pull's choice costs what changed, not the space's size nor the subset's; it
  always equals ``protocol.subset.choose`` over the same inputs.
- What entered and left is the chooser's delta applied to the members this process's
  last evaluation saved, when the store still holds that evaluation's state and the
  chooser has given no delta since; the members a push added since are the records
  written after it (``record_version`` rows) that the store lists as members. Else the
  members are read from the store and diffed against a full walk of the choice.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cloud.errors import NotFound, PinRefused
from cloud.store.base import RecordRow, StoreSession, SubsetLogRow, SubsetStateRow
from cloud.vault import Vault
from protocol.embedding import DIM
from protocol.model import LifecycleState, RecordContent
from protocol.subset import (
    DEFAULT_POLICY,
    MAX_PINS,
    Choice,
    Reason,
    SubsetFacts,
    SubsetPolicy,
    SubsetView,
    by_reason_entries,
)
from protocol.subset_incremental import ChoiceDelta, IncrementalChooser

log = logging.getLogger("memsync.cloud")

FORGOTTEN = LifecycleState.FORGOTTEN.value
# how long a choice stands when nothing in the space changed: time-based rules (recent,
# upcoming) move with the clock
CHOICE_LIFETIME = timedelta(hours=1)
VECTOR_BYTES = DIM * 4  # what a record's float32 vector adds on a device
JOURNAL_REFRESHES = 512  # refreshes the facts journal remembers per space
_epochs = itertools.count(1)


@dataclass(slots=True)
class _Space:
    as_of: int = -1  # the seq the facts were read at
    facts: dict[str, SubsetFacts] = field(default_factory=dict)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)  # record -> episodes
    citing: dict[str, set[str]] = field(default_factory=dict)  # episode -> live records citing it
    epoch: int = field(default_factory=lambda: next(_epochs))  # a new one when read afresh
    journal: list[tuple[int, list[str]]] = field(default_factory=list)  # (as_of, records)
    journal_floor: int = -1  # the journal knows every change after this seq


class FactsCache:
    """Per space: every live record's ``SubsetFacts`` and source episodes.

    Each space has its own lock, held while its facts change; readers get copies. A
    cold space is read whole once per process, in a thread of its own (``warm``), so a
    pull never holds the space's store lock, nor a device's request, for that long."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._spaces: dict[str, _Space] = {}
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._warming: dict[str, threading.Event] = {}

    def _lock_of(self, space_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(space_id, threading.Lock())

    def refresh(self, s: StoreSession, space_id: str) -> None:
        """Bring the space's facts to the session's view of the store."""
        last = s.last_seq(space_id)
        with self._lock_of(space_id):
            space = self._spaces.setdefault(space_id, _Space())
            if space.as_of == last:
                return
            rows = s.records_changed_since(space_id, space.as_of)
            self._update(s, space_id, space, rows)
            if space.as_of < 0:  # read whole: the journal starts here
                space.journal_floor = last
            else:
                space.journal.append((last, [r.record_id for r in rows]))
                if len(space.journal) > JOURNAL_REFRESHES:
                    dropped = space.journal.pop(0)
                    space.journal_floor = dropped[0]
            space.as_of = last

    def facts(self, s: StoreSession, space_id: str) -> dict[str, SubsetFacts]:
        """A copy of the space's facts, refreshed first."""
        self.refresh(s, space_id)
        with self._lock_of(space_id):
            return dict(self._spaces[space_id].facts)

    def snapshot(
        self, s: StoreSession, space_id: str
    ) -> tuple[tuple[int, int], dict[str, SubsetFacts]]:
        """((epoch, as_of), a copy of the facts), refreshed first."""
        self.refresh(s, space_id)
        with self._lock_of(space_id):
            space = self._spaces[space_id]
            return (space.epoch, space.as_of), dict(space.facts)

    def changes_since(
        self, s: StoreSession, space_id: str, since: tuple[int, int]
    ) -> tuple[tuple[int, int], dict[str, SubsetFacts | None]] | None:
        """The facts of every record changed after ``since`` (None: gone), refreshed
        first; None when the journal does not reach back that far."""
        self.refresh(s, space_id)
        epoch, as_of = since
        with self._lock_of(space_id):
            space = self._spaces[space_id]
            if space.epoch != epoch or as_of < space.journal_floor:
                return None
            changed: dict[str, SubsetFacts | None] = {}
            for seq, record_ids in reversed(space.journal):
                if seq <= as_of:
                    break
                for record_id in record_ids:
                    changed[record_id] = space.facts.get(record_id)
            return (space.epoch, space.as_of), changed

    def live(self, space_id: str, record_ids: Iterable[str]) -> set[str]:
        """Which of ``record_ids`` have facts (are live records)."""
        with self._lock_of(space_id):
            space = self._spaces.get(space_id)
            return set() if space is None else {r for r in record_ids if r in space.facts}

    def sources(self, space_id: str, record_id: str) -> tuple[str, ...]:
        with self._lock_of(space_id):
            space = self._spaces.get(space_id)
            return () if space is None else space.sources.get(record_id, ())

    def citing(self, space_id: str, episode_id: str) -> set[str]:
        with self._lock_of(space_id):
            space = self._spaces.get(space_id)
            return set() if space is None else set(space.citing.get(episode_id, ()))

    def warm(
        self,
        session: Callable[[], AbstractContextManager[StoreSession]],
        space_id: str,
        wait: float,
    ) -> bool:
        """Whether the space's facts have been read in this process; if not, start
        reading them in a thread (once) and wait up to ``wait`` seconds for it."""
        with self._guard:
            space = self._spaces.get(space_id)
            if space is not None and space.as_of >= 0:
                return True
            done = self._warming.get(space_id)
            if done is None:
                done = self._warming[space_id] = threading.Event()
                threading.Thread(
                    target=self._warm,
                    args=(session, space_id, done),
                    name=f"subset-facts-{space_id}",
                    daemon=True,
                ).start()
        return done.wait(wait)

    def _warm(
        self,
        session: Callable[[], AbstractContextManager[StoreSession]],
        space_id: str,
        done: threading.Event,
    ) -> None:
        try:
            with session() as s:
                self.refresh(s, space_id)
        except Exception:  # the next choice reads the facts itself, and says why it fails
            log.exception("reading the subset facts of %s failed", space_id)
        finally:
            with self._guard:
                self._warming.pop(space_id, None)
            done.set()

    def evict(self, space_id: str) -> None:
        with self._lock_of(space_id):
            self._spaces.pop(space_id, None)

    def _update(self, s: StoreSession, space_id: str, space: _Space, rows: list[RecordRow]) -> None:
        for row in rows:
            self._drop(space, row.record_id)
        live = [r for r in rows if r.lifecycle != FORGOTTEN]
        if not live:
            return
        versions = s.versions_at(space_id, {row.record_id: row.current_version for row in live})
        deks = self.vault.data_keys(s, space_id, {v.key_id for v in versions.values()})
        sizes = s.record_sizes(space_id, versions)
        for row in live:
            version = versions.get(row.record_id)
            if version is None or version.key_id not in deks:
                continue
            content = Vault.open_with(
                deks[version.key_id],
                space_id,
                "record",
                row.record_id,
                version.version,
                version.sealed_content,
                RecordContent,
            )
            restriction = row.restriction()
            space.facts[row.record_id] = SubsetFacts(
                record_id=row.record_id,
                lifecycle=LifecycleState(row.lifecycle),
                content_type=content.content_type,
                layer=content.layer,
                time_kind=content.time_kind,
                learned_at=row.created_at,
                changed_at=version.recorded_at,
                size_bytes=sizes.get(row.record_id, 0) + VECTOR_BYTES,
                valid_from=content.valid_from,
                valid_until=content.valid_until,
                life_areas=tuple(content.life_areas),
                usage_area=restriction.area if restriction else None,
            )
            sources = tuple(content.source_episode_ids)
            space.sources[row.record_id] = sources
            for episode_id in sources:
                space.citing.setdefault(episode_id, set()).add(row.record_id)

    @staticmethod
    def _drop(space: _Space, record_id: str) -> None:
        space.facts.pop(record_id, None)
        for episode_id in space.sources.pop(record_id, ()):
            citing = space.citing.get(episode_id)
            if citing is not None:
                citing.discard(record_id)
                if not citing:
                    del space.citing[episode_id]


@dataclass(slots=True)
class _Kept:
    """A device's choice kept in this process, and the facts position it covers."""

    chooser: IncrementalChooser
    facts_at: tuple[int, int]  # (epoch, as_of) of the space's facts
    placed: int = 0  # records placed again by the last choice (all of them when built)
    serial: int = field(default_factory=lambda: next(_epochs))  # this chooser's own
    deltas: int = 0  # how many deltas it has given: (serial, deltas) names its base


@dataclass(frozen=True, slots=True)
class Evaluation:
    entered: list[str]
    left: list[str]
    chooser: IncrementalChooser | None  # None: the standing choice still held
    as_of: int  # the feed position the standing choice covers

    @property
    def choice(self) -> Choice | None:
        """The choice this evaluation made (walked when asked), None if it made none."""
        return None if self.chooser is None else self.chooser.choice()


@dataclass(frozen=True, slots=True)
class _Saved:
    """The members an evaluation left, under the state it saved, and its chooser's base."""

    state: tuple[int, int, str]  # (gen, evaluated seq, summary)
    members: frozenset[str]
    base: tuple[int, int]  # (serial, deltas) of the chooser once it gave that choice


# the feed rows after a choice read to find the members a push added since (beyond: the
# whole membership is read)
_EXTRAS_SCAN = 1000


def _summary(choice: Choice | ChoiceDelta) -> str:
    records = len(choice.members) if isinstance(choice, Choice) else choice.records
    return json.dumps(
        {
            "records": records,
            "size_bytes": choice.size_bytes,
            "left_out": choice.left_out,
            "left_out_pins": list(choice.left_out_pins),
            "excluded_pins": list(choice.excluded_pins),
            "by_reason": {r.value: n for r, n in choice.by_reason.items()},
        },
        sort_keys=True,
    )


class SubsetKeeper:
    """Chooses, records and reports each device's subset (call inside a store session)."""

    def __init__(self, vault: Vault, clock: Callable[[], datetime]) -> None:
        self.facts = FactsCache(vault)
        self._clock = clock
        self._kept: dict[tuple[str, str], _Kept] = {}
        self._kept_lock = threading.Lock()  # guards the dicts; a device's own lock its chooser
        self._device_locks: dict[tuple[str, str], threading.Lock] = {}
        # the members the last evaluation left, under the state it saved
        self._members: dict[tuple[str, str], _Saved] = {}

    # --- policy and pins --------------------------------------------------------------

    @staticmethod
    def policy(s: StoreSession, space_id: str, device_id: str) -> SubsetPolicy:
        raw = s.subset_policy(space_id, device_id)
        return DEFAULT_POLICY if raw is None else SubsetPolicy.model_validate_json(raw)

    def set_policy(
        self, s: StoreSession, space_id: str, device_id: str, policy: SubsetPolicy
    ) -> None:
        s.set_subset_policy(space_id, device_id, policy.model_dump_json(), self._clock())
        s.mark_subsets_stale(space_id, device_id)

    def pin(
        self, s: StoreSession, space_id: str, device_id: str, record_id: str, pinned: bool
    ) -> None:
        if pinned:
            record = s.record(space_id, record_id)
            if record is None:
                raise NotFound(f"record {record_id} does not exist in this space; nothing pinned")
            if record.lifecycle == FORGOTTEN:
                raise PinRefused(
                    f"record {record_id} is permanently forgotten; there is nothing to pin"
                )
            if len(s.pins(space_id, device_id)) >= MAX_PINS:
                raise PinRefused(
                    f"device {device_id} already has {MAX_PINS} pins; unpin one first "
                    f"(record {record_id} was not pinned)"
                )
        s.set_pin(space_id, device_id, record_id, pinned, self._clock())
        s.mark_subsets_stale(space_id, device_id)

    @staticmethod
    def record_uses(
        s: StoreSession,
        space_id: str,
        device_id: str,
        uses: Iterable[tuple[str, int, datetime]],
    ) -> None:
        """A device's running use counts (a report never lowers one)."""
        if s.add_record_uses(space_id, device_id, uses):
            s.mark_subsets_stale(space_id)

    # --- choosing ---------------------------------------------------------------------

    def confirm(self, s: StoreSession, space_id: str, device_id: str, gen: int) -> None:
        """The device applied the log up to ``gen``: drop the holdings of what left."""
        left = s.confirm_subset_log(space_id, device_id, gen)
        still = s.subset_members_among(space_id, device_id, left) if left else set()
        gone = [r for r in left if r not in still]
        if gone:
            s.drop_holdings(space_id, device_id, "record", gone)

    def evaluate(
        self, s: StoreSession, space_id: str, device_id: str, *, force: bool = False
    ) -> Evaluation:
        """Choose the device's subset again if anything it depends on moved, and log what
        entered and left. Call under the space's lock."""
        now = self._clock()
        state = s.subset_state(space_id, device_id)
        last = s.last_seq(space_id)
        if (
            not force
            and state is not None
            and state.evaluated_seq == last
            and now - state.evaluated_at < CHOICE_LIFETIME
        ):
            return Evaluation([], [], None, last)
        saved = None if state is None else self._saved(s, space_id, device_id, state, last)
        delta, base, kept = self._choose(s, space_id, device_id, now, fresh=state is None)
        if saved is not None and saved[0].base == base:
            # the chooser's delta is against the members this process saved: the rest of
            # the members are what pushes added since (``extras``)
            was, extras = saved
            chosen = was.members.difference(delta.left).union(delta.entered)
            gone = [*delta.left, *(r for r in extras if r not in chosen)]
            entered = [r for r in delta.entered if r not in extras]
            reasons = delta.entered
        else:
            if state is None:
                # the first choice: the device holds what it was sent or wrote before
                members = s.holdings_of(space_id, device_id, "record")
                s.clear_subset(space_id, device_id)
                s.add_subset_members(space_id, device_id, members)
            else:
                members = self.members(s, space_id, device_id)
            choice = kept.chooser.choice()
            chosen = frozenset(choice.members)
            gone = [r for r in members if r not in choice.members]
            entered = [r for r in choice.members if r not in members]
            reasons = choice.members
        live = self.facts.live(space_id, gone)
        left = sorted(r for r in gone if r in live)
        forgotten = [r for r in gone if r not in live]
        gen = 0 if state is None else state.gen
        log: list[SubsetLogRow] = []
        for record_id in left:
            gen += 1
            log.append(SubsetLogRow(gen, record_id, False, None, now))
        for record_id in entered:
            gen += 1
            log.append(SubsetLogRow(gen, record_id, True, reasons[record_id].value, now))
        s.add_subset_log(space_id, device_id, log)
        s.remove_subset_members(space_id, device_id, [*left, *forgotten])
        s.add_subset_members(space_id, device_id, entered)
        summary = _summary(delta)
        s.save_subset_state(space_id, device_id, SubsetStateRow(gen, last, now, summary))
        with self._kept_lock:
            self._members[(space_id, device_id)] = _Saved(
                (gen, last, summary), chosen, (kept.serial, kept.deltas)
            )
        return Evaluation(entered, left, kept.chooser, last)

    def _saved(
        self, s: StoreSession, space_id: str, device_id: str, state: SubsetStateRow, last: int
    ) -> tuple[_Saved, set[str]] | None:
        """What this process's last evaluation left, if the store's state is still the
        one it saved, and the members pushes added since: a push adds the records it
        writes (each with a ``record_version`` row after the choice's seq), and only an
        evaluation removes any. None when unknown here or too much was written since."""
        with self._kept_lock:
            saved = self._members.get((space_id, device_id))
        if saved is None or saved.state != (state.gen, state.evaluated_seq, state.summary):
            return None
        if last == state.evaluated_seq:
            return saved, set()
        rows = s.changes_after(space_id, state.evaluated_seq, _EXTRAS_SCAN + 1)
        if len(rows) > _EXTRAS_SCAN:
            return None
        written = {r.record_id for r in rows if r.kind == "record_version" and r.record_id}
        written.difference_update(saved.members)
        extras = s.subset_members_among(space_id, device_id, written) if written else set()
        return saved, extras

    def members(self, s: StoreSession, space_id: str, device_id: str) -> set[str]:
        """The device's subset members as ``s`` sees them: what this process's last
        evaluation left, plus what pushes added since, when the store's state is still
        the one it saved; else read from the store."""
        state = s.subset_state(space_id, device_id)
        if state is not None:
            saved = self._saved(s, space_id, device_id, state, s.last_seq(space_id))
            if saved is not None:
                return set(saved[0].members).union(saved[1])
        return s.subset_members(space_id, device_id)

    def _choose(
        self, s: StoreSession, space_id: str, device_id: str, now: datetime, *, fresh: bool
    ) -> tuple[ChoiceDelta, tuple[int, int], _Kept]:
        """The device's choice now: its kept chooser brought up to date, or a new one;
        (its delta, the (serial, deltas) the delta is against, the kept chooser)."""
        policy = self.policy(s, space_id, device_id)
        pins = s.pins(space_id, device_id)
        uses = s.record_uses(space_id)
        key = (space_id, device_id)
        with self._kept_lock:
            device_lock = self._device_locks.setdefault(key, threading.Lock())
        with device_lock:
            with self._kept_lock:
                kept = None if fresh else self._kept.get(key)
            changes = None
            if kept is not None and kept.chooser.policy == policy:
                changes = self.facts.changes_since(s, space_id, kept.facts_at)
            if kept is None or changes is None:
                facts_at, facts = self.facts.snapshot(s, space_id)
                chooser = IncrementalChooser(facts.values(), policy, pins, now, uses)
                kept = _Kept(chooser, facts_at, len(facts))
                with self._kept_lock:
                    self._kept[key] = kept
            else:
                kept.facts_at, changed = changes
                kept.placed = kept.chooser.update(now, changed, pins=pins, uses=uses)
            base = (kept.serial, kept.deltas)
            delta = kept.chooser.delta()
            kept.deltas += 1
            return delta, base, kept

    def placed(self, space_id: str, device_id: str) -> int | None:
        """How many records the device's last choice placed again (None: none kept)."""
        with self._kept_lock:
            kept = self._kept.get((space_id, device_id))
            return None if kept is None else kept.placed

    # --- reading ----------------------------------------------------------------------

    def view(self, s: StoreSession, space_id: str, device_id: str) -> SubsetView:
        state = s.subset_state(space_id, device_id)
        summary = json.loads(state.summary) if state is not None else {}
        counts = {Reason(k): int(v) for k, v in summary.get("by_reason", {}).items()}
        return SubsetView(
            device_id=device_id,
            policy=self.policy(s, space_id, device_id),
            pins=s.pins(space_id, device_id),
            records=int(summary.get("records", 0)),
            size_bytes=int(summary.get("size_bytes", 0)),
            by_reason=by_reason_entries(counts),
            left_out=int(summary.get("left_out", 0)),
            left_out_pins=summary.get("left_out_pins", []),
            excluded_pins=summary.get("excluded_pins", []),
            chosen_at=None if state is None else state.evaluated_at,
        )

    def citing(self, space_id: str, episode_id: str) -> set[str]:
        """The live records that have this episode as a source."""
        return self.facts.citing(space_id, episode_id)

    def cited_by_any(self, space_id: str, episode_id: str, members: set[str]) -> bool:
        """Whether a live record in ``members`` has this episode as a source."""
        return not self.citing(space_id, episode_id).isdisjoint(members)

    def sources(self, space_id: str, record_id: str) -> tuple[str, ...]:
        return self.facts.sources(space_id, record_id)
