"""The invariants checked after every run, each a PASS/FAIL ``Check`` with a precise detail.

Invariants of this module: every check reads real copies — the devices' SQLCipher
stores through their agents (and, for forgotten content, their decrypted pages and WAL
frames), the cloud's record store and key store through the operator handle — and
compares them with what the run recorded in its ``RunTrace``. A failing check names
the device, the record and the operation at fault. A check with nothing to look at
says so in its detail (e.g. "0 concurrent edit(s)"); it never pretends it saw more.

The checks:

- ``converged``: every device that synced last equals the cloud's view of its subset:
  it holds every record the cloud chose for it (``subset_members``; the whole space
  for a protocol-1/2 device) and no other live record, each exactly as the cloud has it
  (its queue is empty; every record it holds has the cloud's lifecycle, current
  version, flags and version texts; it holds every live record of its space).
- ``no_acknowledged_op_lost``: every op a device queued has a cloud receipt stored on
  that device, the cloud keeps the same receipt, and an applied op's effect is there.
- ``applied_once``: each record has exactly one version per applied creation and
  correction that devices hold receipts for, numbered 1..n without gaps.
- ``forgotten_unreadable``: nothing a forgotten record held (its sentences, every data
  key devices held for it, the cloud's wrapped keys) is in any device database (pages
  decrypted, WAL included), the cloud's record store or its key store.
- ``pending_exact``: the cloud's pending list is exactly the devices that still hold a
  forgotten record (checked at the end; the run also checks at every step that no
  device that still holds one is missing from the list: every forgotten record of every
  space against every device of it, each device's holdings read through
  ``observe.held_now`` and the cloud's list through ``cloud_view.StepReads``, each
  reread whenever its database changed).
The two checks of edits that race live in ``simulator.race_checks`` (re-exported here);
the helpers every check shares in ``simulator.check_basics``:

- ``conflicts_kept``: two devices' concurrent corrections of one record both survive
  (in the cloud and on every device that holds the record) and are flagged (a
  ``conflict`` receipt or ``conflicts_with``), never silently dropped.
- ``stale_edits_refused``: an offline device's queued edit to a record forgotten
  elsewhere is refused (``forgotten``) and leaves the record a skeleton everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from device.views import RecordView
from protocol.operations import EffectKind, Receipt
from simulator.check_basics import MAX_LISTED as MAX_LISTED
from simulator.check_basics import applied as _applied
from simulator.check_basics import check as _check
from simulator.check_basics import effective as _effective
from simulator.check_basics import forgotten_on as _forgotten_on
from simulator.check_basics import harvest as harvest
from simulator.check_basics import short as _short
from simulator.check_basics import skeleton_everywhere as _skeleton_everywhere
from simulator.cloud_view import CloudRecord, CloudView, StepReads
from simulator.fleet import DeviceHandle, Fleet
from simulator.forensics import (
    ScanResult,
    scan_device_database,
    scan_record_store,
    scan_sqlite_database,
)
from simulator.observe import (
    FORGOTTEN,
    device_key,
    held_now,
    holds_content,
    version_texts,
)
from simulator.race_checks import CONFLICTS_KEPT as CONFLICTS_KEPT
from simulator.race_checks import STALE_REFUSED as STALE_REFUSED
from simulator.race_checks import conflicts_kept, stale_edits_refused
from simulator.race_checks import edit_holders as edit_holders
from simulator.report import Check
from simulator.trace import RunTrace

CONVERGED = "every device that synced last equals the cloud's view of its subset"
NOTHING_LOST = "no acknowledged operation lost"
APPLIED_ONCE = "no operation applied twice"
FORGOTTEN_GONE = "no forgotten content readable (device pages + WAL, cloud store, key store)"
PENDING_EXACT = "the pending list is exactly the devices that have not yet shredded"


# --- convergence --------------------------------------------------------------------


def converged(
    fleet: Fleet, trace: RunTrace, devices: Iterable[DeviceHandle] | None = None
) -> Check:
    """Every device given (default: those that synced last) equals the cloud's view."""
    view = CloudView(fleet.cloud.operator)
    chosen = list(devices) if devices is not None else _synced_last(fleet, trace)
    problems: list[str] = []
    records_compared = 0
    cloud_records = {u.space_id: view.records(u.space_id) for u in fleet.users.values()}
    texts: dict[tuple[str, str], list[tuple[int, str | None]]] = {}
    for handle in chosen:
        who = device_key(handle)
        space = handle.user.space_id
        cloud = cloud_records[space]
        queued = handle.agent.pending_ops()
        if queued:
            problems.append(f"{who} still queues {queued} op(s)")
        mine = {v.record_id: v for v in handle.agent.list_records()}
        assert handle.agent.device_id is not None
        subset = view.subset(space, handle.agent.device_id)
        for record_id, record in cloud.items():
            wanted = subset is None or record_id in subset
            if wanted and not record.forgotten and record_id not in mine:
                problems.append(f"{who} lacks record {record_id} (cloud: {record.lifecycle})")
        for record_id, local in sorted(mine.items()):
            records_compared += 1
            theirs = cloud.get(record_id)
            if (
                subset is not None
                and record_id not in subset
                and theirs is not None
                and not theirs.forgotten
                and not local.device_only
            ):
                problems.append(f"{who} holds record {record_id}, which is not in its subset")
                continue
            if theirs is None:
                # forgotten on its own device before it ever reached the cloud
                if local.lifecycle != FORGOTTEN or local.text is not None:
                    problems.append(
                        f"{who} holds record {record_id} ({local.lifecycle}) the cloud never saw"
                    )
                continue
            problems.extend(_compare_record(view, texts, who, handle, local, theirs, space))
    devices_text = ", ".join(device_key(h) for h in chosen) or "none"
    return _check(
        CONVERGED,
        problems,
        f"{len(chosen)} device(s) ({devices_text}) equal the cloud on {records_compared} "
        "record view(s): lifecycle, version, flags and every version's text",
    )


