"""The record store's tables, as SQLAlchemy Core objects used for every query.

Invariants:
- Every table is partitioned by ``space_id``; every query names the space.
- Sealed content lives only in ``record_versions``, ``episodes`` and ``artifacts``
  (``sealed_content``); those tables and the ``record_events`` log are append-only
  (enforced by triggers created in ``migrations``). Text, source episode ids,
  conversation ids, epistemic state, areas and subjects exist only inside sealed
  content; the subject index holds keyed hashes (HMAC under a per-space index key
  kept in the key store), never words.
- The DDL that creates these tables is in ``migrations`` (frozen per migration); this
  module describes the head schema, and a test checks the two agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on both dialects.

    SQLite stores naive UTC (SQLAlchemy's text format); PostgreSQL stores timestamptz.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"refusing a naive datetime {value!r}; the store keeps UTC only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


metadata = MetaData()

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("name", Text, nullable=False),
    Column("applied_at", UtcDateTime, nullable=False),
)

spaces = Table(
    "spaces",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("next_seq", BigInteger, nullable=False),
    Column("account_key", LargeBinary),  # Ed25519 verify key for strong authentication
    # bumped by every write to the space's search indexes (cache key of the vector matrix)
    Column("search_generation", BigInteger, nullable=False, server_default="0"),
    # the highest seq compaction ever deleted from the space's change feed (migration 7)
    Column("feed_floor", BigInteger, nullable=False, server_default="0"),
    # the end of the account (migration 10): when, why ("deleted" | "service_shutdown"),
    # and when the space's own keys were destroyed in the key store
    Column("ended_at", UtcDateTime),
    Column("end_reason", Text),
    Column("keys_destroyed_at", UtcDateTime),
)

enrollment_codes = Table(
    "enrollment_codes",
    metadata,
    Column("code_hash", Text, primary_key=True),
    Column("space_id", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("used_at", UtcDateTime),
    Column("used_by", Text),
)

devices = Table(
    "devices",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("public_key", LargeBinary, nullable=False),
    Column("credential_hash", Text, nullable=False, unique=True),
    Column("enrolled_at", UtcDateTime, nullable=False),
    Column("last_seen", UtcDateTime),
    Column("revoked_at", UtcDateTime),
    Column("wiped_at", UtcDateTime),  # a revoked device confirmed its wipe (migration 8)
)

applied_ops = Table(
    "applied_ops",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("op_id", Text, primary_key=True),
    Column("device_id", Text, nullable=False),
    Column("receipt", Text, nullable=False),
    Column("stored_at", UtcDateTime, nullable=False),
)

records = Table(
    "records",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("lifecycle", Text, nullable=False),
    Column("current_version", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("forgotten_at", UtcDateTime),
    Column("usage_restriction", Text),  # UsageRestriction JSON, or NULL
    Column("superseded_by", Text),
    Column("conflicts", Text),  # JSON list of record ids
    Column("created_seq", BigInteger),
    Column("state_seq", BigInteger),
)

record_versions = Table(
    "record_versions",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("supersedes", Integer),
    # legacy plain column: since migration 3 it holds a placeholder; the state is sealed
    Column("epistemic_state", Text, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
    Column("key_id", Text, nullable=False),
    Column("sealed_content", LargeBinary, nullable=False),
    Column("made_by", Text),  # device id or the consolidator's actor (migration 9)
)

episodes = Table(
    "episodes",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("episode_id", Text, primary_key=True),
    Column("typed_at", UtcDateTime, nullable=False),
    Column("key_id", Text, nullable=False),
    Column("sealed_content", LargeBinary, nullable=False),
)

changes = Table(
    "changes",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("record_id", Text),
    Column("version", Integer),
    Column("episode_id", Text),
    Column("event_id", BigInteger),
    Column("at", UtcDateTime, nullable=False),
    Column("artifact_id", Text),
    Column("project", Text),
)

holdings = Table(
    "holdings",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("item_kind", Text, primary_key=True),  # "record", "episode" or "artifact"
    Column("item_id", Text, primary_key=True),
)

# --- the device subset (migration 12; ``cloud.subset``) ---------------------------------

subset_policies = Table(
    "subset_policies",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("policy", Text, nullable=False),  # SubsetPolicy JSON: rules and budget, no content
    Column("updated_at", UtcDateTime, nullable=False),
)

subset_pins = Table(
    "subset_pins",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("pinned_at", UtcDateTime, nullable=False),
)

# the records the cloud last chose for (or saw written by) each device
subset_members = Table(
    "subset_members",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
)

# enters and leaves not yet confirmed by the device (its pull cursor passed them)
subset_log = Table(
    "subset_log",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("gen", BigInteger, primary_key=True),
    Column("record_id", Text, nullable=False),
    Column("entered", Boolean, nullable=False),
    Column("reason", Text),
    Column("at", UtcDateTime, nullable=False),
)

subset_state = Table(
    "subset_state",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("gen", BigInteger, nullable=False),  # the last subset_log gen given out
    Column("evaluated_seq", BigInteger, nullable=False),  # -1: evaluate at the next pull
    Column("evaluated_at", UtcDateTime, nullable=False),
    Column("summary", Text, nullable=False),  # counts and left-out pins (JSON), no content
)

# each device's own running count of how often its retrieval returned a record (a
# report never lowers it, so a replayed pull changes nothing)
record_uses = Table(
    "record_uses",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("uses", BigInteger, nullable=False),
    Column("last_used_at", UtcDateTime, nullable=False),
)

forget_events = Table(
    "forget_events",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("event_id", BigInteger, primary_key=True),
    Column("record_id", Text, nullable=False),
    Column("forgotten_at", UtcDateTime, nullable=False),
    Column("keys_destroyed_at", UtcDateTime),
)

forget_keys = Table(
    "forget_keys",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("event_id", BigInteger, primary_key=True),
    Column("key_id", Text, primary_key=True),
    Column("episode_id", Text),  # set when the key was an episode's
    Column("artifact_id", Text),  # set when the key was an artifact's
)

forget_pending = Table(
    "forget_pending",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("event_id", BigInteger, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("acked_at", UtcDateTime),
)

record_events = Table(
    "record_events",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("at", UtcDateTime, nullable=False),
    Column("kind", Text, nullable=False),
    Column("lifecycle", Text, nullable=False),
    Column("version", Integer, nullable=False),
)

artifacts = Table(
    "artifacts",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("artifact_id", Text, primary_key=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("key_id", Text, nullable=False),
    Column("sealed_content", LargeBinary, nullable=False),
)

derivations = Table(
    "derivations",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("parent_record_id", Text, primary_key=True),
    Column("child_kind", Text, primary_key=True),  # "record" or "artifact"
    Column("child_id", Text, primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("position", Integer, nullable=False),
)

subject_index = Table(
    "subject_index",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("token", Text, primary_key=True),  # HMAC of a protocol.subjects.stored_keys key
    Column("record_id", Text, primary_key=True),
)

# Migration 13: the history index (``protocol.consolidation.accounted``): keyed hashes
# of the history keys of every version a record ever had; only a forget removes them.
history_index = Table(
    "history_index",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("token", Text, primary_key=True),  # HMAC of an accounted.history_keys key
    Column("record_id", Text, primary_key=True),
)

# Migration 14: the episodes the user typed, by keyed hash of their conversation id.
conversation_episodes = Table(
    "conversation_episodes",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("conversation_token", Text, primary_key=True),
    Column("episode_id", Text, primary_key=True),
    Column("typed_at", UtcDateTime, nullable=False),
)

projects = Table(
    "projects",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("is_open", Boolean, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("seq", BigInteger, nullable=False),
)

# The retrieval indexes (migration 4): derived data, deleted when a record is forgotten.
# ``record_search`` says which version of a record the lexical index holds; its terms
# live in a dialect-specific column (``DIALECT_COLUMNS``): a tsvector on PostgreSQL, or
# the rowid of the record's row in the FTS5 table ``record_fts`` on SQLite.
record_search = Table(
    "record_search",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("version", Integer, nullable=False),
)

record_vectors = Table(
    "record_vectors",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("version", Integer, nullable=False),
    Column("model_id", Text, nullable=False),
    # protocol.retrieval.vectors.pack() sealed with the version's data key (kind "vector")
    Column("sealed", LargeBinary, nullable=False),
)

# The consolidator's work queue (migration 5; ``cloud.store.sql_work``): ids, times,
# states and keyed hashes only. ``sentence`` is -1 for an item covering a whole
# episode (behaviour events, external content). The detector's labels are not kept in
# the clear: they say what the words are about. The consolidator re-derives them by
# running the same model on the opened sentence; only the device's sensitivity class
# is kept, sealed with the episode's data key (``device_hint``, migration 15,
# ``cloud.consolidator.hints``), so the cloud can only raise it, never drop it.
work_items = Table(
    "work_items",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("episode_id", Text, primary_key=True),
    Column("sentence", Integer, primary_key=True),
    Column("item_kind", Text, nullable=False),  # candidate | behaviour | external
    # HMAC of the conversation id under the space's index key, never the id itself
    Column("conversation_token", Text, nullable=False),
    Column("marked_at", UtcDateTime, nullable=False),
    Column("ready_at", UtcDateTime),  # NULL until ready (a candidate: its conversation ended)
    Column("state", Text, nullable=False),  # waiting | done | dropped
    Column("record_id", Text),  # what it became (done)
    Column("lease_owner", Text),
    Column("lease_until", UtcDateTime),
    Column("attempts", Integer, nullable=False, server_default="0"),
    # the device's sensitivity label, sealed (migration 15); NULL once the item is finished
    Column("device_hint", LargeBinary),
)

ended_conversations = Table(
    "ended_conversations",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("conversation_token", Text, primary_key=True),
    Column("ended_at", UtcDateTime, nullable=False),
)

# The service's one row (id 1, migration 10): its region and, once a shutdown is
# announced, when it closes and until when export stays open (``cloud.closing``).
service_state = Table(
    "service_state",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("region", Text, nullable=False),
    Column("announced_at", UtcDateTime),
    Column("closes_at", UtcDateTime),
    Column("export_until", UtcDateTime),
)

# One row per export started (migration ``EXPORTS_MIGRATION``; ``cloud.store.sql_export``):
# an export id starts one export only, and the table is the audit log of exports. Ids,
# times and an outcome only: nothing of what the package held.
exports = Table(
    "exports",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("export_id", Text, primary_key=True),
    Column("device_id", Text, nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("finished_at", UtcDateTime),  # NULL while streaming (or after a crash)
    Column("include_sensitive", Boolean, nullable=False),
    Column("outcome", Text, nullable=False),  # streaming | complete | abandoned | failed: ...
)

# Columns a table has on one dialect only (the lexical index's own representation).
DIALECT_COLUMNS: dict[str, dict[str, frozenset[str]]] = {
    "sqlite": {"record_search": frozenset({"fts_rowid"})},
    "postgresql": {"record_search": frozenset({"terms"})},
}
# Tables outside ``metadata`` (SQLite's FTS5 table and the shadow tables it owns).
SQLITE_FTS_TABLE = "record_fts"

CONTENT_TABLES = ("record_versions", "episodes", "artifacts")
APPEND_ONLY_TABLES = (*CONTENT_TABLES, "record_events")
