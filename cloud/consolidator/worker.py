"""One consolidator worker: claim work with a lease, plan each item, apply its ops and
complete it in one transaction.

Invariants:
- Work is claimed with a lease (``StoreSession.claim_work``); any number of workers,
  in any number of processes, may run against one store. A worker that dies keeps its
  leases only until they expire; then another worker takes the items over.
- Each item is planned and applied in one transaction under its space's lock
  (``CloudService.apply_system``): the planner first re-reads the item and does nothing
  if it is no longer waiting (another worker finished it, a forget dropped it), and
  the item is completed (``done`` with the record it became, or ``dropped`` with the
  reason logged) in the same transaction as its ops' effects. So a crash before the
  commit leaves nothing and the item is retried; after it, the item is done.
- Every op id and record id is deterministic (``plan``), so even two workers that both
  hold an item (a lease expired under a slow worker) write one record: the second
  gets ``duplicate`` receipts.
- ``stop()`` ends a run between items: the leases of claimed items not yet started are
  released at once (``release_work``) rather than left to expire.
- An item that failed ``MAX_ATTEMPTS`` times is dropped with a log line instead of
  being retried forever. A failure leaves the lease to expire (no tight retry loop).
- ``fault`` is a test hook: called with ``"claim"`` after a claim and ``"apply"`` after
  an item's transaction committed (``cloud.consolidator.scheduler`` wires it to the
  ``MEMSYNC_WORKER_CRASH_AFTER`` environment variable to kill the process there).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from cloud.consolidator.behaviour import plan_behaviour
from cloud.consolidator.candidates import plan_candidate
from cloud.consolidator.external import claims_of, plan_external
from cloud.consolidator.extractors import OnnxExtractor, default_chain
from cloud.consolidator.plan import Context, Plan, describe
from cloud.consolidator.sensitivity import EmbeddingSensitivity
from cloud.consolidator.timejob import TimeReport, plan_time
from cloud.facts import FactsReader
from cloud.service import CloudService
from cloud.store.base import WORK_KINDS, StoreSession, WorkItemRow
from protocol.consolidation.extract import Extractor
from protocol.detection import Detector
from protocol.operations import AnyOperation, Receipt, ReceiptStatus
from protocol.sentences import split_sentences

log = logging.getLogger("memsync.consolidator")

LEASE_SECONDS = 300.0
BATCH = 20
MAX_ATTEMPTS = 5
# a conversation idle this long is over, even if the device never said so
IDLE_CONVERSATION = timedelta(hours=1)

Planner = Callable[[Context, WorkItemRow], Plan]
PLANNERS: dict[str, Planner] = {
    "candidate": plan_candidate,
    "external": plan_external,
    "behaviour": plan_behaviour,
}


class Outcome(StrEnum):
    DONE = "done"
    DROPPED = "dropped"
    SKIPPED = "skipped"  # no longer waiting when its turn came
    FAILED = "failed"


@dataclass
class ItemResult:
    item: WorkItemRow
    outcome: Outcome
    receipts: list[Receipt] = field(default_factory=list)
    reason: str | None = None


@dataclass
class RunReport:
    """What one run of a job did."""

    claimed: int = 0
    outcomes: dict[Outcome, int] = field(default_factory=lambda: {o: 0 for o in Outcome})
    written: list[str] = field(default_factory=list)  # record ids with an applied op
    time: TimeReport | None = None

    def add(self, result: ItemResult) -> None:
        self.outcomes[result.outcome] += 1
        for receipt in result.receipts:
            if receipt.status is ReceiptStatus.APPLIED and receipt.record_id is not None:
                self.written.append(receipt.record_id)

    def summary(self) -> str:
        counts = ", ".join(f"{o.value} {n}" for o, n in self.outcomes.items())
        text = f"claimed {self.claimed}: {counts}; records written {len(set(self.written))}"
        if self.time is not None:
            text += (
                f"; time: passed {len(self.time.passed)}, questions due "
                f"{self.time.questions_due}, stale {self.time.stale}"
            )
        return text


def cloud_sensitivity(service: CloudService) -> EmbeddingSensitivity:
    """The embedding classifier over the embedder the service's search uses."""
    from cloud.sensitivity.loader import default_classifier

    embedder = service.search.embedder()
    return EmbeddingSensitivity(default_classifier(embedder.model_id), embedder)


