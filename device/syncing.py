"""The agent's sync, as it is run: one ``SyncSession`` at a time, its outcome noted for
the sync status, and live sync's background threads wired to it.

Invariants:
- Syncs are serialised by the agent's sync lock (manual, live and account deletion
  alike); every change a sync makes here is the cloud's word, told with cause
  ``pulled``; every call runs inside the wipe guard (``device.wiping``).
- Only a sync that went through stores its time (``meta.last_synced_at``); a failed
  one is noted with its error and raised unchanged.
- After a sync, up to ``REBUILD_PER_SYNC`` vectors another embedding model made are
  rebuilt, ``batch`` per transaction; until then vector search does not see them.
- Live sync runs the ordinary sync (``device.live``); its waiting pulls share one
  client made when it starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypedDict, Unpack

from device import search, store
from device.changes import Cause, caused_by
from device.client import CloudClient
from device.errors import NeedsNewerProtocol
from device.invalid import known_keywords
from device.live import DEFAULT_WAIT, LiveEvent, LiveSync, Sleeper, end_waiting_pull
from device.live import wait_for_change as wait_for_live_change
from device.parts import Parts
from device.sync import SyncSession
from device.sync_status import SyncTracker
from device.views import SyncReport

REBUILD_PER_SYNC = 256  # vectors of another model re-embedded after each sync


def sync(
    parts: Parts,
    *,
    cloud: Callable[[], CloudClient],
    revocable: Callable[[], AbstractContextManager[None]],
    lock: threading.RLock,
    status: SyncTracker,
) -> SyncReport:
    """Acks left over, then push (pull first on 409), then pull and ack."""
    db = parts.db
    status.started(parts.now())
    try:
        # what the sync changes here is the cloud's word: told as "pulled"
        with caused_by(Cause.PULLED), lock, revocable():
            report = SyncSession(db, cloud(), parts.iso, parts.random).run()
    except BaseException as exc:
        status.failed(exc)
        raise
    with db.atomic():
        store.set_last_synced(db, parts.iso())
    status.succeeded()
    rebuild_vectors(parts, limit=REBUILD_PER_SYNC)
    return report


def rebuild_vectors(parts: Parts, limit: int | None = None, batch: int = 64) -> int:
    """Re-embed records whose vector another embedding model made, ``batch`` per
    transaction, at most ``limit`` (None: all); how many were rebuilt."""
    db = parts.db
    model_id = search.embedder_for(db).model_id
    if model_id in parts.vectors_current:
        return 0  # found current once in this process; every write since indexed itself
    stale = len(search.stale(db))
    wanted = stale if limit is None else min(stale, limit)
    done = 0
    while done < wanted:
        with db.atomic():
            n = search.catch_up(db, limit=min(batch, wanted - done))
        if n == 0:
            break
        done += n
    if done == stale:
        # the scan reads every record (~12 ms at 20k): once per process and model, not
        # after every sync
        parts.vectors_current.add(model_id)
    return done


class LiveOptions(TypedDict, total=False):
    """How live sync runs (each optional): how long a live pull waits, who hears its
    events, and what sleeps between retries (tests hand in their own)."""

    wait: float  # default ``device.live.DEFAULT_WAIT``
    on_event: Callable[[LiveEvent], None] | None
    sleeper: Sleeper | None


def live_sync(
    parts: Parts,
    client: CloudClient,
    sync: Callable[[], SyncReport],
    revocable: Callable[[], AbstractContextManager[None]],
    **options: Unpack[LiveOptions],
) -> LiveSync:
    """A ``LiveSync`` (not started) whose waiting pulls go through ``client``."""
    known_keywords("start_live", options, LiveOptions)
    db = parts.db

    def wait_for_change(seconds: float) -> bool:
        with revocable():
            try:
                return wait_for_live_change(db, client, seconds)
            except NeedsNewerProtocol:
                return True  # the cloud just stepped this device down to version 1

    return LiveSync(
        sync=sync,
        wait_for_change=wait_for_change,
        end_wait=lambda: end_waiting_pull(db, client),
        wait=options.get("wait", DEFAULT_WAIT),
        can_wait=lambda: client.live_pull,
        on_event=options.get("on_event"),
        sleeper=options.get("sleeper"),
    )
