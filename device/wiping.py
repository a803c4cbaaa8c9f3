"""When the cloud says this device must wipe its copy: revoked (401 ``device_revoked``),
its account ended (410 ``account_ended``), or the user deleted the account here.

Invariants:
- Every call to the cloud runs inside ``Wipes.revocable``: a must-wipe answer wipes
  every key and row of memory here, queued ops included, in ONE transaction
  (``device.shred.wipe``), then checkpoints the WAL, confirms the wipe to the cloud
  (``POST /v1/wiped``) and raises ``DeviceRevoked`` or ``AccountEnded``.
- A wipe whose confirmation did not get through is confirmed first, at the next call
  to the cloud; the credential is dropped only once the cloud has heard it.
- Why the device last wiped (the cloud's code, what it said, how many queued ops went)
  is kept in memory only; after a restart the wording is the revoked one.
- ``delete_account`` checks the account passphrase here before anything is sent, and
  wipes this device only after the cloud answered that the account is deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from device import account, shred, store
from device.changes import Cause, caused_by
from device.client import CloudClient
from device.errors import (
    AccountEnded,
    AccountEndedRefused,
    CopyWiped,
    DeviceRevoked,
    DeviceRevokedRefused,
    InvalidOperation,
    NotEnrolled,
    Offline,
    ServerError,
    ServerRefused,
)
from device.parts import Parts
from device.views import AccountDeletion
from protocol import strongauth
from protocol.messages import (
    DeleteAccountRequest,
    DeleteAccountResponse,
    WipedRequest,
    WipedResponse,
)

# what the cloud says when this device must wipe its copy of the memory
MUST_WIPE = (DeviceRevokedRefused, AccountEndedRefused)


def revoked(device_name: str, held: int, confirmed: bool) -> DeviceRevoked:
    told = (
        "the cloud was told"
        if confirmed
        else "the cloud could not be told yet (it is told at the next call to the cloud)"
    )
    what = f"({held} record(s), keys and words included) " if held else ""
    return DeviceRevoked(
        f"device {device_name!r} was revoked by its account: its copy of the "
        f"memory {what}was wiped and {told}; its credential is dropped once the cloud "
        "knows. This device stays revoked: to use the cloud again, ask for a code "
        "('memsync cloud add-device --user …') and create a new device with it "
        "('memsync device init --dir NEW_FOLDER --name NAME --code CODE')"
    )


class Wipes:
    """The wipe of this device's copy, and its confirmation to the cloud."""

    def __init__(self, parts: Parts, cloud: Callable[[], CloudClient]) -> None:
        self._parts = parts
        self._cloud = cloud
        # why this device last wiped its copy: (the cloud's code, what it said, how many
        # queued ops went with it); in memory only (after a restart: "revoked" wording)
        self._cause: tuple[type[ServerRefused], str, int] | None = None

    @contextmanager
    def revocable(self) -> Iterator[None]:
        """Any call to the cloud: a must-wipe answer wipes, confirms and raises."""
        if store.get_meta(self._parts.db).wipe_unconfirmed:
            raise self.wiped(0, self.confirm())
        try:
            yield
        except MUST_WIPE as exc:
            held = self.wipe(type(exc), exc.message)
            raise self.wiped(held, self.confirm()) from exc

    def wipe(self, cause: type[ServerRefused], said: str, how: Cause = Cause.PULLED) -> int:
        """Wipe this device's copy of the memory (the cloud answered ``cause``); how
        many records it held. Each record held is told evicted (``how``: the cloud's
        word, unless this device ended the account itself)."""
        db = self._parts.db
        queued = store.queue_count(db)
        with caused_by(how), db.atomic():
            held = shred.wipe(db, at=self._parts.iso())
        db.checkpoint()
        self._cause = (cause, said, queued)
        return held

    def wiped(self, held: int, confirmed: bool) -> CopyWiped:
        """The error telling why this device's copy was wiped."""
        device_name = store.get_meta(self._parts.db).device_name
        cause = self._cause
        if cause is None or not issubclass(cause[0], AccountEndedRefused):
            return revoked(device_name, held, confirmed)
        _code, said, queued = cause
        told = (
            "the cloud was told"
            if confirmed
            else "the cloud could not be told yet (it is told at the next call to the cloud)"
        )
        what = f"{held} record(s), keys and words included, and " if held else ""
        return AccountEnded(
            f"the account of device {device_name!r} ended (the cloud says: {said}); "
            f"this device's copy of the memory ({what}{queued} queued change(s) never sent, "
            f"lost with the account) was wiped and {told}"
        )

    def confirm(self) -> bool:
        """Tell the cloud this device wiped its copy, then drop the credential. True when
        the cloud has heard it (now or before); False when it could not be reached."""
        db = self._parts.db
        meta = store.get_meta(db)
        if meta.wiped_at is None:
            raise InvalidOperation(
                f"device {meta.device_name!r} has not been wiped; only a device that wiped "
                "its copy (revoked, or its account ended) confirms it"
            )
        if meta.credential is None:
            return True
        try:
            self._cloud().post("/v1/wiped", WipedRequest(), WipedResponse)
        except (Offline, ServerError):
            return False  # not heard: the next call to the cloud tries again
        except ServerRefused:
            pass  # the cloud answered for good (e.g. the credential is unknown to it)
        with db.atomic():
            store.forget_credential(db)
        db.checkpoint()  # no page image holding the credential stays in the WAL
        return True

    def delete_account(
        self,
        account_passphrase: str,
        *,
        sync_lock: threading.RLock,
        stop_live: Callable[[], None],
    ) -> AccountDeletion:
        """Delete the whole account in the cloud, then wipe this device and confirm it."""
        db = self._parts.db
        meta = store.get_meta(db)
        if meta.credential is None or meta.space_id is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; only an account in the cloud "
                "can be deleted"
            )
        key = account.signing_key(account_passphrase, meta.space_id, meta.account_key)
        request_id = self._parts.new_id("req")
        request = DeleteAccountRequest(
            request_id=request_id,
            proof=strongauth.prove_delete_account(key, meta.space_id, request_id),
        )
        with sync_lock, self.revocable():
            response = self._cloud().post("/v1/account/delete", request, DeleteAccountResponse)
        stop_live()
        queued = store.queue_count(db)
        said = (
            f"the account of space {response.space_id} was deleted at "
            f"{response.ended_at.isoformat()} from device {meta.device_id}"
        )
        held = self.wipe(AccountEndedRefused, said, Cause.LOCAL)
        confirmed = self.confirm()
        return AccountDeletion(
            space_id=response.space_id,
            ended_at=response.ended_at.isoformat(),
            wiped_records=held,
            wiped_queued=queued,
            confirmed=confirmed,
            pending=tuple(
                (d.device_id, d.device_name)
                for d in response.pending
                if d.device_id != meta.device_id
            ),
        )
