"""DeviceAgent: the offline core's API for the simulator, the CLI and tests, a facade.

``DeviceAgent`` composes the facades of each concern, every public method a delegation
to the module of its one concern, handed the agent's parts (``device.parts``) and
callables explicitly: its core and wiring (``device.agent_core``), writing
(``device.agent_writing``: ``ops``, ``writing``, ``importing``), reading
(``device.agent_reading``: ``reading``, ``recalling``, ``holdings``), behaviour rules
(``device.agent_rules``: ``learned``), sync and watching (``device.agent_sync``:
``syncing``, ``live``, ``watching``, ``remote``), and the account
(``device.agent_account``: ``enrollment``, ``account_key``, ``export``, ``wiping``).
Opening and closing (``device.opening``) live here. Only wiring lives in any of them.

Invariants:
- Every write comes through ``apply_operation`` or ``_write`` (``device.agent_core``),
  and each tells the live loop; in temporary mode nothing is written at all.
- All traffic goes through one ``CloudClient``, every call inside the wipe guard; time
  and randomness come from the injected ``clock`` and ``random_bytes``.
- Syncs are serialised by the agent's sync lock (manual, live, account deletion).
- Each public name is defined by exactly one facade (``tests/device/test_agent_facade.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from device import opening
from device.agent_account import AccountFacade
from device.agent_core import check_injected
from device.agent_rules import RulesFacade
from device.db import DB_FILENAME, Database
from device.parts import Injected


class DeviceAgent(RulesFacade, AccountFacade):
    """The offline core of one device: open it with ``create`` or ``open``, close it."""

    # --- lifecycle (``device.opening``) ----------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        passphrase: str,
        *,
        device_name: str,
        cloud_url: str | None = None,
        kdf_iterations: int | None = None,
        **injected: Unpack[Injected],
    ) -> DeviceAgent:
        """Create a new encrypted device database and key pair in ``directory``;
        ``kdf_iterations`` None is SQLCipher's 256,000 (lower it only for simulations)."""
        directory = Path(directory)
        check_injected(injected)
        opening.check_name(device_name)
        db = Database.create(directory / DB_FILENAME, passphrase, kdf_iterations=kdf_iterations)
        agent = cls(db, directory, **injected)
        opening.initialise(agent._parts, directory, device_name=device_name, cloud_url=cloud_url)
        return agent

    @classmethod
    def open(cls, directory: Path, passphrase: str, **injected: Unpack[Injected]) -> DeviceAgent:
        """Open an existing device database (applying any pending migrations)."""
        directory = Path(directory)
        check_injected(injected)
        db = Database.open_existing(directory / DB_FILENAME, passphrase)
        agent = cls(db, directory, **injected)
        opening.prepare(agent._parts)
        return agent

    def close(self) -> None:
        self.stop_live()
        if self._client is not None:
            self._client.close()
            self._client = None
        self._db.close()

    def __enter__(self) -> DeviceAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
