"""Builds the memory-candidate detector: ``models/detector/model.onnx`` and ``metrics.json``.

Run by ``make model`` (``.venv/bin/python models/build_detector.py``). Reads the
committed labelled sentences (``models/detector/data/labelled.jsonl``; how they were
made is ``models/detector/label.py`` and ``models/detector/README.md``), trains four
linear heads over ``protocol.detection.features`` on the ``train`` split, checks the
ONNX graph against the numpy forward pass, and scores the ``test`` split.

Invariants: deterministic: no randomness at all (full-batch gradient descent from zero
weights, one BLAS thread), so two builds write byte-identical files (``--check``
builds twice and compares). The graph is numeric only (MatMul, Add, Sigmoid, Softmax):
no text operator, so it runs without a locale. The model file stays under
``MAX_MODEL_BYTES``. Its metadata names the features version, the label columns and
the sha256 of the training data, and carries the data's CC BY 4.0 attribution.
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
import tempfile  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protocol.detection.features import FEATURES_VERSION, N_FEATURES, featurise  # noqa: E402
from protocol.detection.labels import (  # noqa: E402
    CANDIDATE_THRESHOLD,
    CONTENT_TYPES,
    HEADS,
    SENSITIVITIES,
    TIME_KINDS,
    decode,
    vocabulary,
)
from protocol.detection.model import (  # noqa: E402
    DEFAULT_MODEL_NAME,
    INPUT,
    META_DATA,
    META_FEATURES,
    META_LABELS,
    META_NAME,
    Detector,
    short_chatter,
)

DATA = ROOT / "models" / "detector" / "data" / "labelled.jsonl"
OUT_DIR = ROOT / "models" / "detector"
MAX_MODEL_BYTES = 2_000_000
OPSET = 17
IR_VERSION = 8
ATTRIBUTION = (
    "Trained on sentences derived from Synthetic-Persona-Chat (Jandaghi, Sheng, Bai, "
    "Pujara, Sidahmed, 'Faithful Persona-based Conversational Dataset Generation with "
    "Large Language Models', arXiv:2312.10007, 2023), CC BY 4.0 "
    "(https://creativecommons.org/licenses/by/4.0/); labels and hand-written sentences "
    "by memsync (models/detector/README.md)."
)

# Training: full-batch Adam from zero, fixed steps. Chosen on a dev fold carved from the
# train split (CRC-32 of the text; see docs/detector.md), never on the test split.
STEPS = 300
LEARNING_RATE = 0.05
L2 = 1e-5
HAND_WEIGHT = 8.0  # a hand-written hard case counts as this many rule-labelled ones
CLASS_WEIGHT_POWER = 0.5  # rare classes weighted by (largest / own count) ** this
WIDTHS = {"candidate": 1, **{head: len(cols) for head, cols in vocabulary().items()}}
OFFSETS = {head: sum(WIDTHS[h] for h in HEADS[: HEADS.index(head)]) for head in HEADS}
N_OUT = sum(WIDTHS.values())

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Dataset:
    texts: list[str]
    origin: list[str]
    split: npt.NDArray[np.str_]
    candidate: npt.NDArray[np.int64]
    content_type: npt.NDArray[np.int64]  # -1 for non-candidates
    sensitivity: npt.NDArray[np.int64]
    time_kind: npt.NDArray[np.int64]  # -1 for non-candidates


def load(path: Path = DATA) -> Dataset:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    types = [str(v) for v in CONTENT_TYPES]
    sens = [str(v) for v in SENSITIVITIES]
    times = [str(v) for v in TIME_KINDS]
    return Dataset(
        texts=[r["text"] for r in rows],
        origin=[r["origin"] for r in rows],
        split=np.array([r["split"] for r in rows]),
        candidate=np.array([int(r["candidate"]) for r in rows]),
        content_type=np.array(
            [types.index(r["content_type"]) if r["candidate"] else -1 for r in rows]
        ),
        sensitivity=np.array([sens.index(r["sensitivity"]) for r in rows]),
        time_kind=np.array([times.index(r["time_kind"]) if r["candidate"] else -1 for r in rows]),
    )


def subset(data: Dataset, mask: npt.NDArray[np.bool_]) -> Dataset:
    index = np.flatnonzero(mask)
    return Dataset(
        texts=[data.texts[i] for i in index],
        origin=[data.origin[i] for i in index],
        split=data.split[index],
        candidate=data.candidate[index],
        content_type=data.content_type[index],
        sensitivity=data.sensitivity[index],
        time_kind=data.time_kind[index],
    )


# ------------------------------------------------------------------ the model


def softmax(z: F32) -> F32:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    out: F32 = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


def sigmoid(z: F32) -> F32:
    out: F32 = (1.0 / (1.0 + np.exp(-z))).astype(np.float32)
    return out


def forward(x: F32, w: F32, b: F32) -> dict[str, F32]:
    """The numpy reference of the ONNX graph: each head's probabilities."""
    z = (x @ w + b).astype(np.float32)
    out = {"candidate": sigmoid(z[:, 0])}
    for head in HEADS[1:]:
        start = OFFSETS[head]
        out[head] = softmax(z[:, start : start + WIDTHS[head]])
    return out


