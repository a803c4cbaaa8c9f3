"""The record store's migrations, in order: each a version, a name and the DDL it runs
(both dialects). ``cloud.store.migrations`` is the runner that applies them.

Invariants: applied migrations are never edited; a schema change is a new ``Migration``
at the end of ``MIGRATIONS``, with consecutive versions. A migration only creates or
alters tables, indexes and triggers (and fills new columns of existing rows); it holds
no data key, so it never reads or writes sealed content.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

_TYPES = {
    "sqlite": {"blob": "BLOB", "ts": "TIMESTAMP", "bigint": "INTEGER"},
    "postgresql": {"blob": "BYTEA", "ts": "TIMESTAMPTZ", "bigint": "BIGINT"},
}

_V1_TABLES = """
CREATE TABLE spaces (
    space_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at {ts} NOT NULL,
    next_seq {bigint} NOT NULL
);
CREATE TABLE enrollment_codes (
    code_hash TEXT PRIMARY KEY,
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    created_at {ts} NOT NULL,
    expires_at {ts} NOT NULL,
    used_at {ts},
    used_by TEXT
);
CREATE TABLE devices (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    name TEXT NOT NULL,
    public_key {blob} NOT NULL,
    credential_hash TEXT NOT NULL UNIQUE,
    enrolled_at {ts} NOT NULL,
    last_seen {ts},
    PRIMARY KEY (space_id, device_id)
);
CREATE TABLE applied_ops (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    op_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    receipt TEXT NOT NULL,
    stored_at {ts} NOT NULL,
    PRIMARY KEY (space_id, op_id)
);
CREATE TABLE records (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    record_id TEXT NOT NULL,
    lifecycle TEXT NOT NULL,
    current_version INTEGER NOT NULL,
    created_at {ts} NOT NULL,
    forgotten_at {ts},
    PRIMARY KEY (space_id, record_id)
);
CREATE TABLE record_versions (
    space_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    supersedes INTEGER,
    epistemic_state TEXT NOT NULL,
    recorded_at {ts} NOT NULL,
    key_id TEXT NOT NULL,
    sealed_content {blob} NOT NULL,
    PRIMARY KEY (space_id, record_id, version),
    FOREIGN KEY (space_id, record_id) REFERENCES records(space_id, record_id)
);
CREATE TABLE episodes (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    episode_id TEXT NOT NULL,
    typed_at {ts} NOT NULL,
    key_id TEXT NOT NULL,
    sealed_content {blob} NOT NULL,
    PRIMARY KEY (space_id, episode_id)
);
CREATE INDEX episodes_key ON episodes(space_id, key_id);
CREATE TABLE changes (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    seq {bigint} NOT NULL,
    kind TEXT NOT NULL,
    record_id TEXT,
    version INTEGER,
    episode_id TEXT,
    event_id {bigint},
    at {ts} NOT NULL,
    PRIMARY KEY (space_id, seq)
);
CREATE TABLE holdings (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    item_kind TEXT NOT NULL,
    item_id TEXT NOT NULL,
    PRIMARY KEY (space_id, device_id, item_kind, item_id)
);
CREATE INDEX holdings_item ON holdings(space_id, item_kind, item_id);
CREATE TABLE forget_events (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    event_id {bigint} NOT NULL,
    record_id TEXT NOT NULL,
    forgotten_at {ts} NOT NULL,
    keys_destroyed_at {ts},
    PRIMARY KEY (space_id, event_id)
);
CREATE INDEX forget_events_undestroyed ON forget_events(keys_destroyed_at);
CREATE TABLE forget_keys (
    space_id TEXT NOT NULL,
    event_id {bigint} NOT NULL,
    key_id TEXT NOT NULL,
    episode_id TEXT,
    PRIMARY KEY (space_id, event_id, key_id),
    FOREIGN KEY (space_id, event_id) REFERENCES forget_events(space_id, event_id)
);
CREATE INDEX forget_keys_key ON forget_keys(space_id, key_id);
CREATE TABLE forget_pending (
    space_id TEXT NOT NULL,
    event_id {bigint} NOT NULL,
    device_id TEXT NOT NULL,
    acked_at {ts},
    PRIMARY KEY (space_id, event_id, device_id),
    FOREIGN KEY (space_id, event_id) REFERENCES forget_events(space_id, event_id)
);
CREATE INDEX forget_pending_device ON forget_pending(space_id, device_id, acked_at);
"""

_SQLITE_APPEND_ONLY = """
CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
BEGIN SELECT RAISE(ABORT, '{table} is append-only: sealed content is never updated; \
content becomes unreadable only by destroying its key'); END;
CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
BEGIN SELECT RAISE(ABORT, '{table} is append-only: sealed content is never deleted; \
content becomes unreadable only by destroying its key'); END;
"""

_PG_APPEND_ONLY_FUNCTION = """
CREATE FUNCTION memsync_append_only() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'restrict_violation',
        MESSAGE = TG_TABLE_NAME || ' is append-only: sealed content is never '
            || lower(TG_OP) || 'd; content becomes unreadable only by destroying its key';
