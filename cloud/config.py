"""Configuration of one cloud process.

Invariant: the clock, the randomness, request timing and waiting (``sleep``) are
injected here and used everywhere in the cloud; no logic reads ``datetime.now()`` or
``os.urandom`` or calls ``time.sleep`` directly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cloud.indexer import IndexingMode
from protocol.embedding import Embedder
from protocol.messages import MAX_REQUEST_BYTES
from protocol.version import SUPPORTED_VERSIONS, VersionRange, check_range


def utc_now() -> datetime:
    """The default clock: an aware UTC timestamp."""
    return datetime.now(UTC)


def new_request_id() -> str:
    """The default request id: 16 random bytes in hex (the default, like ``random_bytes``)."""
    return os.urandom(16).hex()


@dataclass(frozen=True)
class CloudConfig:
    """Where the cloud keeps its data, and where its time and randomness come from.

    ``store_url`` is ``sqlite:///<absolute path>`` or ``postgresql://user@host:port/db``;
    ``key_store_path`` is a SQLite file that must not be the record store.
    ``master_key`` (32 bytes) overrides ``MEMSYNC_MASTER_KEY`` and the ``master.key``
    file beside the key store. ``embedder`` gives the sentence embedder retrieval uses
    (default: ``cloud.embedder.default_embedder``, the model ``make model`` builds).
    ``supported_versions`` is the closed range of protocol versions this cloud accepts
    (default: every version this code speaks); a narrower range makes, for instance, a
    cloud that still speaks only version 1.
    ``export_wait`` is how long (seconds, in total) an export waits for a store it needs
    before it is refused ``export_unavailable``; ``sleep`` is how it waits (injected, so
    tests never sleep). ``region`` names the region this deployment serves
    (``GET /v1/service``; a shutdown ends the accounts of this region); nothing a device
    receives depends on it (an export is the same package in every region).
    ``indexing`` is how search indexing runs after a push commits (``cloud.indexer``):
    ``background`` (a thread of this process) or ``manual`` (only the worker's reindex
    job and explicit ``CloudService.index_pending`` calls; tests drive it).
    ``metrics`` serves Prometheus metrics at ``/metrics`` (``cloud.telemetry``), behind
    ``Authorization: Bearer <metrics_token>`` when a token is set; ``request_id`` makes
    the id of a request that brought none, ``timer`` (seconds, monotonic) times requests.
    """

    store_url: str
    key_store_path: Path
    clock: Callable[[], datetime] = utc_now
    random_bytes: Callable[[int], bytes] = os.urandom
    max_request_bytes: int = MAX_REQUEST_BYTES
    master_key: bytes | None = field(default=None, repr=False)
    embedder: Callable[[], Embedder] | None = None
    supported_versions: VersionRange = SUPPORTED_VERSIONS
    export_wait: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    region: str = "default"
    body_timeout: float = 30.0  # seconds a request body may take to arrive (408 after)
    indexing: IndexingMode = "background"
    metrics: bool = True
    metrics_token: str | None = field(default=None, repr=False)
    request_id: Callable[[], str] = new_request_id
    timer: Callable[[], float] = time.perf_counter

    def __post_init__(self) -> None:
        check_range(self.supported_versions)
        if self.indexing not in ("background", "manual"):
            raise ValueError(f"indexing {self.indexing!r} is not 'background' or 'manual'")