def _class_weights(labels: npt.NDArray[np.int64], n_classes: int) -> F32:
    counts = np.bincount(labels[labels >= 0], minlength=n_classes).astype(np.float64)
    weights = np.where(counts > 0, (counts.max() / np.maximum(counts, 1)) ** CLASS_WEIGHT_POWER, 0)
    out: F32 = weights.astype(np.float32)
    return out


def train(x: F32, data: Dataset, *, steps: int = STEPS, log: bool = True) -> tuple[F32, F32]:
    """Weights ``(N_FEATURES, N_OUT)`` and bias by full-batch Adam on weighted cross-entropy."""
    n = x.shape[0]
    base = np.where(np.array(data.origin) == "hand", HAND_WEIGHT, 1.0).astype(np.float32)
    targets: dict[str, tuple[F32, F32]] = {}  # head -> (one-hot or 0/1 target, row weight)
    cand = data.candidate.astype(np.float32)
    targets["candidate"] = (cand[:, None], base[:, None])
    for head, labels in (
        ("content_type", data.content_type),
        ("sensitivity", data.sensitivity),
        ("time_kind", data.time_kind),
    ):
        width = WIDTHS[head]
        onehot = np.zeros((n, width), dtype=np.float32)
        known = labels >= 0
        onehot[np.flatnonzero(known), labels[known]] = 1.0
        class_w = _class_weights(labels, width)
        row_w = np.where(known, class_w[np.maximum(labels, 0)], 0.0).astype(np.float32) * base
        targets[head] = (onehot, row_w[:, None])
    totals = {head: float(weights.sum()) for head, (_, weights) in targets.items()}

    w = np.zeros((x.shape[1], N_OUT), dtype=np.float32)
    b = np.zeros((N_OUT,), dtype=np.float32)
    m_w, v_w = np.zeros_like(w), np.zeros_like(w)
    m_b, v_b = np.zeros_like(b), np.zeros_like(b)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, steps + 1):
        probs = forward(x, w, b)
        grad_z = np.zeros((n, N_OUT), dtype=np.float32)
        loss = 0.0
        for head in HEADS:
            target, weight = targets[head]
            p = probs[head][:, None] if head == "candidate" else probs[head]
            start = OFFSETS[head]
            grad_z[:, start : start + WIDTHS[head]] = (p - target) * weight / totals[head]
            if log and (step == 1 or step % 50 == 0 or step == steps):
                clipped = np.clip(p, 1e-7, 1 - 1e-7)
                if head == "candidate":
                    ce = -(target * np.log(clipped) + (1 - target) * np.log(1 - clipped))
                else:
                    ce = -(target * np.log(clipped))
                loss += float((ce * weight).sum() / totals[head])
        grad_w = (x.T @ grad_z).astype(np.float32) + np.float32(L2) * w
        grad_b = grad_z.sum(axis=0)
        for param, grad, m, v in ((w, grad_w, m_w, v_w), (b, grad_b, m_b, v_b)):
            m *= beta1
            m += (1 - beta1) * grad
            v *= beta2
            v += (1 - beta2) * grad * grad
            m_hat = m / (1 - beta1**step)
            v_hat = v / (1 - beta2**step)
            param -= (LEARNING_RATE * m_hat / (np.sqrt(v_hat) + eps)).astype(np.float32)
        if log and (step == 1 or step % 50 == 0 or step == steps):
            print(f"  step {step:4d}  loss {loss:.4f}", file=sys.stderr)
    return w, b


