"""Export then import into a fresh account, through the real cloud (uvicorn, httpx) on
SQLite and PostgreSQL: the same content arrives, every record a candidate "imported,
not verified"; the package is the whole space, sealed to the asking device, with the
device's own kept classes added; nothing of a forgotten record travels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloud.config import CloudConfig
from device.agent import DeviceAgent
from device.errors import PackageNotSigned
from device.views import RecordView
from protocol.export.package import ExportedRecord, ExportPackage
from protocol.model import (
    Layer,
    LifeArea,
    LifecycleState,
    Sensitivity,
    TimeKind,
)
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from tests.device.test_write_paths import _propose as propose_rule

ACCOUNT = "correct horse battery staple"
TYPED = (
    "I grew up in Duluth. I drink my coffee iced. Answer me in short bullet lists. "
    "I am renovating the attic this spring."
)
CORRECTION = "I drink my coffee hot now."
KEPT = "I take insulin every morning."
ASTHMA = "I have asthma."


@pytest.fixture(params=["sqlite", "postgresql"])
def cloud(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningCloud]:
    if request.param == "sqlite":
        with RunningCloud.sqlite(tmp_path / "cloud") as running:
            yield running
        return
    request.applymarker(pytest.mark.postgres)
    make_db: Callable[[], str] = request.getfixturevalue("postgres_database")
    config = CloudConfig(store_url=make_db(), key_store_path=tmp_path / "keys.db")
    with RunningCloud(config) as running:
        yield running


def _content_key(record: ExportedRecord) -> tuple[object, ...]:
    c = record.current.content
    areas = tuple(a.value for a in c.life_areas)
    return (c.text, areas, c.sensitivity.value, c.time_kind.value, c.project)


def _view_key(view: RecordView) -> tuple[object, ...]:
    return (view.text, view.life_areas, view.sensitivity, view.time_kind, view.project)


def _accepted_rule(agent: DeviceAgent, text: str) -> str:
    """A behaviour rule the assistant proposed from what the user did, then accepted."""
    record = propose_rule(agent, text)
    agent.accept_rule(record)
    return record


def _fill(phone: DeviceHandle) -> dict[str, str]:
    a = phone.agent
    a.say(TYPED, "c1")
    a.set_project("attic", True)
    ids = {
        "duluth": a.remember("I grew up in Duluth.", "c1", life_areas=[LifeArea.GENERAL]).record_id,
        "coffee": a.remember(
            "I drink my coffee iced.", "c1", life_areas=[LifeArea.LEISURE]
        ).record_id,
        "attic": a.remember(
            "I am renovating the attic this spring.",
            "c1",
            life_areas=[LifeArea.HOME],
            project="attic",
            time_kind=TimeKind.FOR_NOW,
        ).record_id,
    }
    a.say("My locker code is 4417.", "c5")  # its own conversation: forgetting it takes
    ids["locker"] = a.remember("My locker code is 4417.", "c5").record_id  # its episode
    ids["rule"] = _accepted_rule(a, "Keep answers short in the morning.")
    a.say(CORRECTION, "c2")
    a.correct(ids["coffee"], CORRECTION, "c2")
    a.say(ASTHMA, "c3")
    ids["asthma"] = a.remember(
        ASTHMA, "c3", life_areas=[LifeArea.HEALTH], sensitivity=Sensitivity.HEALTH
    ).record_id
    assert a.sync().refused == []
    a.forget_permanently(ids["locker"])
    a.keep_on_device(Sensitivity.HEALTH)
    a.say(KEPT, "c4")
    ids["insulin"] = a.remember(
        KEPT, "c4", life_areas=[LifeArea.HEALTH], sensitivity=Sensitivity.HEALTH
    ).record_id
    report = a.sync()
    assert report.refused == [], report.refused
    return ids


def test_export_then_import_into_a_fresh_account_gives_the_same_content_as_candidates(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone", account_passphrase=ACCOUNT)
        ids = _fill(phone)
        out = tmp_path / "out"
        out.mkdir()
        result = phone.agent.export(out, ACCOUNT)

        # one JSON package in the open schema, and its human-readable view beside it
        text = result.package_path.read_text()
        package = ExportPackage.model_validate_json(text)
        assert json.loads(text)["schema_version"] == 2
        assert all(
            v["provenance"]["producer"] in ("user", "source", "assistant", "import")
            for r in json.loads(text)["records"]
            for v in r["versions"]
        )
        assert (
            result.view_path.exists() and "I grew up in Duluth\\." in result.view_path.read_text()
        )
        assert oct(result.package_path.stat().st_mode & 0o777) == "0o600"
        by_id = {r.id: r for r in package.all_records()}
        # every field, version chains included
        coffee = by_id[ids["coffee"]]
        assert [v.content.text for v in coffee.versions] == ["I drink my coffee iced.", CORRECTION]
        assert coffee.versions[1].supersedes == 1 and coffee.current_version == 2
        # the forgotten record is a skeleton and nothing more
        assert [s.id for s in package.skeletons] == [ids["locker"]]
        # as a token: a random hex digest may hold the digits "4417" (it failed once so)
        assert re.search(r"\b4417\b", text) is None and "locker" not in text
        # accepted behaviour rules apart; sensitive classes apart, the kept class included
        assert [r.id for r in package.behaviour_rules] == [ids["rule"]]
        assert package.sensitive is not None
        assert {r.id for r in package.sensitive.records} == {ids["asthma"], ids["insulin"]}
        assert result.device_only_records == 1
        assert {r.id for r in package.records} == {ids["duluth"], ids["coffee"], ids["attic"]}
        assert [(p.name, p.open) for p in package.projects] == [("attic", True)]
        assert [d.name for d in package.devices] == ["phone"]
        assert package.tasks == []
        texts = {e.text for e in [*package.episodes, *package.sensitive.episodes]}
        assert TYPED in texts and ASTHMA in texts and KEPT in texts

        # a package without the sensitive classes holds none of them
        bare = phone.agent.export(out, ACCOUNT, include_sensitive=False)
        bare_text = bare.package_path.read_text()
        assert json.loads(bare_text)["sensitive"] is None
        assert "asthma" not in bare_text and "insulin" not in bare_text

        # import into a fresh account (a held-back user on the same cloud)
        bea = fleet.add_user("bea")
        laptop = fleet.add_device(bea, "laptop")
        # another account's package (issue 22): refused unless asked, then labelled
        with pytest.raises(PackageNotSigned, match="signed by another account"):
            laptop.agent.import_package(result.package_path)
        assert laptop.agent.what_do_you_know() == [] and laptop.agent.pending_ops() == 0
        report = laptop.agent.import_package(result.package_path, allow_unsigned=True)
        assert report.origin == "signed by another account"
        assert report.kind == "package" and report.export_id == result.export_id
        synced = laptop.agent.sync()
        assert synced.refused == []
        views = {v.record_id: v for v in laptop.agent.what_do_you_know()}
        imported = [_view_key(views[rid]) for rid in report.record_ids]
        assert sorted(imported, key=repr) == sorted(
            (_content_key(r) for r in package.all_records()), key=repr
        )
        assert not set(report.record_ids) & set(by_id)  # new ids: nothing overwritten
        for rid in report.record_ids:
            view = views[rid]
            assert (view.lifecycle, view.source_kind, view.layer) == (
                LifecycleState.CANDIDATE.value,
                "import",
                Layer.CONSOLIDATED_FACT.value,
            )
        assert laptop.agent.rules() == []
        # the cloud keeps them candidates too. The laptop keeps no class on the device,
        # but the phone's device-only record is marked so in the signed package and
        # stays only on the laptop (issue 22 item 6): it never reaches bea's cloud.
        assert len(report.device_only) == 1
        [kept] = report.device_only
        assert views[kept].text is not None and "insulin" in views[kept].text
        with cloud.operator.store.session(bea.space_id) as s:
            rows = s.records(bea.space_id, report.record_ids)
        assert {row.lifecycle for row in rows.values()} == {"candidate"}
        assert set(rows) == set(report.record_ids) - {kept}
        # and the first account is untouched by all of it
        with cloud.operator.store.session(ada.space_id) as s:
            assert s.records(ada.space_id, report.record_ids) == {}
    finally:
        fleet.close()
