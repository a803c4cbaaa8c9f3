"""An export as the service runs it: the checks before any byte, the sealed stream, and
the ``exports`` log of how it ended.

Invariants:
- An export (``export``) is refused before any byte of the package unless the space's
  registered account key verifies the request's proof (403), its export id never
  started an export (409) and both stores answer within ``CloudConfig.export_wait``
  (503 naming the store); refusals change nothing.
- Its package is read from one store snapshot (``cloud.export``), sealed in chunks to
  the asking device's public key; a failure after streaming began ends the stream with
  an error chunk, never a final one.
- Every export started is a row of the ``exports`` audit log with its outcome
  (complete, failed with the reason, or abandoned), written once.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime

from nacl.public import PublicKey, SealedBox
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from cloud.admission import Admission
from cloud.config import CloudConfig
from cloud.errors import (
    ExportIdUsed,
    ExportIncomplete,
    ExportUnavailable,
    KeyStoreError,
    StrongAuthRequired,
)
from cloud.export import PackageBuilder
from cloud.keystore import SqliteKeyStore
from cloud.store import SqlStore
from cloud.vault import Vault
from protocol.export.package import PackageHeader
from protocol.export.stream import PREFIX_BYTES, StreamSealer
from protocol.messages import ExportRequest
from protocol.sealing import KEY_BYTES
from protocol.strongauth import verify_export

log = logging.getLogger("memsync.cloud")

EXPORT_FIRST_WAIT = 0.5  # seconds before an export first looks at its stores again
EXPORT_MAX_STEP = 5.0  # the wait doubles up to this


class Exports:
    """Exports of one service's spaces."""

    def __init__(
        self,
        config: CloudConfig,
        store: SqlStore,
        key_store: Callable[[], SqliteKeyStore],
        vault: Vault,
        admission: Admission,
        *,
        sweep: Callable[[], object],
    ) -> None:
        self.config = config
        self.store = store
        self._key_store = key_store  # read at each call: an operator may reopen it
        self.vault = vault
        self._admission = admission
        self._clock: Callable[[], datetime] = config.clock
        self._random = config.random_bytes
        self._sweep = sweep

    @property
    def key_store(self) -> SqliteKeyStore:
        return self._key_store()

    def export(self, space_id: str, device_id: str, req: ExportRequest) -> Iterator[bytes]:
        """Start export ``req.export_id`` of the caller's whole space: the sealed stream's
        frames (``protocol.export.stream``), for the asking device only.

        Everything that can refuse runs now, before the iterator is returned, so a
        refusal is a plain error and changes nothing: the stores must answer (waiting up
        to ``export_wait``, then ``ExportUnavailable`` naming the store), the account key
        must verify the proof (``StrongAuthRequired``) and the export id must be new
        (``ExportIdUsed``). The export is then in the ``exports`` log; iterating reads the
        package from one snapshot and records how it ended (complete, failed with the
        reason, or abandoned when the iterator is closed before its end)."""
        self._await_stores(space_id)
        now = self._clock()
        with self.store.session(space_id, lock=True) as s:
            device = self._admission.enrolled(s, space_id, device_id)
            account_key = s.account_key(space_id)
            if account_key is None:
                raise StrongAuthRequired(
                    f"export {req.export_id}: space {space_id} has no account key registered, "
                    "so nothing can prove the account passphrase; register it first "
                    "(nothing was exported)"
                )
            if not verify_export(
                account_key, req.proof, space_id, req.export_id, req.include_sensitive
            ):
                part = "with" if req.include_sensitive else "without"
                raise StrongAuthRequired(
                    f"export {req.export_id}: the proof does not verify against the account "
                    f"key of space {space_id} for an export {part} the sensitive classes "
                    "(wrong passphrase, or a proof made for another export); nothing was "
                    "exported"
                )
            if not s.start_export(space_id, req.export_id, device_id, now, req.include_sensitive):
                raise ExportIdUsed(
                    f"export id {req.export_id} already started an export of space "
                    f"{space_id}; an export id starts one export only (make a new id and a "
                    "new proof; nothing was exported)"
                )
        stream_key = self._random(KEY_BYTES)
        sealer = StreamSealer(stream_key, self._random(PREFIX_BYTES), req.export_id)
        header = PackageHeader(
            export_id=req.export_id,
            exported_at=now,
            space_id=space_id,
            includes_sensitive=req.include_sensitive,
        )
        sealed_key = SealedBox(PublicKey(device.public_key)).encrypt(stream_key)
        return self._frames(header, sealer, sealed_key)

    def package(self, header: PackageHeader) -> Iterator[str]:
        """The package text of ``header``'s space, line by line, from one snapshot held
        while it is iterated (closed with the iterator). No check, no seal, no log: the
        export route's reader, and the builder tests' and benches' way in."""

        def forgotten_now(key_ids: set[str]) -> set[str]:
            with self.store.session() as fresh:
                return fresh.forgotten_key_ids(header.space_id, key_ids)

        with self.store.snapshot() as s:
            builder = PackageBuilder(s, self.vault, header.space_id, forgotten_now=forgotten_now)
            yield from builder.lines(header)

    def _frames(
        self, header: PackageHeader, sealer: StreamSealer, sealed_key: bytes
    ) -> Iterator[bytes]:
        """The frames; the outcome is logged before the last frame leaves (complete, or
        failed with the reason), or as abandoned when closed before that."""
        logged = False
        try:
            yield sealer.header(sealed_key)
            try:
                for frame in sealer.seal_all(line.encode() for line in self.package(header)):
                    if sealer.closed:  # the final frame: the whole package was read
                        logged = self._finish(header, "complete")
                    yield frame
            except Exception as exc:  # every failure ends the stream with its reason
                reason = self._failure(header, exc)
                logged = self._finish(header, f"failed: {reason}")
                yield sealer.error(reason)
        finally:
            if not logged:  # closed before its end: the client went away
                self._finish(header, "abandoned")

    def _failure(self, header: PackageHeader, exc: Exception) -> str:
        where = f"export {header.export_id} of {header.space_id}"
        if isinstance(exc, ExportIncomplete):
            reason = str(exc)
        elif isinstance(exc, KeyStoreError | sqlite3.Error):
            reason = f"the key store {self.key_store.path} cannot be read ({exc})"
        elif isinstance(exc, DBAPIError):
            reason = f"the record store {self._store_name} cannot be read ({exc.orig})"
        else:
            log.exception("%s failed", where)
            reason = f"the export failed ({type(exc).__name__}: {exc})"
        log.error("%s stopped: %s", where, reason)
        return f"{reason}; nothing partial is kept, try the export again with a new id"

    def _finish(self, header: PackageHeader, outcome: str) -> bool:
        """Log how the export ended (once: a later call changes nothing); True."""
        try:
            with self.store.session() as s:
                s.finish_export(header.space_id, header.export_id, self._clock(), outcome)
        except Exception:  # the stream's end must not fail on its log line
            log.exception("export %s: its outcome %r was not logged", header.export_id, outcome)
        try:  # a forget during the export may owe the record store's WAL truncation
            self._sweep()
        except Exception:
            log.exception("export %s: the sweep after it failed", header.export_id)
        return True

    @property
    def _store_name(self) -> str:
        """The record store's URL without its password (for errors and logs)."""
        return make_url(self.config.store_url).render_as_string(hide_password=True)

    def _store_problem(self, space_id: str) -> str | None:
        """Why a store the export of ``space_id`` needs cannot be read now (None: both can)."""
        try:
            with self.store.session() as s:
                s.space_exists(space_id)
        except DBAPIError as exc:
            return f"the record store {self._store_name} cannot be read ({exc.orig})"
        try:
            self.key_store.check_space(space_id)
        except KeyStoreError as exc:
            return str(exc)
        return None

    def _await_stores(self, space_id: str) -> None:
        """Return once both stores answer; wait (``config.sleep``) up to
        ``config.export_wait`` seconds in all, then refuse ``ExportUnavailable``."""
        waited, step = 0.0, EXPORT_FIRST_WAIT
        while True:
            problem = self._store_problem(space_id)
            if problem is None:
                return
            if waited >= self.config.export_wait:
                raise ExportUnavailable(
                    f"export of {space_id}: {problem}; waited {waited:g} s for it. Nothing "
                    "was exported; try again later"
                )
            pause = min(step, self.config.export_wait - waited)
            log.warning("export of %s waits %g s: %s", space_id, pause, problem)
            self.config.sleep(pause)
            waited += pause
            step = min(step * 2, EXPORT_MAX_STEP)
