"""Pull cost follows changes, not size (issue 6): one change in 100 vs 100k records.

``measure(service, spaces, reps)`` takes spaces built by ``bench.spaces.prepare`` (a
real device caught up in each, its HTTP requests timed). Each repetition adds one
remembered sentence to every space (an episode and a remember op, applied as another
device's push: three change rows, the episode, the record version and its state), then
the space's device syncs and brings exactly that. Sizes alternate within a repetition,
so drift on a shared machine falls on both; the first ``WARMUP`` repetitions are not
counted. Reported per size: the median and p90 of the pull request at the HTTP seam
(the cloud's work plus loopback), the median of the whole ``sync()`` on the device
(acks, an empty push queue, the pull, applying it), and the changes each pull brought;
then the ratios largest / smallest.

Invariants: nothing here asserts a timing; a pull that did not bring the one memory
(three changes) is an error naming the space, not a figure.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.http_timing import percentile
from bench.retrieval import fast_vectors
from bench.spaces import SpaceWithDevice
from cloud.service import CloudService

WARMUP = 2
CHANGES_PER_MEMORY = 3  # episode, record_version, record_state


class PullDidNotBringTheChange(RuntimeError):
    """A timed pull brought something other than the one memory added before it."""


def _one(service: CloudService, prepared: SpaceWithDevice) -> tuple[float, float]:
    """Add one memory, sync the device; (pull request seconds, sync seconds)."""
    prepared.add_memory(service)
    prepared.log.entries.clear()
    start = time.perf_counter()
    report = prepared.agent.sync()
    sync_s = time.perf_counter() - start
    if report.pulled != CHANGES_PER_MEMORY:
        raise PullDidNotBringTheChange(
            f"space {prepared.space.space_id} ({prepared.space.records} records): the pull "
            f"brought {report.pulled} changes, expected {CHANGES_PER_MEMORY}"
        )
    return sum(prepared.log.seconds("/v1/pull")), sync_s


def measure(service: CloudService, spaces: list[SpaceWithDevice], reps: int) -> dict[str, Any]:
    """Figures per space size (keyed by record count) and the ratios largest/smallest."""
    pulls: dict[int, list[float]] = {p.space.records: [] for p in spaces}
    syncs: dict[int, list[float]] = {p.space.records: [] for p in spaces}
    with fast_vectors():  # the device indexes the new record; the model is not the point
        for rep in range(WARMUP + reps):
            for prepared in spaces:
                pull_s, sync_s = _one(service, prepared)
                if rep >= WARMUP:
                    pulls[prepared.space.records].append(pull_s)
                    syncs[prepared.space.records].append(sync_s)
    ms = 1000.0
    sizes = sorted(pulls)
    out: dict[str, Any] = {
        str(n): {
            "pull_p50_ms": ms * statistics.median(pulls[n]),
            "pull_p90_ms": ms * percentile(pulls[n], 90),
            "sync_p50_ms": ms * statistics.median(syncs[n]),
            "changes_per_pull": CHANGES_PER_MEMORY,
            "repetitions": reps,
        }
        for n in sizes
    }
    small, big = out[str(sizes[0])], out[str(sizes[-1])]
    out["ratio_pull"] = big["pull_p50_ms"] / small["pull_p50_ms"]
    out["ratio_sync"] = big["sync_p50_ms"] / small["sync_p50_ms"]
    return out
