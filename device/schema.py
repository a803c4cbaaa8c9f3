"""The device schema, as the ordered statements of each migration.

Invariants:
- Sealed content (``record_versions``, ``episodes``) and data keys are append-only,
  enforced by triggers in the database itself: an UPDATE of sealed bytes or key ids
  raises, and a DELETE raises unless a matching ``shred_permits`` row exists. Only
  ``device/shred.py`` writes permits (and clears them in the same transaction).
- Plain columns hold metadata only; every text the user typed lives sealed, once.
- ``op_queue`` rows carry the operation without its text; the text is re-read from
  the sealed row at push time, so forgetting the row forgets the queued text too.
- A record row is never deleted: a forgotten record stays as a skeleton.
"""

from __future__ import annotations

V1: tuple[str, ...] = (
    """
    CREATE TABLE meta (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        device_name TEXT NOT NULL,
        cloud_url TEXT,
        device_id TEXT,
        space_id TEXT,
        credential TEXT,
        local_space TEXT NOT NULL,
        private_key BLOB NOT NULL CHECK (length(private_key) = 32),
        pull_cursor TEXT,
        created_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE data_keys (
        key_id TEXT PRIMARY KEY,
        dek BLOB NOT NULL CHECK (length(dek) = 32),
        origin TEXT NOT NULL CHECK (origin IN ('local', 'cloud'))
    )
    """,
    """
    CREATE TABLE episodes (
        episode_id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        typed_at TEXT NOT NULL,
        bound_space TEXT NOT NULL,
        key_id TEXT NOT NULL REFERENCES data_keys (key_id),
        sealed BLOB NOT NULL,
        sync_state TEXT NOT NULL CHECK (sync_state IN ('pending', 'synced', 'refused')),
        refusal_reason TEXT
    )
    """,
    "CREATE INDEX episodes_conversation ON episodes (conversation_id, typed_at)",
    """
    CREATE TABLE records (
        record_id TEXT PRIMARY KEY,
        lifecycle TEXT NOT NULL CHECK (lifecycle IN
            ('candidate', 'active', 'not_in_use', 'permanently_forgotten')),
        current_version INTEGER,
        forgotten_at TEXT,
        sync_state TEXT NOT NULL CHECK (sync_state IN ('pending', 'synced', 'refused')),
        refusal_reason TEXT,
        CHECK ((lifecycle = 'permanently_forgotten') = (forgotten_at IS NOT NULL))
    )
    """,
    """
    CREATE TABLE record_versions (
        record_id TEXT NOT NULL REFERENCES records (record_id),
        version INTEGER NOT NULL CHECK (version >= 1),
        supersedes INTEGER,
        epistemic_state TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        bound_space TEXT NOT NULL,
        key_id TEXT NOT NULL REFERENCES data_keys (key_id),
        sealed BLOB NOT NULL,
        PRIMARY KEY (record_id, version)
    )
    """,
    """
    CREATE TABLE recall_words (
        record_id TEXT NOT NULL REFERENCES records (record_id),
        word TEXT NOT NULL,
        PRIMARY KEY (record_id, word)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX recall_words_word ON recall_words (word)",
    """
    CREATE TABLE op_queue (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        op_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('add_episode', 'remember', 'forget_permanently')),
        record_id TEXT,
        episode_id TEXT,
        op_json TEXT NOT NULL,
        queued_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX op_queue_record ON op_queue (record_id)",
    "CREATE INDEX op_queue_episode ON op_queue (episode_id)",
    """
    CREATE TABLE receipts (
        op_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        record_id TEXT,
        episode_id TEXT,
        receipt_json TEXT NOT NULL,
        stored_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE pending_acks (
        event_id INTEGER PRIMARY KEY,
        record_id TEXT NOT NULL,
        received_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE forgotten_episodes (
        episode_id TEXT PRIMARY KEY,
        forgotten_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE shred_permits (
        kind TEXT NOT NULL CHECK (kind IN ('record', 'episode', 'key')),
        item_id TEXT NOT NULL,
        PRIMARY KEY (kind, item_id)
    )
    """,
    # --- Invariant 3, structural: sealed content is append-only ---------------------
    """
    CREATE TRIGGER record_versions_append_only BEFORE UPDATE ON record_versions
    BEGIN
        SELECT RAISE(ABORT, 'append-only: record ' || OLD.record_id || ' v' || OLD.version
            || ' cannot be updated; a correction is a new version');
    END
    """,
    """
    CREATE TRIGGER record_versions_delete_needs_permit BEFORE DELETE ON record_versions
    WHEN NOT EXISTS (
        SELECT 1 FROM shred_permits WHERE kind = 'record' AND item_id = OLD.record_id)
    BEGIN
        SELECT RAISE(ABORT, 'append-only: record ' || OLD.record_id || ' v' || OLD.version
            || ' can only be removed by shredding (no shred permit)');
    END
    """,
    """
    CREATE TRIGGER episodes_append_only
    BEFORE UPDATE OF episode_id, conversation_id, typed_at, bound_space, key_id, sealed
    ON episodes
    BEGIN
        SELECT RAISE(ABORT, 'append-only: episode ' || OLD.episode_id
            || ' content cannot be updated');
    END
    """,
    """
    CREATE TRIGGER episodes_delete_needs_permit BEFORE DELETE ON episodes
    WHEN NOT EXISTS (
        SELECT 1 FROM shred_permits WHERE kind = 'episode' AND item_id = OLD.episode_id)
    BEGIN
        SELECT RAISE(ABORT, 'append-only: episode ' || OLD.episode_id
            || ' can only be removed by shredding (no shred permit)');
    END
    """,
    """
    CREATE TRIGGER data_keys_append_only BEFORE UPDATE ON data_keys
    BEGIN
        SELECT RAISE(ABORT, 'append-only: data key ' || OLD.key_id || ' cannot be updated');
    END
    """,
    """
    CREATE TRIGGER data_keys_delete_needs_permit BEFORE DELETE ON data_keys
    WHEN NOT EXISTS (SELECT 1 FROM shred_permits WHERE kind = 'key' AND item_id = OLD.key_id)
    BEGIN
        SELECT RAISE(ABORT, 'append-only: data key ' || OLD.key_id
            || ' can only be destroyed by shredding (no shred permit)');
    END
    """,
)


