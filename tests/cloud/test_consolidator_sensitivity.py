"""Issue 18 on both record stores: a record is sensitive when the device or the cloud says
so, and a sensitive background record waits as a candidate until the user confirms it.

The device's class reaches the cloud in ``MarkCandidate`` and is kept sealed with the
work item (migration 15); the consolidator's chain can only raise it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select, update

from cloud.consolidator.hints import HINT_BYTES, open_hint
from cloud.consolidator.worker import Consolidator, Outcome
from cloud.detector import default_detector
from cloud.service import CloudService
from cloud.store import schema as t
from protocol.detection import Detector
from protocol.model import LifecycleState, Sensitivity
from tests.cloud.conftest import Device, applied, new_user, push
from tests.cloud.test_consolidator import Work, contents

# The device's detector and lexicon miss these (it sends ``normal``); the cloud's
# broader lexicon and its classifier over the embedding catch them.
MISSED_BY_DEVICE = {
    "I switched to the night shift after the lupus flare.": Sensitivity.HEALTH,
    "I've been on lithium for years.": Sensitivity.HEALTH,
}
PLAIN = "I go swimming every Tuesday."  # normal to every checker


@pytest.fixture(scope="module")
def detector() -> Detector:
    return default_detector()


@pytest.fixture
def work() -> Work:
    return Work()


@pytest.fixture
def phone(service: CloudService) -> Iterator[Device]:
    (device,) = new_user(service, "alice", "phone")
    yield device


def _records(service: CloudService, device: Device) -> dict[str, tuple[str, Sensitivity]]:
    """text -> (lifecycle, sensitivity) of every live record the device pulls."""
    return {c.text: (state, c.sensitivity) for state, c in contents(service, device).values()}


def test_the_device_s_own_detector_misses_these_sentences(detector: Detector) -> None:
    """The premise of the next test: on the device they are normal."""
    from protocol.consolidation.sensitivity import sensitivity_of

    for sentence in MISSED_BY_DEVICE:
        (found,) = detector.detect([sentence])
        assert found.candidate, sentence
        assert sensitivity_of(sentence, found.sensitivity) is Sensitivity.NORMAL, sentence


def test_a_sensitive_sentence_the_device_missed_waits_as_a_candidate(
    service: CloudService, detector: Detector, work: Work, phone: Device
) -> None:
    ops = []
    for n, sentence in enumerate([*MISSED_BY_DEVICE, PLAIN]):
        ops += [
            work.episode(f"ep_sens0000{n:02d}", sentence),
            work.mark(f"ep_sens0000{n:02d}", 0, sensitivity="normal"),  # the device said normal
        ]
    applied(push(service, phone, *ops, work.end()))
    report = Consolidator(service, worker_id="w1", detector=detector).run_session_end()
    assert report.outcomes[Outcome.DONE] == len(MISSED_BY_DEVICE) + 1
    records = _records(service, phone)
    for sentence, cls in MISSED_BY_DEVICE.items():
        assert records[sentence] == (LifecycleState.CANDIDATE.value, cls), sentence
    # the control: a normal fact still goes active ("recently learned")
    assert records[PLAIN] == (LifecycleState.ACTIVE.value, Sensitivity.NORMAL)


def test_a_sentence_the_device_flagged_waits_even_when_the_cloud_says_normal(
    service: CloudService, detector: Detector, work: Work, phone: Device
) -> None:
    applied(
        push(
            service,
            phone,
            work.episode("ep_sens000101", PLAIN),
            work.mark("ep_sens000101", 0, sensitivity="health"),  # e.g. the user named it
            work.end(),
        )
    )
    Consolidator(service, worker_id="w1", detector=detector).run_session_end()
    assert _records(service, phone)[PLAIN] == (LifecycleState.CANDIDATE.value, Sensitivity.HEALTH)


def test_the_device_label_is_sealed_padded_and_cleared_when_the_item_finishes(
    service: CloudService, detector: Detector, work: Work, phone: Device
) -> None:
    labels = ["normal", "health", "financial_detail"]
    applied(
        push(
            service,
            phone,
            work.episode("ep_sens000201", f"{PLAIN} I drink tea every morning. I like jazz."),
            *(work.mark("ep_sens000201", n, sensitivity=label) for n, label in enumerate(labels)),
        )
    )
    c = t.work_items.c
    with service.store.engine.connect() as conn:
        sealed = [r[0] for r in conn.execute(select(c.device_hint).order_by(c.sentence))]
    assert len(sealed) == 3 and all(isinstance(s, bytes) for s in sealed)
    assert len({len(s) for s in sealed}) == 1  # the length says nothing about the class
    assert len(sealed[0]) > HINT_BYTES
    for s in sealed:
        assert not any(label.encode() in s for label in labels)
    with service.store.session() as s:
        opened = [open_hint(service.vault, s, phone.space_id, "ep_sens000201", n) for n in range(3)]
    assert opened == [Sensitivity(label) for label in labels]
    applied(push(service, phone, work.end()))
    Consolidator(service, worker_id="w1", detector=detector).run_session_end()
    with service.store.engine.connect() as conn:
        assert [r[0] for r in conn.execute(select(c.device_hint))] == [None, None, None]


def test_an_item_queued_before_migration_15_has_no_label_and_the_cloud_still_decides(
    service: CloudService, detector: Detector, work: Work, phone: Device
) -> None:
    sentence, cls = next(iter(MISSED_BY_DEVICE.items()))
    applied(
        push(
            service,
            phone,
            work.episode("ep_sens000301", sentence),
            work.mark("ep_sens000301", 0, sensitivity="health"),
            work.end(),
        )
    )
    with service.store.engine.begin() as conn:  # as if queued before the label was kept
        conn.execute(update(t.work_items).values(device_hint=None))
    Consolidator(service, worker_id="w1", detector=detector).run_session_end()
    assert _records(service, phone)[sentence] == (LifecycleState.CANDIDATE.value, cls)
