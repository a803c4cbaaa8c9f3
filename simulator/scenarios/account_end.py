"""Scenario: taking one's memory away, and the end of an account. The phone exports the
whole memory (strong authentication, sealed to the phone), the package is imported
into a held-back account where everything arrives as a candidate, then the account is
deleted from the phone while the laptop is offline; the laptop wipes itself when it
reconnects.

Invariant: every check reads real copies: the package and view files as written, the
held-back account's records in the cloud's store, the devices' databases decrypted
page by page (WAL included), and the cloud's record store and key store as stored.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from device.errors import AccountEnded, Refused
from protocol.export.package import PACKAGE_SCHEMA_VERSION, ExportPackage
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet
from simulator.forensics import (
    scan_device_database,
    scan_record_store,
    scan_sqlite_database,
)
from simulator.report import ScenarioReport, StepState
from simulator.scenarios.play import Emit, device_state, play

NAME = "account-end"
ACCOUNT = "cy's account passphrase, long and only hers"
TYPED = "I keep bees on the roof. My bank PIN is 8841."
KEPT = "I keep bees on the roof."
SECRET = "My bank PIN is 8841."
OFFLINE = "I moved the hives to the garden."


def run(cloud: RunningCloud, root: Path, emit: Emit) -> ScenarioReport:
    """Play the scenario against ``cloud`` with devices under ``root``; return the report."""
    return play(NAME, _play, cloud, root, emit)


def _play(fleet: Fleet, report: ScenarioReport, emit: Emit) -> None:
    cy = fleet.add_user("cy")
    phone = fleet.add_device(cy, "phone", account_passphrase=ACCOUNT)
    laptop = fleet.add_device(cy, "laptop")
    operator = fleet.cloud.operator

    def step(title: str) -> None:
        pending = []
        status = operator.account_status(cy.space_id)
        if status is not None:
            pending = [
                {
                    "record_id": "the whole account",
                    "pending_devices": [p.device_name for p in status.pending],
                }
            ]
        state = StepState(title, [device_state(d) for d in cy.devices], pending)
        report.steps.append(state)
        emit(state)

    phone.agent.say(TYPED, "c1")
    phone.agent.remember(KEPT, "c1")
    phone.agent.remember(SECRET, "c1")
    phone.agent.sync()
    laptop.agent.sync()
    step("1. phone remembers two sentences; both devices sync")

    out = Path(tempfile.mkdtemp(prefix="export-", dir=phone.directory.parent))
    try:
        phone.agent.export(out, "not the passphrase")
        refused = "exported"
    except Refused as exc:
        refused = exc.code
    report.check(
        "an export needs the account passphrase (nothing written without it)",
        refused == "strong_auth_required" and not any(out.iterdir()),
        f"wrong passphrase: {refused}; files: {sorted(p.name for p in out.iterdir())}",
    )
    result = phone.agent.export(out, ACCOUNT)
    package = ExportPackage.model_validate_json(result.package_path.read_text())
    texts = sorted(r.current.content.text for r in package.all_records())
    step(f"2. phone exports the whole memory: {result.package_path.name} and its view")
    report.check(
        "the package holds the whole memory in the open schema, with a readable view",
        texts == sorted([KEPT, SECRET])
        and package.schema_version == PACKAGE_SCHEMA_VERSION
        and "I keep bees on the roof\\." in result.view_path.read_text(),
        f"records: {texts}; totals: {package.totals.model_dump()}",
    )

    dee = fleet.add_user("dee")
    tablet = fleet.add_device(dee, "tablet")
    # another account's package: imported only when asked (issue 22)
    imported = tablet.agent.import_package(result.package_path, allow_unsigned=True)
    tablet.agent.sync()
    with operator.store.session(dee.space_id) as s:
        states = sorted(
            row.lifecycle for row in s.records(dee.space_id, imported.record_ids).values()
        )
    views = {v.record_id: v for v in tablet.agent.what_do_you_know()}
    labels = sorted({views[r].confidence or "" for r in imported.record_ids})
    step(f"3. a held-back account imports the package: {len(imported.record_ids)} candidates")
    report.check(
        "everything imported is a candidate, imported, not verified (device and cloud)",
        states == ["candidate", "candidate"] and labels == ["Imported, not verified"],
        f"cloud: {states}; labels: {labels}",
    )

    # the PIN as words carry it (" 8841"): the bare digits also occur, by chance, inside
    # the microseconds of any stored time ("07:18:41.884123")
    needles: dict[str, bytes] = {"the PIN sentence": SECRET.encode(), "PIN": b" 8841"}
    for handle in (phone, laptop):
        for record in handle.agent.list_records():
            for n, key in enumerate(handle.agent.data_keys_for(record.record_id)):
                needles[f"{handle.name} data key {record.record_id} {n}"] = key
    cloud_keys = operator.key_store.wrapped_keys_for(laptop.agent.data_key_ids())
    needles.update({f"cloud wrapped key {k}": v for k, v in cloud_keys.items()})

    laptop.go_offline()
    laptop.agent.say(OFFLINE, "c2")
    step("4. laptop goes offline and types something (queued)")

    deletion = phone.agent.delete_account(ACCOUNT)
    pending = sorted(name for _, name in deletion.pending)
    step("5. the account is deleted from the phone; every key of its memory is destroyed")
    report.check(
        "the cloud reports the offline laptop pending",
        pending == ["laptop"] and phone.agent.list_records() == [],
        f"pending: {pending}; phone wiped {deletion.wiped_records} record(s)",
    )

    laptop.go_online()
    try:
        laptop.agent.sync()
        heard = "nothing"
    except AccountEnded as exc:
        heard = str(exc)
    status = operator.account_status(cy.space_id)
    left = status.pending if status is not None else ("?",)
    step("6. laptop reconnects: the account ended, it wipes its copy and confirms")
    report.check(
        "the laptop wiped itself and nothing is pending",
        "ended" in heard and laptop.agent.list_records() == [] and not left,
        f"laptop heard: {heard[:100]}; pending: {list(left)}",
    )

    for handle in (phone, laptop):
        scan = scan_device_database(handle.db_path, handle.passphrase, needles)
        report.check(
            f"{handle.name} database and WAL hold no trace (decrypted pages)",
            scan.clean and scan.unreadable_pages == 0,
            scan.describe(),
        )
    config = fleet.cloud.config
    store_scan = scan_record_store(config.store_url, operator.store.audit_blobs(), needles)
    report.check("cloud record store holds no trace", store_scan.clean, store_scan.describe())
    key_scan = scan_sqlite_database(config.key_store_path, needles)
    still = operator.key_store.wrapped_keys_for(list(cloud_keys))
    report.check(
        "cloud key store holds none of the account's keys",
        key_scan.clean and not still and bool(cloud_keys),
        key_scan.describe() + f"; {len(cloud_keys)} key(s) captured before, {len(still)} left",
    )
    skeletons = sorted(
        operator.record_status(cy.space_id, r.id).lifecycle_state.value
        for r in package.all_records()
    )
    with operator.store.session(dee.space_id) as s:
        kept = sorted(
            row.lifecycle for row in s.records(dee.space_id, imported.record_ids).values()
        )
    report.check(
        "only skeletons remain of the account; the other account is untouched",
        skeletons == ["permanently_forgotten"] * 2 and kept == ["candidate", "candidate"],
        f"deleted account: {skeletons}; held-back account: {kept}",
    )
