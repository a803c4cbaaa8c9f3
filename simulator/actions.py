"""The actions of a random run, as data: a name, a per-step rate, and what it does.

Invariants: an action draws every choice from the run's one ``random.Random`` and picks
among devices and records in run order (labels like ``u0/d1`` and ``r3``, never random
ids), so the same seed makes the same choices; it returns one log line that names only
labels, so the same seed gives the same log. An action with nothing to act on says so
and changes nothing. Adding a fault is adding an ``Action`` to the list.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from device.views import SyncReport
from simulator.cloud_processes import CloudProcesses
from simulator.cloud_runner import RunningCloud
from simulator.driver import Driver
from simulator.errors import CrashPointNotReached
from simulator.fleet import DeviceHandle
from simulator.observe import device_key, live_record_ids
from simulator.sentences import SentenceMaker
from simulator.transport import Fault, FaultKind


@dataclass
class RunContext:
    """What actions share: the driver, the one random stream, sentences and labels."""

    driver: Driver
    rng: random.Random
    sentences: SentenceMaker
    devices: list[DeviceHandle]
    labels: dict[str, str] = field(default_factory=dict)  # record id -> "r<n>"
    order: dict[str, int] = field(default_factory=dict)  # record id -> creation index
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def label(self, record_id: str) -> str:
        return self.labels.get(record_id, record_id)

    def name(self, handle: DeviceHandle) -> str:
        return self.device_labels[device_key(handle)]

    @property
    def device_labels(self) -> dict[str, str]:
        users: dict[str, int] = {}
        out: dict[str, str] = {}
        for handle in self.devices:
            u = users.setdefault(handle.user.name, len(users))
            out[device_key(handle)] = f"u{u}/{handle.name}"
        return out

    def new_record(self, record_id: str) -> str:
        self.order[record_id] = len(self.order)
        self.labels[record_id] = f"r{len(self.labels)}"
        return self.labels[record_id]

    def records_of(self, handle: DeviceHandle) -> list[str]:
        """Records the device may still edit, in run order."""
        held = live_record_ids(handle)
        return sorted((r for r in held if r in self.order), key=self.order.__getitem__)

    def pick(self, items: Sequence[DeviceHandle]) -> DeviceHandle:
        return items[self.rng.randrange(len(items))]


Perform = Callable[[RunContext], str]


@dataclass(frozen=True)
class Action:
    name: str
    rate: float  # probability that a step is this action
    perform: Perform


def remember(ctx: RunContext) -> str:
    handle = ctx.pick(ctx.devices)
    record_id = ctx.driver.remember(handle, ctx.sentences.statement())
    ctx.count("remembered")
    return f"{ctx.name(handle)} remembers {ctx.new_record(record_id)}"


def toggle_network(ctx: RunContext) -> str:
    handle = ctx.pick(ctx.devices)
    if handle.online:
        handle.go_offline()
        ctx.count("went offline")
        return f"{ctx.name(handle)} goes offline"
    handle.go_online()
    ctx.count("came back")
    return f"{ctx.name(handle)} comes back online"


def sync(ctx: RunContext) -> str:
    handle = ctx.pick(ctx.devices)
    report = ctx.driver.sync(handle)
    if report is None:
        ctx.count("sync while offline")
        return f"{ctx.name(handle)} tries to sync: offline"
    ctx.count("synced")
    ctx.count("ops applied", report.applied)
    ctx.count("duplicates answered", report.duplicates)
    ctx.count("ops refused", len(report.refused))
    ctx.count("records shredded", len(report.shredded))
    _count_rounds(ctx, report)
    return (
        f"{ctx.name(handle)} syncs: pushed {report.pushed} (applied {report.applied}, "
        f"duplicate {report.duplicates}, refused {len(report.refused)}), pulled "
        f"{report.pulled}, shredded {len(report.shredded)}"
    )


def _count_rounds(ctx: RunContext, report: SyncReport) -> None:
    """Resyncs, and pushes that had to pull more than once first."""
    if report.resynced:
        ctx.count("resyncs")
    if report.pulls_before_push > 1:
        ctx.count("pushes that pulled again first")


# the two points every sync passes (``resync_pulled`` is reached only in a resync)
SYNC_CRASH_POINTS = ("push_answered", "pull_answered")


def crash(ctx: RunContext) -> str:
    online = [h for h in ctx.devices if h.online]
    if not online:
        ctx.count("crash skipped")
        return "crash: no device is online"
    handle = ctx.pick(online)
    point = SYNC_CRASH_POINTS[ctx.rng.randrange(len(SYNC_CRASH_POINTS))]
    if point == "push_answered" and handle.agent.pending_ops() == 0:
        point = "pull_answered"  # with nothing queued the push never reaches its point
    try:
        ctx.driver.crash_during_sync(handle, point)
    except CrashPointNotReached:
        ctx.count("crash point not reached")
        return f"{ctx.name(handle)}'s sync finished before reaching {point} (not killed)"
    ctx.count(f"killed at {point}")
    return f"{ctx.name(handle)} is killed (SIGKILL) during sync at {point}"


def _held_record(ctx: RunContext) -> tuple[DeviceHandle, str] | None:
    """A random (device, record it may still edit), in run order; None if none."""
    candidates = [(h, r) for h in ctx.devices for r in ctx.records_of(h)]
    if not candidates:
        return None
    return candidates[ctx.rng.randrange(len(candidates))]


def forget(ctx: RunContext) -> str:
    picked = _held_record(ctx)
    if picked is None:
        ctx.count("forget skipped")
        return "forget: no record to forget"
    handle, record_id = picked
    ctx.driver.forget(handle, record_id)
    ctx.count("forgotten")
    return f"{ctx.name(handle)} forgets {ctx.label(record_id)} permanently"


def correct(ctx: RunContext) -> str:
    picked = _held_record(ctx)
    if picked is None:
        ctx.count("correct skipped")
        return "correct: no record to correct"
    handle, record_id = picked
    ctx.driver.correct(handle, record_id, ctx.sentences.statement())
    ctx.count("corrected")
    return f"{ctx.name(handle)} corrects {ctx.label(record_id)}"


def _shared_records(ctx: RunContext) -> list[tuple[DeviceHandle, DeviceHandle, str]]:
    """(device, other device of the same user, record both may edit), in run order."""
    out: list[tuple[DeviceHandle, DeviceHandle, str]] = []
    for i, first in enumerate(ctx.devices):
        mine = ctx.records_of(first)
        for second in ctx.devices[i + 1 :]:
            if second.user is not first.user:
                continue
            theirs = set(ctx.records_of(second))
            out.extend((first, second, r) for r in mine if r in theirs)
    return out


def concurrent_edit(ctx: RunContext) -> str:
    shared = _shared_records(ctx)
    if not shared:
        ctx.count("concurrent edit skipped")
        return "concurrent edit: no record held by two devices of one user"
    first, second, record_id = shared[ctx.rng.randrange(len(shared))]
    texts = (ctx.sentences.statement(), ctx.sentences.statement())
    ctx.driver.concurrent_edit(first, second, record_id, texts)
    ctx.count("concurrent edits")
    return (
        f"{ctx.name(first)} and {ctx.name(second)} go offline and both correct "
        f"{ctx.label(record_id)}"
    )


def stale_edit(ctx: RunContext) -> str:
    shared = _shared_records(ctx)
    if not shared:
        ctx.count("stale edit skipped")
        return "stale edit: no record held by two devices of one user"
    first, second, record_id = shared[ctx.rng.randrange(len(shared))]
    offline, forgetter = (first, second) if ctx.rng.random() < 0.5 else (second, first)
    edit = ctx.driver.stale_edit(offline, forgetter, record_id, ctx.sentences.statement())
    ctx.count("forgotten")
    if edit is None:
        ctx.count("stale edit not stale")
        return (
            f"{ctx.name(forgetter)} forgets {ctx.label(record_id)} and syncs; the cloud had "
            f"not seen it, so {ctx.name(offline)} does not edit it"
        )
    ctx.count("stale edits")
    return (
        f"{ctx.name(offline)} goes offline; {ctx.name(forgetter)} forgets "
        f"{ctx.label(record_id)} and syncs; {ctx.name(offline)} corrects it offline"
    )


def partition_or_heal(ctx: RunContext) -> str:
    """Heal every partition if there is one; else cut a random group of devices off
    from the cloud together (they keep working offline)."""
    fleet = ctx.driver.fleet
    if any(h.transport.cut_off for h in ctx.devices):
        fleet.heal()
        ctx.count("partitions healed")
        return "the partition heals"
    group = ctx.rng.sample(ctx.devices, ctx.rng.randint(1, len(ctx.devices)))
    group.sort(key=ctx.devices.index)
    fleet.partition(group)
    ctx.count("partitions")
    return "partition: " + ", ".join(ctx.name(h) for h in group) + " cut off from the cloud"


def restart_mid_request(ctx: RunContext) -> str:
    """The cloud process a device talks to restarts (is killed and started again) after
    it committed the device's push (or answered its pull) and before the device heard."""
    reachable = [h for h in ctx.devices if h.online and not h.transport.cut_off]
    if not reachable:
        ctx.count("restart skipped")
        return "restart: no device reaches the cloud"
    handle = ctx.pick(reachable)
    path = "/v1/push" if handle.agent.pending_ops() else "/v1/pull"
    cloud = ctx.driver.fleet.cloud
    restart: Callable[[], None]
    if isinstance(cloud, CloudProcesses):
        index = cloud.urls.index(handle.home_url)
        restart = functools.partial(cloud.restart, index, kill=True)
    elif isinstance(cloud, RunningCloud):
        restart = cloud.restart  # stopped and started: the answer was already sent
    else:
        ctx.count("restart skipped")
        return f"restart: a {type(cloud).__name__} cannot be restarted"
    handle.transport.inject(Fault(kind=FaultKind.SERVER_RESTART, path=path, action=restart))
    report = ctx.driver.sync(handle)
    hit = handle.transport.drop_scripted() == 0
    ctx.count("cloud restarts mid-request" if hit else "restart not reached")
    outcome = "heard nothing" if report is None else "synced"
    where = "push" if path == "/v1/push" else "pull"
    return (
        f"the cloud restarts during {ctx.name(handle)}'s {where} ({outcome})"
        if hit
        else f"{ctx.name(handle)} syncs; its {where} never came, so no restart"
    )