def _synced_last(fleet: Fleet, trace: RunTrace) -> list[DeviceHandle]:
    return [h for h in fleet.devices() if device_key(h) in trace.last_synced]


def _compare_record(
    view: CloudView,
    texts: dict[tuple[str, str], list[tuple[int, str | None]]],
    who: str,
    handle: DeviceHandle,
    local: RecordView,
    cloud: CloudRecord,
    space: str,
) -> list[str]:
    rid = cloud.record_id
    if local.lifecycle != cloud.lifecycle:
        return [f"{who} record {rid}: lifecycle {local.lifecycle}, cloud {cloud.lifecycle}"]
    if cloud.forgotten:
        if local.text is not None or handle.agent.data_keys_for(rid):
            return [f"{who} record {rid}: forgotten in the cloud but still readable here"]
        return []
    problems: list[str] = []
    if local.version != cloud.current_version:
        problems.append(
            f"{who} record {rid}: current version v{local.version}, cloud v{cloud.current_version}"
        )
    if tuple(sorted(local.conflicts_with)) != cloud.live_conflicts:
        problems.append(
            f"{who} record {rid}: conflicts_with {sorted(local.conflicts_with)}, cloud "
            f"{list(cloud.live_conflicts)}"
        )
    if local.superseded_by != cloud.superseded_by:
        problems.append(
            f"{who} record {rid}: superseded_by {local.superseded_by}, cloud {cloud.superseded_by}"
        )
    key = (space, rid)
    if key not in texts:
        texts[key] = view.version_texts(space, rid)
    cloud_chain = dict(texts[key])
    local_chain = {v.version: v.text for v in version_texts(handle, rid)}
    for version in sorted(set(cloud_chain) | set(local_chain)):
        if local_chain.get(version, "<missing>") != cloud_chain.get(version, "<missing>"):
            problems.append(
                f"{who} record {rid} v{version}: text {_short(local_chain.get(version))}, "
                f"cloud {_short(cloud_chain.get(version))}"
            )
    return problems


# --- receipts -----------------------------------------------------------------------


