"""A default device's one-change pull as its space grows (issue 21, item 3).

A protocol-3 device holds a chosen subset of its space; the cloud keeps that choice
per device and updates it from the changes, so one new memory costs one pull whose
price should not follow the space's size (goal: <= 1.2x from 1k to 100k records).

``measure(folder, smoke)`` serves one SQLite cloud over loopback HTTP
(``RunningCloud``), fills a space per size through ``bench.spaces.fill_space`` (the
real push path, random unit vectors for the embedder), and catches up a real
default-policy ``DeviceAgent`` in each (its requests timed at the HTTP seam). Then,
repeatedly and alternating the sizes within each repetition (drift on a shared
machine falls on every size), another device's push adds one remembered sentence to
each space, the cloud's indexer is let finish (a condition, not a sleep), and that
space's device syncs. Reported per size: the median and p90 of the pull request
(the cloud's work plus loopback), the median of the whole ``sync()``, what the cloud
chose for the device, and the ratios largest / smallest beside a mirror's (protocol 2)
in the same spaces, which reads the feed without choosing.

Invariants: nothing here asserts a timing; a sync that did not bring the new memory
to the device (it must be kept: it is the newest fact) is an error naming the space.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from bench import spaces
from bench.http_timing import RequestLog, TimingTransport, percentile
from bench.retrieval import fast_vectors
from device.agent import DeviceAgent
from simulator.cloud_runner import RunningCloud

WARMUP = 2
FULL_SIZES = (1_000, 10_000, 100_000)
SMOKE_SIZES = (50, 150)
GOAL_RATIO = 1.2


class ChangeNotBrought(RuntimeError):
    """A timed sync did not leave the new memory on the device."""


@dataclass
class Reader:
    """A device caught up in a built space, its requests timed."""

    space: spaces.BuiltSpace
    agent: DeviceAgent
    log: RequestLog
    kind: str  # "default" (protocol 3: a chosen subset) or "mirror" (protocol 2)


def _reader(cloud: RunningCloud, space: spaces.BuiltSpace, folder: Path, kind: str) -> Reader:
    log = RequestLog()
    agent, _sync_s = spaces.caught_up_device(
        cloud.operator,
        space,
        folder / f"{kind}-{space.records}",
        cloud.url,
        TimingTransport(log),
        protocol_versions=spaces.MIRROR if kind == "mirror" else None,
        name=f"{kind}-reader",
    )
    return Reader(space, agent, log, kind)


def _one(cloud: RunningCloud, reader: Reader, added: int) -> tuple[float, float]:
    """Add one memory to the reader's space, sync it; (pull seconds, sync seconds)."""
    space = reader.space
    ops = spaces.memory_ops(space.tag, space.records + added, 1, space.tag)
    spaces.push_checked(cloud.operator, space.space_id, space.writer_id, ops)
    cloud.operator.indexer.wait_idle(120)
    reader.log.entries.clear()
    start = time.perf_counter()
    reader.agent.sync()
    sync_s = time.perf_counter() - start
    record_id = next(op["record_id"] for op in ops if op.get("kind") == "remember")
    if not reader.agent.holds(record_id):
        raise ChangeNotBrought(
            f"space {space.space_id} ({space.records} records, {reader.kind} device): "
            f"the new memory {record_id} is not on the device after its sync"
        )
    return sum(reader.log.seconds("/v1/pull")), sync_s


def _figures(readers: list[Reader], cloud: RunningCloud, reps: int) -> dict[str, Any]:
    pulls: dict[tuple[str, int], list[float]] = {}
    syncs: dict[tuple[str, int], list[float]] = {}
    added = {id(r.space): 0 for r in readers}
    with fast_vectors():
        for rep in range(WARMUP + reps):
            for reader in readers:
                pull_s, sync_s = _one(cloud, reader, added[id(reader.space)])
                added[id(reader.space)] += 1
                if rep >= WARMUP:
                    key = (reader.kind, reader.space.records)
                    pulls.setdefault(key, []).append(pull_s)
                    syncs.setdefault(key, []).append(sync_s)
    ms = 1000.0
    out: dict[str, Any] = {"repetitions": reps}
    for kind in ("default", "mirror"):
        sizes = sorted(n for k, n in pulls if k == kind)
        rows = {
            str(n): {
                "pull_p50_ms": ms * statistics.median(pulls[(kind, n)]),
                "pull_p90_ms": ms * percentile(pulls[(kind, n)], 90),
                "sync_p50_ms": ms * statistics.median(syncs[(kind, n)]),
            }
            for n in sizes
        }
        small, big = rows[str(sizes[0])], rows[str(sizes[-1])]
        out[kind] = {
            "sizes": rows,
            "ratio_pull": big["pull_p50_ms"] / small["pull_p50_ms"],
            "ratio_sync": big["sync_p50_ms"] / small["sync_p50_ms"],
        }
    out["goal_ratio"] = GOAL_RATIO
    out["met"] = out["default"]["ratio_sync"] <= GOAL_RATIO
    return out


def measure(folder: Path, smoke: bool, sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Figures per size for a default device and a mirror, and the ratios."""
    sizes = sizes or (SMOKE_SIZES if smoke else FULL_SIZES)
    reps = 3 if smoke else 15
    folder.mkdir(parents=True, exist_ok=True)
    readers: list[Reader] = []
    with RunningCloud.sqlite(folder / "cloud") as cloud:
        try:
            chosen: dict[str, Any] = {}
            for tag, n in enumerate(sizes, start=40):
                with fast_vectors():
                    space = spaces.fill_space(cloud.operator, f"subset-pull-{n}", n, tag)
                    cloud.operator.index_pending()
                readers.append(_reader(cloud, space, folder, "default"))
                readers.append(_reader(cloud, space, folder, "mirror"))
                chosen[str(n)] = readers[-2].agent.subset().records
            out = _figures(readers, cloud, reps)
            out["default"]["chosen_records"] = chosen
        finally:
            for reader in readers:
                reader.agent.close()
    out["sizes_records"] = list(sizes)
    return out


def render(result: dict[str, Any]) -> Table:
    table = Table(
        title="one-change sync as the space grows (median of "
        f"{result['repetitions']}; goal: a default device <= {result['goal_ratio']}x)"
    )
    for col in ("device", "records", "pull p50 ms", "pull p90 ms", "sync p50 ms"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for kind in ("default", "mirror"):
        for n, row in result[kind]["sizes"].items():
            table.add_row(
                kind,
                f"{int(n):,}",
                f"{row['pull_p50_ms']:.1f}",
                f"{row['pull_p90_ms']:.1f}",
                f"{row['sync_p50_ms']:.1f}",
            )
        table.add_row(
            kind,
            "largest / smallest",
            f"{result[kind]['ratio_pull']:.2f}x",
            "",
            f"{result[kind]['ratio_sync']:.2f}x",
        )
    return table


if __name__ == "__main__":
    import argparse
    import tempfile

    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(Path(tmp), args.smoke, tuple(args.sizes) if args.sizes else None)
    Console().print(render(result))
    print({k: v for k, v in result.items() if k in ("default", "mirror", "met")})