def compact(ctx: RunContext) -> str:
    """The operator compacts one user's change feed: a device whose cursor is now below
    the feed's floor is answered ``resync_required`` at its next pull and rebuilds."""
    users = list({h.user.space_id: h.user for h in ctx.devices}.values())
    index = ctx.rng.randrange(len(users))
    ctx.driver.fleet.cloud.operator.compact(users[index].space_id)
    ctx.count("feed compactions")
    return f"the operator compacts u{index}'s change feed"


def twin_sync(ctx: RunContext) -> str:
    """Two sync processes on one device at once (``device live`` beside ``device
    sync``): a real ``memsync device sync`` process on its folder while the agent syncs.
    Both push the same queued ops, so the cloud sees them twice and one copy is answered
    ``duplicate``."""
    reachable = [h for h in ctx.devices if h.online and not h.transport.cut_off]
    if not reachable:
        ctx.count("twin sync skipped")
        return "twin sync: no device reaches the cloud"
    handle = ctx.pick(reachable)
    report, code = ctx.driver.twin_sync(handle)
    ctx.count("twin syncs")
    if report is not None:
        ctx.count("duplicates answered", report.duplicates)
    ok = "both completed" if report is not None and code == 0 else "one failed"
    return f"{ctx.name(handle)} syncs in two processes at once ({ok})"


