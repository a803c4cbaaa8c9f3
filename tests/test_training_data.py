"""Never training data: the detector (memsync's only trained model) is built from files
under ``models/detector/data`` and nothing else, so nothing a device or the cloud holds
(imports included) can ever reach a training run.

Checked on the build script's source (a build takes about a minute, too long to run
here): every file it reads is read through ``load``/``build``'s path parameter (or is
a model it has just written, read back by ``--check``), whose
default is the committed ``labelled.jsonl`` and which no caller overrides; it imports no
store, database, network or device/cloud code and reads no environment variable that
could point it elsewhere; and ``make model`` lists no other data for it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "models" / "build_detector.py"
DATA_DIR = ROOT / "models" / "detector" / "data"
READS = {"read_bytes", "read_text", "open", "load", "loads", "loadtxt", "genfromtxt", "fromfile"}
FORBIDDEN_IMPORTS = {
    "device", "cloud", "simulator", "sqlite3", "sqlcipher3", "sqlalchemy", "psycopg",
    "httpx", "urllib", "requests", "socket", "glob", "shutil",
}  # fmt: skip


def _tree() -> ast.Module:
    return ast.parse(SCRIPT.read_text(encoding="utf-8"), filename=str(SCRIPT))


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_detector_data_constant_is_the_committed_file_under_models_detector_data() -> None:
    tree = _tree()
    [assign] = [
        n for n in tree.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "DATA" for t in n.targets)
    ]  # fmt: skip
    assert ast.unparse(assign.value) == "ROOT / 'models' / 'detector' / 'data' / 'labelled.jsonl'"
    assert (DATA_DIR / "labelled.jsonl").is_file()


def test_every_read_of_the_build_goes_through_the_data_path_parameter() -> None:
    tree = _tree()
    receivers: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in READS:
            continue
        is_json = isinstance(func, ast.Attribute) and ast.unparse(func.value) == "json"
        if is_json and name in {"loads", "load"}:
            continue  # parsing text already read (json.loads of a line), not a file read
        if isinstance(func, ast.Name) and name == "load":
            receivers.append(f"load({ast.unparse(node.args[0])})")
            continue
        receivers.append(ast.unparse(func))
    assert sorted(receivers) == sorted(
        [
            "data_path.read_bytes",
            "load(data_path)",
            "path.read_text",
            # --check reads back the two models it has just written, to compare them
            "(args.out / 'model.onnx').read_bytes",
            "(Path(other) / 'model.onnx').read_bytes",
        ]
    ), receivers
    load, build = _function(tree, "load"), _function(tree, "build")
    assert [a.arg for a in load.args.args] == ["path"]
    assert [ast.unparse(d) for d in load.args.defaults] == ["DATA"]
    data_path = [a for a in build.args.kwonlyargs if a.arg == "data_path"]
    assert data_path and ast.unparse(build.args.kw_defaults[0]) == "DATA"
    for node in ast.walk(tree):  # no caller points the build at other data
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "build":
            assert all(k.arg != "data_path" for k in node.keywords), ast.unparse(node)
            assert len(node.args) <= 1, ast.unparse(node)


def test_the_build_imports_no_store_network_or_device_and_reads_no_environment() -> None:
    tree = _tree()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
            if node.module.startswith("protocol"):
                assert node.module.startswith("protocol.detection"), node.module
    assert not imported & FORBIDDEN_IMPORTS, imported & FORBIDDEN_IMPORTS
    source = SCRIPT.read_text(encoding="utf-8")
    assert "environ.get" not in source and "getenv" not in source and "environ[" in source
    for match in re.finditer(r"environ\[(.+?)\]", source):
        assert match.group(1) == "_name"  # only the BLAS thread counts are set, never read


def test_make_model_gives_the_detector_only_data_under_models_detector_data() -> None:
    lines = (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("$(DETECTOR):"))
    prerequisites = lines[at].split(":", 1)[1].split()
    not_code = [p for p in prerequisites if not p.endswith(".py")]
    assert not_code == ["$(DETECTOR_DIR)/data/labelled.jsonl", "$(MODEL_STAMP)"]
    assert lines[at + 1].strip() == "$(BIN)/python models/build_detector.py"  # no arguments
