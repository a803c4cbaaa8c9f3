"""Ending an account, as the service runs it: a deletion the user proves with the
account key, or the service's shutdown; then every key of the space is destroyed.

Invariants:
- ``end_space`` forgets everything of the space in ONE transaction under its lock
  (``cloud.account_end.end_in_transaction``); its new data keys are written just before
  that transaction commits; the keys are destroyed after it (the sweep, which also
  finishes an end a crash interrupted). Ending an ended space changes nothing and
  answers the existing end.
- ``delete_account`` changes nothing unless the space's registered account key
  verifies the proof for this space and request (``StrongAuthRequired``), and nothing
  from ``closes_at`` on (``ServiceClosed``).
- ``keys_destroyed_at`` is set only once the key store destroyed the space; a key-store
  failure is logged and retried by the next sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from cloud.account_end import AccountEnd, EndReason, account_end, end_in_transaction
from cloud.admission import Admission
from cloud.errors import KeyStoreError, NotFound, StrongAuthRequired
from cloud.keystore import SqliteKeyStore
from cloud.live import ChangeNotifier
from cloud.search import SearchIndex
from cloud.store import SqlStore
from cloud.store.sql import SqlSession
from cloud.vault import Vault
from protocol import strongauth
from protocol.messages import DeleteAccountRequest, DeleteAccountResponse

log = logging.getLogger("memsync.cloud")


class Ending:
    """The end of accounts for one service."""

    def __init__(
        self,
        store: SqlStore,
        key_store: Callable[[], SqliteKeyStore],
        vault: Vault,
        search: SearchIndex,
        live: ChangeNotifier,
        clock: Callable[[], datetime],
        admission: Admission,
        *,
        announce: Callable[[SqlSession, str, int], bool],
        check_writable: Callable[[datetime, str], None],
        sweep: Callable[[], None],
    ) -> None:
        self.store = store
        self._key_store = key_store  # read at each call: an operator may reopen it
        self.vault = vault
        self.search = search
        self.live = live
        self._clock = clock
        self._admission = admission
        self._announce = announce
        self._check_writable = check_writable
        self._sweep = sweep

    @property
    def key_store(self) -> SqliteKeyStore:
        return self._key_store()

    def end_space(self, space_id: str, reason: EndReason) -> AccountEnd:
        """End an account: everything of the space is forgotten in one transaction under
        its lock (``cloud.account_end``), then every key of the space is destroyed. An
        ended space is answered as it is (nothing changes)."""
        now = self._clock()
        moved = False
        with self.store.session(space_id, lock=True) as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            if s.space_end(space_id) is None:
                vault = self.vault.for_push()
                first = s.last_seq(space_id)
                end_in_transaction(s, vault, space_id, reason, now)
                vault.write_keys()
                moved = self._announce(s, space_id, first)
                log.warning("space %s ended (%s) at %s", space_id, reason.value, now.isoformat())
        self.search.evict(space_id)
        if moved:
            self.live.changed(space_id)  # its live pulls wake and hear 410
        self._sweep()  # receipts rewritten, rows deleted: destroy the keys, truncate the WAL
        status = self.account_status(space_id)
        assert status is not None
        return status

    def account_status(self, space_id: str) -> AccountEnd | None:
        """How an ended account stands (its keys, its devices still to wipe); None while
        the space has not ended."""
        with self.store.session() as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            end = s.space_end(space_id)
            return None if end is None else account_end(s, end)

    def delete_account(
        self, space_id: str, device_id: str, req: DeleteAccountRequest
    ) -> DeleteAccountResponse:
        """The user deletes the account from a device, proving it with the account key
        (``protocol.strongauth``); without a registered key, or with a proof that does
        not verify for this space and request, ``StrongAuthRequired`` and nothing
        changes."""
        self._check_writable(self._clock(), "deleting the account")
        with self.store.session(space_id) as s:
            self._admission.enrolled(s, space_id, device_id)
            account_key = s.account_key(space_id)
        if account_key is None:
            raise StrongAuthRequired(
                f"space {space_id} has no account key registered, so deleting the account "
                "cannot be authenticated: register an account passphrase first (nothing was "
                "changed)"
            )
        if not strongauth.verify_delete_account(account_key, req.proof, space_id, req.request_id):
            raise StrongAuthRequired(
                f"deleting the account of space {space_id} needs strong authentication: the "
                f"proof of request {req.request_id} does not verify against this account's "
                "key (nothing was changed)"
            )
        end = self.end_space(space_id, EndReason.DELETED)
        return DeleteAccountResponse(
            space_id=space_id, ended_at=end.ended_at, pending=list(end.pending)
        )

    def destroy_ended_spaces(self) -> int:
        """Destroy every key of each ended space whose keys may remain; how many it did."""
        with self.store.session() as s:
            ended = s.ended_spaces_with_keys()
        done = 0
        for end in ended:
            try:
                self.key_store.destroy_space(end.space_id)
            except KeyStoreError as exc:  # the end stays committed; the next sweep retries
                log.error("ended space %s: %s", end.space_id, exc)
                continue
            with self.store.session() as s:
                s.mark_space_keys_destroyed(end.space_id, self._clock())
            done += 1
        return done
