"""One hostile body cannot stall the cloud (issue 22, item 1). Real uvicorn on
loopback: while bodies built to cost the parser seconds arrive (an unauthenticated
enroll of 260,000 keys, a push of 1.3 million empty lists), ``/v1/health`` and a
normal push keep answering, and each hostile body is refused with a specific error.

The figure asserted is deliberately generous ("not blocked for more than
``MAX_STALL`` seconds"); the parse used to run on the event loop and held every other
request for 3 to 8 seconds. ``make bench`` has no figure for it yet.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from simulator.cloud_runner import RunningCloud
from tests.e2e.test_bad_input import _enroll, _episode

pytestmark = pytest.mark.e2e
MAX_STALL = 1.5  # seconds; the parse on the event loop stalled every request for 3-8 s
ROUNDS = 3


def _many_keys() -> bytes:
    inner = ",".join(f'"k{i}":0' for i in range(260_000))
    return ('{"protocol_version":1,"code":"c0000000","x":{' + inner + "}}").encode()


def _many_lists() -> bytes:
    return ('{"protocol_version":1,"ops":[' + ",".join(["[]"] * 1_300_000) + "]}").encode()


def _worst_gap(probe: Callable[[], None], busy: threading.Event) -> float:
    """The longest a probe waited for an answer while ``busy`` is set."""
    worst = 0.0
    while busy.is_set():
        started = time.perf_counter()
        probe()
        worst = max(worst, time.perf_counter() - started)
    return worst


def test_hostile_bodies_do_not_stall_health_or_a_normal_push(tmp_path: Path) -> None:
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        device = _enroll(cloud, "ada")
        keys, lists = _many_keys(), _many_lists()
        assert 2_000_000 < len(keys) < 4_000_000 and len(lists) < 4 * 1024 * 1024
        answers: list[httpx.Response] = []
        busy = threading.Event()

        def hostile() -> None:
            with httpx.Client(base_url=cloud.url, timeout=60) as raw:
                for _ in range(ROUNDS):
                    answers.append(
                        raw.post(
                            "/v1/enroll", content=keys, headers={"content-type": "application/json"}
                        )
                    )
                    answers.append(
                        raw.post(
                            "/v1/push",
                            content=lists,
                            headers={
                                "content-type": "application/json",
                                "authorization": device.headers["authorization"],
                            },
                        )
                    )
            busy.clear()  # fmt: skip

        n = iter(range(1, 10_000))

        def health() -> None:
            assert httpx.get(f"{cloud.url}/v1/health", timeout=30).status_code == 200

        def push() -> None:
            body = {"protocol_version": 1, "ops": [_episode(next(n), "I like tea.")]}
            assert device.post("/v1/push", json=body, timeout=30).status_code == 200

        health()
        push()  # warm: the first push opens what later ones reuse
        busy.set()
        attacker = threading.Thread(target=hostile)
        attacker.start()
        worst_health = _worst_gap(health, busy)
        attacker.join(timeout=120)
        assert not attacker.is_alive()
        assert len(answers) == 2 * ROUNDS
        for enroll, flood in zip(answers[::2], answers[1::2], strict=True):
            assert enroll.status_code == 413, enroll.text[:200]
            assert enroll.json()["code"] == "request_too_large"
            assert "commas and brackets; at most" in enroll.json()["message"]
            assert flood.status_code == 413, flood.text[:200]
            assert "refused before it was parsed" in flood.json()["message"]
            assert len(enroll.content) < 2_000 and len(flood.content) < 2_000
        assert worst_health < MAX_STALL, f"/v1/health waited {worst_health:.2f} s"

        # a normal push while the hostile bodies arrive again
        busy.set()
        attacker = threading.Thread(target=hostile)
        answers.clear()
        attacker.start()
        worst_push = _worst_gap(push, busy)
        attacker.join(timeout=120)
        assert worst_push < MAX_STALL, f"a normal push waited {worst_push:.2f} s"
        assert json.loads(answers[0].content)["code"] == "request_too_large"
        device.close()
