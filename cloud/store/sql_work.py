"""The work room (``cloud.store.rooms.work``): the consolidator's work queue (migration
5), ``work_items``, ``ended_conversations`` and ``conversation_episodes``.

Invariants:
- Every query of one space names it; only ``claim_work`` and ``space_ids`` look across
  spaces, and they hand back ids, times and states, never anything that was typed.
- A row holds ids, times, states and a keyed hash of the conversation id. The
  detector's labels (what a sentence is about) are never stored in the clear: the
  consolidator runs the same model again on the opened sentence. The device's
  sensitivity label is kept sealed (``device_hint``, migration 15) while the item
  waits, and cleared when it is finished or dropped.
- A candidate is ready once its conversation has ended (``end_conversation``, or an
  item added to an already ended conversation); behaviour and external items are ready
  at once. ``ready_at`` is set once and never cleared.
- ``claim_work`` takes the lease of the rows it returns in the same transaction that
  selected them: on PostgreSQL with ``SELECT … FOR UPDATE SKIP LOCKED`` (two claimers
  skip each other's rows), on SQLite inside the ``BEGIN IMMEDIATE`` transaction every
  session runs (one writer at a time). A row with a live lease is never handed to a
  second claimer; once ``lease_until`` passes, any claimer may take it over.
- ``done`` and ``dropped`` are final: nothing moves a row back to ``waiting``.
  ``complete_work`` and ``resolve_work`` touch waiting rows only, so a forget that
  dropped an item wins over a worker finishing it late.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, or_, select, update

from cloud.errors import StoreError
from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store.base import WHOLE_EPISODE, WORK_KINDS, WorkItemRow
from cloud.store.sql_lineage import chunks

WAITING, DONE, DROPPED = "waiting", "done", "dropped"
_w = t.work_items.c
_COLS = (
    _w.space_id,
    _w.episode_id,
    _w.sentence,
    _w.item_kind,
    _w.conversation_token,
    _w.marked_at,
    _w.ready_at,
    _w.state,
    _w.record_id,
    _w.lease_owner,
    _w.lease_until,
    _w.attempts,
)


def _column(sentence: int | None) -> int:
    return WHOLE_EPISODE if sentence is None else sentence


def check_work_item(episode_id: str, sentence: int | None, item_kind: str) -> None:
    """Raise ``StoreError`` for a kind that is not one, or a candidate naming no sentence."""
    if item_kind not in WORK_KINDS:
        raise StoreError(f"work item {episode_id}: kind {item_kind!r} is not one of {WORK_KINDS}")
    if item_kind == "candidate" and sentence is None:
        raise StoreError(f"work item {episode_id}: a candidate names its sentence")


def new_work_item(
    space_id: str,
    episode_id: str,
    sentence: int | None,
    item_kind: str,
    conversation_token: str,
    at: datetime,
    ready: bool,
    device_hint: bytes | None,
) -> dict[str, Any]:
    """The ``work_items`` row of a new waiting item (ready at ``at`` when ``ready``); the
    store and a push's held rows (``sql_batch``) both build it here."""
    return {
        "space_id": space_id,
        "episode_id": episode_id,
        "sentence": _column(sentence),
        "item_kind": item_kind,
        "conversation_token": conversation_token,
        "marked_at": at,
        "ready_at": at if ready else None,
        "state": WAITING,
        "attempts": 0,
        "device_hint": device_hint,
    }


def _row(r: Any) -> WorkItemRow:
    return WorkItemRow(
        space_id=r[0],
        episode_id=r[1],
        sentence=None if r[2] == WHOLE_EPISODE else int(r[2]),
        item_kind=r[3],
        conversation_token=r[4],
        marked_at=r[5],
        ready_at=r[6],
        state=r[7],
        record_id=r[8],
        lease_owner=r[9],
        lease_until=r[10],
        attempts=int(r[11]),
    )


class WorkQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection
    _dialect: str

    def space_ids(self) -> list[str]:
        """Every space that has not ended, in id order (the daily time job walks them)."""
        c = t.spaces.c
        rows = self.conn.execute(
            select(c.space_id).where(c.ended_at.is_(None)).order_by(c.space_id)
        )
        return [r[0] for r in rows]

    def candidate_exists(self, space_id: str, episode_id: str, sentence: int) -> bool:
        """Whether sentence ``sentence`` of the episode was already marked (any state)."""
        found = self.conn.execute(
            select(_w.state).where(
                _w.space_id == space_id,
                _w.episode_id == episode_id,
                _w.sentence == sentence,
                _w.item_kind == "candidate",
            )
        ).first()
        return found is not None

    def conversation_ended(self, space_id: str, conversation_token: str) -> bool:
        c = t.ended_conversations.c
        found = self.conn.execute(
            select(c.ended_at).where(
                c.space_id == space_id, c.conversation_token == conversation_token
            )
        ).first()
        return found is not None

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
        """Queue one item (a second add of the same key changes nothing); True if new.

        A candidate is ready at once only if its conversation has already ended.
        ``device_hint`` is the device's label, already sealed (``consolidator.hints``)."""
        check_work_item(episode_id, sentence, item_kind)
        if self.work_item(space_id, episode_id, sentence) is not None:
            return False
        ready = item_kind != "candidate" or self.conversation_ended(space_id, conversation_token)
        row = new_work_item(
            space_id, episode_id, sentence, item_kind, conversation_token, at, ready, device_hint
        )
        self._insert_ignore_rows(t.work_items, [row])  # a concurrent add changes nothing
        return True

    def end_conversation(self, space_id: str, conversation_token: str, at: datetime) -> int:
        """Record the end of a conversation; its waiting candidates become ready.
        Returns how many became ready now (0 on a repeat)."""
        self._insert_ignore_rows(
            t.ended_conversations,
            [{"space_id": space_id, "conversation_token": conversation_token, "ended_at": at}],
        )
        result = self.conn.execute(
            update(t.work_items)
            .where(
                _w.space_id == space_id,
                _w.conversation_token == conversation_token,
                _w.state == WAITING,
                _w.ready_at.is_(None),
            )
            .values(ready_at=at)
        )
        return int(result.rowcount)

    def _insert_ignore_rows(self, table: Any, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.conn.execute(q.insert_ignore(self._dialect, table), rows)

    def _where_keys(self, space_id: str, keys: Sequence[tuple[str, int | None]]) -> Any:
        return and_(
            _w.space_id == space_id,
            or_(
                *(
                    and_(_w.episode_id == episode, _w.sentence == _column(sentence))
                    for episode, sentence in keys
                )
            ),
        )

    def _finish(
        self,
        space_id: str,
        keys: Iterable[tuple[str, int | None]],
        state: str,
        record_id: str | None,
    ) -> int:
        done = 0
        for chunk in chunks(sorted(set(keys), key=lambda k: (k[0], _column(k[1])))):
            values: dict[str, Any] = {
                "state": state,
                "lease_owner": None,
                "lease_until": None,
                "device_hint": None,
            }
            if record_id is not None:
                values["record_id"] = record_id
            result = self.conn.execute(
                update(t.work_items)
                .where(self._where_keys(space_id, chunk), _w.state == WAITING)
                .values(**values)
            )
            done += int(result.rowcount)
        return done

    def resolve_work(self, space_id: str, refs: Iterable[tuple[str, int]], record_id: str) -> int:
        """These candidates were consolidated into ``record_id`` (waiting rows only)."""
        return self._finish(space_id, refs, DONE, record_id)

    def complete_work(
        self,
        space_id: str,
        keys: Iterable[tuple[str, int | None]],
        *,
        record_id: str | None = None,
        dropped: bool = False,
    ) -> int:
        """Mark waiting items done (or dropped) and free their lease, whoever held it:
        the consolidator's ops are idempotent, so the same work finished twice is the
        same work."""
        return self._finish(space_id, keys, DROPPED if dropped else DONE, record_id)

    def work_item_hint(self, space_id: str, episode_id: str, sentence: int) -> bytes | None:
        """The sealed device label of a waiting candidate, or None (none kept, or finished)."""
        found = self.conn.execute(
            select(_w.device_hint).where(
                _w.space_id == space_id,
                _w.episode_id == episode_id,
                _w.sentence == sentence,
                _w.state == WAITING,
            )
        ).first()
        return None if found is None or found[0] is None else bytes(found[0])

    def release_work(
        self, owner: str, space_id: str, keys: Iterable[tuple[str, int | None]]
    ) -> int:
        """Give back ``owner``'s leases on these items (they wait to be claimed again)."""
        freed = 0
        for chunk in chunks(sorted(set(keys), key=lambda k: (k[0], _column(k[1])))):
            result = self.conn.execute(
                update(t.work_items)
                .where(
                    self._where_keys(space_id, chunk),
                    _w.state == WAITING,
                    _w.lease_owner == owner,
                )
                .values(lease_owner=None, lease_until=None)
            )
            freed += int(result.rowcount)
        return freed

    def drop_work_for_episodes(self, space_id: str, episode_ids: Iterable[str]) -> int:
        """A destroyed episode's waiting work is dropped (forgetting, same transaction)."""
        dropped = 0
        for chunk in chunks(sorted(set(episode_ids))):
            result = self.conn.execute(
                update(t.work_items)
                .where(_w.space_id == space_id, _w.episode_id.in_(chunk), _w.state == WAITING)
                .values(state=DROPPED, lease_owner=None, lease_until=None, device_hint=None)
            )
            dropped += int(result.rowcount)
        return dropped

    def claim_work(
        self,
        owner: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        kinds: Sequence[str] = WORK_KINDS,
        waiting_since: datetime | None = None,
    ) -> list[WorkItemRow]:
        """Lease up to ``limit`` waiting items of ``kinds``, across spaces, oldest first.

        An item is claimable when it is ready (or, with ``waiting_since``, was marked at
        or before it: a conversation that never said it ended) and its lease is free or
        expired. The lease (``owner``, ``now + lease_seconds``, one more attempt) is
        taken in this transaction; on PostgreSQL the rows are selected ``FOR UPDATE SKIP
        LOCKED``, so a concurrent claimer skips them instead of waiting or doubling."""
        if limit < 1 or lease_seconds <= 0:
            raise StoreError(f"claim by {owner}: limit and lease must be positive")
        unknown = set(kinds) - set(WORK_KINDS)
        if unknown:
            raise StoreError(f"claim by {owner}: unknown work kinds {sorted(unknown)}")
        ready: Any = _w.ready_at.is_not(None)
        if waiting_since is not None:
            ready = or_(ready, _w.marked_at <= waiting_since)
        query = (
            select(*_COLS)
            .where(
                _w.state == WAITING,
                _w.item_kind.in_(list(kinds)),
                ready,
                or_(_w.lease_until.is_(None), _w.lease_until <= now),
            )
            .order_by(_w.marked_at, _w.space_id, _w.episode_id, _w.sentence)
            .limit(limit)
            .with_for_update(skip_locked=True)  # SQLite: no-op, the transaction is IMMEDIATE
        )
        rows = [_row(r) for r in self.conn.execute(query)]
        until = now + timedelta(seconds=lease_seconds)
        claimed: list[WorkItemRow] = []
        for row in rows:
            self.conn.execute(
                update(t.work_items)
                .where(
                    _w.space_id == row.space_id,
                    _w.episode_id == row.episode_id,
                    _w.sentence == _column(row.sentence),
                )
                .values(lease_owner=owner, lease_until=until, attempts=_w.attempts + 1)
            )
            claimed.append(
                replace(row, lease_owner=owner, lease_until=until, attempts=row.attempts + 1)
            )
        return claimed

    def work_item(self, space_id: str, episode_id: str, sentence: int | None) -> WorkItemRow | None:
        row = self.conn.execute(
            select(*_COLS).where(
                _w.space_id == space_id,
                _w.episode_id == episode_id,
                _w.sentence == _column(sentence),
            )
        ).first()
        return None if row is None else _row(row)

    def work_items(
        self,
        space_id: str,
        item_kind: str,
        states: Sequence[str] = (WAITING, DONE),
        limit: int = 1000,
    ) -> list[WorkItemRow]:
        """A space's items of one kind in these states, newest first."""
        rows = self.conn.execute(
            select(*_COLS)
            .where(
                _w.space_id == space_id,
                _w.item_kind == item_kind,
                _w.state.in_(list(states)),
            )
            .order_by(_w.marked_at.desc(), _w.episode_id.desc(), _w.sentence.desc())
            .limit(limit)
        )
        return [_row(r) for r in rows]

    def add_conversation_episode(
        self, space_id: str, conversation_token: str, episode_id: str, typed_at: datetime
    ) -> None:
        self._insert_ignore_rows(
            t.conversation_episodes,
            [
                {
                    "space_id": space_id,
                    "conversation_token": conversation_token,
                    "episode_id": episode_id,
                    "typed_at": typed_at,
                }
            ],
        )

    def conversation_episodes(
        self, space_id: str, conversation_token: str, before: datetime, limit: int
    ) -> list[str]:
        """Up to ``limit`` episodes the user typed in one conversation at or before
        ``before``, newest first (a subjectless sentence's context is there)."""
        c = t.conversation_episodes.c
        rows = self.conn.execute(
            select(c.episode_id)
            .where(
                c.space_id == space_id,
                c.conversation_token == conversation_token,
                c.typed_at <= before,
            )
            .order_by(c.typed_at.desc(), c.episode_id.desc())
            .limit(limit)
        )
        return [r[0] for r in rows]

    def drop_conversation_episodes(self, space_id: str, episode_ids: Iterable[str]) -> None:
        c = t.conversation_episodes.c
        for chunk in chunks(sorted(set(episode_ids))):
            self.conn.execute(
                t.conversation_episodes.delete().where(
                    c.space_id == space_id, c.episode_id.in_(chunk)
                )
            )
