"""Recall as the agent runs it: this device's own pipeline, or the cloud's over the
whole space, and the uses each answer counts.

Invariants:
- Local recall is ``device.retrieval.recall`` (the fixed eight steps over this
  device's subset, offline); every hit was re-checked against authoritative state
  there, never here.
- A cloud answer comes sealed to this device's key and is opened here; one that does
  not open is a ``ServerError``, never a partial answer. Each of its lines says
  whether this device holds the record (``RecallHit.from_cloud``).
- Records an answer returns count as used (``device.subset.note_uses``, reported with
  the next pull), in one transaction after the answer; in temporary mode nothing is
  counted (nothing is written at all).
- When the cloud is unreachable or slow and ``fallback`` is on, local recall answers
  with the same question (the consents read once) and its note says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TypedDict, Unpack

from pydantic import ValidationError

from device import cloud_recall, keys, retrieval, store
from device import subset as device_subset
from device.client import CloudClient
from device.errors import NotEnrolled, Offline, ServerError
from device.invalid import known_keywords
from device.parts import Parts
from device.retrieval import Recall
from device.views import RecallHit
from protocol.errors import ProtocolError
from protocol.messages import RecallRequest, RecallResponse
from protocol.model import LifeArea, Sensitivity


class Scope(TypedDict, total=False):
    """The keyword arguments every recall of the agent takes besides query and limit."""

    area: LifeArea | None
    project: str | None
    personalized: bool
    factual: bool | None
    consents: Iterable[Sensitivity]


@dataclass(frozen=True, slots=True)
class Question:
    """What a recall is asked: the query and the caller's scope and consents."""

    query: str
    limit: int = 5
    area: LifeArea | None = None
    project: str | None = None
    personalized: bool = True
    factual: bool | None = None
    consents: tuple[Sensitivity, ...] = ()

    @classmethod
    def of(cls, query: str, limit: int, **scope: Unpack[Scope]) -> Question:
        """The question of a call; the consents are read once, here."""
        known_keywords("recall", scope, Scope)
        return cls(
            query,
            limit,
            area=scope.get("area"),
            project=scope.get("project"),
            personalized=scope.get("personalized", True),
            factual=scope.get("factual"),
            consents=tuple(scope.get("consents", ())),
        )


class Recaller:
    def __init__(
        self,
        parts: Parts,
        temporary: Callable[[], bool],
        cloud: Callable[[], CloudClient],
        revocable: Callable[[], AbstractContextManager[None]],
        holds: Callable[[str], bool],
    ) -> None:
        self._parts = parts
        self._temporary = temporary
        self._cloud = cloud
        self._revocable = revocable
        self._holds = holds

    def run(self, q: Question) -> Recall:
        """This device's answer, counting nothing."""
        return retrieval.recall(
            self._parts.db,
            q.query,
            self._parts.now(),
            limit=q.limit,
            area=q.area,
            project=q.project,
            personalized=q.personalized,
            factual=q.factual,
            consents=frozenset(q.consents),
        )

    def count_uses(self, hits: Iterable[RecallHit]) -> None:
        """The records an answer told count as used (none in temporary mode)."""
        used = [h.record_id for h in hits]
        if used and not self._temporary():
            db = self._parts.db
            with db.atomic():
                device_subset.note_uses(db, used, self._parts.iso())

    def local(self, q: Question) -> Recall:
        answer = self.run(q)
        self.count_uses(answer.hits)
        return answer

    def in_cloud(self, q: Question, *, fallback: bool) -> Recall:
        try:
            return self._from_cloud(q)
        except Offline as exc:
            if not fallback:
                raise
            return cloud_recall.fallen_back(self.local(q), exc)

    def _from_cloud(self, q: Question) -> Recall:
        meta = store.get_meta(self._parts.db)
        if meta.credential is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; it can only search itself"
            )
        request = RecallRequest(
            query=q.query,
            limit=q.limit,
            area=q.area,
            project=q.project,
            personalized=q.personalized,
            factual=q.factual,
            consents=list(q.consents),
        )
        with self._revocable():
            client = self._cloud()
            response = client.post("/v1/recall", request, RecallResponse)
        try:
            plain = keys.open_sealed_answer(
                keys.load_private_key(meta.private_key), response.sealed_answer
            )
            answer = cloud_recall.open_answer(plain, client.protocol_version)
        except (keys.SealedKeyDoesNotOpen, ValidationError, ValueError, ProtocolError) as exc:
            raise ServerError(f"the cloud's recall answer does not open: {exc}") from exc
        recall = cloud_recall.with_unindexed(
            retrieval.from_cloud(answer, held=self._holds), answer.unindexed
        )
        # counted like a local answer's: the subset's rules for what is used often or
        # lately may then bring these records here at the next sync, within the budget
        self.count_uses(recall.hits)
        return recall