def no_acknowledged_op_lost(fleet: Fleet, trace: RunTrace) -> Check:
    """Every queued op was answered (or dropped with its record when the device shredded
    it); every receipt a device stored is kept by the cloud, with its effect."""
    harvest(fleet, trace)
    view = CloudView(fleet.cloud.operator)
    handles = {device_key(h): h for h in fleet.devices()}
    problems: list[str] = []
    dropped = 0
    for op in trace.issued:
        if op.op_id in trace.receipts:
            continue
        handle = handles.get(op.device)
        if handle is not None and _forgotten_on(handle, op.record_id):
            dropped += 1  # shredded with its record before its receipt was stored
            continue
        problems.append(
            f"op {op.op_id} ({op.kind} of {op.record_id} by {op.device}, step {op.step}) "
            "was never answered and its record is not forgotten"
        )
    kept: dict[str, dict[str, Receipt]] = {}
    for op_id, (who, receipt) in sorted(trace.receipts.items()):
        handle = handles.get(who)
        if handle is None:
            problems.append(f"op {op_id}: device {who} is no longer in the fleet")
            continue
        space = handle.user.space_id
        if space not in kept:
            kept[space] = view.receipts(space)
        theirs = kept[space].get(op_id)
        if theirs is None:
            problems.append(
                f"op {op_id} ({who}): acknowledged {receipt.status.value} but the cloud has "
                "no receipt for it"
            )
            continue
        if _effective(theirs) is not _effective(receipt):
            problems.append(
                f"op {op_id} ({who}): device holds {_effective(receipt).value}, cloud kept "
                f"{_effective(theirs).value}"
            )
        if _applied(receipt):
            problems.extend(_effect_present(view, space, op_id, receipt))
    return _check(
        NOTHING_LOST,
        problems,
        f"{len(trace.issued)} queued op(s): {len(trace.issued) - dropped} answered, {dropped} "
        f"dropped with a record shredded first; {len(trace.receipts)} acknowledged "
        "receipt(s) all kept by the cloud with their effects",
    )


def _effect_present(view: CloudView, space: str, op_id: str, receipt: Receipt) -> list[str]:
    if receipt.record_id is None:
        return []
    record = view.records(space).get(receipt.record_id)
    if record is None:
        return [f"op {op_id}: applied to record {receipt.record_id}, which the cloud lacks"]
    if record.forgotten or not receipt.versions:
        return []
    newest = receipt.versions[-1]
    versions = {v for v, _ in view.version_texts(space, receipt.record_id)}
    if newest not in versions:
        return [
            f"op {op_id}: applied as {receipt.record_id} v{newest}, which the cloud lacks "
            f"(it has {sorted(versions)})"
        ]
    return []


def applied_once(fleet: Fleet, trace: RunTrace) -> Check:
    """Each version of each record is the effect of exactly one applied op (a creation
    or a correction, by the receipts devices acknowledged and the cloud kept): versions
    numbered 1..n, none claimed twice, none without its op."""
    harvest(fleet, trace)
    view = CloudView(fleet.cloud.operator)
    problems: list[str] = []
    checked = 0
    for user in fleet.users.values():
        space = user.space_id
        receipts = dict(view.receipts(space))
        for op_id, (who, receipt) in trace.receipts.items():
            if who.startswith(f"{user.name}/"):
                receipts.setdefault(op_id, receipt)
        claims: dict[str, dict[int, list[str]]] = {}
        for op_id, receipt in sorted(receipts.items()):
            if receipt.record_id is None or not _applied(receipt):
                continue
            if receipt.effect not in (EffectKind.CREATED, EffectKind.CORRECTED):
                continue
            if receipt.versions:
                per = claims.setdefault(receipt.record_id, {})
                per.setdefault(receipt.versions[-1], []).append(op_id)
        for record_id in sorted(view.records(space)):
            checked += 1
            versions = [v for v, _ in view.version_texts(space, record_id)]
            per_version = claims.get(record_id, {})
            if versions != list(range(1, len(versions) + 1)):
                problems.append(f"record {record_id}: versions {versions} are not 1..n")
            for version, ops in sorted(per_version.items()):
                if len(ops) > 1:
                    problems.append(f"record {record_id} v{version}: made by {len(ops)} ops {ops}")
            unclaimed = [v for v in versions if v not in per_version]
            if unclaimed:
                problems.append(
                    f"record {record_id}: version(s) {unclaimed} were made by no applied op "
                    "(an op applied twice?)"
                )
    return _check(
        APPLIED_ONCE,
        problems,
        f"{checked} record(s): every version made by exactly one applied op, numbered 1..n",
    )


# --- forgetting ---------------------------------------------------------------------


def all_needles(trace: RunTrace) -> dict[str, bytes]:
    """Every byte string a forgotten record left that must be gone, labelled."""
    return {
        f"{f.record_id} {label}": needle
        for f in trace.forgotten.values()
        for label, needle in f.needles.items()
    }


