"""A Hypothesis state machine over real devices and an in-process cloud.

Two SQLCipher devices of one user talk to the real FastAPI app (in process, through
the test client's transport) behind the simulator's fault-injecting transport at the
device's one seam: requests that never arrive, responses lost after the server
committed, requests delivered twice, stale copies of requests delivered again later,
and devices that crash (their connection dropped without closing) and reopen. Random
remembers, "don't use"s, forgets, syncs, pins and changes of a device's subset budget
run in between. Whenever every device is back online and has synced, the invariants
must hold:

- every device equals the cloud's view of each record it knows (state and text);
- each device holds exactly the live records the cloud chose for its subset, and
  leaving the subset is never forgetting: every record is still in the cloud;
- no queued operation is left, and no acknowledged one was lost: every record a
  device created exists in the cloud (or was forgotten);
- nothing was applied twice: every record has exactly one version;
- forgotten stays forgotten: no device can read a record the cloud forgot, and an
  offline device's queued edit to it never brings it back.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, precondition, rule

from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.errors import NotFound
from cloud.service import CloudService
from device.agent import DeviceAgent
from device.errors import Offline, Refused, ServerRefused
from protocol.messages import RecordState
from protocol.model import LifecycleState
from protocol.subset import SubsetBudget, SubsetPolicy
from simulator.transport import EveryRequest, FaultInjectingTransport, FaultKind
from tests.device.conftest import TickingClock, seeded

PASSPHRASE = "state machine passphrase"
SENTENCES = [f"My friend number {i} lives in town {i}." for i in range(40)]
FORGOTTEN = LifecycleState.FORGOTTEN.value


# how the network behaves during one sync: every request gets that fault
NETWORK = {
    "ok": None,
    "offline": FaultKind.DROP_REQUEST,  # never arrives
    "lose_response": FaultKind.READ_TIMEOUT,  # the server commits, the answer is lost
    "duplicate": FaultKind.DUPLICATE,  # delivered twice; the device hears the first
    "replay": FaultKind.REPLAY_LATER,  # a copy of each request arrives again later
}
FAILS = {"offline", "lose_response"}


class SyncUnderFire(RuleBasedStateMachine):
    records = Bundle("records")

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="memsync-sm-"))
        self.config = CloudConfig(
            store_url=f"sqlite:///{self.root / 'records.db'}",
            key_store_path=self.root / "keys.db",
        )
        self.client = TestClient(create_app(self.config))
        self.client.__enter__()
        self.service: CloudService = self.client.app.state.service  # type: ignore[attr-defined]
        self.space, code = self.service.add_user("ada")
        self.transports: list[FaultInjectingTransport] = []
        self.agents: list[DeviceAgent] = []
        self.created: dict[str, int] = {}  # record id -> the device that made it
        self.next_sentence = 0
        for n in range(2):
            transport = FaultInjectingTransport(self.client._transport)
            agent = DeviceAgent.create(
                self.root / f"device{n}",
                PASSPHRASE,
                device_name=f"device{n}",
                cloud_url="http://testserver",
                transport=transport,
                clock=TickingClock(),
                random_bytes=seeded(100 + n),
            )
            agent.enroll(code if n == 0 else self.service.new_enrollment_code(self.space))
            self.transports.append(transport)
            self.agents.append(agent)

    def teardown(self) -> None:
        for agent in self.agents:
            agent.close()
        self.client.__exit__(None, None, None)
        shutil.rmtree(self.root, ignore_errors=True)

    # --- what users and networks do ---------------------------------------------------

    @precondition(lambda self: self.next_sentence < len(SENTENCES))
    @rule(target=records, device=st.integers(0, 1))
    def remember(self, device: int) -> str:
        text = SENTENCES[self.next_sentence]
        self.next_sentence += 1
        agent = self.agents[device]
        agent.say(text, f"c{self.next_sentence}")
        record = agent.remember(text, f"c{self.next_sentence}").record_id
        self.created[record] = device
        return record

    @rule(device=st.integers(0, 1), record=records)
    def dont_use(self, device: int, record: str) -> None:
        # not held here, forgotten, or already not in use: refused, nothing changed
        with contextlib.suppress(Refused):
            self.agents[device].dont_use(record)

    @rule(device=st.integers(0, 1), record=records)
    def forget(self, device: int, record: str) -> None:
        with contextlib.suppress(Refused):
            self.agents[device].forget_permanently(record)

    @rule(device=st.integers(0, 1), budget=st.integers(0, 6))
    def set_budget(self, device: int, budget: int) -> None:
        policy = SubsetPolicy(budget=SubsetBudget(max_records=budget))
        self.agents[device].set_subset_policy(policy)

    @rule(device=st.integers(0, 1), record=records, pinned=st.booleans())
    def pin(self, device: int, record: str, pinned: bool) -> None:
        # not in the cloud yet (404) or forgotten (409): refused, nothing changed
        with contextlib.suppress(ServerRefused):
            self.agents[device].pin(record, pinned=pinned)

    @rule(device=st.integers(0, 1), mode=st.sampled_from(sorted(NETWORK)))
    def sync(self, device: int, mode: str) -> None:
        kind = NETWORK[mode]
        self.transports[device].plan = EveryRequest(kind) if kind is not None else None
        try:
            self.agents[device].sync()
        except Offline:
            assert mode in FAILS
        finally:
            self.transports[device].plan = None

    @rule(device=st.integers(0, 1))
    def crash_and_reopen(self, device: int) -> None:
        agent = self.agents[device]
        agent._debug_db().conn.close()  # the process dies; nothing is closed cleanly
        self.agents[device] = DeviceAgent.open(
            agent.directory,
            PASSPHRASE,
            transport=self.transports[device],
            clock=TickingClock(),
            random_bytes=seeded(200 + device + self.next_sentence),
        )

    # --- the invariants, once everyone is back online ---------------------------------

    def _cloud(self, record: str) -> RecordState | None:
        """The cloud's view of a record; None when it never saw it."""
        try:
            return self.service.record_status(self.space, record)
        except NotFound:
            return None

    @rule(device=st.integers(0, 1))
    def stale_copies_arrive(self, device: int) -> None:
        self.transports[device].deliver_held()

    @rule()
    def everyone_syncs_and_converges(self) -> None:
        for transport in self.transports:  # stale copies still in flight arrive first
            transport.deliver_held()
        for _round in range(2):
            for agent in self.agents:
                agent.sync()
        for n, agent in enumerate(self.agents):
            assert agent.pending_ops() == 0, f"device{n} still queues ops"
            for view in agent.list_records():
                state = self._cloud(view.record_id)
                if state is None:
                    # forgotten on its own device before it was ever pushed: the cloud
                    # never saw it, and the device keeps only the skeleton
                    assert view.lifecycle == FORGOTTEN and self.created[view.record_id] == n
                    assert view.text is None and not agent.data_keys_for(view.record_id)
                    continue
                cloud_state = state.lifecycle_state.value
                assert view.lifecycle == cloud_state, (n, view.record_id, view.lifecycle)
                if cloud_state == FORGOTTEN:
                    assert view.text is None and not agent.data_keys_for(view.record_id)
                else:
                    assert view.version == state.version == 1, (n, view.record_id)
        live = {
            r
            for r in self.created
            if (st_ := self._cloud(r)) and st_.lifecycle_state.value != FORGOTTEN
        }
        for n, agent in enumerate(self.agents):
            held = {v.record_id for v in agent.list_records() if v.lifecycle != FORGOTTEN}
            assert agent.device_id is not None
            with self.service.store.session(self.space) as s:
                chosen = set(s.subset_members(self.space, agent.device_id))
            # exactly its subset: every live record the cloud chose, and nothing else
            assert held == chosen & live, (n, sorted(held ^ (chosen & live)))
        for record, maker in self.created.items():
            if self._cloud(record) is None:  # never lost: in the cloud, or forgotten first
                skeleton = [v for v in self.agents[maker].list_records() if v.record_id == record]
                assert skeleton and skeleton[0].lifecycle == FORGOTTEN, record


SyncUnderFire.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=14,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_sync_under_fire = SyncUnderFire.TestCase
