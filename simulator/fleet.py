"""Fleets of real device agents against one cloud (one process or several).

Invariants:
- Every device is a real ``DeviceAgent`` with its own SQLCipher file in the fleet's
  folder; the simulator reaches the cloud only over HTTP through the device's transport
  seam (a ``FaultInjectingTransport``), and reaches the cloud's stores only through the
  operator handle.
- Devices are spread over the cloud's processes round robin (or pinned with
  ``cloud_index``); a device's cloud URL is its home process, fixed at enrollment.
- Network faults (offline, partitions, fail-over, injected faults) live in each
  device's transport; clocks in its ``SkewedClock`` over the fleet clock. Neither
  reaches into the device's code.
- ``crash`` drops an agent without closing anything (an open transaction is lost, as
  when the process dies); ``reopen`` opens the same files with the same transport and
  clock. A crashed device cannot be used until reopened.
- A fleet made with an ``embedder`` (e.g. ``simulator.stub_embedder.STUB``, where
  retrieval is not under test) assigns it to each device's database before the device
  exists (``device.search.assign_embedder``), for as long as the fleet is open; without
  one, devices embed with the real model.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from cloud.config import CloudConfig
from cloud.service import CloudService
from device import search
from device.agent import DeviceAgent
from device.db import DB_FILENAME
from simulator.clock import Clock, SkewedClock, system_clock
from simulator.errors import FleetError
from simulator.transport import FaultInjectingTransport, FaultPlan, origin_of


class Cloud(Protocol):
    """What a fleet needs of a cloud: its URLs (one per process) and an operator."""

    config: CloudConfig
    operator: CloudService

    @property
    def urls(self) -> list[str]: ...

    def settle(self, timeout: float = ...) -> None:
        """Wait until the cloud's own background work is done (its indexer idle)."""


@dataclass
class User:
    name: str
    space_id: str
    devices: list[DeviceHandle] = field(default_factory=list)


class DeviceHandle:
    """One device of a user: its agent, its folder, its network and its clock."""

    def __init__(
        self,
        name: str,
        user: User,
        agent: DeviceAgent,
        transport: FaultInjectingTransport,
        passphrase: str,
        *,
        clock: SkewedClock,
        home_url: str,
        random_bytes: Callable[[int], bytes] | None = None,
    ) -> None:
        self.name = name
        self.user = user
        self._agent: DeviceAgent | None = agent
        self.transport = transport
        self.passphrase = passphrase
        self.clock = clock
        self.home_url = home_url
        self.directory = agent.directory
        self._random_bytes = random_bytes
        self.crashes = 0

    @property
    def agent(self) -> DeviceAgent:
        if self._agent is None:
            raise FleetError(f"device {self.name!r} crashed; reopen() it before using it")
        return self._agent

    @property
    def crashed(self) -> bool:
        return self._agent is None

    # --- the network ------------------------------------------------------------------

    @property
    def online(self) -> bool:
        return self.transport.online

    def go_offline(self) -> None:
        self.transport.online = False

    def go_online(self) -> None:
        self.transport.online = True

    @property
    def partitioned(self) -> bool:
        """Cut off from the cloud process it currently talks to."""
        return self.current_origin in self.transport.cut_off

    @property
    def current_origin(self) -> str:
        home = origin_of(self.home_url)
        return self.transport.routes.get(home, home)

    def fail_over(self, url: str) -> None:
        """Send this device's requests to another cloud process (as a load balancer
        would), without touching the device: its cloud URL stays its home."""
        home, target = origin_of(self.home_url), origin_of(url)
        if target == home:
            self.transport.routes.pop(home, None)
        else:
            self.transport.routes[home] = target

    def go_home(self) -> None:
        self.transport.routes.pop(origin_of(self.home_url), None)

    # --- the process ------------------------------------------------------------------

    def crash(self) -> None:
        """The device's process dies: the connection is dropped, nothing closed cleanly."""
        agent = self.agent
        agent._debug_db().conn.close()
        self._agent = None
        self.crashes += 1

    def reopen(self) -> DeviceAgent:
        """Start the device again on its files, with the same transport and clock."""
        if self._agent is not None:
            raise FleetError(f"device {self.name!r} is running; crash() or close() it first")
        self._agent = DeviceAgent.open(
            self.directory,
            self.passphrase,
            transport=self.transport,
            clock=self.clock,
            random_bytes=self._random_bytes,
        )
        return self._agent

    def close(self) -> None:
        if self._agent is not None:
            self._agent.close()
            self._agent = None

    @property
    def db_path(self) -> Path:
        return self.agent.db_path

    def __repr__(self) -> str:
        state = "crashed" if self.crashed else f"online={self.online}"
        return f"DeviceHandle({self.name!r}, {state}, home={self.home_url})"


