"""Statements one pull page runs, built once at import: each reads one kind of item for
the whole page by an IN-list (``cloud.changes``).

Invariants:
- Each statement names the space (``:sp``) and takes its ids as one expanding
  parameter (``:ids``); callers chunk the ids (``cloud.store.sql_lineage.chunks``), so
  no statement passes SQLite's bound-parameter limit.
- Built from ``cloud.store.schema`` with ``bindparam``s only: the same SQL on both
  dialects, typed columns keeping their bind processing. Nothing here holds a value.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select, tuple_

from cloud.store import schema as t

_sp: Any = bindparam("sp")


def _ids() -> Any:
    return bindparam("ids", expanding=True)


_v = t.record_versions.c
# (record_id, version) pairs: a row value IN-list (SQLite >= 3.15, PostgreSQL)
VERSIONS_AT = select(
    _v.record_id, _v.version, _v.supersedes, _v.recorded_at, _v.key_id, _v.sealed_content
).where(_v.space_id == _sp, tuple_(_v.record_id, _v.version).in_(_ids()))

_d = t.derivations.c
PARENTS_OF_MANY = (
    select(_d.child_id, _d.parent_record_id)
    .where(_d.space_id == _sp, _d.child_kind == bindparam("kind"), _d.child_id.in_(_ids()))
    .order_by(_d.child_id, _d.position, _d.parent_record_id)
)

_e = t.forget_events.c
FORGET_EVENTS = select(_e.event_id, _e.record_id, _e.forgotten_at).where(
    _e.space_id == _sp, _e.event_id.in_(_ids())
)
_k = t.forget_keys.c
FORGET_EVENT_KEYS = (
    select(_k.event_id, _k.key_id, _k.episode_id, _k.artifact_id)
    .where(_k.space_id == _sp, _k.event_id.in_(_ids()))
    .order_by(_k.event_id, _k.key_id)
)
