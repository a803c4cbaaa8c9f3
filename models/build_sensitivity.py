"""Builds the cloud's second sensitivity classifier: ``models/sensitivity/model.json``.

Run by ``make model`` (``.venv/bin/python models/build_sensitivity.py``). Embeds every
committed labelled sentence (``models/detector/data/labelled.jsonl``, its
``sensitivity`` column; rule labels included) with the sentence embedder ``make model``
builds (``models/embedder``), fits a softmax over the 10 sensitivity classes, and
chooses the ``normal_floor`` (sensitive below it) on the tuning half of the
hand-labelled sensitivity data (``bench/sensitivity_data/tune.jsonl``) only. The
held-out half (``test.jsonl``) is never read here.

Invariants: deterministic: no randomness at all (full-batch Adam from zero weights, one
BLAS thread, float32 embeddings that do not depend on their batch), so two builds write
byte-identical files (``--check`` builds twice and compares). The file names the
embedder it was trained over (the cloud refuses it with another one), the sha256 of
the training and tuning data and the settings. Nothing a device or the cloud holds is
ever read: only the two paths below.
"""

from __future__ import annotations

import os

# One BLAS thread: a multi-threaded sum may be ordered differently from run to run,
# and the build must give the same bytes every time. Set before numpy is imported.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloud.sensitivity.classifier import (  # noqa: E402
    CLASSES,
    SensitivityClassifier,
    model_document,
    softmax,
)
from protocol.embedding import Embedder  # noqa: E402

DATA = ROOT / "models" / "detector" / "data" / "labelled.jsonl"
TUNE = ROOT / "bench" / "sensitivity_data" / "tune.jsonl"
EMBEDDER_DIR = ROOT / "models" / "embedder"
OUT = ROOT / "models" / "sensitivity" / "model.json"

# Training: full-batch Adam from zero, fixed steps; chosen on the detector's own split
# (train on ``train``, look at ``test``; ``--dev``), then fitted on every row.
STEPS = 600
LEARNING_RATE = 0.05
L2 = 1e-4
HAND_WEIGHT = 4.0  # a hand-written sentence counts 4x (as in the detector's build)
# The floor: the highest-precision floor whose sensitive recall on the tuning half is at
# least TARGET_RECALL (a missed sensitive sentence costs more than a flagged normal one).
TARGET_RECALL = 0.90
DEFAULT_FLOOR = 0.6  # when there is no tuning half yet
FLOORS = tuple(round(0.02 * i, 2) for i in range(1, 50)) + tuple(
    round(0.98 + 0.002 * i, 3) for i in range(0, 10)
)


@dataclass(frozen=True)
class Labelled:
    texts: list[str]
    classes: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float64]
    splits: list[str]


def load(path: Path) -> Labelled:
    """Text, class index, sample weight and split of each labelled sentence, in file order."""
    index = {c.value: i for i, c in enumerate(CLASSES)}
    texts: list[str] = []
    classes: list[int] = []
    hand: list[bool] = []
    splits: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        label = row.get("sensitivity")
        if label not in index:
            raise ValueError(f"{path}:{number}: sensitivity {label!r} is not one of {list(index)}")
        texts.append(str(row["text"]))
        classes.append(index[label])
        hand.append(row.get("origin") == "hand")
        splits.append(str(row.get("split", "train")))
    y = np.asarray(classes, dtype=np.int64)
    counts = np.bincount(y, minlength=len(CLASSES)).astype(np.float64)
    per_class = np.sqrt(counts.max() / np.maximum(counts, 1.0))
    w = per_class[y] * np.where(np.asarray(hand), HAND_WEIGHT, 1.0)
    return Labelled(texts, y, w / w.mean(), splits)


def load_embedder(directory: Path) -> Embedder:
    model = (directory / "model.onnx").read_bytes()
    tokenizer = (directory / "tokenizer.json").read_text(encoding="utf-8")
    return Embedder.from_bytes(model, tokenizer, threads=1)