# ------------------------------------------------------------------ the ONNX graph


def onnx_model(w: F32, b: F32, metadata: dict[str, str]) -> onnx.ModelProto:
    """MatMul + Add, split into the four heads; Sigmoid for candidate, Softmax for the rest."""
    widths = [WIDTHS[h] for h in HEADS]
    nodes = [
        helper.make_node("MatMul", [INPUT, "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["logits"]),
        helper.make_node(
            "Split", ["logits", "split_sizes"], [f"{h}_logits" for h in HEADS], axis=1
        ),
        helper.make_node("Squeeze", ["candidate_logits", "axis_one"], ["candidate_logit"]),
        helper.make_node("Sigmoid", ["candidate_logit"], ["candidate"]),
    ]
    nodes += [helper.make_node("Softmax", [f"{h}_logits"], [h], axis=-1) for h in HEADS[1:]]
    initializers = [
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(b, "b"),
        numpy_helper.from_array(np.array(widths, dtype=np.int64), "split_sizes"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis_one"),
    ]
    graph = helper.make_graph(
        nodes,
        "memsync_candidate_detector",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["batch", N_FEATURES])],
        [helper.make_tensor_value_info("candidate", TensorProto.FLOAT, ["batch"])]
        + [
            helper.make_tensor_value_info(h, TensorProto.FLOAT, ["batch", WIDTHS[h]])
            for h in HEADS[1:]
        ],
        initializer=initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="memsync models/build_detector.py",
        doc_string=ATTRIBUTION,
    )
    for key in sorted(metadata):
        model.metadata_props.add(key=key, value=metadata[key])
    onnx.checker.check_model(model, full_check=True)
    return model


# ------------------------------------------------------------------ evaluation


def prf(gold: npt.NDArray[np.bool_], pred: npt.NDArray[np.bool_]) -> dict[str, float]:
    tp = int((gold & pred).sum())
    fp = int((~gold & pred).sum())
    fn = int((gold & ~pred).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "support": int(gold.sum()),
        "predicted": int(pred.sum()),
    }


def evaluate(data: Dataset, probs: dict[str, F32]) -> dict[str, object]:
    """Held-out precision/recall/F1 per label value of each head (see docs/detector.md)."""
    found = decode(
        probs["candidate"],
        probs["content_type"],
        probs["sensitivity"],
        probs["time_kind"],
        chatter=short_chatter(data.texts),
    )
    gold_cand = data.candidate.astype(bool)
    pred_cand = np.array([d.candidate for d in found])
    on_cand = gold_cand  # type and time are scored on the sentences that are candidates
    result: dict[str, object] = {"candidate": prf(gold_cand, pred_cand)}
    pred_type = np.array([CONTENT_TYPES.index(d.content_type) for d in found])
    pred_sens = np.array([SENSITIVITIES.index(d.sensitivity) for d in found])
    pred_time = np.array([TIME_KINDS.index(d.time_kind) for d in found])
    result["content_type"] = {
        str(v): prf((data.content_type == i)[on_cand], (pred_type == i)[on_cand])
        for i, v in enumerate(CONTENT_TYPES)
    }
    result["content_type_accuracy"] = round(
        float((pred_type == data.content_type)[on_cand].mean()), 4
    )
    result["sensitive"] = prf(data.sensitivity > 0, pred_sens > 0)
    result["sensitivity"] = {
        str(v): prf(data.sensitivity == i, pred_sens == i)
        for i, v in enumerate(SENSITIVITIES)
        if (data.sensitivity == i).any() or (pred_sens == i).any()
    }
    result["time_kind"] = {
        str(v): prf((data.time_kind == i)[on_cand], (pred_time == i)[on_cand])
        for i, v in enumerate(TIME_KINDS)
    }
    result["time_kind_accuracy"] = round(float((pred_time == data.time_kind)[on_cand].mean()), 4)
    hand = np.array(data.origin) == "hand"
    if hand.any():
        result["candidate_hand_cases"] = prf(gold_cand[hand], pred_cand[hand])
    result["sentences"] = len(data.texts)
    return result


def print_metrics(metrics: dict[str, object]) -> None:
    def line(name: str, m: object) -> None:
        assert isinstance(m, dict)
        print(
            f"  {name:<22} P {m['precision']:.3f}  R {m['recall']:.3f}  F1 {m['f1']:.3f}"
            f"  (support {m['support']}, predicted {m['predicted']})"
        )

    print(f"held-out test split: {metrics['sentences']} sentences")
    line("candidate", metrics["candidate"])
    if "candidate_hand_cases" in metrics:
        line("candidate (hand cases)", metrics["candidate_hand_cases"])
    line("sensitive vs normal", metrics["sensitive"])
    for head in ("content_type", "sensitivity", "time_kind"):
        print(f" {head}:")
        table = metrics[head]
        assert isinstance(table, dict)
        for name, m in table.items():
            line(name, m)
    print(f" content_type accuracy {metrics['content_type_accuracy']}")
    print(f" time_kind accuracy {metrics['time_kind_accuracy']}")


# ------------------------------------------------------------------ the build


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build(out_dir: Path, *, data_path: Path = DATA, log: bool = True) -> dict[str, object]:
    data_bytes = data_path.read_bytes()
    data = load(data_path)
    is_train = data.split == "train"
    train_set, test_set = subset(data, is_train), subset(data, ~is_train)
    if log:
        print(
            f"{len(train_set.texts)} training and {len(test_set.texts)} test sentences; "
            f"features {FEATURES_VERSION}",
            file=sys.stderr,
        )
    x_train = featurise(train_set.texts)
    w, b = train(x_train, train_set, log=log)
    del x_train

    metadata = {
        META_NAME: DEFAULT_MODEL_NAME,
        META_FEATURES: FEATURES_VERSION,
        META_LABELS: json.dumps(vocabulary(), sort_keys=True),
        META_DATA: sha256_bytes(data_bytes),
        "memsync.heads": json.dumps(list(HEADS)),
        "memsync.candidate_threshold": str(CANDIDATE_THRESHOLD),
        "memsync.training": json.dumps(
            {
                "steps": STEPS,
                "learning_rate": LEARNING_RATE,
                "l2": L2,
                "hand_weight": HAND_WEIGHT,
                "class_weight_power": CLASS_WEIGHT_POWER,
                "train_sentences": len(train_set.texts),
            },
            sort_keys=True,
        ),
        "memsync.attribution": ATTRIBUTION,
    }
    model_bytes = onnx_model(w, b, metadata).SerializeToString()
    if len(model_bytes) >= MAX_MODEL_BYTES:
        raise SystemExit(f"model is {len(model_bytes)} bytes, over the {MAX_MODEL_BYTES} limit")

    # The ONNX graph must compute what the numpy forward pass computes.
    x_test = featurise(test_set.texts)
    reference = forward(x_test, w, b)
    detector = Detector.from_bytes(model_bytes, threads=1)
    got = detector.probabilities(test_set.texts)
    for head in HEADS:
        np.testing.assert_allclose(got[head], reference[head], rtol=1e-4, atol=1e-5, err_msg=head)
    metrics = evaluate(test_set, got)
    if log:
        print_metrics(metrics)

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "model.onnx").write_bytes(model_bytes)
    summary = {
        "model_id": detector.model_id,
        "model_bytes": len(model_bytes),
        "features_version": FEATURES_VERSION,
        "training_data_sha256": metadata[META_DATA],
        "candidate_threshold": CANDIDATE_THRESHOLD,
        "held_out": metrics,
    }
    (out_dir / "metrics.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    if log:
        print(f"wrote {out_dir / 'model.onnx'} ({len(model_bytes)} bytes, {detector.model_id})")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument(
        "--check", action="store_true", help="build twice and fail unless the bytes are equal"
    )
    args = parser.parse_args(argv)
    summary = build(args.out)
    if args.check:
        with tempfile.TemporaryDirectory() as other:
            again = build(Path(other), log=False)
            first = (args.out / "model.onnx").read_bytes()
            second = (Path(other) / "model.onnx").read_bytes()
            if first != second or summary != again:
                raise SystemExit("two builds differ: the detector build is not deterministic")
            print(f"reproducible: sha256 {sha256_bytes(first)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