def doubled_push(ctx: RunContext) -> str:
    """A retrying proxy in front of the cloud: a device remembers something new, the
    operator compacts its user's feed, and the device syncs with each of its pushes
    delivered twice, hearing the SECOND answer (``duplicate`` for ops the first copy
    applied). Behind the new floor, the device resyncs between its pushes."""
    reachable = [h for h in ctx.devices if h.online and not h.transport.cut_off]
    if not reachable:
        ctx.count("doubled push skipped")
        return "doubled push: no device reaches the cloud"
    handle = ctx.pick(reachable)
    label = ctx.new_record(ctx.driver.remember(handle, ctx.sentences.statement()))
    ctx.driver.fleet.cloud.operator.compact(handle.user.space_id)
    ctx.count("feed compactions")
    handle.transport.inject(
        *(Fault(kind=FaultKind.DUPLICATE_SECOND, path="/v1/push") for _ in range(3))
    )
    report = ctx.driver.sync(handle)
    handle.transport.drop_scripted()
    ctx.count("doubled pushes")
    if report is None:
        return f"{ctx.name(handle)} remembers {label}; its doubled sync did not complete"
    ctx.count("duplicates answered", report.duplicates)
    _count_rounds(ctx, report)
    how = "resynced between its pushes" if report.resynced else "did not need a resync"
    return (
        f"{ctx.name(handle)} remembers {label}, the feed is compacted, and its pushes "
        f"arrive twice (it hears the second answer; {how})"
    )