def forgotten_unreadable(fleet: Fleet, trace: RunTrace) -> Check:
    needles = all_needles(trace)
    problems: list[str] = []
    details: list[str] = []
    view = CloudView(fleet.cloud.operator)
    for forgotten in trace.forgotten.values():
        problems.extend(_skeleton_everywhere(fleet, view, forgotten))
    if needles:
        for handle in fleet.devices():
            scan = scan_device_database(handle.db_path, handle.passphrase, needles)
            if not scan.clean or scan.unreadable_pages or not scan.pages:
                problems.append(f"{device_key(handle)}: {scan.describe(MAX_LISTED)}")
        store = _scan_record_store(fleet, needles)
        if not store.clean:
            problems.append(f"cloud record store: {store.describe(MAX_LISTED)}")
        keys = scan_sqlite_database(fleet.cloud.config.key_store_path, needles)
        if not keys.clean:
            problems.append(f"cloud key store: {keys.describe(MAX_LISTED)}")
        wanted = {k for f in trace.forgotten.values() for k in f.cloud_key_ids}
        left = fleet.cloud.operator.key_store.wrapped_keys_for(wanted)
        if left:
            problems.append(f"cloud key store still wraps key(s) {sorted(left)[:MAX_LISTED]}")
        details.append(
            f"{len(needles)} needle(s) of {len(trace.forgotten)} forgotten record(s) found "
            f"nowhere: {sum(1 for _ in fleet.devices())} device database(s) decrypted page by "
            f"page with WAL, the record store, the key store ({len(wanted)} wrapped key(s) "
            "destroyed)"
        )
    return _check(FORGOTTEN_GONE, problems, "; ".join(details) or "0 forgotten record(s)")


def _scan_record_store(fleet: Fleet, needles: Mapping[str, bytes]) -> ScanResult:
    store = fleet.cloud.operator.store
    return scan_record_store(fleet.cloud.config.store_url, store.audit_blobs(), needles)


def pending_exact(fleet: Fleet, trace: RunTrace) -> Check:
    """At the end: the cloud waits exactly for the devices still holding a forgotten
    record; plus every problem the run saw at its steps (``pending_problems``)."""
    view = CloudView(fleet.cloud.operator)
    problems = list(trace.pending_problems)
    forgets = 0
    for user in fleet.users.values():
        pending = view.pending_devices(user.space_id)
        forgotten = view.forgotten_record_ids(user.space_id)
        forgets += len(forgotten)
        problems.extend(_pending_mismatch(user.devices, forgotten, pending, "at the end"))
    return _check(
        PENDING_EXACT,
        problems,
        f"{forgets} forget(s) in the cloud; pending list = devices still holding them, at "
        f"the end and at each of {trace.pending_samples} step(s) sampled",
    )


def _pending_mismatch(
    devices: Iterable[DeviceHandle],
    forgotten: Iterable[str],
    pending: Mapping[str, set[str]],
    when: str,
    *,
    exact: bool = True,
    holds: Callable[[DeviceHandle, str], bool] = holds_content,
) -> list[str]:
    problems: list[str] = []
    for rid in sorted(forgotten):
        waiting = pending.get(rid, set())
        for handle in devices:
            holding = holds(handle, rid)
            listed = handle.agent.device_id in waiting
            if holding and not listed:
                problems.append(
                    f"{when}: {device_key(handle)} still holds record {rid} but the cloud "
                    "does not list it pending"
                )
            elif listed and not holding and exact:
                problems.append(
                    f"{when}: the cloud lists {device_key(handle)} pending for {rid}, but it "
                    "holds nothing of it"
                )
    return problems


def sample_pending(fleet: Fleet, trace: RunTrace, step: int) -> list[str]:
    """At a step of a run: no device still holding a forgotten record is missing from
    the pending list. (A device can be listed after it shredded and before its ack
    arrives, so exactness is checked only once everyone has synced.)"""
    reads = StepReads(fleet.cloud.operator)
    problems: list[str] = []
    for user in fleet.users.values():
        pending, forgotten = reads.forgets(user.space_id)
        problems.extend(
            _pending_mismatch(
                user.devices, forgotten, pending, f"step {step}", exact=False, holds=held_now
            )
        )
    trace.pending_samples += 1
    trace.pending_problems.extend(problems)
    return problems


def check_all(fleet: Fleet, trace: RunTrace) -> list[Check]:
    """Every invariant, in a fixed order (the walls check is ``simulator.walls``)."""
    return [
        converged(fleet, trace),
        no_acknowledged_op_lost(fleet, trace),
        applied_once(fleet, trace),
        forgotten_unreadable(fleet, trace),
        pending_exact(fleet, trace),
        conflicts_kept(fleet, trace),
        stale_edits_refused(fleet, trace),
    ]