END
$fn$
"""

_PG_APPEND_ONLY = """
CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
FOR EACH ROW EXECUTE FUNCTION memsync_append_only();
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
FOR EACH STATEMENT EXECUTE FUNCTION memsync_append_only();
"""


def _split(script: str) -> list[str]:
    return [s.strip() for s in script.split(";\n") if s.strip()]


def _v1(conn: Connection) -> None:
    dialect = conn.dialect.name
    for statement in _split(_V1_TABLES.format(**_TYPES[dialect])):
        conn.exec_driver_sql(statement)


def _v2_append_only(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        for table in ("record_versions", "episodes"):
            # each trigger body holds a ';' of its own, so split on the trigger boundary
            for trigger in _SQLITE_APPEND_ONLY.format(table=table).split("END;"):
                if trigger.strip():
                    conn.exec_driver_sql(trigger.strip() + " END;")
    else:
        conn.exec_driver_sql(_PG_APPEND_ONLY_FUNCTION)
        for table in ("record_versions", "episodes"):
            for statement in _split(_PG_APPEND_ONLY.format(table=table)):
                conn.exec_driver_sql(statement)


_V3_MEMORY_RECORD = """
ALTER TABLE spaces ADD COLUMN account_key {blob};
ALTER TABLE records ADD COLUMN usage_restriction TEXT;
ALTER TABLE records ADD COLUMN superseded_by TEXT;
ALTER TABLE records ADD COLUMN conflicts TEXT;
ALTER TABLE records ADD COLUMN created_seq {bigint};
ALTER TABLE records ADD COLUMN state_seq {bigint};
CREATE INDEX records_created ON records(space_id, created_seq);
ALTER TABLE changes ADD COLUMN artifact_id TEXT;
ALTER TABLE changes ADD COLUMN project TEXT;
ALTER TABLE forget_keys ADD COLUMN artifact_id TEXT;
CREATE TABLE record_events (
    space_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    seq {bigint} NOT NULL,
    at {ts} NOT NULL,
    kind TEXT NOT NULL,
    lifecycle TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (space_id, record_id, seq),
    FOREIGN KEY (space_id, record_id) REFERENCES records(space_id, record_id)
);
CREATE TABLE artifacts (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    artifact_id TEXT NOT NULL,
    created_at {ts} NOT NULL,
    key_id TEXT NOT NULL,
    sealed_content {blob} NOT NULL,
    PRIMARY KEY (space_id, artifact_id)
);
CREATE TABLE derivations (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    parent_record_id TEXT NOT NULL,
    child_kind TEXT NOT NULL,
    child_id TEXT NOT NULL,
    seq {bigint} NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (space_id, parent_record_id, child_kind, child_id)
);
CREATE INDEX derivations_child ON derivations(space_id, child_kind, child_id);
CREATE TABLE subject_index (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    token TEXT NOT NULL,
    record_id TEXT NOT NULL,
    PRIMARY KEY (space_id, token, record_id)
);
CREATE INDEX subject_index_record ON subject_index(space_id, record_id);
CREATE TABLE projects (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    name TEXT NOT NULL,
    is_open BOOLEAN NOT NULL,
    updated_at {ts} NOT NULL,
    seq {bigint} NOT NULL,
    PRIMARY KEY (space_id, name)
)
"""

# written into the legacy plain column of record_versions since migration 3: the
# epistemic state is sealed inside the content now, and old rows are never rewritten
LEGACY_EPISTEMIC_PLACEHOLDER = "sealed"


def _v3_memory_record(conn: Connection) -> None:
    for statement in _split(_V3_MEMORY_RECORD.format(**_TYPES[conn.dialect.name])):
        conn.exec_driver_sql(statement)
    _append_only(conn, ("artifacts", "record_events"))


def _append_only(conn: Connection, tables: tuple[str, ...]) -> None:
    """Refuse UPDATE and DELETE (and TRUNCATE) on ``tables`` (function from migration 2)."""
    for table in tables:
        if conn.dialect.name == "sqlite":
            for trigger in _SQLITE_APPEND_ONLY.format(table=table).split("END;"):
                if trigger.strip():
                    conn.exec_driver_sql(trigger.strip() + " END;")
        else:
            for statement in _split(_PG_APPEND_ONLY.format(table=table)):
                conn.exec_driver_sql(statement)


# Migration 4: the retrieval indexes (derived data; see ``cloud.store.search``). The
# lexical index is dialect-specific: PostgreSQL keeps a tsvector with a GIN index in
# ``record_search`` itself; SQLite keeps the terms in an FTS5 table and ``record_search``
# names each record's FTS row. Both hold blinded terms only (``protocol.retrieval.lexical``).
_V4_COMMON = """
ALTER TABLE spaces ADD COLUMN search_generation {bigint} NOT NULL DEFAULT 0;
CREATE INDEX records_superseded_by ON records(space_id, superseded_by);
CREATE TABLE record_vectors (
    space_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    model_id TEXT NOT NULL,
    sealed {blob} NOT NULL,
    PRIMARY KEY (space_id, record_id),
    FOREIGN KEY (space_id, record_id) REFERENCES records(space_id, record_id)
)
"""

_V4_SQLITE = """
CREATE TABLE record_search (
    space_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    fts_rowid INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (space_id, record_id),
    FOREIGN KEY (space_id, record_id) REFERENCES records(space_id, record_id)
);
CREATE VIRTUAL TABLE record_fts USING fts5(
    space_id UNINDEXED, record_id UNINDEXED, terms, tokenize = 'unicode61'
)
"""

_V4_POSTGRESQL = """
CREATE TABLE record_search (
    space_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    terms TSVECTOR NOT NULL,
    PRIMARY KEY (space_id, record_id),
    FOREIGN KEY (space_id, record_id) REFERENCES records(space_id, record_id)
);
CREATE INDEX record_search_terms ON record_search USING GIN (terms)
"""


def _v4_search(conn: Connection) -> None:
    dialect = conn.dialect.name
    own = _V4_SQLITE if dialect == "sqlite" else _V4_POSTGRESQL
    for statement in _split(_V4_COMMON.format(**_TYPES[dialect]) + ";\n" + own):
        conn.exec_driver_sql(statement)


# Migration 5: the consolidator's work queue (see ``cloud.store.sql_work``). Ids, times,
# states and keyed hashes only: the words stay in their sealed episode, and the
# detector's labels are not kept (the consolidator runs the same model again on the
# opened sentence). ``sentence`` is -1 for an item that covers a whole episode.
# ``conversation_token`` is a keyed hash of the conversation id, never the id itself.
_V5_WORK_QUEUE = """
CREATE TABLE work_items (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    episode_id TEXT NOT NULL,
    sentence INTEGER NOT NULL,
    item_kind TEXT NOT NULL,
    conversation_token TEXT NOT NULL,
    marked_at {ts} NOT NULL,
    ready_at {ts},
    state TEXT NOT NULL,
    record_id TEXT,
    lease_owner TEXT,
    lease_until {ts},
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (space_id, episode_id, sentence)
);
CREATE INDEX work_items_claim ON work_items(state, item_kind, marked_at);
CREATE INDEX work_items_conversation ON work_items(space_id, conversation_token, state);
CREATE INDEX work_items_kind ON work_items(space_id, item_kind, marked_at);
CREATE TABLE ended_conversations (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    conversation_token TEXT NOT NULL,
    ended_at {ts} NOT NULL,
    PRIMARY KEY (space_id, conversation_token)
)
"""


def _v5_work_queue(conn: Connection) -> None:
    for statement in _split(_V5_WORK_QUEUE.format(**_TYPES[conn.dialect.name])):
        conn.exec_driver_sql(statement)


def _v6_revocation(conn: Connection) -> None:
    """A device can be revoked: its credential is refused from then on."""
    ts = _TYPES[conn.dialect.name]["ts"]
    conn.exec_driver_sql(f"ALTER TABLE devices ADD COLUMN revoked_at {ts}")


def _v7_feed_floor(conn: Connection) -> None:
    """The change feed can be compacted (``cloud.store.sql``, ``compact_changes``): a
    space's ``feed_floor`` is the highest seq ever deleted from its feed (0: none), and
    compaction finds its rows by kind."""
    bigint = _TYPES[conn.dialect.name]["bigint"]
    conn.exec_driver_sql(f"ALTER TABLE spaces ADD COLUMN feed_floor {bigint} NOT NULL DEFAULT 0")
    conn.exec_driver_sql("CREATE INDEX changes_kind ON changes(space_id, kind, seq)")


def _v8_wipe_confirmation(conn: Connection) -> None:
    """A revoked device confirms it wiped its copy; from then on it is pending nowhere."""
    ts = _TYPES[conn.dialect.name]["ts"]
    conn.exec_driver_sql(f"ALTER TABLE devices ADD COLUMN wiped_at {ts}")


def _v9_version_authors(conn: Connection) -> None:
    """Who made each record version (the device id, or the consolidator's actor name;
    NULL for versions made before this migration), so a correction based on an older
    version can tell a concurrent change by someone else from its own device's."""
    conn.exec_driver_sql("ALTER TABLE record_versions ADD COLUMN made_by TEXT")


