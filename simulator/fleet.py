"""Fleets of real device agents against one running cloud.

Invariants: every device is a real ``DeviceAgent`` with its own SQLCipher file in the
fleet's folder; the simulator reaches the cloud only over HTTP through the device's
transport seam, and reaches the cloud's stores only through the operator handle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from device.agent import DeviceAgent
from simulator.cloud_runner import RunningCloud
from simulator.transport import SwitchableTransport


@dataclass
class User:
    name: str
    space_id: str
    devices: list[DeviceHandle] = field(default_factory=list)


class DeviceHandle:
    """One device of a user: its agent, its folder, and whether it can reach the cloud."""

    def __init__(
        self,
        name: str,
        user: User,
        agent: DeviceAgent,
        transport: SwitchableTransport,
        passphrase: str,
    ) -> None:
        self.name = name
        self.user = user
        self.agent = agent
        self.transport = transport
        self.passphrase = passphrase

    @property
    def online(self) -> bool:
        return self.transport.online

    def go_offline(self) -> None:
        self.transport.online = False

    def go_online(self) -> None:
        self.transport.online = True

    @property
    def db_path(self) -> Path:
        return self.agent.db_path

    def __repr__(self) -> str:
        return f"DeviceHandle({self.name!r}, online={self.online})"


class Fleet:
    """Users and their devices, each device a real agent in its own folder."""

    def __init__(
        self, cloud: RunningCloud, root: Path, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.cloud = cloud
        self.root = root
        self.clock = clock
        self.users: dict[str, User] = {}
        self._unused_codes: dict[str, str] = {}

    def add_user(self, name: str) -> User:
        space_id, code = self.cloud.operator.add_user(name)
        user = User(name, space_id)
        self.users[name] = user
        self._unused_codes[name] = code
        return user

    def add_device(
        self,
        user: User,
        name: str,
        passphrase: str | None = None,
        *,
        account_passphrase: str | None = None,
    ) -> DeviceHandle:
        """A new device of ``user``, enrolled (and holding the account key, if given)."""
        code = self._code_for(user)
        transport = SwitchableTransport()
        secret = passphrase or f"passphrase of {user.name}'s {name}"
        agent = DeviceAgent.create(
            self.root / user.name / name,
            secret,
            device_name=name,
            cloud_url=self.cloud.url,
            transport=transport,
            clock=self.clock,
        )
        agent.enroll(code, account_passphrase=account_passphrase)
        handle = DeviceHandle(name, user, agent, transport, secret)
        user.devices.append(handle)
        return handle

    def _code_for(self, user: User) -> str:
        unused = self._unused_codes.pop(user.name, None)
        return unused or self.cloud.operator.new_enrollment_code(user.space_id)

    def devices(self) -> Iterator[DeviceHandle]:
        for user in self.users.values():
            yield from user.devices

    def close(self) -> None:
        for handle in self.devices():
            handle.agent.close()
