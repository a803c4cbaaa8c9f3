"""The ``memsync`` console entry (issue 23): fast, lazy, and helpful with a typo.

A device command loads neither the cloud, the simulator nor onnxruntime; ``--help``
loads no group at all; the embedder's model id is known without a session and is the
id the session gives; a misspelt command is refused with a suggestion, as JSON under
``--json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from device import cli as device_cli
from device import embedder as device_embedder
from device import live
from memsync.cli import main, suggestion

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = Path(os.environ.get("MEMSYNC_MODEL_DIR") or ROOT / "models" / "embedder")
HEAVY = ("fastapi", "sqlalchemy", "psycopg", "onnxruntime", "tokenizers", "simulator", "cloud")

_CHILD = """
import json, sys
from memsync.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = {heavy!r}
print(json.dumps({{"code": code, "loaded": [m for m in heavy if m in sys.modules]}}))
"""


def _child(
    args: list[str], env: dict[str, str], heavy: tuple[str, ...] = HEAVY
) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(heavy=heavy), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    last = done.stdout.strip().splitlines()[-1]
    result: dict[str, object] = json.loads(last)
    result["stdout"] = done.stdout
    return result


def test_the_console_script_is_the_lazy_entry() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["memsync"] == "memsync.cli:main"


def test_a_device_command_loads_neither_cloud_nor_simulator_nor_onnxruntime(
    tmp_path: Path,
) -> None:
    env = {"MEMSYNC_PASSPHRASE": "pw", "MEMSYNC_DEVICE_DIR": str(tmp_path / "dev")}
    made = _child(["device", "init", "--name", "phone"], env)
    assert made["code"] in (0, None), made
    listed = _child(["device", "list"], env)
    assert listed["code"] in (0, None), listed
    assert "No records." in str(listed["stdout"])
    assert listed["loaded"] == []


# what only a write needs: reading and listing records must not build the rule engine
WRITE_ONLY = ("protocol.rules", "protocol.rulebook", "protocol.operations", "device.facts")


def test_listing_records_loads_no_rule_engine(tmp_path: Path) -> None:
    env = {"MEMSYNC_PASSPHRASE": "pw", "MEMSYNC_DEVICE_DIR": str(tmp_path / "dev")}
    for args in (
        ["device", "init", "--name", "phone"],
        ["device", "say", "I grew up in Duluth.", "--conversation", "c1"],
        ["device", "remember", "I grew up in Duluth.", "--conversation", "c1"],
    ):
        done = _child(args, env)
        assert done["code"] in (0, None), done
    listed = _child(["device", "list"], env, WRITE_ONLY)
    assert listed["code"] in (0, None), listed
    assert "Duluth" in str(listed["stdout"])
    assert listed["loaded"] == [], "device list imported what only a write needs"


def test_help_loads_no_group() -> None:
    done = _child(["--help"], {})
    assert done["code"] == 0
    assert "device" in str(done["stdout"]) and "cloud" in str(done["stdout"])
    assert done["loaded"] == []


def test_the_model_id_without_a_session_is_the_sessions() -> None:
    session = device_embedder.load_embedder(MODEL_DIR)
    assert device_embedder.manifest_model_id(MODEL_DIR) == session.model_id
    lazy = device_embedder.LazyEmbedder(MODEL_DIR)
    assert lazy.model_id == session.model_id
    assert lazy._embedder is None  # known without building the session


def test_a_manifest_that_does_not_match_the_model_is_not_trusted(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copyfile(MODEL_DIR / name, folder / name)
    manifest = json.loads((MODEL_DIR / "MANIFEST.json").read_text())
    manifest["outputs"]["model.onnx"]["sha256"] = "0" * 64
    manifest["model_id"] = "someone-else@000000000000"
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    assert device_embedder.manifest_model_id(folder) is None
    lazy = device_embedder.LazyEmbedder(folder)
    assert lazy.model_id == device_embedder.load_embedder(MODEL_DIR).model_id


def test_the_cli_live_wait_default_is_the_live_modules() -> None:
    assert device_cli.DEFAULT_WAIT == live.DEFAULT_WAIT


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["devcie", "list"], "did you mean 'device'?"), (["device", "lsit"], "did you mean 'list'?")],
)
def test_a_typo_is_refused_with_the_nearest_command(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "lsit" in err or "devcie" in err


def test_a_typo_under_json_is_a_json_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["device", "lsit", "--json"])
    assert exited.value.code == 2
    error = json.loads(capsys.readouterr().err)
    assert "did you mean 'list'?" in error["error"]


def test_nothing_close_suggests_nothing() -> None:
    assert suggestion("zzzzqqq", ["device", "cloud"]) is None
    assert suggestion("dev", ["device", "cloud"]) == "device"
