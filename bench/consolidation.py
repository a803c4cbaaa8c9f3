"""The consolidator's throughput: candidates turned into records per second, one worker.

``measure(n, folder)`` starts an in-process cloud on SQLite, pushes ``n`` typed
sentences with the detector's marks and the end of their conversations (not timed),
then times one ``Consolidator.run_session_end()`` (claim with leases, open each
episode, re-run the detector, extract, decide and apply through the rules, complete the
item in the same transaction). Beside it, the same number of explicit ``remember`` ops
applied directly: the record write without the consolidator's reading and planning.

Invariant: nothing here asserts a timing.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nacl.public import PrivateKey

from cloud.config import CloudConfig
from cloud.consolidator.worker import Consolidator
from cloud.service import CloudService
from protocol.ids import make_id
from protocol.messages import EnrollRequest, PushRequest
from protocol.model import ContentType, Initiator, Sensitivity, TimeKind
from protocol.operations import AddEpisode, EndSession, MarkCandidate, Remember

AT = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
NAMES = ["Ana", "Ben", "Carla", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jo"]
CITIES = ["Lisbon", "Porto", "Berlin", "Oslo", "Rome", "Paris", "Vienna", "Prague"]


def _sentence(i: int) -> str:
    return f"My friend {NAMES[i % 10]} {i} lives in {CITIES[(i // 10) % 8]}."


def _ops(n: int, explicit: bool) -> list[dict[str, Any]]:
    user = {"made_at": AT, "initiated_by": Initiator.USER}
    ops: list[Any] = []
    for i in range(n):
        episode = make_id("ep", (i + (n if explicit else 0)).to_bytes(10, "big"))
        conversation = f"c{i}"
        ops.append(
            AddEpisode(
                op_id=make_id("op", (4 * i).to_bytes(10, "big")),
                episode_id=episode,
                conversation_id=conversation,
                text=_sentence(i),
                typed_at=AT,
                **user,
            )
        )
        if explicit:
            ops.append(
                Remember(
                    op_id=make_id("op", (4 * i + 1).to_bytes(10, "big")),
                    record_id=make_id("rec", i.to_bytes(10, "big")),
                    text=_sentence(i),
                    conversation_id=conversation,
                    source_episode_ids=[episode],
                    **user,
                )
            )
            continue
        ops.append(
            MarkCandidate(
                op_id=make_id("op", (4 * i + 2).to_bytes(10, "big")),
                made_at=AT,
                initiated_by=Initiator.ASSISTANT,
                episode_id=episode,
                sentence=0,
                content_type=ContentType.RELATIONSHIP,
                sensitivity=Sensitivity.NORMAL,
                time_kind=TimeKind.PERMANENT,
                score=0.99,
                model_id="bench",
            )
        )
        ops.append(
            EndSession(
                op_id=make_id("op", (4 * i + 3).to_bytes(10, "big")),
                conversation_id=conversation,
                **user,
            )
        )
    return [op.model_dump(mode="json") for op in ops]


def _push(service: CloudService, space: str, device: str, ops: list[dict[str, Any]]) -> None:
    for start in range(0, len(ops), 500):
        service.push(space, device, PushRequest(ops=ops[start : start + 500]))


def _device(service: CloudService, name: str) -> tuple[str, str]:
    space, code = service.add_user(name)
    key = bytes(PrivateKey.generate().public_key)
    enrolled = service.enroll(EnrollRequest(code=code, device_name=name, public_key=key))
    return space, enrolled.device_id


def measure(n: int, folder: Path) -> dict[str, float]:
    folder.mkdir(parents=True, exist_ok=True)
    config = CloudConfig(
        store_url=f"sqlite:///{folder / 'records.db'}", key_store_path=folder / "keys.db"
    )
    service = CloudService(config)
    try:
        space, device = _device(service, "bench-consolidation")
        _push(service, space, device, _ops(n, explicit=False))
        worker = Consolidator(service, worker_id="bench", batch=100)  # loads the detector
        start = time.perf_counter()
        report = worker.run_session_end()
        consolidate_s = time.perf_counter() - start

        space2, device2 = _device(service, "bench-explicit")
        explicit = _ops(n, explicit=True)
        episodes = explicit[0::2]
        remembers = explicit[1::2]
        _push(service, space2, device2, episodes)
        start = time.perf_counter()
        _push(service, space2, device2, remembers)
        remember_s = time.perf_counter() - start
    finally:
        service.close()
    return {
        "candidates": n,
        "records_written": float(len(set(report.written))),
        "consolidated_per_s": n / consolidate_s,
        "remember_applied_per_s": n / remember_s,
    }