def fit(
    x: npt.NDArray[np.float32], y: npt.NDArray[np.int64], sample: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Weighted softmax regression by full-batch Adam from zero weights."""
    n, d = x.shape
    k = len(CLASSES)
    xs = x.astype(np.float64)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    w = np.zeros((d, k))
    b = np.zeros(k)
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    scale = sample[:, None] / sample.sum()
    for step in range(1, STEPS + 1):
        p = softmax(xs @ w + b)
        g = (p - onehot) * scale
        gw = xs.T @ g + L2 * w
        gb = g.sum(axis=0)
        mw = beta1 * mw + (1 - beta1) * gw
        vw = beta2 * vw + (1 - beta2) * gw * gw
        mb = beta1 * mb + (1 - beta1) * gb
        vb = beta2 * vb + (1 - beta2) * gb * gb
        c1, c2 = 1 - beta1**step, 1 - beta2**step
        w -= LEARNING_RATE * (mw / c1) / (np.sqrt(vw / c2) + eps)
        b -= LEARNING_RATE * (mb / c1) / (np.sqrt(vb / c2) + eps)
    return w.astype(np.float32), b.astype(np.float32)


def recall_precision(
    flagged: npt.NDArray[np.bool_], truth: npt.NDArray[np.bool_]
) -> tuple[float, float]:
    tp = int((flagged & truth).sum())
    recall = tp / max(int(truth.sum()), 1)
    precision = tp / max(int(flagged.sum()), 1)
    return recall, precision


def choose_floor(p_normal: npt.NDArray[np.float64], sensitive: npt.NDArray[np.bool_]) -> float:
    """The floor with the best precision among those reaching ``TARGET_RECALL`` (ties: the
    higher floor, the safer side); the highest floor when none reaches it."""
    best: tuple[float, float] | None = None
    for floor in FLOORS:
        recall, precision = recall_precision(p_normal < floor, sensitive)
        if recall >= TARGET_RECALL and (best is None or precision >= best[1]):
            best = (floor, precision)
    return FLOORS[-1] if best is None else best[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(data: Path = DATA, tune: Path = TUNE, *, dev: bool = False) -> bytes:
    """The bytes of ``model.json`` (``dev``: fit on the detector's train split and print
    figures on its test split instead)."""
    labelled = load(data)
    embedder = load_embedder(EMBEDDER_DIR)
    x = embedder.embed(labelled.texts)
    rows = np.arange(len(labelled.texts))
    if dev:
        rows = np.asarray([i for i, s in enumerate(labelled.splits) if s == "train"])
    w, b = fit(x[rows], labelled.classes[rows], labelled.weights[rows])
    training: dict[str, object] = {
        "data_sha256": sha256(data),
        "sentences": len(rows),
        "steps": STEPS,
        "learning_rate": LEARNING_RATE,
        "l2": L2,
        "hand_weight": HAND_WEIGHT,
        "class_weights": "(largest class / own count)^0.5",
        "target_recall": TARGET_RECALL,
    }
    floor = DEFAULT_FLOOR
    if tune.is_file():
        tune_set = load(tune)
        p = softmax(embedder.embed(tune_set.texts).astype(np.float64) @ w + b)
        floor = choose_floor(p[:, 0], tune_set.classes != 0)
        recall, precision = recall_precision(p[:, 0] < floor, tune_set.classes != 0)
        training |= {
            "tune_sha256": sha256(tune),
            "tune_sentences": len(tune_set.texts),
            "tune_recall": round(recall, 4),
            "tune_precision": round(precision, 4),
        }
        print(f"floor {floor}: tuning half recall {recall:.3f} precision {precision:.3f}")
    else:
        training |= {"tune_sha256": None}
        print(f"no tuning half at {tune}; floor {floor}", file=sys.stderr)
    out = model_document(w, b, floor, embedder.model_id, training)
    if dev:
        test = np.asarray([i for i, s in enumerate(labelled.splits) if s == "test"])
        model = SensitivityClassifier.from_bytes(out)
        p = model.probabilities(x[test])
        truth = labelled.classes[test] != 0
        for f in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
            r, pr = recall_precision(p[:, 0] < f, truth)
            print(f"dev floor {f}: recall {r:.3f} precision {pr:.3f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="build twice, compare the bytes")
    parser.add_argument("--dev", action="store_true", help="fit on train, score the test split")
    args = parser.parse_args()
    if args.dev:
        build(dev=True)
        return
    out = build()
    if args.check and build() != out:
        sys.exit("two builds gave different bytes")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(out)
    model = SensitivityClassifier.from_bytes(out)
    print(f"wrote {OUT} ({len(out):,} bytes, {model.model_id})")


if __name__ == "__main__":
    main()
