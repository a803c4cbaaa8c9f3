"""A push's writes, held in memory and written set-at-a-time (issue 21).

Invariants:
- Read-your-writes: every read a push makes sees every earlier write of the same push.
  The reads this class answers itself (receipts, records, versions, episodes, the
  subject and history indexes, work-item existence, ended conversations, forgotten
  keys, projects) consult
  the buffers first and the store for the rest; every other method of the session
  first writes the buffers out (``flush``) and forgets what was read, then runs on the
  store itself. So a push decided through this session decides exactly as one op per
  transaction would (``tests/cloud/test_push_batch.py`` holds that oracle).
- Only rows that are new in this push are held: inserted rows (feed, receipts, record
  events, versions, episodes, derivations, index rows, holdings, subset members, work
  items, conversation episodes) and the records created in it (their later state
  changes are folded into the one INSERT). A state change of an older record goes to
  the store at once; content is never updated either way.
- Sequence numbers are handed out from memory under the space lock (taken by the
  session) and the space's counter is written once, at ``flush``.
- Held rows reach the store, one executemany per table (``sql_many``), at ``flush``: before the push
  writes its keys and commits, and before any method this class does not answer. A
  push that raises before that leaves nothing behind (the transaction rolls back).
- A key created in this push is forgotten only if a forget of this push named it: once
  a forget event is written, every key is asked of the store again.
- ``opened_episodes`` (episode id, key id) -> opened content lives on this push's
  session only and is emptied when the push ends (``cloud.push.apply_ops``); a read
  still asks the row and its key first, so a forget in the push is honoured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import bindparam, select, update

from cloud.errors import StoreError
from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store.base import (
    WHOLE_EPISODE,
    ChangeRow,
    DerivationRow,
    EpisodeRow,
    ProjectRow,
    RecordEventRow,
    RecordRow,
    VersionRow,
)
from cloud.store.migrations import LEGACY_EPISTEMIC_PLACEHOLDER
from cloud.store.sql import SqlSession
from cloud.store.sql_direct import column_in
from cloud.store.sql_lineage import chunks
from cloud.store.sql_many import insert_many, insert_many_ignoring
from cloud.store.sql_work import check_work_item, new_work_item

_a = t.applied_ops.c
RECEIPTS = select(_a.op_id, _a.receipt).where(
    _a.space_id == bindparam("sp"), _a.op_id.in_(bindparam("ids", expanding=True))
)
_w = t.work_items.c
WORK_OF_EPISODES = select(_w.episode_id, _w.sentence, _w.item_kind).where(
    _w.space_id == bindparam("sp"), _w.episode_id.in_(bindparam("ids", expanding=True))
)
SET_NEXT_SEQ = (
    update(t.spaces).where(t.spaces.c.space_id == bindparam("sp")).values(next_seq=bindparam("n"))
)
# the methods that run on the store without writing the buffers out first: they touch
# no table this class holds rows of
_UNBUFFERED = frozenset({"touch_device", "lock_space"})


class BatchSession:
    """Wraps one ``SqlSession`` of one space for the length of a push."""

    def __init__(self, inner: SqlSession, space_id: str) -> None:
        self.inner = inner
        self.space_id = space_id
        self._next_seq: int | None = None  # the next number to hand out, once read
        self._written_seq: int | None = None  # the counter as the store holds it
        self._fresh_keys: set[str] = set()  # keys this push created, no forget since
        self._tokens_of: Callable[[], Iterable[str]] | None = None
        self._named_tokens: list[str] | None = None  # made from ``_tokens_of``, once
        self.opened_episodes: dict[tuple[str, str], Any] = {}  # see the docstring
        self._clear_buffers()
        self._clear_known()

    def _clear_buffers(self) -> None:
        self._receipts: dict[str, dict[str, Any]] = {}
        self._changes: list[dict[str, Any]] = []
        self._records: dict[str, dict[str, Any]] = {}
        self._versions: dict[tuple[str, int], dict[str, Any]] = {}
        self._episodes: dict[str, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._derivations: list[dict[str, Any]] = []
        self._subjects: dict[str, list[str]] = {}  # record id -> its tokens
        self._subject_records: dict[str, set[str]] = {}  # token -> held records under it
        self._history: dict[str, set[str]] = {}
        self._holdings: set[tuple[str, str, str]] = set()
        self._members: set[tuple[str, str]] = set()
        self._work: dict[tuple[str, int], dict[str, Any]] = {}
        self._conversations: list[dict[str, Any]] = []

    def _clear_known(self) -> None:
        """What was read of the store (valid until a write this class does not see)."""
        self._known_receipts: dict[str, str | None] = {}
        self._known_records: dict[str, RecordRow | None] = {}
        self._known_episodes: dict[str, EpisodeRow | None] = {}
        self._known_projects: dict[str, ProjectRow] | None = None
        # (episode, sentence column) -> item kind, for every work item of the episodes in
        # ``_known_work_of`` (a sentence of another episode is asked of the store)
        self._known_work: dict[tuple[str, int], str] = {}
        self._known_work_of: set[str] = set()
        self._known_ended: dict[str, bool] = {}

    # --- everything else: write out, then the store itself ----------------------------

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name in _UNBUFFERED:
            return value
        if not callable(value):  # the connection itself: whoever uses it sees every row
            self.flush()
            self._clear_known()
            return value

        def through(*args: Any, **kwargs: Any) -> Any:
            self.flush()
            self._clear_known()
            if name == "add_forget_event":
                self._fresh_keys.clear()
            return value(*args, **kwargs)

        return through

    def _check(self, space_id: str) -> None:
        if space_id != self.space_id:
            raise StoreError(
                f"a push of space {self.space_id} was asked about space {space_id}; "
                "a push touches one space"
            )

    # --- prefetching ----------------------------------------------------------------

    def prefetch(
        self,
        op_ids: Iterable[str],
        record_ids: Iterable[str],
        episode_ids: Iterable[str],
        conversation_tokens: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        """One IN-list read each for the receipts, records and episodes a push names;
        the tokens of the conversations it names are made and read at the first
        ``conversation_ended`` the store must answer."""
        self._tokens_of = conversation_tokens
        space = self.space_id
        wanted = sorted(set(op_ids) - self._receipts.keys())
        self._known_receipts.update(dict.fromkeys(wanted))
        for chunk in chunks(wanted):
            rows = self.inner.conn.execute(RECEIPTS, {"sp": space, "ids": chunk})
            self._known_receipts.update((r[0], r[1]) for r in rows)
        records = sorted(set(record_ids) - self._records.keys())
        self._known_records.update(dict.fromkeys(records))
        self._known_records.update(self.inner.records(space, records))
        episodes = sorted(set(episode_ids) - self._episodes.keys())
        self._known_episodes.update(dict.fromkeys(episodes))
        self._known_episodes.update(self.inner.episodes(space, episodes))
        work_of = sorted(set(episode_ids) - self._known_work_of)
        for chunk in chunks(work_of):
            items = self.inner.conn.execute(WORK_OF_EPISODES, {"sp": space, "ids": chunk})
            self._known_work.update(((r[0], int(r[1])), r[2]) for r in items)
        self._known_work_of.update(work_of)

    # --- ordering ----------------------------------------------------------------------

    def allocate_seq(self, space_id: str) -> int:
        self._check(space_id)
        if self._next_seq is None:
            self._next_seq = self.inner.last_seq(space_id) + 1
            self._written_seq = self._next_seq
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def last_seq(self, space_id: str) -> int:
        if space_id == self.space_id and self._next_seq is not None:
            return self._next_seq - 1
        return self.inner.last_seq(space_id)

    # --- receipts ----------------------------------------------------------------------

    def receipt(self, space_id: str, op_id: str) -> str | None:
        self._check(space_id)
        held = self._receipts.get(op_id)
        if held is not None:
            return str(held["receipt"])
        if op_id in self._known_receipts:
            return self._known_receipts[op_id]
        found = self.inner.receipt(space_id, op_id)
        self._known_receipts[op_id] = found
        return found

    def put_receipt(
        self, space_id: str, op_id: str, device_id: str, receipt_json: str, at: datetime
    ) -> None:
        self._check(space_id)
        if op_id in self._receipts or self._known_receipts.get(op_id) is not None:
            raise StoreError(f"op {op_id} of space {space_id} already has a receipt")
        self._receipts[op_id] = {
            "space_id": space_id,
            "op_id": op_id,
            "device_id": device_id,
            "receipt": receipt_json,
            "stored_at": at,
        }

    # --- records -----------------------------------------------------------------------

    def insert_record(
        self,
        space_id: str,
        record_id: str,
        lifecycle: str,
        version: int,
        at: datetime,
        created_seq: int,
    ) -> None:
        self._check(space_id)
        if record_id in self._records or self._known_records.get(record_id) is not None:
            raise StoreError(f"record {record_id} of space {space_id} already exists")
        self._records[record_id] = {
            "space_id": space_id,
            "record_id": record_id,
            "lifecycle": lifecycle,
            "current_version": version,
            "created_at": at,
            "forgotten_at": None,
            "usage_restriction": None,
            "superseded_by": None,
            "conflicts": None,
            "created_seq": created_seq,
            "state_seq": None,
        }
        self._known_records.pop(record_id, None)

    def set_record_state(self, space_id: str, record_id: str, **values: object) -> None:
        self._check(space_id)
        held = self._records.get(record_id)
        if held is None:  # an older record: its state changes in the store at once
            self._known_records.pop(record_id, None)
            self.inner.set_record_state(space_id, record_id, **values)
            return
        unknown = set(values) - SqlSession._STATE_COLUMNS
        if unknown:
            raise StoreError(f"record {record_id}: {sorted(unknown)} are not state columns")
        held.update(values)

    @staticmethod
    def _record_row(held: dict[str, Any]) -> RecordRow:
        return RecordRow(
            record_id=held["record_id"],
            lifecycle=held["lifecycle"],
            current_version=held["current_version"],
            created_at=held["created_at"],
            forgotten_at=held["forgotten_at"],
            usage_restriction=held["usage_restriction"],
            superseded_by=held["superseded_by"],
            conflicts=held["conflicts"],
            created_seq=held["created_seq"],
            state_seq=held["state_seq"],
        )

    def record(self, space_id: str, record_id: str) -> RecordRow | None:
        return self.records(space_id, [record_id]).get(record_id)

    def records(self, space_id: str, record_ids: Iterable[str]) -> dict[str, RecordRow]:
        self._check(space_id)
        out: dict[str, RecordRow] = {}
        missing: list[str] = []
        for record_id in record_ids:
            held = self._records.get(record_id)
            if held is not None:
                out[record_id] = self._record_row(held)
            elif record_id in self._known_records:
                row = self._known_records[record_id]
                if row is not None:
                    out[record_id] = row
            else:
                missing.append(record_id)
        if missing:
            found = self.inner.records(space_id, missing)
            self._known_records.update(dict.fromkeys(missing))
            self._known_records.update(found)
            out.update(found)
        return out

    # --- versions and episodes -----------------------------------------------------------

    def insert_version(self, space_id: str, row: VersionRow) -> None:
        self._check(space_id)
        self._versions[row.record_id, row.version] = {
            "space_id": space_id,
            "record_id": row.record_id,
            "version": row.version,
            "supersedes": row.supersedes,
            "epistemic_state": LEGACY_EPISTEMIC_PLACEHOLDER,
            "recorded_at": row.recorded_at,
            "key_id": row.key_id,
            "sealed_content": row.sealed_content,
            "made_by": row.made_by,
        }
        self._fresh_keys.add(row.key_id)

    def version(self, space_id: str, record_id: str, version: int) -> VersionRow | None:
        self._check(space_id)
        held = self._versions.get((record_id, version))
        if held is None:
            return self.inner.version(space_id, record_id, version)
        # as the store reads it back: ``made_by`` is written, never read with the row
        return VersionRow(
            record_id,
            version,
            held["supersedes"],
            held["recorded_at"],
            held["key_id"],
            held["sealed_content"],
        )

    def insert_episode(self, space_id: str, row: EpisodeRow) -> None:
        self._check(space_id)
        if row.episode_id in self._episodes or self._known_episodes.get(row.episode_id):
            raise StoreError(f"episode {row.episode_id} of space {space_id} already exists")
        self._episodes[row.episode_id] = {
            "space_id": space_id,
            "episode_id": row.episode_id,
            "typed_at": row.typed_at,
            "key_id": row.key_id,
            "sealed_content": row.sealed_content,
        }
        self._known_episodes.pop(row.episode_id, None)
        self._fresh_keys.add(row.key_id)

    def episodes(self, space_id: str, episode_ids: Iterable[str]) -> dict[str, EpisodeRow]:
        self._check(space_id)
        out: dict[str, EpisodeRow] = {}
        missing: list[str] = []
        for episode_id in episode_ids:
            held = self._episodes.get(episode_id)
            if held is not None:
                out[episode_id] = EpisodeRow(
                    episode_id, held["typed_at"], held["key_id"], held["sealed_content"]
                )
            elif episode_id in self._known_episodes:
                row = self._known_episodes[episode_id]
                if row is not None:
                    out[episode_id] = row
            else:
                missing.append(episode_id)
        if missing:
            found = self.inner.episodes(space_id, missing)
            self._known_episodes.update(dict.fromkeys(missing))
            self._known_episodes.update(found)
            out.update(found)
        return out

    def forgotten_key_ids(self, space_id: str, key_ids: Iterable[str]) -> set[str]:
        self._check(space_id)
        asked = [k for k in key_ids if k not in self._fresh_keys]
        return self.inner.forgotten_key_ids(space_id, asked) if asked else set()

    # --- the feed and the history log ----------------------------------------------------

    def add_change(self, space_id: str, row: ChangeRow) -> None:
        self._check(space_id)
        self._changes.append(
            {
                "space_id": space_id,
                "seq": row.seq,
                "kind": row.kind,
                "record_id": row.record_id,
                "version": row.version,
                "episode_id": row.episode_id,
                "event_id": row.event_id,
                "at": row.at,
                "artifact_id": row.artifact_id,
                "project": row.project,
            }
        )

    def add_record_event(self, space_id: str, row: RecordEventRow) -> None:
        self._check(space_id)
        self._events.append(
            {
                "space_id": space_id,
                "record_id": row.record_id,
                "seq": row.seq,
                "at": row.at,
                "kind": row.kind,
                "lifecycle": row.lifecycle,
                "version": row.version,
            }
        )

    def add_derivations(self, space_id: str, rows: Iterable[DerivationRow]) -> None:
        self._check(space_id)
        self._derivations += [
            {
                "space_id": space_id,
                "parent_record_id": r.parent_record_id,
                "child_kind": r.child_kind,
                "child_id": r.child_id,
                "seq": r.seq,
                "position": r.position,
            }
            for r in rows
        ]

    # --- the subject and history indexes ---------------------------------------------------

    def set_subject_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None:
        self._check(space_id)
        if record_id not in self._records:  # an older record's rows are replaced in the store
            self.__getattr__("set_subject_tokens")(space_id, record_id, tokens)
            return
        for token in self._subjects.get(record_id, ()):
            self._subject_records[token].discard(record_id)
        self._subjects[record_id] = sorted(set(tokens))
        for token in self._subjects[record_id]:
            self._subject_records.setdefault(token, set()).add(record_id)

    def records_with_subjects(self, space_id: str, tokens: Sequence[str]) -> list[str]:
        self._check(space_id)
        wanted = sorted(set(tokens))
        rows = column_in(self.inner, "subject_index", "record_id", "token", space_id, wanted)
        found = {record_id for _token, record_id in rows}
        # a record held here is new in this push: the store has no row of it
        for token in wanted:
            found.update(self._subject_records.get(token, ()))
        return sorted(found)

    def add_history_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None:
        self._check(space_id)
        self._history.setdefault(record_id, set()).update(tokens)

    def has_history(self, space_id: str, record_id: str) -> bool:
        self._check(space_id)
        if self._history.get(record_id):
            return True
        return self.inner.has_history(space_id, record_id)

    def records_with_history(self, space_id: str, tokens: Sequence[str]) -> list[str]:
        self._check(space_id)
        found = set(self.inner.records_with_history(space_id, tokens))
        wanted = set(tokens)
        found.update(r for r, held in self._history.items() if wanted & held)
        return sorted(found)

    # --- holdings, subsets, projects -----------------------------------------------------

    def add_holdings(self, space_id: str, device_id: str, items: Iterable[tuple[str, str]]) -> None:
        self._check(space_id)
        self._holdings.update((device_id, kind, item) for kind, item in items)

    def add_subset_members(self, space_id: str, device_id: str, record_ids: Iterable[str]) -> None:
        self._check(space_id)
        self._members.update((device_id, r) for r in record_ids)

    def projects(self, space_id: str) -> dict[str, ProjectRow]:
        self._check(space_id)
        if self._known_projects is None:
            self._known_projects = self.inner.projects(space_id)
        return dict(self._known_projects)

    # --- the consolidator's work queue -------------------------------------------------------

    def candidate_exists(self, space_id: str, episode_id: str, sentence: int) -> bool:
        self._check(space_id)
        held = self._work.get((episode_id, sentence))
        if held is not None:
            return bool(held["item_kind"] == "candidate")
        if episode_id in self._known_work_of:
            return self._known_work.get((episode_id, sentence)) == "candidate"
        return self.inner.candidate_exists(space_id, episode_id, sentence)

    def _work_exists(self, episode_id: str, sentence: int | None) -> bool:
        column = WHOLE_EPISODE if sentence is None else sentence
        if (episode_id, column) in self._work:
            return True
        if episode_id in self._known_work_of:
            return (episode_id, column) in self._known_work
        return self.inner.work_item(self.space_id, episode_id, sentence) is not None

    def conversation_ended(self, space_id: str, conversation_token: str) -> bool:
        """Ended conversations are never held here (``end_conversation`` writes through);
        a token not known yet is read with every token the push names (``prefetch``)."""
        self._check(space_id)
        known = self._known_ended.get(conversation_token)
        if known is None:
            if self._named_tokens is None:
                self._named_tokens = list(self._tokens_of()) if self._tokens_of else []
            wanted = sorted({conversation_token, *self._named_tokens} - self._known_ended.keys())
            self._known_ended.update(dict.fromkeys(wanted, False))
            token = "conversation_token"
            ended = column_in(self.inner, "ended_conversations", token, token, space_id, wanted)
            self._known_ended.update((found, True) for found, _same in ended)
            known = self._known_ended[conversation_token]
        return known

    def add_work_item(
        self,
        space_id: str,
        episode_id: str,
        sentence: int | None,
        item_kind: str,
        conversation_token: str,
        at: datetime,
        device_hint: bytes | None = None,
    ) -> bool:
        """As ``WorkQueries.add_work_item``, the row held until ``flush``."""
        self._check(space_id)
        check_work_item(episode_id, sentence, item_kind)
        if self._work_exists(episode_id, sentence):
            return False
        ready = item_kind != "candidate" or self.conversation_ended(space_id, conversation_token)
        row = new_work_item(
            space_id, episode_id, sentence, item_kind, conversation_token, at, ready, device_hint
        )
        self._work[episode_id, row["sentence"]] = row
        return True

    def add_conversation_episode(
        self, space_id: str, conversation_token: str, episode_id: str, typed_at: datetime
    ) -> None:
        self._check(space_id)
        self._conversations.append(
            {
                "space_id": space_id,
                "conversation_token": conversation_token,
                "episode_id": episode_id,
                "typed_at": typed_at,
            }
        )

    # --- writing out -------------------------------------------------------------------------

    def flush(self) -> None:
        """Every held row to the store, one executemany per table (then nothing is held)."""
        s, space = self.inner, self.space_id
        run = partial(insert_many, s)
        if self._next_seq is not None and self._next_seq != self._written_seq:
            s.conn.execute(SET_NEXT_SEQ, {"sp": space, "n": self._next_seq})
            self._written_seq = self._next_seq
        run(q.INSERT_RECORD, list(self._records.values()))
        run(q.INSERT_VERSION, list(self._versions.values()))
        run(q.INSERT_EPISODE, list(self._episodes.values()))
        run(q.INSERT_CHANGE, self._changes)
        run(q.INSERT_RECORD_EVENT, self._events)
        run(q.PUT_RECEIPT, list(self._receipts.values()))
        ignore = partial(insert_many_ignoring, s)
        ignore(t.derivations, self._derivations)
        ignore(
            t.subject_index,
            [
                {"space_id": space, "token": token, "record_id": record_id}
                for record_id, tokens in self._subjects.items()
                for token in tokens
            ],
        )
        ignore(
            t.history_index,
            [
                {"space_id": space, "token": token, "record_id": record_id}
                for record_id, tokens in self._history.items()
                for token in sorted(tokens)
            ],
        )
        ignore(
            t.holdings,
            [
                {"space_id": space, "device_id": d, "item_kind": k, "item_id": i}
                for d, k, i in sorted(self._holdings)
            ],
        )
        ignore(
            t.subset_members,
            [{"space_id": space, "device_id": d, "record_id": r} for d, r in sorted(self._members)],
        )
        ignore(t.work_items, list(self._work.values()))
        ignore(t.conversation_episodes, self._conversations)
        self._clear_buffers()