# --- migration 2: the full memory record (issue 3) ----------------------------------
#
# Adds what the whole record model needs on the device: the account key (strong
# authentication), the record's usage restriction and flags (superseded by a newer
# statement, conflicts), the subject index and derivation edges ``protocol.rules``
# reads as facts, sealed derived artifacts (append-only, shredded like content),
# projects, the record state history "as of" reads use, and local receipts. The op
# queue and the shred permits are rebuilt because their CHECKs name the kinds allowed.

OP_KINDS = (
    "add_episode", "remember", "correct", "dont_use", "use_again", "restrict_usage",
    "confirm", "reaffirm", "forget_permanently", "forget_area", "infer", "add_artifact",
    "set_project",
)  # fmt: skip
_KIND_LIST = ", ".join(f"'{k}'" for k in OP_KINDS)

V2: tuple[str, ...] = (
    "ALTER TABLE meta ADD COLUMN account_key BLOB CHECK (account_key IS NULL "
    "OR length(account_key) = 32)",
    "ALTER TABLE records ADD COLUMN usage_area TEXT",
    "ALTER TABLE records ADD COLUMN usage_project TEXT",
    "ALTER TABLE records ADD COLUMN superseded_by TEXT",
    "ALTER TABLE records ADD COLUMN conflicts_with TEXT NOT NULL DEFAULT '[]'",
    # derived from content: shredded with the record
    """
    CREATE TABLE subject_index (
        record_id TEXT NOT NULL REFERENCES records (record_id),
        subject_key TEXT NOT NULL,
        PRIMARY KEY (record_id, subject_key)
    )
    """,
    "CREATE INDEX subject_index_key ON subject_index (subject_key)",
    """
    CREATE TABLE derivations (
        parent_id TEXT NOT NULL,
        child_kind TEXT NOT NULL CHECK (child_kind IN ('record', 'artifact')),
        child_id TEXT NOT NULL,
        PRIMARY KEY (parent_id, child_kind, child_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX derivations_child ON derivations (child_id)",
    """
    CREATE TABLE artifacts (
        artifact_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        created_at TEXT NOT NULL,
        bound_space TEXT NOT NULL,
        key_id TEXT NOT NULL REFERENCES data_keys (key_id),
        sealed BLOB NOT NULL,
        sync_state TEXT NOT NULL CHECK (sync_state IN ('pending', 'synced', 'refused')),
        refusal_reason TEXT
    )
    """,
    """
    CREATE TABLE forgotten_artifacts (
        artifact_id TEXT PRIMARY KEY,
        forgotten_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE projects (
        name TEXT PRIMARY KEY,
        open INTEGER NOT NULL CHECK (open IN (0, 1)),
        updated_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE record_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        record_id TEXT NOT NULL,
        at TEXT NOT NULL,
        lifecycle TEXT NOT NULL,
        version INTEGER
    )
    """,
    "CREATE INDEX record_events_record ON record_events (record_id, at)",
    """
    CREATE TABLE local_receipts (
        op_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        record_id TEXT,
        episode_id TEXT,
        artifact_id TEXT,
        receipt_json TEXT NOT NULL,
        stored_at TEXT NOT NULL
    )
    """,
    f"""
    CREATE TABLE op_queue_v2 (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        op_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ({_KIND_LIST})),
        record_id TEXT,
        episode_id TEXT,
        artifact_id TEXT,
        version INTEGER,
        op_json TEXT NOT NULL,
        queued_at TEXT NOT NULL
    )
    """,
    "INSERT INTO op_queue_v2 (seq, op_id, kind, record_id, episode_id, version, op_json, "
    "queued_at) SELECT seq, op_id, kind, record_id, episode_id, "
    "CASE kind WHEN 'remember' THEN 1 END, op_json, queued_at FROM op_queue",
    "DROP TABLE op_queue",
    "ALTER TABLE op_queue_v2 RENAME TO op_queue",
    "CREATE INDEX op_queue_record ON op_queue (record_id)",
    "CREATE INDEX op_queue_episode ON op_queue (episode_id)",
    "CREATE INDEX op_queue_artifact ON op_queue (artifact_id)",
    # permits are cleared inside every shredding transaction, so the table is empty here
    "DROP TABLE shred_permits",
    """
    CREATE TABLE shred_permits (
        kind TEXT NOT NULL CHECK (kind IN ('record', 'episode', 'key', 'artifact')),
        item_id TEXT NOT NULL,
        PRIMARY KEY (kind, item_id)
    )
    """,
    """
    CREATE TRIGGER artifacts_append_only
    BEFORE UPDATE OF artifact_id, kind, created_at, bound_space, key_id, sealed ON artifacts
    BEGIN
        SELECT RAISE(ABORT, 'append-only: artifact ' || OLD.artifact_id
            || ' content cannot be updated');
    END
    """,
    """
    CREATE TRIGGER artifacts_delete_needs_permit BEFORE DELETE ON artifacts
    WHEN NOT EXISTS (
        SELECT 1 FROM shred_permits WHERE kind = 'artifact' AND item_id = OLD.artifact_id)
    BEGIN
        SELECT RAISE(ABORT, 'append-only: artifact ' || OLD.artifact_id
            || ' can only be removed by shredding (no shred permit)');
    END
    """,
)


# --- migration 3: retrieval indexes (issue 4) ----------------------------------------
#
# The word table gives way to real search: an FTS5 index of each record's current
# version (stemmed terms, blinded with this device's search key, so the index holds no
# word in the clear), int8 sentence vectors tagged with the model that made them, and
# which version each index holds. All of it is derived data: ``device/shred.py``
# deletes it with the record, and the same transaction merges the FTS5 segments
# (``optimize``) so no deleted term stays behind in an old segment.
# Records already held are indexed when the agent next opens (``device.search``).

V3: tuple[str, ...] = (
    "DROP TABLE recall_words",
    """
    CREATE TABLE search_state (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        search_key BLOB NOT NULL CHECK (length(search_key) = 32),
        generation INTEGER NOT NULL,
        needs_merge INTEGER NOT NULL CHECK (needs_merge IN (0, 1))
    )
    """,
    "INSERT INTO search_state (singleton, search_key, generation, needs_merge) "
    "VALUES (1, randomblob(32), 0, 0)",
    "CREATE VIRTUAL TABLE record_fts USING fts5(terms, content='', contentless_delete=1, "
    "tokenize='unicode61')",
    "INSERT INTO record_fts (record_fts, rank) VALUES ('secure-delete', 1)",
    """
    CREATE TABLE record_search (
        record_id TEXT PRIMARY KEY REFERENCES records (record_id),
        version INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE record_vectors (
        record_id TEXT PRIMARY KEY REFERENCES records (record_id),
        version INTEGER NOT NULL,
        model_id TEXT NOT NULL,
        vector BLOB NOT NULL
    )
    """,
    "CREATE INDEX records_superseded_by ON records (superseded_by)",
)


# --- migration 4: writing memory (issue 5) --------------------------------------------
#
# The detector's candidates (labels only: the words stay sealed in their episode; rows
# are deleted when the episode is shredded), conversations that ended (their candidates
# are ready for consolidation), and the sensitive classes the user keeps only on this
# device: episodes and records of those classes are marked ``device_only`` and their
# operations are never queued, so nothing of them is ever pushed. The op queue is
# rebuilt because its CHECK names the kinds allowed.

OP_KINDS_V4 = (
    *OP_KINDS, "mark_candidate", "end_session", "consolidate", "corroborate", "revise_rule",
    "pass_time",
)  # fmt: skip
_KIND_LIST_V4 = ", ".join(f"'{k}'" for k in OP_KINDS_V4)

V4: tuple[str, ...] = (
    """
    CREATE TABLE candidates (
        episode_id TEXT NOT NULL,
        sentence INTEGER NOT NULL,
        conversation_id TEXT NOT NULL,
        content_type TEXT NOT NULL,
        sensitivity TEXT NOT NULL,
        time_kind TEXT NOT NULL,
        score REAL NOT NULL,
        model_id TEXT NOT NULL,
        marked_at TEXT NOT NULL,
        record_id TEXT,
        PRIMARY KEY (episode_id, sentence)
    )
    """,
    "CREATE INDEX candidates_conversation ON candidates (conversation_id)",
    """
    CREATE TABLE ended_conversations (
        conversation_id TEXT PRIMARY KEY,
        ended_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE device_only_classes (
        sensitivity TEXT PRIMARY KEY,
        chosen_at TEXT NOT NULL
    )
    """,
    "ALTER TABLE episodes ADD COLUMN device_only INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE records ADD COLUMN device_only INTEGER NOT NULL DEFAULT 0",
    f"""
    CREATE TABLE op_queue_v4 (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        op_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ({_KIND_LIST_V4})),
        record_id TEXT,
        episode_id TEXT,
        artifact_id TEXT,
        version INTEGER,
        op_json TEXT NOT NULL,
        queued_at TEXT NOT NULL
    )
    """,
    "INSERT INTO op_queue_v4 SELECT seq, op_id, kind, record_id, episode_id, artifact_id, "
    "version, op_json, queued_at FROM op_queue",
    "DROP TABLE op_queue",
    "ALTER TABLE op_queue_v4 RENAME TO op_queue",
    "CREATE INDEX op_queue_record ON op_queue (record_id)",
    "CREATE INDEX op_queue_episode ON op_queue (episode_id)",
    "CREATE INDEX op_queue_artifact ON op_queue (artifact_id)",
)


# --- migration 5: sync under fire (issue 6) -------------------------------------------
#
# Resync: a device too far behind the cloud's compacted change feed rebuilds its subset
# from the start (``device.sync``). ``meta.resync_started_at`` is the persisted marker:
# set in its own transaction before the first page, cleared in the final transaction
# that shreds what the cloud no longer has and moves the cursor; a crash in between
# restarts the resync from scratch. ``resync_seen`` holds the ids (never content) of
# the records, episodes and artifacts the cloud sent during the resync in progress.
#
# Wipe confirmation: a revoked device wipes its memory and keeps its credential only to
# tell the cloud (``POST /v1/wiped``); ``meta.wiped_at`` says it wiped, and the
# confirmation is owed while the credential is still there.

V5: tuple[str, ...] = (
    "ALTER TABLE meta ADD COLUMN resync_started_at TEXT",
    """
    CREATE TABLE resync_seen (
        kind TEXT NOT NULL CHECK (kind IN ('record', 'episode', 'artifact')),
        item_id TEXT NOT NULL,
        PRIMARY KEY (kind, item_id)
    ) WITHOUT ROWID
    """,
    "ALTER TABLE meta ADD COLUMN wiped_at TEXT",
)


# Migration 6 (numbered after the resync work's 5): the tables whose ``key_id``
# references ``data_keys`` get an index on it. With foreign keys on, deleting a data
# key (every shred) otherwise makes SQLite scan each of them whole: 0.4 s per forgotten
# record on a device holding 100k records (bench/destruction.py).
V6_KEY_INDEXES: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS episodes_key ON episodes (key_id)",
    "CREATE INDEX IF NOT EXISTS record_versions_key ON record_versions (key_id)",
    "CREATE INDEX IF NOT EXISTS artifacts_key ON artifacts (key_id)",
)

# The import ledger: each export package imported into this device, once (an export
# id is imported at most once; ``device.importing``). Metadata only: no text.
V7_IMPORT_LEDGER: tuple[str, ...] = (
    """
    CREATE TABLE imported_packages (
        export_id TEXT PRIMARY KEY,
        imported_at TEXT NOT NULL,
        episodes INTEGER NOT NULL CHECK (episodes >= 0),
        records INTEGER NOT NULL CHECK (records >= 0),
        not_imported TEXT NOT NULL
    )
    """,
)


# Migration 8, the device subset (issue 9): ``record_uses`` counts what this device's own
# retrieval returned, reported to the cloud with the next pull (``reported`` = the part
# already sent); ``subset_entries`` says why the cloud put a record in this device's
# subset; ``deferred_evictions`` holds records that left the subset while an operation on
# them was still queued (they leave once the queue is sent). Ids, counts and times only.
V8_SUBSET: tuple[str, ...] = (
    """
    CREATE TABLE record_uses (
        record_id TEXT PRIMARY KEY,
        uses INTEGER NOT NULL CHECK (uses >= 0),
        reported INTEGER NOT NULL DEFAULT 0 CHECK (reported >= 0),
        last_used_at TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE subset_entries (
        record_id TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        entered_at TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE deferred_evictions (
        record_id TEXT PRIMARY KEY,
        episode_ids TEXT NOT NULL,
        artifact_ids TEXT NOT NULL,
        left_at TEXT NOT NULL
    ) WITHOUT ROWID
    """,
)


# --- migration 9: what a resync kept unseen (issue 19) --------------------------------
#
# ``resync_kept`` names the records a finished resync kept although the cloud did not
# send them, because a queued op of this device creates them. When the cloud answers
# that op ``duplicate`` (it had the record before this delivery), whether it still has
# the record is ASKED of the cloud (its record status), never inferred from the resync:
# a duplicate only says the op was applied once before. A row goes when that op's
# receipt is stored or the record is shredded. Ids only.
V9_RESYNC_KEPT: tuple[str, ...] = (
    """
    CREATE TABLE resync_kept (
        record_id TEXT PRIMARY KEY
    ) WITHOUT ROWID
    """,
)


# --- migration 10: when this device last synced (issue 23 item 5) ----------------------
#
# ``meta.last_synced_at``: the injected clock's time at the end of the last sync that
# went through (push, pull, acks); NULL while the device never synced, so a status can
# say "first sync". A time only; a failed sync writes nothing (its error stays in memory).
V10_LAST_SYNCED: tuple[str, ...] = ("ALTER TABLE meta ADD COLUMN last_synced_at TEXT",)


# --- migration 11: derived rows stored once (issue 21 item 2) --------------------------
#
# ``subject_index`` and ``record_search`` were rowid tables whose primary key is a second
# b-tree holding the same text again (the subject index: ~250 bytes a record twice over).
# As WITHOUT ROWID tables the primary key IS the table, so each row is stored once; the
# columns, their order, the key lookup index and what every query reads stay the same.
# The rows are copied, then the old tables dropped (``secure_delete`` zeroes their
# pages), in the migration's one transaction. ``record_vectors`` stays a rowid table:
# its rows are ~450 bytes, and a WITHOUT ROWID b-tree would copy whole rows into its
# interior pages, costing more than the key index it saves.
V11_DERIVED_STORED_ONCE: tuple[str, ...] = (
    """
    CREATE TABLE subject_index_v11 (
        record_id TEXT NOT NULL REFERENCES records (record_id),
        subject_key TEXT NOT NULL,
        PRIMARY KEY (record_id, subject_key)
    ) WITHOUT ROWID
    """,
    "INSERT INTO subject_index_v11 (record_id, subject_key) "
    "SELECT record_id, subject_key FROM subject_index",
    "DROP TABLE subject_index",
    "ALTER TABLE subject_index_v11 RENAME TO subject_index",
    "CREATE INDEX subject_index_key ON subject_index (subject_key)",
    """
    CREATE TABLE record_search_v11 (
        record_id TEXT PRIMARY KEY REFERENCES records (record_id),
        version INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    "INSERT INTO record_search_v11 (record_id, version) "
    "SELECT record_id, version FROM record_search",
    "DROP TABLE record_search",
    "ALTER TABLE record_search_v11 RENAME TO record_search",
)
