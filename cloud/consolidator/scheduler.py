"""The worker process: APScheduler 3 runs the session-end job every few seconds, the
reindex job every minute (vectors of a new embedding model are rebuilt in the
background) and the daily job once a day (``memsync cloud worker``).

Invariants:
- SIGTERM/SIGINT stop the worker between items: the item in hand is finished, the
  other claimed items are given back, and the process exits 0. That holds from the
  moment ``memsync cloud worker`` starts (``stopping``): a stop asked for while the
  worker still loads waits, pending, and ends it before it claims anything.
- Both jobs run at most one instance at a time per process and coalesce missed runs;
  a job that raises is logged and runs again at its next time. The work itself is
  safe to run in any number of processes at once (leases, ``worker``).
- ``--once`` runs the session-end job, then the daily job, once each, and returns.
- Test fault hook: with ``MEMSYNC_WORKER_CRASH_AFTER`` set to ``claim`` or ``apply``,
  the process kills itself with SIGKILL the first time it reaches that point (after a
  claim committed its leases; after an item's transaction committed), exactly like a
  ``kill -9`` there. Never set it in production.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from cloud.consolidator.stopping import StopSignals
from cloud.consolidator.worker import Consolidator, RunReport

log = logging.getLogger("memsync.consolidator")

CRASH_ENV = "MEMSYNC_WORKER_CRASH_AFTER"
CRASH_POINTS = ("claim", "apply")
SESSION_END_SECONDS = 5.0
REINDEX_SECONDS = 60.0
DAILY_AT = (3, 0)  # 03:00 UTC


def crash_hook(environ: Mapping[str, str] = os.environ) -> Callable[[str], None] | None:
    """The test fault hook the environment asks for (None: none)."""
    point = environ.get(CRASH_ENV)
    if not point:
        return None
    if point not in CRASH_POINTS:
        raise ValueError(f"{CRASH_ENV}={point!r}: expected one of {CRASH_POINTS}")

    def fault(reached: str) -> None:
        if reached == point:
            log.warning("%s=%s: killing this worker (test fault hook)", CRASH_ENV, point)
            os.kill(os.getpid(), signal.SIGKILL)

    return fault


@dataclass(frozen=True)
class OnceReport:
    session_end: RunReport
    daily: RunReport
    reindexed: int = 0


def run_once(consolidator: Consolidator) -> OnceReport:
    """Each job once: the session-end job, the daily job (with the time job), reindex."""
    session_end, daily = consolidator.run_session_end(), consolidator.run_daily()
    return OnceReport(session_end, daily, consolidator.service.reindex())


def _reindex(consolidator: Consolidator) -> Callable[[], None]:
    def job() -> None:
        indexed = consolidator.service.reindex()
        if indexed:
            log.info("reindex job: %d record(s) indexed", indexed)

    return job


def _job(name: str, run: Callable[[], RunReport]) -> Callable[[], None]:
    def job() -> None:
        report = run()
        if report.claimed or report.time is not None:
            log.info("%s job: %s", name, report.summary())

    return job


def run_forever(
    consolidator: Consolidator,
    stop: StopSignals,
    *,
    session_end_seconds: float = SESSION_END_SECONDS,
    daily_at: tuple[int, int] = DAILY_AT,
) -> None:
    """Run the jobs on their schedules until SIGTERM or SIGINT, then stop between items.

    A stop already pending (asked for while the worker loaded) ends it at once, before
    any job runs."""
    if stop.pending():
        name = stop.wait()
        log.info("worker %s: %s before the first job, stopped", consolidator.worker_id, name)
        return
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.add_job(
        _job("session-end", consolidator.run_session_end),
        IntervalTrigger(seconds=session_end_seconds, timezone=UTC),
        id="session-end",
        name="session-end",
        max_instances=1,
        coalesce=True,
        next_run_time=datetime.now(UTC),
    )
    scheduler.add_job(
        _reindex(consolidator),
        IntervalTrigger(seconds=REINDEX_SECONDS, timezone=UTC),
        id="reindex",
        name="reindex",
        max_instances=1,
        coalesce=True,
    )
    hour, minute = daily_at
    scheduler.add_job(
        _job("daily", consolidator.run_daily),
        CronTrigger(hour=hour, minute=minute, timezone=UTC),
        id="daily",
        name="daily",
        max_instances=1,
        coalesce=True,
        misfire_grace_time=3600,
    )
    scheduler.start()
    log.info(
        "worker %s: session-end every %ss, daily at %02d:%02d UTC",
        consolidator.worker_id,
        session_end_seconds,
        hour,
        minute,
    )
    name = stop.wait()
    log.info("worker %s: %s, stopping after the item in hand", consolidator.worker_id, name)
    consolidator.stop()  # the running job ends after its current item
    scheduler.shutdown(wait=True)