class Fleet:
    """Users and their devices, each device a real agent in its own folder.

    ``cloud`` is a ``RunningCloud`` or a ``CloudProcesses`` (anything with ``urls`` and
    an ``operator``). ``clock`` is the fleet clock every device's clock is read from
    (default: the system clock); the cloud keeps its own. ``rng`` seeds each device's
    randomness (key pairs, ids) when given, so a seeded fleet replays. ``embedder``,
    when given, is what every device of the fleet embeds with instead of the model.
    """

    def __init__(
        self,
        cloud: Cloud,
        root: Path,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        embedder: search.TextEmbedder | None = None,
        kdf_iterations: int | None = None,
    ) -> None:
        self.cloud = cloud
        self.embedder = embedder
        self.kdf_iterations = kdf_iterations  # None: SQLCipher's default, as a user's device
        self.root = root
        self.clock: Clock = clock or system_clock
        self.rng = rng
        self.users: dict[str, User] = {}
        self._unused_codes: dict[str, str] = {}
        self._next_process = itertools.count()

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
        clock_skew: timedelta = timedelta(0),
        cloud_index: int | None = None,
        plan: FaultPlan | None = None,
    ) -> DeviceHandle:
        """A new device of ``user``, enrolled at its home cloud process (round robin
        unless ``cloud_index`` pins it), its clock ``clock_skew`` off the fleet clock.
        ``plan`` draws faults for its requests once it is enrolled."""
        if any(d.name == name for d in user.devices):
            raise FleetError(f"user {user.name!r} already has a device named {name!r}")
        urls = self.cloud.urls
        index = next(self._next_process) % len(urls) if cloud_index is None else cloud_index
        if not 0 <= index < len(urls):
            raise FleetError(
                f"device {name!r}: cloud_index {index} is out of range; the cloud has "
                f"{len(urls)} process(es)"
            )
        code = self._code_for(user)
        transport = FaultInjectingTransport()
        clock = SkewedClock(self.clock, clock_skew)
        random_bytes = random.Random(self.rng.getrandbits(64)).randbytes if self.rng else None
        secret = passphrase or f"passphrase of {user.name}'s {name}"
        directory = self.root / user.name / name
        if self.embedder is not None:
            search.assign_embedder(directory / DB_FILENAME, self.embedder)
        agent = DeviceAgent.create(
            directory,
            secret,
            device_name=name,
            cloud_url=urls[index],
            transport=transport,
            clock=clock,
            random_bytes=random_bytes,
            kdf_iterations=self.kdf_iterations,
        )
        agent.enroll(code, account_passphrase=account_passphrase)
        transport.plan = plan  # enrolled on a clean network; the faults start now
        handle = DeviceHandle(
            name, user, agent, transport, secret,
            clock=clock, home_url=urls[index], random_bytes=random_bytes,
        )  # fmt: skip
        user.devices.append(handle)
        return handle

    def _code_for(self, user: User) -> str:
        unused = self._unused_codes.pop(user.name, None)
        return unused or self.cloud.operator.new_enrollment_code(user.space_id)

    def devices(self) -> Iterator[DeviceHandle]:
        for user in self.users.values():
            yield from user.devices

    def device(self, user: str, name: str) -> DeviceHandle:
        for handle in self.users[user].devices if user in self.users else []:
            if handle.name == name:
                return handle
        raise FleetError(f"no device {name!r} of user {user!r} in this fleet")

    # --- partitions -------------------------------------------------------------------

    def partition(
        self, devices: Iterable[DeviceHandle], *, from_urls: Sequence[str] | None = None
    ) -> None:
        """Cut ``devices`` off together: from every cloud process, or only from the
        processes at ``from_urls`` (they still reach the others, e.g. after
        ``fail_over``). Requests across the cut fail to connect and are logged."""
        urls = self.cloud.urls if from_urls is None else list(from_urls)
        unknown = [u for u in urls if u not in self.cloud.urls]
        if unknown:
            raise FleetError(f"cannot partition from {unknown}: not a process of this cloud")
        origins = {origin_of(u) for u in urls}
        for handle in devices:
            handle.transport.cut_off |= origins

    def heal(self, devices: Iterable[DeviceHandle] | None = None) -> None:
        """End every partition (of ``devices``, or of the whole fleet)."""
        for handle in self.devices() if devices is None else devices:
            handle.transport.cut_off.clear()

    def close(self) -> None:
        for handle in self.devices():
            handle.close()
            if self.embedder is not None:
                search.assign_embedder(handle.directory / DB_FILENAME, None)
