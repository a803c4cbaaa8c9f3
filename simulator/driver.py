"""What a simulated user and network do to a fleet, recorded in a ``RunTrace``.

Invariants: every user-facing write goes through the device's real agent and is
recorded (op id, device, record) the moment it is queued; before a forget, everything
that must later be unreadable is captured (each version's text and each data key every
device of the user holds for it, and the cloud's wrapped keys for them); a device that
writes no longer counts as "synced last" until its next completed sync. The driver
reads the time only through the injected ``clock`` (seconds, monotonic).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from device.errors import DeviceError, Offline
from device.views import SyncReport
from simulator import invariants
from simulator.cloud_view import CloudView, StepReads
from simulator.errors import CrashPointNotReached
from simulator.fleet import DeviceHandle, Fleet
from simulator.observe import (
    FORGOTTEN,
    device_key,
    held_now,
    record_key_ids,
    version_texts,
)
from simulator.processes import Killed, kill_during_sync, sync_in_a_process
from simulator.report import Check
from simulator.trace import ConcurrentEdit, ForgottenRecord, IssuedOp, RunTrace, StaleEdit

SYNCS_COMPLETED = "every sync that reached the cloud completed without an error"


@dataclass(frozen=True)
class ForgetTiming:
    """One forget: when it reached the cloud and when the last device shredded it."""

    record_id: str
    forgotten_step: int
    committed_step: int | None
    shredded_step: int | None
    seconds: float | None


class Driver:
    """Acts on a fleet as users and networks would, and keeps the run's trace."""

    def __init__(
        self,
        fleet: Fleet,
        trace: RunTrace | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fleet = fleet
        self.trace = trace or RunTrace()
        self.clock = clock
        self.step = 0
        self._conversations = 0
        self.view = CloudView(fleet.cloud.operator)
        self.step_reads = StepReads(fleet.cloud.operator)
        self.sessions = 0  # in-process syncs tried while the device reached the cloud

    # --- what users do ----------------------------------------------------------------

    def _conversation(self) -> str:
        self._conversations += 1
        return f"conv-{self._conversations}"

    def _issue(self, handle: DeviceHandle, kind: str, record_id: str, op_id: str,
               text: str | None = None) -> IssuedOp:  # fmt: skip
        who = device_key(handle)
        self.trace.wrote(who)
        return self.trace.issue(IssuedOp(op_id, who, kind, record_id, self.step, text))

    def remember(self, handle: DeviceHandle, sentence: str) -> str:
        """The user types ``sentence`` and asks to remember it; returns the record id."""
        conversation = self._conversation()
        handle.agent.say(sentence, conversation)
        result = handle.agent.remember(sentence, conversation)
        self._issue(handle, "remember", result.record_id, result.op_id, sentence)
        return result.record_id

    def correct(self, handle: DeviceHandle, record_id: str, sentence: str) -> IssuedOp:
        """The user types ``sentence`` and says the record is wrong: this is right."""
        conversation = self._conversation()
        handle.agent.say(sentence, conversation)
        result = handle.agent.correct(record_id, sentence, conversation)
        return self._issue(handle, "correct", record_id, result.op_id, sentence)

    def forget(self, handle: DeviceHandle, record_id: str) -> IssuedOp:
        """Forget permanently, after capturing what must be unreadable afterwards."""
        invariants.harvest(self.fleet, self.trace, [handle])  # the forget drops receipts
        self.capture_before_forget(handle, record_id)
        result = handle.agent.forget_permanently(record_id)
        return self._issue(handle, "forget_permanently", record_id, result.op_id)

    def capture_before_forget(self, handle: DeviceHandle, record_id: str) -> ForgottenRecord:
        user = handle.user
        forgotten = self.trace.forgotten.get(record_id) or ForgottenRecord(
            record_id, user.space_id, device_key(handle), self.step
        )
        needles = forgotten.needles
        key_ids = set(forgotten.cloud_key_ids)
        for other in user.devices:
            who = device_key(other)
            for version in version_texts(other, record_id):
                if version.text:
                    needles.setdefault(f"v{version.version} text", version.text.encode())
                    if needles[f"v{version.version} text"] != version.text.encode():
                        needles[f"v{version.version} text on {who}"] = version.text.encode()
            for n, key in enumerate(other.agent.data_keys_for(record_id)):
                needles[f"data key {n} on {who}"] = key
            key_ids.update(record_key_ids(other, record_id))
        key_ids.update(self.view.version_key_ids(user.space_id, record_id))
        wrapped = self.fleet.cloud.operator.key_store.wrapped_keys_for(key_ids)
        for key_id, blob in wrapped.items():
            needles[f"cloud wrapped key {key_id}"] = blob
        forgotten.cloud_key_ids = set(wrapped)
        self.trace.forgotten[record_id] = forgotten
        return forgotten

    # --- what networks and processes do ----------------------------------------------

    def sync(self, handle: DeviceHandle) -> SyncReport | None:
        """Sync one device; None when it is offline, or when the sync ended in any other
        device error, which the trace keeps (a check fails on it: a user can act on
        neither; nothing the device did before the error is lost). A sync tried while
        the device reaches its cloud process is a device session, whatever it meets on
        the way (an injected fault, a restart)."""
        if handle.online and not handle.partitioned:
            self.sessions += 1
        try:
            report = handle.agent.sync()
        except Offline:
            return None
        except DeviceError as exc:
            self.trace.sync_errors.append((self.step, device_key(handle), str(exc)[:500]))
            self.trace.wrote(device_key(handle))  # it did not complete a sync
            invariants.harvest(self.fleet, self.trace, [handle])
            return None
        self.trace.synced(device_key(handle), self.step)
        invariants.harvest(self.fleet, self.trace, [handle])
        return report

    def twin_sync(self, handle: DeviceHandle) -> tuple[SyncReport | None, int]:
        """Two sync processes on one device at once, as ``device live`` and ``device
        sync`` would be: a real ``memsync device sync`` process on the device's folder
        while the in-process agent syncs. Returns the agent's report and the process's
        exit code; a process that failed is kept in the trace like a failed sync."""
        with ThreadPoolExecutor(max_workers=1) as pool:
            other = pool.submit(sync_in_a_process, handle.agent.directory, handle.passphrase, None)
            report = self.sync(handle)
            done = other.result()
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-500:]
            self.trace.sync_errors.append(
                (
                    self.step,
                    device_key(handle),
                    f"second sync process: exit {done.returncode}: {tail}",
                )
            )
        invariants.harvest(self.fleet, self.trace, [handle])
        return report, done.returncode

    def crash_during_sync(self, handle: DeviceHandle, point: str) -> Killed:
        """A real process kill of the device at ``point`` of a sync (see processes).
        Raises ``CrashPointNotReached`` when the sync finished first (it then counts as
        a completed sync)."""
        try:
            killed = kill_during_sync(handle, point)
        except CrashPointNotReached:
            self.trace.synced(device_key(handle), self.step)  # the sync completed
            invariants.harvest(self.fleet, self.trace, [handle])
            raise
        self.trace.wrote(device_key(handle))  # it did not complete a sync
        invariants.harvest(self.fleet, self.trace, [handle])
        return killed

    # --- races -------------------------------------------------------------------------

    def concurrent_edit(
        self, first: DeviceHandle, second: DeviceHandle, record_id: str, texts: tuple[str, str]
    ) -> ConcurrentEdit:
        """Both devices go offline and correct the same record differently."""
        first.go_offline()
        second.go_offline()
        a = self.correct(first, record_id, texts[0])
        b = self.correct(second, record_id, texts[1])
        edit = ConcurrentEdit(
            record_id,
            first.user.space_id,
            ((a.device, a.op_id, texts[0]), (b.device, b.op_id, texts[1])),
            self.step,
        )
        self.trace.concurrent.append(edit)
        return edit

    def stale_edit(
        self, offline: DeviceHandle, forgetter: DeviceHandle, record_id: str, text: str
    ) -> StaleEdit | None:
        """``offline`` goes offline holding the record; ``forgetter`` (brought online)
        forgets it and syncs; then ``offline`` corrects it. None when the cloud did not
        commit the forget (e.g. it never saw the record), so the edit is not stale."""
        offline.go_offline()
        forgetter.go_online()
        self.forget(forgetter, record_id)
        self.sync(forgetter)
        record = self.view.records(forgetter.user.space_id).get(record_id)
        if record is None or not record.forgotten:
            return None
        op = self.correct(offline, record_id, text)
        edit = StaleEdit(record_id, offline.user.space_id, op.device, op.op_id, self.step)
        self.trace.stale.append(edit)
        return edit

    # --- watching ----------------------------------------------------------------------

    def observe(self) -> list[str]:
        """After a step: note forgets the cloud committed and those every device has
        shredded (for the forget-to-shred figures), and check the pending list's safety
        side. Returns the pending problems seen now. (Devices are read through
        ``observe.held_now`` and the cloud through ``StepReads``: each reread whenever
        it changed.)"""
        now = self.clock()
        open_forgets = [f for f in self.trace.forgotten.values() if f.shredded_step is None]
        uncommitted: dict[str, list[str]] = {}
        for forgotten in open_forgets:
            if forgotten.committed_step is None:
                uncommitted.setdefault(forgotten.space_id, []).append(forgotten.record_id)
        lifecycles = {
            space: self.step_reads.lifecycles(space, record_ids)
            for space, record_ids in uncommitted.items()
        }
        devices_of: dict[str, list[DeviceHandle]] = {}
        for user in self.fleet.users.values():
            devices_of.setdefault(user.space_id, []).extend(user.devices)
        for forgotten in open_forgets:
            if forgotten.committed_step is None:
                lifecycle = lifecycles[forgotten.space_id].get(forgotten.record_id)
                if lifecycle != FORGOTTEN:
                    continue
                forgotten.committed_step, forgotten.committed_at = self.step, now
            devices = devices_of.get(forgotten.space_id, [])
            if not any(held_now(h, forgotten.record_id) for h in devices):
                forgotten.shredded_step, forgotten.shredded_at = self.step, now
        return invariants.sample_pending(self.fleet, self.trace, self.step)

    def timings(self) -> list[ForgetTiming]:
        return [
            ForgetTiming(f.record_id, f.step, f.committed_step, f.shredded_step, f.seconds_to_shred)
            for f in self.trace.forgotten.values()
        ]

    def sync_until_quiet(self, max_rounds: int = 8) -> int | None:
        """Every device online on a clean network (partitions healed, faults off), then
        sync rounds until one changes nothing anywhere.
        Returns the rounds it took, or None when it never went quiet."""
        devices = list(self.fleet.devices())
        self.fleet.heal()
        for handle in devices:
            handle.transport.plan = None  # the network is clean from here on
            handle.transport.drop_scripted()
            handle.go_online()
        for round_no in range(1, max_rounds + 1):
            busy = False
            for handle in devices:
                report = self.sync(handle)
                if report is None or report.pushed or report.pulled or report.acked:
                    busy = True
            self.observe()
            if not busy:
                return round_no
        return None

    def checks(self) -> list[Check]:
        """Every invariant over the fleet and this trace (walls not included)."""
        return [*invariants.check_all(self.fleet, self.trace), self.sync_errors_check()]

    def sync_errors_check(self) -> Check:
        """No sync ended in an error the user could not act on (offline is not one)."""
        errors = self.trace.sync_errors
        detail = (
            "every sync that reached the cloud completed"
            if not errors
            else "; ".join(f"step {step}: {who}: {what}" for step, who, what in errors[:5])
            + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        )
        return Check(SYNCS_COMPLETED, not errors, detail)