def _v10_account_end(conn: Connection) -> None:
    """The end of an account (``cloud.account_end``): when and why a space ended, and when
    its own keys were destroyed; and the service's one ``service_state`` row, which says
    whether (and when) the service closes (``cloud.closing``)."""
    ts = _TYPES[conn.dialect.name]["ts"]
    conn.exec_driver_sql(f"ALTER TABLE spaces ADD COLUMN ended_at {ts}")
    conn.exec_driver_sql("ALTER TABLE spaces ADD COLUMN end_reason TEXT")
    conn.exec_driver_sql(f"ALTER TABLE spaces ADD COLUMN keys_destroyed_at {ts}")
    conn.exec_driver_sql(
        "CREATE TABLE service_state (id INTEGER PRIMARY KEY CHECK (id = 1), region TEXT NOT NULL, "
        f"announced_at {ts}, closes_at {ts}, export_until {ts})"
    )


# Issue 7's exports table (after migration 10, the end of an account).
EXPORTS_MIGRATION = 11
_EXPORTS = """
CREATE TABLE exports (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    export_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    started_at {ts} NOT NULL,
    finished_at {ts},
    include_sensitive BOOLEAN NOT NULL,
    outcome TEXT NOT NULL,
    PRIMARY KEY (space_id, export_id)
)
"""


