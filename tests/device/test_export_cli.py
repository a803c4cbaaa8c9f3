"""``memsync device export``, run in-process against the real sealed stream at the
device's transport seam (the CLI opens its device with that transport)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device import cli
from device.agent import DeviceAgent
from tests.device.conftest import PASSPHRASE, TickingClock, seeded
from tests.device.export_cloud import ExportCloud
from tests.device.fake_cloud import FakeCloud

ACCOUNT = "account words for the cli"


@pytest.fixture
def device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ExportCloud]:
    cloud = FakeCloud()
    exporter = ExportCloud(cloud)
    directory = tmp_path / "dev"
    with DeviceAgent.create(
        directory,
        PASSPHRASE,
        device_name="phone",
        cloud_url="https://cloud.test",
        transport=cloud.transport,
        clock=TickingClock(),
        random_bytes=seeded(3),
    ) as agent:
        agent.enroll(cloud.new_code(), account_passphrase=ACCOUNT)

    seeds = iter(range(100, 200))

    def open_with_transport(args: object) -> DeviceAgent:
        return DeviceAgent.open(
            Path(getattr(args, "dir")),  # noqa: B009
            cli._passphrase(),
            transport=cloud.transport,
            clock=TickingClock(),
            random_bytes=seeded(next(seeds)),  # each run its own export id
        )

    monkeypatch.setattr(cli, "_open", open_with_transport)
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMSYNC_DEVICE_DIR", str(directory))
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", ACCOUNT)
    return directory, exporter


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["device", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_export_prints_the_two_paths_and_the_totals(
    device: tuple[Path, ExportCloud], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, exporter = device
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out, err = run(capsys, "export", "--out", str(out_dir))
    assert code == 0, err
    [sent] = exporter.sent
    export_id = sent.request.export_id
    package = out_dir / f"memsync-export-{export_id}.json"
    view = out_dir / f"memsync-export-{export_id}.md"
    assert f"package: {package}" in out and f"view:    {view}" in out
    assert "  records: 1" in out and "  sensitive.records: 1" in out and "tasks: 0" in out
    assert package.exists() and view.exists()

    code, out, _ = run(capsys, "export", "--out", str(out_dir), "--without-sensitive", "--json")
    data = json.loads(out)
    assert code == 0 and data["includes_sensitive"] is False
    assert data["totals"]["sensitive.records"] == 0 and data["totals"]["records"] == 1
    assert Path(data["package"]).exists() and exporter.sent[1].request.include_sensitive is False


def test_cli_export_errors_exit_2_and_leave_nothing(
    device: tuple[Path, ExportCloud],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, exporter = device
    (tmp_path / "a-file").write_text("in the way")  # a missing folder is made (issue 23)
    code, _, err = run(capsys, "export", "--out", str(tmp_path / "a-file" / "out"))
    assert code == 2 and "cannot be made" in err and "a-file" in err
    assert "Traceback" not in err and exporter.export_requests == 0
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", "not the account words")
    code, _, err = run(capsys, "export", "--out", str(out_dir))
    assert code == 2 and "account passphrase is wrong" in err
    monkeypatch.setenv("MEMSYNC_ACCOUNT_PASSPHRASE", ACCOUNT)
    exporter.error_after = 1
    code, _, err = run(capsys, "export", "--out", str(out_dir))
    assert code == 2 and "no file of it was kept" in err and "stopped answering" in err
    assert exporter.export_requests == 1 and list(out_dir.iterdir()) == []