def _refused(receipt: Receipt) -> bool:
    return receipt.status is ReceiptStatus.REFUSED or (
        receipt.status is ReceiptStatus.DUPLICATE
        and receipt.original_status is ReceiptStatus.REFUSED
    )


class Consolidator:
    """Claims, plans, applies and completes consolidator work for one worker id."""

    def __init__(
        self,
        service: CloudService,
        *,
        worker_id: str,
        detector: Detector | None = None,
        extractor: Extractor | None = None,
        sensitivity: EmbeddingSensitivity | None = None,
        lease_seconds: float = LEASE_SECONDS,
        batch: int = BATCH,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        if detector is None:
            from cloud.detector import default_detector

            detector = default_detector()
        self.service = service
        self.worker_id = worker_id
        self.onnx = OnnxExtractor(detector)
        if extractor is None and sensitivity is None:
            sensitivity = cloud_sensitivity(service)
        self.sensitivity = sensitivity  # the embedding step, prefetched per claimed batch
        if extractor is None:
            assert sensitivity is not None
            extractor = default_chain(self.onnx, sensitivity)
        self.extractor = extractor
        self.lease_seconds = lease_seconds
        self.batch = batch
        self._fault = fault or (lambda _point: None)
        self._stopping = False

    def stop(self) -> None:
        """Finish the item in hand, give back the other claimed items, run no more."""
        self._stopping = True

    @property
    def now(self) -> datetime:
        return self.service.config.clock()

    # --- the jobs -------------------------------------------------------------------

    def run_session_end(self) -> RunReport:
        """Consolidate the candidates of conversations that ended."""
        return self._drain(("candidate",), waiting_since=None)

    def run_daily(self) -> RunReport:
        """Everything waiting (candidates of conversations idle for an hour too,
        behaviour events, external content), then the time job."""
        report = self._drain(WORK_KINDS, waiting_since=self.now - IDLE_CONVERSATION)
        report.time = self.run_time()
        return report

    def run_time(self) -> TimeReport:
        """``PassTime`` for every record whose date has passed, in every space."""
        report = TimeReport()
        with self.service.store.session() as s:
            spaces = s.space_ids()
        for space_id in spaces:
            if self._stopping:
                break

            def ops(s: StoreSession, space_id: str = space_id) -> Sequence[AnyOperation]:
                return plan_time(self._context(s, space_id), report)

            try:
                receipts = self.service.apply_system(space_id, ops)
            except Exception:  # one space's failure does not stop the others; next run retries
                log.exception("time job: space %s failed", space_id)
                continue
            report.passed += [
                r.record_id
                for r in receipts
                if r.status is ReceiptStatus.APPLIED and r.record_id is not None
            ]
        return report

    # --- claiming and processing ----------------------------------------------------

    def claim(
        self, kinds: Sequence[str] = WORK_KINDS, waiting_since: datetime | None = None
    ) -> list[WorkItemRow]:
        with self.service.store.session() as s:
            return s.claim_work(
                self.worker_id,
                self.now,
                self.lease_seconds,
                self.batch,
                kinds=kinds,
                waiting_since=waiting_since,
            )

    def _drain(self, kinds: Sequence[str], waiting_since: datetime | None) -> RunReport:
        report = RunReport()
        seen: set[tuple[str, str, int | None]] = set()
        while not self._stopping:
            items = self.claim(kinds, waiting_since)
            if not items:
                return report
            self._fault("claim")
            self._prefetch(items)
            report.claimed += len(items)
            fresh = [i for i in items if (i.space_id, *i.key) not in seen]
            for index, item in enumerate(items):
                if self._stopping:
                    self._release(items[index:])
                    return report
                seen.add((item.space_id, *item.key))
                report.add(self.process(item))
            if not fresh:  # only our own failures came back (a lease shorter than a run)
                return report
        return report

    def _prefetch(self, items: Sequence[WorkItemRow]) -> None:
        """Embed the claimed items' sentences in one batch for the sensitivity step (a
        speed-up only: best effort, read-only, and each item is still planned in its
        own transaction from what it reads there)."""
        if self.sensitivity is None:
            return
        texts: list[str] = []
        try:
            by_space: dict[str, list[WorkItemRow]] = {}
            for item in items:
                by_space.setdefault(item.space_id, []).append(item)
            with self.service.store.session() as s:
                for space_id, group in by_space.items():
                    reader = FactsReader(s, self.service.vault, space_id)
                    opened = reader.episodes({i.episode_id for i in group})
                    for item in group:
                        episode = opened.get(item.episode_id)
                        if episode is None:
                            continue
                        if item.item_kind == "external":
                            texts += claims_of(episode.text)
                        elif item.item_kind == "candidate" and item.sentence is not None:
                            sentences = split_sentences(episode.text)
                            if item.sentence < len(sentences):
                                texts.append(sentences[item.sentence])
            self.sensitivity.prefetch(texts)
        except Exception:  # the items embed one by one instead
            log.exception("prefetching %d sentence(s) failed", len(texts))

    def _release(self, items: Sequence[WorkItemRow]) -> None:
        by_space: dict[str, list[tuple[str, int | None]]] = {}
        for item in items:
            by_space.setdefault(item.space_id, []).append(item.key)
        with self.service.store.session() as s:
            for space_id, keys in by_space.items():
                s.release_work(self.worker_id, space_id, keys)

    def process(self, item: WorkItemRow) -> ItemResult:
        """Plan, apply and complete one claimed item; never raises."""
        try:
            if item.attempts > MAX_ATTEMPTS:
                return self._give_up(item)
            result = self._apply(item)
        except Exception as exc:  # the lease expires; this or another worker retries
            log.exception("%s: attempt %d failed", describe(item), item.attempts)
            return ItemResult(item, Outcome.FAILED, reason=str(exc))
        self._fault("apply")
        return result

    def _context(self, s: StoreSession, space_id: str) -> Context:
        return Context(s, self.service.vault, space_id, self.now, self.onnx, self.extractor)

    def _apply(self, item: WorkItemRow) -> ItemResult:
        planner = PLANNERS[item.item_kind]
        planned: list[Plan | None] = [None]
        result = ItemResult(item, Outcome.SKIPPED)

        def ops(s: StoreSession) -> Sequence[AnyOperation]:
            current = s.work_item(item.space_id, item.episode_id, item.sentence)
            if current is None or current.state != "waiting":
                return []
            plan = planner(self._context(s, item.space_id), item)
            planned[0] = plan
            return plan.ops

        def then(s: StoreSession, receipts: list[Receipt]) -> None:
            plan = planned[0]
            if plan is None:
                return
            refused = [r for r in receipts if _refused(r)]
            reason = plan.drop
            if reason is None and item.item_kind == "candidate" and refused:
                reason = f"{refused[0].code}: {refused[0].reason}"
            if reason is not None:
                s.complete_work(item.space_id, [item.key], dropped=True)
                result.outcome, result.reason = Outcome.DROPPED, reason
                log.info("%s dropped: %s", describe(item), reason)
                return
            for receipt in refused:  # external "same source counts once" and the like
                log.info("%s: %s %s", describe(item), receipt.code, receipt.reason)
            s.complete_work(item.space_id, [item.key, *plan.finishes], record_id=plan.record_id)
            result.outcome = Outcome.DONE

        result.receipts = self.service.apply_system(item.space_id, ops, then)
        return result

    def _give_up(self, item: WorkItemRow) -> ItemResult:
        reason = f"failed {item.attempts - 1} times; given up"

        def then(s: StoreSession, _receipts: list[Receipt]) -> None:
            s.complete_work(item.space_id, [item.key], dropped=True)

        self.service.apply_system(item.space_id, [], then)
        log.error("%s dropped: %s", describe(item), reason)
        return ItemResult(item, Outcome.DROPPED, reason=reason)
