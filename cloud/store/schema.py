"""The record store's tables, as SQLAlchemy Core objects used for every query.

Invariants:
- Every table is partitioned by ``space_id``; every query names the space.
- Sealed content lives only in ``record_versions.sealed_content`` and
  ``episodes.sealed_content``; those two tables are append-only (enforced by triggers
  created in ``migrations``). Text, source episode ids and conversation ids exist only
  inside sealed content.
- The DDL that creates these tables is in ``migrations`` (frozen per migration); this
  module describes the head schema, and a test checks the two agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
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
)

record_versions = Table(
    "record_versions",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("record_id", Text, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("supersedes", Integer),
    Column("epistemic_state", Text, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
    Column("key_id", Text, nullable=False),
    Column("sealed_content", LargeBinary, nullable=False),
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
)

holdings = Table(
    "holdings",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("item_kind", Text, primary_key=True),  # "record" or "episode"
    Column("item_id", Text, primary_key=True),
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
)

forget_pending = Table(
    "forget_pending",
    metadata,
    Column("space_id", Text, primary_key=True),
    Column("event_id", BigInteger, primary_key=True),
    Column("device_id", Text, primary_key=True),
    Column("acked_at", UtcDateTime),
)

APPEND_ONLY_TABLES = ("record_versions", "episodes")