def _v11_exports(conn: Connection) -> None:
    """One row per export started: an export id starts one export only, and the rows
    are the audit log of exports (who, when, with or without the sensitive classes,
    how it ended). No content, no key."""
    conn.exec_driver_sql(_EXPORTS.format(**_TYPES[conn.dialect.name]))


# Issue 9's device subset (``cloud.subset``): each device's policy and pins, what the
# cloud chose for it, the enters and leaves it has not yet confirmed, and how often
# each record was used. Ids, times, counts and rule settings only: no content.
SUBSET_MIGRATION = 12
_SUBSET = """
CREATE TABLE subset_policies (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    policy TEXT NOT NULL,
    updated_at {ts} NOT NULL,
    PRIMARY KEY (space_id, device_id)
);
CREATE TABLE subset_pins (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    pinned_at {ts} NOT NULL,
    PRIMARY KEY (space_id, device_id, record_id)
);
CREATE TABLE subset_members (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    PRIMARY KEY (space_id, device_id, record_id)
);
CREATE TABLE subset_log (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    gen {bigint} NOT NULL,
    record_id TEXT NOT NULL,
    entered BOOLEAN NOT NULL,
    reason TEXT,
    at {ts} NOT NULL,
    PRIMARY KEY (space_id, device_id, gen)
);
CREATE TABLE subset_state (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    gen {bigint} NOT NULL,
    evaluated_seq {bigint} NOT NULL,
    evaluated_at {ts} NOT NULL,
    summary TEXT NOT NULL,
    PRIMARY KEY (space_id, device_id)
);
CREATE TABLE record_uses (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    device_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    uses {bigint} NOT NULL,
    last_used_at {ts} NOT NULL,
    PRIMARY KEY (space_id, device_id, record_id)
);
CREATE INDEX changes_record ON changes(space_id, record_id);
CREATE INDEX changes_episode ON changes(space_id, episode_id);
CREATE INDEX changes_artifact ON changes(space_id, artifact_id)
"""


