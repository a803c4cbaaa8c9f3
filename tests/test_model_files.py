"""One model-loading module (issue 24 item 5): ``protocol.model_files`` finds and loads
the models for both sides; ``device/{detector,embedder}.py`` and
``cloud/{detector,embedder}.py`` only hand it their environment, paths, lock and error.
"""

from __future__ import annotations

import ast
import hashlib
import json
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cloud.detector
import cloud.embedder
import cloud.errors
import device.detector
import device.embedder
import device.errors
from protocol import model_files
from protocol.model_files import EMBEDDER, MANIFEST_FILE, MODEL_FILE, Shelf, manifest_model_id

SIDES = [
    (device.detector, model_files.DETECTOR, device.errors.DetectorMissing),
    (cloud.detector, model_files.DETECTOR, cloud.errors.DetectorMissing),
    (device.embedder, EMBEDDER, device.errors.ModelMissing),
    (cloud.embedder, EMBEDDER, cloud.errors.ModelMissing),
]
# what loading code looks like; the side modules must have none of it
LOADING = {"from_bytes", "read_bytes", "read_text", "is_file", "get", "sha256"}


@pytest.mark.parametrize(
    ("module", "kind", "missing"), SIDES, ids=lambda x: getattr(x, "__name__", "")
)
def test_each_side_only_wires_the_shared_shelf(module: object, kind: object, missing: type) -> None:
    shelf = module._SHELF  # type: ignore[attr-defined]
    assert isinstance(shelf, Shelf) and shelf.kind is kind
    tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert called & LOADING == set(), f"{module}: loads by itself: {called & LOADING}"


@pytest.mark.parametrize(
    ("module", "kind", "missing"), SIDES, ids=lambda x: getattr(x, "__name__", "")
)
def test_a_missing_file_is_the_sides_own_error_naming_it(
    module: object, kind: model_files.ModelKind, missing: type, tmp_path: Path
) -> None:
    shelf = module._SHELF  # type: ignore[attr-defined]
    with pytest.raises(missing, match=MODEL_FILE) as caught:
        shelf.check(tmp_path)
    assert caught.value.path == tmp_path / MODEL_FILE


def _shelf(environ: dict[str, str], checkout: Path) -> Shelf[Path]:
    def missing(path: Path) -> Exception:
        return FileNotFoundError(f"missing {path}")

    return Shelf(
        EMBEDDER,
        environ=environ,
        path=Path,
        checkout=checkout,
        lock=threading.Lock(),
        missing=missing,
    )


def test_the_folder_is_the_env_variable_else_the_checkouts(tmp_path: Path) -> None:
    assert _shelf({}, tmp_path).folder() == tmp_path / "models" / "embedder"
    assert _shelf({EMBEDDER.env: str(tmp_path / "x")}, Path("/nowhere")).folder() == tmp_path / "x"
    assert _shelf({EMBEDDER.env: ""}, tmp_path).folder() == tmp_path / "models" / "embedder"


def test_one_copy_per_folder_however_it_is_spelled(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    shelf = _shelf({}, tmp_path)
    made: list[Path] = []

    def make(directory: Path) -> object:
        made.append(directory)
        return object()

    first = shelf.once(tmp_path / "m", make)
    assert shelf.once(tmp_path / "m" / ".." / "m", make) is first
    assert made == [(tmp_path / "m").resolve()]


def _manifest(model: bytes, model_id: str, digest: str | None = None) -> bytes:
    sha = digest or hashlib.sha256(model).hexdigest()
    return json.dumps({"model_id": model_id, "outputs": {MODEL_FILE: {"sha256": sha}}}).encode()


@given(st.binary(min_size=1, max_size=256), st.binary(min_size=1, max_size=8))
def test_the_manifest_is_trusted_only_for_its_own_model(model: bytes, other: bytes) -> None:
    digest = hashlib.sha256(model).hexdigest()
    good = f"minilm@{digest[:12]}"
    assert manifest_model_id(_manifest(model, good), model) == good
    assert manifest_model_id(_manifest(model, good), model + other) is None
    assert manifest_model_id(_manifest(model, "minilm@000000000000"), model) is None
    assert manifest_model_id(None, model) is None
    assert manifest_model_id(b"not json", model) is None
    assert manifest_model_id(b'{"model_id": 1}', model) is None


def test_the_manifest_beside_the_files_is_read(tmp_path: Path) -> None:
    (tmp_path / MODEL_FILE).write_bytes(b"onnx bytes")
    (tmp_path / "tokenizer.json").write_text("{}")
    shelf = _shelf({}, tmp_path)
    assert model_files.folder_model_id(shelf, tmp_path) is None  # no manifest
    digest = hashlib.sha256(b"onnx bytes").hexdigest()
    (tmp_path / MANIFEST_FILE).write_bytes(_manifest(b"onnx bytes", f"m@{digest[:12]}"))
    assert model_files.folder_model_id(shelf, tmp_path) == f"m@{digest[:12]}"
