"""The first ``recall --cloud`` on a freshly pushed space (issue 20): before and after
indexing moved out of the request, with a real uvicorn cloud and the real embedder.

- after: the serving process answers at once from what is indexed (nothing, on a
  fresh space) and says how many records are not yet searchable; its background
  indexer then indexes the space (timed until idle, a condition wait).
- before: the same work the request did until issue 20, on an identically built space
  in the same run: the whole index catch-up, then the same HTTP recall (reconstructed,
  since the old code is gone: catch-up time + recall time, each measured).
- floor: the same recall once the space is indexed.
Spaces are built by a separate in-process "pusher" service (``indexing="manual"``, so
nothing indexes them before the measurement), rounds alternate after/before, medians
are reported. The device's timeout is ``device.client.DEFAULT_TIMEOUT``; a request
that takes longer would have been reported to the user as a slow (before issue 20:
unreachable) cloud.
"""

from __future__ import annotations

import base64
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from nacl.public import PrivateKey, SealedBox
from rich.table import Table

from bench.spaces import memory_ops, push_checked
from cloud.config import CloudConfig
from cloud.service import CloudService
from device.client import DEFAULT_TIMEOUT
from protocol.messages import EnrollRequest
from simulator.cloud_runner import RunningCloud

RECORDS, SMOKE_RECORDS = 1_500, 40
ROUNDS, SMOKE_ROUNDS = 2, 1
QUERY = "What did I say about my garden?"


def _space(pusher: CloudService, name: str, n: int, tag: int) -> str:
    space_id, _code = pusher.add_user(name)
    writer = pusher.enroll(_enroll(pusher, space_id, PrivateKey.generate())).device_id
    push_checked(pusher, space_id, writer, memory_ops(tag, 0, n, tag))
    return space_id


def _enroll(service: CloudService, space_id: str, key: PrivateKey) -> EnrollRequest:
    return EnrollRequest(
        code=service.new_enrollment_code(space_id),
        device_name=f"bench-{space_id[-6:]}",
        public_key=bytes(key.public_key),
    )


def _asker(
    cloud: RunningCloud, service: CloudService, space_id: str
) -> tuple[httpx.Client, PrivateKey]:
    key = PrivateKey.generate()
    enrolled = service.enroll(_enroll(service, space_id, key))
    client = httpx.Client(
        base_url=cloud.url,
        headers={"authorization": f"Bearer {enrolled.credential}"},
        timeout=DEFAULT_TIMEOUT * 10,  # measure past the device's timeout, not stop at it
    )
    return client, key


def _recall(client: httpx.Client, key: PrivateKey) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    r = client.post("/v1/recall", json={"protocol_version": 4, "query": QUERY})
    took = time.perf_counter() - start
    r.raise_for_status()
    sealed = base64.b64decode(r.json()["sealed_answer"])
    answer: dict[str, Any] = json.loads(SealedBox(key).decrypt(sealed))
    return took, answer


def measure(folder: Path, smoke: bool) -> dict[str, Any]:
    n, rounds = (SMOKE_RECORDS, SMOKE_ROUNDS) if smoke else (RECORDS, ROUNDS)
    folder.mkdir(parents=True, exist_ok=True)
    config = CloudConfig(
        store_url=f"sqlite:///{folder / 'records.db'}", key_store_path=folder / "keys.db"
    )
    after: list[float] = []
    before: list[float] = []
    before_catch_up: list[float] = []
    indexing: list[float] = []
    floor: list[float] = []
    unindexed: list[int] = []
    with RunningCloud(config) as cloud:
        pusher = CloudService(replace(config, indexing="manual"))
        serving = cloud.service
        assert serving is not None
        try:
            # warm both processes (the model loaded, the first request served): the
            # figures are of a fresh space, not of a fresh process
            pusher.search.embedder().embed(["warm up"])
            warm = _space(pusher, "warm-up", 5, 99)
            client, key = _asker(cloud, pusher, warm)
            _recall(client, key)
            assert serving.indexer.wait_idle(timeout=600)
            _recall(client, key)
            client.close()
            for r in range(rounds):
                # after: the first recall of a fresh space, answered from what is indexed
                space = _space(pusher, f"after-{r}", n, 2 * r + 1)
                client, key = _asker(cloud, pusher, space)
                took, answer = _recall(client, key)
                after.append(took)
                unindexed.append(int(answer.get("unindexed", 0)))
                start = time.perf_counter()
                assert serving.indexer.wait_idle(timeout=3600)
                indexing.append(time.perf_counter() - start)
                took, answer = _recall(client, key)
                assert answer.get("unindexed", 0) == 0
                floor.append(took)
                client.close()
                # before: the request caught the whole space up, then searched it
                space = _space(pusher, f"before-{r}", n, 2 * r + 2)
                client, key = _asker(cloud, pusher, space)
                start = time.perf_counter()
                pusher.index_catch_up(space)
                catch_up = time.perf_counter() - start
                took, answer = _recall(client, key)
                assert answer.get("unindexed", 0) == 0
                before_catch_up.append(catch_up)
                before.append(catch_up + took)
                client.close()
        finally:
            pusher.close()
    med = statistics.median
    return {
        "records": n,
        "rounds": rounds,
        "device_timeout_s": DEFAULT_TIMEOUT,
        "after_first_recall_s": med(after),
        "after_unindexed_in_answer": min(unindexed),
        "after_background_indexing_s": med(indexing),
        "before_first_recall_s": med(before),
        "before_catch_up_inside_request_s": med(before_catch_up),
        "floor_recall_indexed_s": med(floor),
        "before_times_out_on_device": med(before) > DEFAULT_TIMEOUT,
        "after_times_out_on_device": med(after) > DEFAULT_TIMEOUT,
        "ratio_after_vs_floor": med(after) / med(floor),
        "ratio_before_vs_floor": med(before) / med(floor),
    }


def render(result: dict[str, Any]) -> Table:
    table = Table(
        title=f"first recall --cloud on a freshly pushed space of {result['records']:,} records "
        f"(median of {result['rounds']}; device timeout {result['device_timeout_s']:g} s)"
    )
    table.add_column("what")
    table.add_column("seconds", justify="right")
    table.add_column("note")
    table.add_row(
        "after: answered from what is indexed",
        f"{result['after_first_recall_s']:.3f}",
        f"{result['after_unindexed_in_answer']:,} record(s) not yet searchable, said so",
    )
    table.add_row(
        "after: background indexing until idle",
        f"{result['after_background_indexing_s']:.2f}",
        "outside any request",
    )
    table.add_row(
        "before: catch-up inside the request + recall",
        f"{result['before_first_recall_s']:.2f}",
        "times out on the device" if result["before_times_out_on_device"] else "within timeout",
    )
    table.add_row(
        "floor: the same recall, space indexed",
        f"{result['floor_recall_indexed_s']:.3f}",
        f"after {result['ratio_after_vs_floor']:.2f}x, "
        f"before {result['ratio_before_vs_floor']:.0f}x",
    )
    return table


if __name__ == "__main__":
    import sys
    import tempfile

    from rich.console import Console

    with tempfile.TemporaryDirectory(prefix="memsync-bench-cloud-recall-") as tmp:
        figures = measure(Path(tmp), "--smoke" in sys.argv)
    Console().print(render(figures))
    print(json.dumps(figures, indent=2))
