"""``DeviceAgent``'s reads, as delegations: the record views and retrieval
(``device.reading``, ``device.recalling``) and what this device holds
(``device.holdings``).

Invariants: the reads here write nothing but the uses a retrieval counts
(``device.recalling``: none in temporary mode); each answers offline from this device's
database, except ``retrieve_from_cloud``, which asks the cloud (and, with ``fallback``,
answers from here when it cannot).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Unpack

from device import catalog, holdings, reading, store, views
from device.agent_core import AgentCore
from device.recalling import Question, Scope
from device.retrieval import Recall
from protocol.operations import Receipt


class ReadingFacade(AgentCore):
    """The reads of ``DeviceAgent`` (see ``device.agent``)."""

    # --- reading (``device.reading``, ``device.recalling``) ------------------------------

    def recall(self, query: str, limit: int = 5, **scope: Unpack[Scope]) -> list[views.RecallHit]:
        """The records retrieval returns for a task (see ``retrieve`` for the whole answer)."""
        return list(self.retrieve(query, limit, **scope).hits)

    def retrieve(self, query: str, limit: int = 5, **scope: Unpack[Scope]) -> Recall:
        """The fixed eight-step retrieval over this device's subset, offline; each hit
        counts as used (``device.recalling``)."""
        return self._recaller.local(Question.of(query, limit, **scope))

    def retrieve_from_cloud(
        self, query: str, limit: int = 5, *, fallback: bool = True, **scope: Unpack[Scope]
    ) -> Recall:
        """The cloud's retrieval over the whole space, sealed to this device; offline,
        with ``fallback``, this device's own answers (``device.recalling``)."""
        return self._recaller.in_cloud(Question.of(query, limit, **scope), fallback=fallback)

    def what_do_you_know(self) -> list[views.RecordView]:
        """Everything: candidates, inferences, not in use, corrected, skeletons."""
        return reading.what_do_you_know(self._db, self._now_dt())

    def list_records(self) -> list[views.RecordView]:
        return self.what_do_you_know()

    def record_history(self, record_id: str) -> list[views.VersionView]:
        """The version chain, for the user: old versions marked no longer active."""
        return reading.record_history(self._db, record_id)

    def as_of(self, when: datetime) -> list[views.RecordView]:
        """What memory said at ``when`` (forgotten content never)."""
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"as_of needs a time with a time zone, got {when!r}")
        return reading.as_of(self._db, when.astimezone(UTC))

    def explain(self, record_id: str) -> str:
        """ "How do you know this?", from the record's evidence and source episodes."""
        return reading.explain(self._db, record_id, self._now_dt())

    def sources(self, record_id: str) -> list[views.SourceView]:
        """The current version's source episodes (quoted only for the user's words)."""
        return reading.sources(self._db, record_id)

    def due_questions(self) -> list[tuple[str, str]]:
        return reading.due_questions(self._db, self._now_dt())

    # --- what this device holds (``device.holdings``) ------------------------------------

    def receipt(self, op_id: str) -> Receipt | None:
        """The durable receipt of an op: the cloud's once pushed, else the local one."""
        return holdings.receipt(self._db, op_id)

    def pending_ops(self) -> int:
        return store.queue_count(self._db)

    def data_keys_for(self, record_id: str) -> list[bytes]:
        """Raw DEKs held for the record's versions and its source episodes."""
        return holdings.data_keys_for(self._db, record_id)

    def data_keys_for_artifact(self, artifact_id: str) -> list[bytes]:
        return holdings.data_keys_for_artifact(self._db, artifact_id)

    def artifact_ids(self) -> list[str]:
        return catalog.artifact_ids(self._db)

    def data_key_ids(self) -> set[str]:
        return store.key_ids(self._db)

    def holds(self, record_id: str) -> bool:
        """Whether this device holds the record's content now (read from its database)."""
        return holdings.holds(self._db, record_id)

    def held_records(self) -> set[str]:
        """The records whose content this device holds now (read from its database)."""
        return holdings.held_records(self._db)

    def held_because(self, record_id: str) -> str | None:
        """Why the cloud put the record in this device's subset, or None."""
        return holdings.held_because(self._db, record_id)
