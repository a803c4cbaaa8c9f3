"""``/metrics`` scraped over real HTTP from the app under uvicorn, on both stores: a
live pull shows in ``memsync_live_pulls`` while it waits, a push counts its ops, and
every answer carries its ``X-Request-ID``.

What would break it: a gauge that is not read at scrape time, metrics served only by
the test client, or a request id lost on the way through uvicorn.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

import httpx
from nacl.public import PrivateKey
from prometheus_client.parser import text_string_to_metric_families

from protocol.version import PROTOCOL_VERSION
from simulator.cloud_runner import RunningCloud
from tests.cloud.conftest import TYPED, Ops

MAX_SCRAPES = 2_000  # a bound, not a wait: each scrape is one real request


def _value(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no sample {name} {labels}")


def test_metrics_over_http_see_a_live_pull_and_count_a_push(any_cloud: RunningCloud) -> None:
    _space_id, code = any_cloud.operator.add_user("alice")
    key = PrivateKey.generate()
    with httpx.Client(base_url=any_cloud.url, timeout=30) as http:
        enrolled = http.post(
            "/v1/enroll",
            json={
                "protocol_version": PROTOCOL_VERSION,
                "code": code,
                "device_name": "phone",
                "public_key": base64.b64encode(bytes(key.public_key)).decode(),
            },
        ).json()
        auth = {"Authorization": f"Bearer {enrolled['credential']}"}
        first = http.post("/v1/pull", headers=auth, json={"protocol_version": PROTOCOL_VERSION})
        assert first.status_code == 200, first.text
        cursor = first.json()["cursor"]
        assert first.headers["X-Request-ID"]

        answered: list[Any] = []

        def live_pull() -> None:
            with httpx.Client(base_url=any_cloud.url, timeout=30) as other:
                body = {"protocol_version": PROTOCOL_VERSION, "cursor": cursor, "wait": 20}
                answered.append(other.post("/v1/pull", headers=auth, json=body))

        waiting = threading.Thread(target=live_pull)
        waiting.start()
        try:
            for _ in range(MAX_SCRAPES):
                scraped = http.get("/metrics")
                if _value(scraped.text, "memsync_live_pulls") == 1:
                    break
            else:
                raise AssertionError("the live pull never showed in memsync_live_pulls")
            assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
            ops = Ops()
            pushed = http.post(
                "/v1/push",
                headers={**auth, "X-Request-ID": "e2e-push"},
                json={
                    "protocol_version": PROTOCOL_VERSION,
                    "ops": [ops.episode("ep_aaaaaaaa01", TYPED)],
                },
            )
            assert pushed.status_code == 200 and pushed.headers["X-Request-ID"] == "e2e-push"
        finally:
            waiting.join(timeout=30)
        assert answered and answered[0].status_code == 200  # the push woke it
        assert [c["kind"] for c in answered[0].json()["changes"]] == ["episode"]

        after = http.get("/metrics").text
        assert _value(after, "memsync_live_pulls") == 0
        assert _value(after, "memsync_ops_applied_total", outcome="applied") == 1
        assert _value(after, "memsync_store_up") == 1
        pulls = _value(
            after, "memsync_http_request_duration_seconds_count",
            route="/v1/pull", method="POST", status="200",
        )  # fmt: skip
        assert pulls == 2
        # the scrapes themselves are counted under their own route
        assert _value(after, "memsync_http_request_duration_seconds_count", route="/metrics") >= 1
