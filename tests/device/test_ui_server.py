"""The inspector served for real (``serve_ui`` and ``memsync device ui``) over a real
cloud: the printed link, the devices table, the forget's pending devices, export and
import through the page, and the Host check under uvicorn.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from device import cli
from device.agent import DeviceAgent
from device.ui.server import UiServer, serve_ui
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet
from tests.device.conftest import PASSPHRASE, TickingClock, seeded

ACCOUNT = "account passphrase of ada"
SAID = "I keep the spare key under the blue flowerpot."


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    with RunningCloud.sqlite(tmp_path / "cloud") as running:
        yield running


def _session(ui: UiServer) -> httpx.Client:
    http = httpx.Client(base_url=ui.base, follow_redirects=False, timeout=30)
    opened = http.get(ui.url)
    assert opened.status_code == 303 and opened.headers["location"] == "/"
    return http


def _post(http: httpx.Client, ui: UiServer, path: str, **kw: Any) -> str:
    page = http.get("/settings").text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    data = {"csrf": found.group(1), **kw.pop("data", {})}
    answer = http.post(path, data=data, headers={"Origin": ui.base}, **kw)
    assert answer.status_code == 303, answer.text
    text: str = html.unescape(http.get(answer.headers["location"]).text)
    return text


def _flash(page: str) -> str:
    found = re.search(r'<p role="status" id="flash">(.*?)</p>', page, re.S)
    assert found is not None, page[:400]
    return found.group(1)


def test_the_page_over_a_real_cloud(cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone", account_passphrase=ACCOUNT)
        laptop = fleet.add_device(ada, "laptop", account_passphrase=ACCOUNT)
        phone.agent.say(SAID, "c1")
        record = phone.agent.remember(SAID, "c1").record_id
        phone.agent.sync()
        laptop.agent.sync()
        with serve_ui(phone.agent) as ui:
            assert ui.url == f"http://127.0.0.1:{ui.port}/?token={ui.token}"
            assert len(ui.token) == 43  # 32 bytes, url-safe
            http = _session(ui)
            # the Host check under uvicorn: DNS rebinding gets nothing
            rebound = httpx.get(
                f"{ui.base}/memory", headers={"Host": "attacker.example"}, cookies=http.cookies
            )
            assert rebound.status_code == 403 and SAID not in rebound.text

            settings = html.unescape(http.get("/settings").text)
            rows = re.findall(r'<tr data-device-id="([^"]+)"><th scope="row">([^<]+)<', settings)
            assert [name for _, name in rows] == ["phone (this device)", "laptop"]
            assert "never" not in settings  # both reached the cloud

            synced = _post(http, ui, "/sync", data={"next": "/memory"})
            assert _flash(synced).startswith("Synced:")

            answer = http.post(
                f"/records/{record}/forget",
                data={"csrf": _csrf(http), "understand": "on"},
                headers={"Origin": ui.base},
            )
            assert answer.headers["location"] == f"/records/{record}/forgotten"
            page = html.unescape(http.get(answer.headers["location"]).text)
            assert "Permanently forgotten; it cannot be brought back." in page
            pending = re.search(r'<ul id="pending">(.*?)</ul>', page, re.S)
            assert pending is not None and "laptop" in pending.group(1)
            assert "phone" not in pending.group(1) and SAID not in page
            assert (
                "laptop"
                in html.unescape(http.get("/settings").text).split('id="pending-forgets"')[1]
            )

            phone.agent.say("I like green tea.", "c2")
            phone.agent.remember("I like green tea.", "c2")
            phone.agent.sync()  # the export is the cloud's copy of the space
            exported = _post(
                http, ui, "/export",
                data={"account_passphrase": ACCOUNT, "include_sensitive": "on"},
            )  # fmt: skip
            flash = _flash(exported)
            assert flash.startswith("Exported exp_"), flash
            files = sorted((phone.agent.directory / "exports").iterdir())
            assert [f.suffix for f in files] == [".json", ".md"]
            assert all(str(f) in flash for f in files)
            wrong = _post(http, ui, "/export", data={"account_passphrase": "nope"})
            assert _flash(wrong).startswith("Not exported")

        with pytest.raises(httpx.TransportError):
            httpx.get(ui.url, timeout=5)
        # the package, imported on another device through its page: candidates only
        package = next(f for f in files if f.suffix == ".json")
        other = DeviceAgent.create(
            tmp_path / "other", PASSPHRASE, device_name="other",
            clock=TickingClock(), random_bytes=seeded(5),
        )  # fmt: skip
        with other, serve_ui(other) as ui:
            http = _session(ui)
            upload = {"file": (package.name, package.read_bytes(), "application/json")}
            refused = http.post(  # another account's package: only when the user says so
                "/import", data={"csrf": _csrf(http)}, files=upload, headers={"Origin": ui.base}
            )
            page = html.unescape(http.get(refused.headers["location"]).text)
            assert _flash(page).startswith("Not imported") and "another account" in page
            assert other.waiting_for_confirmation() == []
            imported = http.post(
                "/import",
                data={"csrf": _csrf(http), "from_elsewhere": "yes"},
                files=upload,
                headers={"Origin": ui.base},
            )
            page = html.unescape(http.get(imported.headers["location"]).text)
            assert "1 candidate(s) arrived" in _flash(page), _flash(page)
            assert "signed by another account: imported from elsewhere" in _flash(page)
            waiting = other.waiting_for_confirmation()
            assert [v.text for v in waiting] == ["I like green tea."]
            assert [v.confidence for v in waiting] == ["Imported, not verified"]
            assert SAID not in page
    finally:
        fleet.close()


def _csrf(http: httpx.Client) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', http.get("/settings").text)
    assert found is not None
    return found.group(1)


def test_the_cloud_unreachable_is_said_on_the_page(tmp_path: Path) -> None:
    agent = DeviceAgent.create(
        tmp_path / "d", PASSPHRASE, device_name="phone", cloud_url="http://127.0.0.1:9",
        clock=TickingClock(), random_bytes=seeded(3),
    )  # fmt: skip
    with agent:
        agent._debug_db()  # enrolled state is not needed: the page says it is not enrolled
        with serve_ui(agent) as ui:
            http = _session(ui)
            page = html.unescape(http.get("/settings").text)
            assert "not enrolled" in page and "<caption>Devices of this account</caption>" in page


def test_memsync_device_ui_prints_the_link_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "device"
    DeviceAgent.create(folder, PASSPHRASE, device_name="phone").close()
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", PASSPHRASE)
    seen: list[int] = []

    def serve_once() -> None:
        printed = capsys.readouterr().out
        found = re.fullmatch(
            r"memsync inspector: (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{43}))\n",
            printed,
        )
        assert found is not None, printed
        with httpx.Client(follow_redirects=True, timeout=30) as http:
            page = http.get(found.group(1))
        seen.append(page.status_code)
        assert "<h1>What do you know about me?</h1>" in page.text

    monkeypatch.setattr(cli, "_wait_for_interrupt", serve_once)
    monkeypatch.setattr(cli.webbrowser, "open", lambda url: pytest.fail(f"opened {url}"))
    assert cli.main(["device", "ui", "--dir", str(folder), "--no-open"]) == 0
    assert seen == [200]


def test_the_page_shows_and_changes_what_this_device_keeps(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone")
        phone.agent.say(SAID, "c1")
        record = phone.agent.remember(SAID, "c1").record_id
        assert record is not None
        phone.agent.sync()
        with serve_ui(phone.agent) as ui:
            http = _session(ui)
            settings = html.unescape(http.get("/settings").text)
            assert "This device keeps 1 record(s)" in settings
            # each class in words, not its enum name
            assert "1 record(s) kept because it was learned, changed or used recently" in settings
            assert "<li>  recent: 1</li>" not in settings
            assert 'id="max-records"' in settings
            page = html.unescape(http.get(f"/records/{record}").text)
            assert "This device holds it: it was written here" in page
            # no rule keeps it any more: at the next sync it leaves, still in the cloud
            changed = _post(
                http,
                ui,
                "/subset",
                data={"max_records": "10", "max_megabytes": "1", "recent_days": "0"},
            )
            assert "what leaves stays in the cloud" in _flash(changed)
            assert phone.agent.subset().policy.rules.recent_days == 0
            synced = _post(http, ui, "/sync", data={"next": "/memory"})
            assert "1 left it (they are still in the cloud)" in _flash(synced)
            assert not phone.agent.holds(record)
            assert http.get(f"/records/{record}").status_code == 404
            # a pin (from another page of the app: the record is not held here) brings it back
            phone.agent.pin(record)
            phone.agent.sync()
            page = html.unescape(http.get(f"/records/{record}").text)
            assert "keeps it because you pinned it here" in page
            unpinned = _post(http, ui, f"/records/{record}/unpin")
            assert "The rules decide again" in _flash(unpinned)
            assert phone.agent.subset().pins == []
    finally:
        fleet.close()
