"""The agent's core: its parts and the wiring every concern of ``DeviceAgent`` shares.

``AgentCore`` holds what was injected (clock, randomness, transport, protocol range),
the parts every concern module is handed (``device.parts``), the one cloud client, the
sync lock and the live loop's slot; the facades of each concern (``device.agent_*``)
build on it, and ``device.agent.DeviceAgent`` composes them.

Invariants:
- Every write comes through ``apply_operation`` (decide, apply, queue and receipt in
  ONE local transaction, ``device.local``; a refusal raises ``Refused`` and changes
  nothing) or ``_write`` (``device.writing``), and each tells the live loop.
- In temporary mode nothing is written at all: every write raises ``TemporaryMode``
  before touching the store (``_writable``, first in each write); reads work.
- All traffic goes through one ``CloudClient`` (``_cloud``, the one transport seam),
  every call inside the wipe guard (``_revocable``, ``device.wiping``); time and
  randomness come from the injected ``clock`` and ``random_bytes``.
- An unknown keyword or a bad protocol range is refused before anything is opened.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, Unpack

from pydantic import ValidationError

from device import holdings, keys, store, views
from device.changes import ChangeHub
from device.client import LIVE_PULL_SINCE, CloudClient
from device.db import Database
from device.errors import DeviceRevoked, InvalidOperation, NoCloud, NotEnrolled, TemporaryMode
from device.invalid import build, invalid, known_keywords
from device.live import LiveSync
from device.local import apply_local
from device.ops import Ops, detect
from device.parts import Injected, Parts, system_clock, utc_now
from device.recalling import Recaller
from device.remote import Remote
from device.sync_status import SyncTracker
from device.wiping import Wipes, revoked
from device.writing import Writer
from protocol.operations import AnyOperation
from protocol.version import SUPPORTED_VERSIONS, VersionRange, check_range

_T = TypeVar("_T")


def _checked_versions(versions: VersionRange | None) -> VersionRange:
    try:
        return check_range(SUPPORTED_VERSIONS if versions is None else versions)
    except ValueError as exc:
        raise InvalidOperation(
            f"protocol_versions {versions!r}: {exc}; nothing was opened"
        ) from exc


def check_injected(injected: Injected) -> None:
    """Refuse an unknown keyword or a bad version range before anything is opened."""
    known_keywords("DeviceAgent", injected, Injected)
    _checked_versions(injected.get("protocol_versions"))


class AgentCore:
    """The parts and the wiring; see ``device.agent.DeviceAgent`` for the API."""

    def __init__(self, db: Database, directory: Path, **injected: Unpack[Injected]) -> None:
        check_injected(injected)
        self._db = db
        self._directory = directory
        self._transport = injected.get("transport")
        self._protocol_versions = _checked_versions(injected.get("protocol_versions"))
        self._clock = injected.get("clock") or system_clock
        self._random = injected.get("random_bytes") or secrets.token_bytes
        self._client: CloudClient | None = None
        self._temporary = False
        self._sync_lock = threading.RLock()
        self._live: LiveSync | None = None
        self._changes = ChangeHub(db, self._now_dt)
        self._status = SyncTracker()
        parts = self._parts = Parts(db, self._now_dt, self._random)
        self._wipes = Wipes(parts, self._cloud)
        self._ops = Ops(parts, self.apply_operation, self._writable)
        holds = partial(holdings.holds, db)  # ``ReadingFacade.holds``, the same read
        self._recaller = Recaller(
            parts, lambda: self._temporary, self._cloud, self._revocable, holds
        )
        self._remote = Remote(parts, self._cloud, self._revocable, self._status, self._queued)

    # --- identity --------------------------------------------------------------------

    @property
    def device_id(self) -> str | None:
        return store.get_meta(self._db).device_id

    @property
    def space_id(self) -> str | None:
        return store.get_meta(self._db).space_id

    @property
    def device_name(self) -> str:
        return store.get_meta(self._db).device_name

    @property
    def public_key(self) -> bytes:
        return keys.public_key_bytes(keys.load_private_key(store.get_meta(self._db).private_key))

    @property
    def account_key(self) -> bytes | None:
        return store.get_meta(self._db).account_key

    @property
    def protocol_versions(self) -> VersionRange:
        """The protocol versions this device speaks (its pin, or every one it knows)."""
        return self._protocol_versions

    @property
    def protocol_version(self) -> int:
        """The version the device speaks to its cloud: the highest of its range until a
        cloud refused it, then the one negotiated (``CloudClient.protocol_version``)."""
        return self._protocol_versions[1] if self._client is None else self._client.protocol_version

    @property
    def live_pull(self) -> bool:
        """Whether the version spoken to the cloud has live pull (``PullRequest.wait``)."""
        return self.protocol_version >= LIVE_PULL_SINCE

    @property
    def db_path(self) -> Path:
        return self._db.path

    @property
    def directory(self) -> Path:
        return self._directory

    # --- the parts, and the wiring -----------------------------------------------------

    def _now_dt(self) -> datetime:
        return utc_now(self._clock)

    def _now(self) -> str:
        return self._now_dt().isoformat()

    def now(self) -> datetime:
        """The injected clock's time, in UTC (for callers that date what they write)."""
        return self._now_dt()

    def random_bytes(self, n: int) -> bytes:
        """``n`` bytes from the injected randomness (session ids, tokens, file names)."""
        return self._random(n)

    def _id(self, prefix: str) -> str:
        return self._parts.new_id(prefix)

    def _cloud(self, cloud_url: str | None = None) -> CloudClient:
        """The one client: made when first needed, made again when the URL changes."""
        url = cloud_url or store.get_meta(self._db).cloud_url
        if url is None:
            raise NoCloud(
                f"device {self.device_name!r} has no cloud URL; give one to enroll or init"
            )
        if self._client is None or self._client.base_url != url:
            if self._client is not None:
                self._client.close()
            self._client = CloudClient(
                url, transport=self._transport, protocol_versions=self._protocol_versions
            )
        self._client.credential = store.get_meta(self._db).credential
        return self._client

    def _writable(self, what: str) -> None:
        if self._temporary:
            raise TemporaryMode(what)

    def _queued(self) -> None:
        """An op was applied (maybe queued) or the subset changed: a live loop syncs."""
        live = self._live
        if live is not None:
            live.queued()

    def _revocable(self) -> AbstractContextManager[None]:
        """A call to the cloud, guarded: a must-wipe answer wipes (``device.wiping``)."""
        return self._wipes.revocable()

    def _revoked(self, held: int, confirmed: bool) -> DeviceRevoked:
        return revoked(self.device_name, held, confirmed)

    def _needs_credential(self, then: str) -> None:
        if store.get_meta(self._db).credential is None:
            raise NotEnrolled(f"device {self.device_name!r} is not enrolled; {then}")

    def _debug_db(self) -> Any:
        """The raw connection, for tests that must poke the store directly."""
        return self._db

    # --- temporary mode --------------------------------------------------------------

    @property
    def temporary_mode(self) -> bool:
        """While on, nothing is written: no episode, record, queue row, receipt, history."""
        return self._temporary

    def set_temporary_mode(self, on: bool) -> None:
        """Turn temporary mode on or off (kept in memory only: turning it on writes nothing)."""
        self._temporary = bool(on)

    # --- the write paths (``device.local``, ``device.writing``) ---------------------------

    def apply_operation(self, op: AnyOperation) -> views.LocalResult:
        """Apply an operation locally and queue it; ``Refused`` carries the receipt."""
        self._writable(f"operation {op.kind} {op.op_id}")
        result = apply_local(self._db, op, now=self._now_dt(), random_bytes=self._random)
        self._queued()
        return result

    def _apply_kept(self, op: AnyOperation, keep: bool | None) -> views.LocalResult:
        return apply_local(
            self._db, op, now=self._now_dt(), random_bytes=self._random, keep_on_device=keep
        )

    def _write(self, what: str, run: Callable[[Writer], _T], *, doing: str = "") -> _T:
        """One of ``device.writing``'s paths (``doing``: the temporary-mode guard's words);
        a value it refuses is told in words."""
        if doing:
            self._writable(doing)
        writer = Writer(self._db, self._now_dt, self._id, self._apply_kept, detect, build)
        try:
            result = run(writer)
        except ValidationError as exc:
            raise invalid(what, "", exc) from exc
        except ValueError as exc:
            raise InvalidOperation(f"{what} refused, nothing was changed: {exc}") from exc
        self._queued()
        return result
