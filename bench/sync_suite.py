"""The sync benchmarks of issue 6, run together: which stores, which sizes, one build.

``run(root, sizes)`` runs, in this order:
- the fleet (``bench.fleet``) against PostgreSQL (a fresh database, dropped after) and
  against SQLite, the same workload on each;
- on a SQLite cloud: spaces of ``small``, ``mid`` and ``big`` records each with a real
  device caught up; pull cost (``bench.pull_cost``) on small vs big, then key
  destruction (``bench.destruction``) on mid vs big, reusing the big build;
- pull cost again on a PostgreSQL cloud (small vs big).

Invariants: nothing here asserts a timing. PostgreSQL missing is reported as such and
its rows are left out, except under ``CI=true``, where it is an error (as in the
tests: a skipped PostgreSQL bench must not pass CI). Every cloud, device and database
made here is closed or dropped whatever happens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import destruction, fleet, postgres, pull_cost, spaces
from cloud.config import CloudConfig
from simulator.cloud_runner import RunningCloud


@dataclass(frozen=True)
class SyncSizes:
    devices: int
    users: int
    rounds: int
    threads: int
    small: int  # records in the small space (pull cost)
    mid: int  # records on the small device of the destruction bench
    big: int  # records in the big space (both)
    reps: int  # pull-cost repetitions per size
    forget: int  # key-destruction events applied


FULL = SyncSizes(200, 20, 3, 24, 100, 1_000, 100_000, 30, 1_000)
SMOKE = SyncSizes(6, 2, 2, 4, 20, 40, 200, 3, 20)


class PostgresUnavailable(RuntimeError):
    """PostgreSQL at 127.0.0.1:5432 does not answer while CI=true."""


def _postgres_up() -> bool:
    if postgres.available():
        return True
    if os.environ.get("CI") == "true":
        raise PostgresUnavailable(
            "PostgreSQL at 127.0.0.1:5432 is unreachable and CI=true: the sync bench "
            "must run its PostgreSQL rows"
        )
    return False


def _pull_cost(
    cloud: RunningCloud, root: Path, sizes: SyncSizes
) -> tuple[dict[str, Any], spaces.SpaceWithDevice]:
    """Pull cost on ``cloud``; its figures, and the big space (the caller closes it)."""
    small = spaces.prepare(cloud.operator, cloud.url, root, "small", sizes.small, tag=1)
    try:
        big = spaces.prepare(cloud.operator, cloud.url, root, "big", sizes.big, tag=2)
        try:
            figures = pull_cost.measure(cloud.operator, [small, big], sizes.reps)
        except BaseException:
            big.agent.close()
            raise
    finally:
        small.agent.close()
    figures["setup"] = {
        "big_cloud_build_s": big.space.build_s,
        "big_device_catch_up_s": big.catch_up_s,
    }
    return figures, big


def run(root: Path, sizes: SyncSizes) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": sizes.__dict__.copy()}
    pg = _postgres_up()
    out["postgresql"] = "used" if pg else "unavailable (its rows are missing)"
    shape = {
        "devices": sizes.devices,
        "users": sizes.users,
        "rounds": sizes.rounds,
        "threads": sizes.threads,
    }
    out["fleet"] = {}
    if pg:
        with postgres.fresh_database("fleet") as url:
            out["fleet"]["postgresql"] = fleet.measure(url, root / "fleet-pg", **shape)
    sqlite_url = f"sqlite:///{root / 'fleet-sqlite' / 'records.db'}"
    out["fleet"]["sqlite"] = fleet.measure(sqlite_url, root / "fleet-sqlite", **shape)

    out["pull_cost"] = {}
    with RunningCloud.sqlite(root / "sync-sqlite" / "cloud") as cloud:
        out["pull_cost"]["sqlite"], big = _pull_cost(cloud, root / "sync-sqlite", sizes)
        try:
            mid = spaces.prepare(
                cloud.operator, cloud.url, root / "sync-sqlite", "mid", sizes.mid, tag=3
            )
            try:
                out["destruction"] = destruction.measure(
                    cloud.operator, [mid, big], min(sizes.forget, sizes.mid)
                )
            finally:
                mid.agent.close()
        finally:
            big.agent.close()
    if pg:
        with postgres.fresh_database("pullcost") as url:
            folder = root / "sync-pg"
            folder.mkdir(parents=True, exist_ok=True)
            config = CloudConfig(store_url=url, key_store_path=folder / "keys.db")
            with RunningCloud(config) as cloud:
                out["pull_cost"]["postgresql"], big = _pull_cost(cloud, folder, sizes)
                big.agent.close()
    return out
