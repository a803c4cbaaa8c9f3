"""``DeviceAgent``'s account, as delegations: enrollment and the account key
(``device.enrollment``, ``device.account_key``), export (``device.export``), and the
end of the account (``device.wiping``).

Invariants: every call to the cloud runs inside the wipe guard (``_revocable``); every
write here is refused in temporary mode before anything is sent or stored (export
writes only files, so it is allowed); deleting the account stops live sync and takes
the sync lock (``device.wiping``).
"""

from __future__ import annotations

from pathlib import Path

from device import account_key as account_keys
from device import enrollment, export, views
from device.account_key import KeyChange
from device.agent_sync import SyncFacade
from device.export import ExportResult


class AccountFacade(SyncFacade):
    """The account of ``DeviceAgent`` (see ``device.agent``)."""

    # --- enrollment and the account key ----------------------------------------------

    def enroll(
        self, code: str, cloud_url: str | None = None, *, account_passphrase: str | None = None
    ) -> str:
        """Enroll with a one-time code (then register the account key); the device id."""
        self._writable("enrollment")
        device_id = enrollment.enroll(self._db, lambda: self._cloud(cloud_url), code)
        if account_passphrase is not None:
            self.register_account(account_passphrase)
        return device_id

    def register_account(self, account_passphrase: str) -> None:
        """Register the account passphrase's key; one already registered must match."""
        self._writable("registering the account key")
        enrollment.register_account(self._db, self._cloud, self._revocable, account_passphrase)

    # --- the account passphrase (``device.account_key``) -----------------------------

    def change_account_passphrase(self, current: str, new: str) -> KeyChange:
        """Change the account passphrase (``device.account_key.change``)."""
        self._writable("changing the account passphrase")
        with self._revocable():
            return account_keys.change(
                self._db, self._cloud, current, new, random_bytes=self._random
            )

    def learn_account_key(self, account_passphrase: str) -> bool:
        """Take a passphrase changed on another device (``device.account_key.learn``)."""
        self._writable("checking the account passphrase")
        with self._revocable():
            return account_keys.learn(self._db, self._cloud, account_passphrase)

    # --- export ----------------------------------------------------------------------

    def export(
        self, out_dir: Path, account_passphrase: str, *, include_sensitive: bool = True
    ) -> ExportResult:
        """Export the whole space into ``out_dir`` (``device.export``)."""
        with self._revocable():
            return export.export(
                self._db,
                self._cloud,
                Path(out_dir),
                account_passphrase,
                include_sensitive=include_sensitive,
                random_bytes=self._random,
            )

    # --- the end of the account (``device.wiping``) --------------------------------------

    def delete_account(self, account_passphrase: str) -> views.AccountDeletion:
        """Delete the whole account (cloud and devices); this device wipes its copy."""
        self._writable("deleting the account")
        return self._wipes.delete_account(
            account_passphrase, sync_lock=self._sync_lock, stop_live=self.stop_live
        )

    @property
    def closing_notice(self) -> str | None:
        """The ``Memsync-Closing`` header the cloud sent last, or None."""
        return None if self._client is None else self._client.closing

    def confirm_wipe(self) -> bool:
        """Tell the cloud this device wiped its copy; False when it was not reached."""
        return self._wipes.confirm()
