"""Scenario: a memory written offline on the phone, forgotten from the laptop,
unreadable everywhere once the phone reconnects.

Invariant: every check reads real copies (device pages decrypted with the device
passphrase, the WAL included; the cloud's record store and key store as stored), and
a positive control proves the device scan can see the very keys it later must miss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet, User
from simulator.forensics import (
    scan_device_database,
    scan_record_store,
    scan_sqlite_database,
)
from simulator.report import ScenarioReport, StepState
from simulator.scenarios.play import Emit, device_state, play

NAME = "forget-propagation"
CONVERSATION = "conv-1"
TYPED = "Morning! I grew up in Duluth. Anyway, what should I cook tonight?"
SENTENCE = "I grew up in Duluth."


def _pending(fleet: Fleet, user: User) -> list[dict[str, Any]]:
    names = {d.agent.device_id: d.name for d in user.devices}
    response = fleet.cloud.operator.pending(user.space_id)
    return [
        {
            "record_id": forget.record_id,
            "pending_devices": [names.get(p.device_id, p.device_name) for p in forget.pending],
        }
        for forget in response.forgets
        if forget.pending
    ]


def run(cloud: RunningCloud, root: Path, emit: Emit) -> ScenarioReport:
    """Play the scenario against ``cloud`` with devices under ``root``; return the report."""
    return play(NAME, _play, cloud, root, emit)


def _play(fleet: Fleet, report: ScenarioReport, emit: Emit) -> None:
    user = fleet.add_user("ada")
    phone = fleet.add_device(user, "phone")
    laptop = fleet.add_device(user, "laptop")

    def step(title: str) -> list[dict[str, Any]]:
        pending = _pending(fleet, user)
        state = StepState(title, [device_state(d) for d in user.devices], pending)
        report.steps.append(state)
        emit(state)
        return pending

    phone.go_offline()
    phone.agent.say(TYPED, CONVERSATION)
    record_id = phone.agent.remember(SENTENCE, CONVERSATION).record_id
    step(f"1. phone offline: user typed a message and asked to remember {SENTENCE!r}")

    phone.go_online()
    phone.agent.sync()
    step("2. phone reconnects and syncs")

    laptop.agent.sync()
    hits = laptop.agent.recall("Where did I grow up in Duluth?")
    seen = any(h.record_id == record_id for h in hits)
    recalled_line = hits[0].line if hits else "recall found nothing"
    step(f"3. laptop syncs and recalls: {recalled_line}")
    report.check("laptop sees the memory", seen, recalled_line)

    # What a thief would look for later: the sentence and every data key that opened it.
    needles: dict[str, bytes] = {"sentence": SENTENCE.encode()}
    for handle in (phone, laptop):
        for n, key in enumerate(handle.agent.data_keys_for(record_id)):
            needles[f"{handle.name} data key {n}"] = key
    cloud_keys = fleet.cloud.operator.key_store.wrapped_keys_for(laptop.agent.data_key_ids())
    for key_id, blob in cloud_keys.items():
        needles[f"cloud wrapped key {key_id}"] = blob
    control = scan_device_database(phone.db_path, phone.passphrase, needles)
    report.check(
        "scanner control: phone keys visible before forget",
        any(h.needle.startswith("phone data key") for h in control.hits)
        and control.unreadable_pages == 0,
        control.describe(),
    )

    phone.go_offline()
    step("4. phone goes offline")

    laptop.agent.forget_permanently(record_id)
    laptop.agent.sync()
    pending = step("5. laptop forgets it permanently and syncs")
    pending_names = {name for forget in pending for name in forget["pending_devices"]}
    report.check(
        "cloud reports phone pending after forget",
        pending_names == {"phone"},
        f"pending: {sorted(pending_names) or 'none'}",
    )

    phone.go_online()
    phone.agent.sync()
    pending = step("6. phone reconnects and syncs")
    report.check(
        "nothing pending after phone reconnects",
        not pending,
        "nothing pending" if not pending else f"still pending: {pending}",
    )

    _check_convergence(fleet, user, report)
    status = fleet.cloud.operator.record_status(user.space_id, record_id)
    dumped = status.model_dump(mode="json") if hasattr(status, "model_dump") else dict(status)
    leaked = {"text", "content_type", "source_episode_ids", "conversation_id"} & {
        k for k, v in dumped.items() if v
    }
    report.check(
        "cloud keeps only a skeleton",
        dumped.get("lifecycle_state") == "permanently_forgotten" and not leaked,
        f"{dumped}",
    )
    for handle in (phone, laptop):
        views = {v.record_id: v for v in handle.agent.list_records()}
        view = views.get(record_id)
        recalled = [h for h in handle.agent.recall("Where did I grow up in Duluth?")]
        report.check(
            f"{handle.name} shows a skeleton and recalls nothing",
            view is not None
            and view.lifecycle_state.value == "permanently_forgotten"
            and not view.text
            and not recalled,
            f"state={view.lifecycle if view else 'missing'}, recall hits={len(recalled)}",
        )
        scan = scan_device_database(handle.db_path, handle.passphrase, needles)
        report.check(
            f"{handle.name} database and WAL hold no trace (decrypted pages)",
            scan.clean and scan.pages > 0 and scan.unreadable_pages == 0,
            scan.describe(),
        )

    config = fleet.cloud.config
    store_scan = scan_record_store(
        config.store_url, fleet.cloud.operator.store.audit_blobs(), needles
    )
    report.check("cloud record store holds no trace", store_scan.clean, store_scan.describe())
    key_scan = scan_sqlite_database(config.key_store_path, needles)
    left = fleet.cloud.operator.key_store.wrapped_keys_for(list(cloud_keys))
    report.check(
        "cloud key store holds none of its keys",
        key_scan.clean and not left and bool(cloud_keys),
        key_scan.describe() + f"; {len(cloud_keys)} key(s) captured before, {len(left)} left",
    )


def _check_convergence(fleet: Fleet, user: User, report: ScenarioReport) -> None:
    """Every device that synced last holds what the cloud says of each record it knows."""
    known = {v.record_id for d in user.devices for v in d.agent.list_records()}
    cloud_view = {
        rid: fleet.cloud.operator.record_status(user.space_id, rid).lifecycle_state.value
        for rid in known
    }
    disagreements = []
    for handle in user.devices:
        mine = {v.record_id: v.lifecycle_state.value for v in handle.agent.list_records()}
        if mine != cloud_view or handle.agent.pending_ops():
            disagreements.append(f"{handle.name}: {mine} (queued {handle.agent.pending_ops()})")
    report.check(
        "every device agrees with the cloud",
        bool(known) and not disagreements,
        "; ".join(disagreements) or f"{len(user.devices)} devices = cloud on {cloud_view}",
    )