def forget_mid_sync(ctx: RunContext) -> str:
    """While a device syncs, another device of its user forgets a record both hold and
    syncs, just before each of the first two pushes: the second forget lands between
    the syncing device's pull and its push, so that push is answered ``pull_required``
    again after it already pulled."""
    shared = [
        (a, b, r)
        for a, b, r in _shared_records(ctx)
        if a.online and b.online and not a.transport.cut_off and not b.transport.cut_off
    ]
    if not shared:
        ctx.count("forget mid-sync skipped")
        return "forget mid-sync: no record held by two reachable devices of one user"
    first, second, _ = shared[ctx.rng.randrange(len(shared))]
    syncer, forgetter = (first, second) if ctx.rng.random() < 0.5 else (second, first)
    records = [r for a, b, r in shared if a is first and b is second][:2]
    label = ctx.new_record(ctx.driver.remember(syncer, ctx.sentences.statement()))

    def forget_elsewhere(record_id: str) -> Callable[[], None]:
        def act() -> None:
            ctx.driver.forget(forgetter, record_id)
            ctx.driver.sync(forgetter)

        return act

    for record_id in records:
        syncer.transport.inject(
            Fault(kind=FaultKind.INTERLEAVE, path="/v1/push", action=forget_elsewhere(record_id))
        )
    report = ctx.driver.sync(syncer)
    syncer.transport.drop_scripted()
    ctx.count("forgotten", len(records))
    ctx.count("forgets mid-sync")
    if report is not None:
        _count_rounds(ctx, report)
    outcome = "completed" if report is not None else "did not complete"
    gone = ", ".join(ctx.label(r) for r in records)
    return (
        f"{ctx.name(syncer)} remembers {label} and syncs while {ctx.name(forgetter)} "
        f"forgets {gone} and syncs before each push ({outcome})"
    )


@dataclass(frozen=True)
class Rates:
    """Per-step probabilities; what is left over (1 - their sum) is a sync."""

    remember: float = 0.30
    offline: float = 0.10
    crash: float = 0.03
    forget: float = 0.06
    correct: float = 0.08
    concurrent: float = 0.04
    stale: float = 0.03
    partition: float = 0.0
    restart: float = 0.0
    compact: float = 0.03
    twin: float = 0.01
    doubled: float = 0.02
    forget_mid_sync: float = 0.02

    def as_dict(self) -> dict[str, float]:
        return {
            "remember": self.remember,
            "offline": self.offline,
            "crash": self.crash,
            "forget": self.forget,
            "correct": self.correct,
            "concurrent": self.concurrent,
            "stale": self.stale,
            "partition": self.partition,
            "restart": self.restart,
            "compact": self.compact,
            "twin": self.twin,
            "doubled": self.doubled,
            "forget_mid_sync": self.forget_mid_sync,
        }


def action_set(rates: Rates) -> list[Action]:
    """The run's actions with their rates; ``sync`` takes the rest of each step."""
    named: dict[str, Perform] = {
        "remember": remember,
        "offline": toggle_network,
        "crash": crash,
        "forget": forget,
        "correct": correct,
        "concurrent": concurrent_edit,
        "stale": stale_edit,
        "partition": partition_or_heal,
        "restart": restart_mid_request,
        "compact": compact,
        "twin": twin_sync,
        "doubled": doubled_push,
        "forget_mid_sync": forget_mid_sync,
    }
    given = rates.as_dict()
    actions = [Action(name, given[name], perform) for name, perform in named.items()]
    rest = max(0.0, 1.0 - sum(given.values()))
    return [*actions, Action("sync", rest, sync)]


def choose(actions: Sequence[Action], rng: random.Random) -> Action:
    """One action, each with probability ``rate`` (their rates sum to 1)."""
    draw = rng.random() * sum(a.rate for a in actions)
    for action in actions:
        draw -= action.rate
        if draw < 0:
            return action
    return actions[-1]
