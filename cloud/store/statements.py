"""Statements the push path runs per op, built once at import.

Invariants:
- Each statement is built from ``cloud.store.schema`` with ``bindparam``s only, so it
  is the same SQL the inline Core expressions produced, on both dialects (typed
  columns keep their bind processing, e.g. ``UtcDateTime``); building it per call cost
  more Python than running it.
- Every statement here names the space (``:sp``) like every other query of the store.
- Nothing here holds a value: parameters are passed at execution.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, bindparam, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from cloud.store import schema as t

_sp: Any = bindparam("sp")


def _ids() -> Any:
    return bindparam("ids", expanding=True)


_s = t.spaces.c
# one statement gives out a sequence number: the value before the increment
ALLOCATE_SEQ = (
    update(t.spaces)
    .where(_s.space_id == _sp)
    .values(next_seq=_s.next_seq + 1)
    .returning(_s.next_seq - 1)
)

_a = t.applied_ops.c
RECEIPT = select(_a.receipt).where(_a.space_id == _sp, _a.op_id == bindparam("op_id"))
PUT_RECEIPT = insert(t.applied_ops)

RECORD_COLS = (
    t.records.c.record_id,
    t.records.c.lifecycle,
    t.records.c.current_version,
    t.records.c.created_at,
    t.records.c.forgotten_at,
    t.records.c.usage_restriction,
    t.records.c.superseded_by,
    t.records.c.conflicts,
    t.records.c.created_seq,
    t.records.c.state_seq,
)
_r = t.records.c
RECORD = select(*RECORD_COLS).where(_r.space_id == _sp, _r.record_id == bindparam("rid"))
RECORDS = select(*RECORD_COLS).where(_r.space_id == _sp, _r.record_id.in_(_ids()))
INSERT_RECORD = insert(t.records)
INSERT_VERSION = insert(t.record_versions)
INSERT_EPISODE = insert(t.episodes)
INSERT_CHANGE = insert(t.changes)
INSERT_RECORD_EVENT = insert(t.record_events)

_e = t.episodes.c
EPISODES = select(_e.episode_id, _e.typed_at, _e.key_id, _e.sealed_content).where(
    _e.space_id == _sp, _e.episode_id.in_(_ids())
)

_k = t.forget_keys.c
FORGOTTEN_KEY_IDS = select(_k.key_id).where(_k.space_id == _sp, _k.key_id.in_(_ids())).distinct()

_i = t.subject_index.c
# no DISTINCT: with it SQLite scans the space's whole index by record_id instead of
# seeking the tokens; the caller's set removes the duplicates
RECORDS_WITH_SUBJECTS = select(_i.record_id).where(_i.space_id == _sp, _i.token.in_(_ids()))
DROP_RECORD_SUBJECTS = delete(t.subject_index).where(
    _i.space_id == _sp, _i.record_id == bindparam("rid")
)

_p = t.projects.c
PROJECTS = select(_p.name, _p.is_open, _p.updated_at, _p.seq).where(_p.space_id == _sp)

_set_state: dict[frozenset[str], Any] = {}


def set_record_state(columns: frozenset[str]) -> Any:
    """``UPDATE records SET <columns>`` for one record (bind names ``v_<column>``)."""
    stmt = _set_state.get(columns)
    if stmt is None:
        stmt = (
            update(t.records)
            .where(_r.space_id == _sp, _r.record_id == bindparam("rid"))
            .values({name: bindparam(f"v_{name}") for name in sorted(columns)})
        )
        _set_state[columns] = stmt
    return stmt


_insert_ignore: dict[tuple[str, str], Any] = {}


def insert_ignore(dialect: str, table: Table) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING`` into ``table`` for ``dialect``."""
    stmt = _insert_ignore.get((dialect, table.name))
    if stmt is None:
        if dialect == "postgresql":
            stmt = postgresql.insert(table).on_conflict_do_nothing()
        else:
            stmt = sqlite.insert(table).on_conflict_do_nothing()
        _insert_ignore[dialect, table.name] = stmt
    return stmt
