"""Recall as the service answers it: the retrieval pipeline over the caller's whole
space, sealed to the asking device.

Invariants:
- Only an enrolled device of an open space recalls; the answer is sealed to that
  device's public key, so no one else on the way can read it.
- Recall runs over what is indexed (``cloud.retrieval``) and says how many live records
  are not indexed yet (``RecallAnswer.unindexed``, protocol 4 on; an older device gets
  0). Indexing never runs inside a recall: one that finds the space behind schedules a
  catch-up after its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from nacl.public import PublicKey, SealedBox

from cloud.admission import Admission
from cloud.indexer import Indexer
from cloud.retrieval import CloudRetrieval
from cloud.search import SearchIndex
from cloud.store import SqlStore
from protocol.messages import (
    RECALL_UNINDEXED_SINCE,
    RecallAnswer,
    RecallLine,
    RecallRequest,
    RecallResponse,
)
from protocol.versioned import render_json


class Recall:
    """Recall for one service."""

    def __init__(
        self,
        store: SqlStore,
        search: SearchIndex,
        retrieval: CloudRetrieval,
        indexer: Indexer,
        clock: Callable[[], datetime],
        admission: Admission,
    ) -> None:
        self.store = store
        self.search = search
        self.retrieval = retrieval
        self.indexer = indexer
        self._clock = clock
        self._admission = admission

    def recall(self, space_id: str, device_id: str, req: RecallRequest) -> RecallResponse:
        """The eight retrieval steps over the whole space, for one enrolled device."""
        with self.store.session(space_id) as s:
            device = self._admission.enrolled(s, space_id, device_id)
        unindexed = self.search.unindexed(space_id) if req.personalized else 0
        result = self.retrieval.recall(
            space_id,
            req.query,
            now=self._clock(),
            area=req.area,
            project=req.project,
            personalized=req.personalized,
            factual=req.factual,
            consents=frozenset(req.consents),
            limit=req.limit,
        )
        lines = [
            RecallLine(
                record_id=line.record_id,
                text=line.text,
                content_type=line.content_type,
                epistemic_state=line.epistemic_state,
                confidence=line.confidence,
                conflict=line.conflict,
                outdated=line.outdated,
                current=line.current,
                line=line.line,
                score=round(line.score, 4),
                pulled_in_by=line.pulled_in_by or (line.via[0] if line.via else None),
                relation=line.via[1] if line.via else None,
            )
            for line in result.lines
        ]
        version = req.protocol_version
        answer = RecallAnswer(
            lines=lines,
            block=result.text,
            factual=result.factual,
            # an older device cannot be told; it gets the answer it always got
            unindexed=unindexed if version >= RECALL_UNINDEXED_SINCE else 0,
        )
        box = SealedBox(PublicKey(device.public_key))
        plain = render_json(answer, version).encode()
        if unindexed:  # e.g. pushed through another process, or before a restart
            self.indexer.schedule(space_id)  # after the answer: it does not compete with it
        return RecallResponse(sealed_answer=box.encrypt(plain))
