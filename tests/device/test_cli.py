"""The ``memsync device`` command group, run in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device import cli

PASS = "cli pass'phrase"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", PASS)
    monkeypatch.setenv("MEMSYNC_DEVICE_DIR", str(tmp_path / "dev"))
    return tmp_path / "dev"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["device", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_flow(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "init", "--name", "phone")[0] == 0
    assert (env / "device.db").exists()
    code, out, _ = run(capsys, "say", "I grew up in Duluth. I like tea.", "--conversation", "c1")
    assert code == 0 and "Logged episode ep_" in out
    code, out, _ = run(capsys, "remember", "I like tea.", "--conversation", "c1", "--json")
    record = json.loads(out)["record_id"]
    code, out, _ = run(capsys, "recall", "tea")
    assert code == 0 and 'you wrote: "I like tea."' in out and record in out
    code, out, _ = run(capsys, "list", "--json")
    assert json.loads(out)[0]["text"] == "I like tea."
    code, out, _ = run(capsys, "forget", record, "--permanent", "--yes")
    assert code == 0 and out.strip() == "Permanently forgotten; it cannot be brought back."
    code, out, _ = run(capsys, "list")
    assert "permanently forgotten at" in out and "tea" not in out


def test_cli_errors_exit_2_without_traceback(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(capsys, "list")
    assert code == 2 and "no device database at" in err and "Traceback" not in err
    run(capsys, "init", "--name", "phone")
    run(capsys, "say", "My favorite number is not 1729.", "--conversation", "c1")
    code, _, err = run(capsys, "remember", "1729", "--conversation", "c1")
    assert code == 2 and "only a fragment" in err
    code, _, err = run(capsys, "forget", "rec_aaaaaaaaaaaaaaaa")
    assert code == 2 and "only permanent forgetting exists so far" in err
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    code, _, err = run(capsys, "forget", "rec_aaaaaaaaaaaaaaaa", "--permanent")
    assert code == 2 and "not confirmed" in err
    code, _, err = run(capsys, "sync")
    assert code == 2 and "not enrolled" in err
    monkeypatch.setenv("MEMSYNC_PASSPHRASE", "wrong")
    code, _, err = run(capsys, "list")
    assert code == 2 and "does not open the device database" in err


def test_init_prompts_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSYNC_PASSPHRASE", raising=False)
    answers = iter(["one", "two"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    code, _, err = run(capsys, "init", "--name", "p", "--dir", str(tmp_path / "d"))
    assert code == 2 and "passphrases differ" in err
    assert not (tmp_path / "d" / "device.db").exists()