def _v12_subset(conn: Connection) -> None:
    """The device subset: policies, pins, members, the unconfirmed enter/leave log, each
    device's evaluation state, and record use counts; and indexes that find an entering
    record's versions, episodes and artifacts in the change feed without a scan."""
    for statement in _split(_SUBSET.format(**_TYPES[conn.dialect.name])):
        conn.exec_driver_sql(statement)


# Issue 17's history index (``protocol.consolidation.accounted``): per record, a keyed
# hash (the subject index's HMAC, ``Vault.subject_token``) of every history key of every
# version it ever had. Rows are only inserted while the record lives and deleted with it
# when it is forgotten. Existing records are not backfilled here: their keys are HMACs of
# sealed words, and a migration holds no data key (see docs/consolidator.md).
HISTORY_MIGRATION = 13
_HISTORY = """
CREATE TABLE history_index (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    token TEXT NOT NULL,
    record_id TEXT NOT NULL,
    PRIMARY KEY (space_id, token, record_id)
);
CREATE INDEX history_index_record ON history_index(space_id, record_id)
"""


def _v13_history(conn: Connection) -> None:
    """The history index: what a record ever said and which episodes it came from, as
    keyed hashes, so the consolidator finds corrected, retracted and candidate records
    of a sentence without opening the space."""
    for statement in _split(_HISTORY):
        conn.exec_driver_sql(statement)


# Migration 14: which conversation each episode the user typed belongs to, as a keyed
# hash of the conversation id (the one work items carry), so the consolidator finds the
# sentence that gives a subjectless follow-up its subject without opening the space.
# Rows go with their episode when it is destroyed. Episodes from before it are not
# backfilled (the conversation id is sealed); their follow-ups find no context.
CONVERSATION_MIGRATION = 14
_CONVERSATIONS = """
CREATE TABLE conversation_episodes (
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    conversation_token TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    typed_at {ts} NOT NULL,
    PRIMARY KEY (space_id, conversation_token, episode_id)
);
CREATE INDEX conversation_episodes_episode ON conversation_episodes(space_id, episode_id)
"""


def _v14_conversations(conn: Connection) -> None:
    for statement in _split(_CONVERSATIONS.format(**_TYPES[conn.dialect.name])):
        conn.exec_driver_sql(statement)


# Migration 15: the device's sensitivity label of a candidate (``MarkCandidate``), sealed
# with its episode's data key (``cloud.consolidator.hints``), so "sensitive when the
# device or the cloud says so" holds: the consolidator opens it as a hint that can only
# raise. Written in the transaction of its work item; cleared when the item finishes.
# Items queued before it have none (their device label was not kept).
HINT_MIGRATION = 15


def _v15_candidate_hints(conn: Connection) -> None:
    blob = _TYPES[conn.dialect.name]["blob"]
    conn.exec_driver_sql(f"ALTER TABLE work_items ADD COLUMN device_hint {blob}")


# Migration 16: records by the seq of their last state change, so the subset facts'
# refresh ("records changed since seq") reads what changed, not every record of the space.
STATE_SEQ_MIGRATION = 16


def _v16_records_state_seq(conn: Connection) -> None:
    conn.exec_driver_sql("CREATE INDEX records_state ON records(space_id, state_seq)")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[Connection], None]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "tables", _v1),
    Migration(2, "append_only_content", _v2_append_only),
    Migration(3, "memory_record", _v3_memory_record),
    Migration(4, "search_indexes", _v4_search),
    Migration(5, "work_queue", _v5_work_queue),
    Migration(6, "device_revocation", _v6_revocation),
    Migration(7, "feed_floor", _v7_feed_floor),
    Migration(8, "wipe_confirmation", _v8_wipe_confirmation),
    Migration(9, "version_authors", _v9_version_authors),
    Migration(10, "account_end", _v10_account_end),
    Migration(EXPORTS_MIGRATION, "exports", _v11_exports),
    Migration(SUBSET_MIGRATION, "device_subset", _v12_subset),
    Migration(HISTORY_MIGRATION, "history_index", _v13_history),
    Migration(CONVERSATION_MIGRATION, "conversation_episodes", _v14_conversations),
    Migration(HINT_MIGRATION, "candidate_hints", _v15_candidate_hints),
    Migration(STATE_SEQ_MIGRATION, "records_state_seq", _v16_records_state_seq),
)
