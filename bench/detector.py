"""The memory-candidate detector: held-out quality and throughput on one core.

``measure(smoke)`` loads the shipped model (``make model``) through the device's loader
with one intra-op thread, runs it NOW over the test split of the committed labelled
data (so the figures are the model's, not copied from metrics.json), and times the
whole pipeline (features + ONNX) on batches of 256 and of 1. ``smoke`` shortens the
timing runs only. ``render(result)`` turns the result into rich tables.

``sensitivity`` scores both halves of the hand-written sensitivity set
(``bench.sensitivity_eval``, issue 18) on what the device decides (the detector's class
raised by the lexicon, ``device_decisions``), beside the lexicon alone as the anchor.

Invariant: nothing here asserts a timing or a score; the tests hold the floors.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from bench import sensitivity_eval
from device.detector import MODEL_FILE, detector_dir, load_detector
from protocol.consolidation.sensitivity import sensitivity_of
from protocol.detection import CONTENT_TYPES, SENSITIVITIES, TIME_KINDS, Detector, follow_up
from protocol.model import Sensitivity

DATA = Path(__file__).resolve().parent.parent / "models" / "detector" / "data" / "labelled.jsonl"
BATCH = 256


def _prf(gold: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    return sensitivity_eval.prf(
        int((gold & pred).sum()), int((~gold & pred).sum()), int((gold & ~pred).sum())
    )


def _test_split() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    return [r for r in rows if r["split"] == "test"]


def quality(detector: Detector, rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Precision/recall/F1 per label on ``rows``; type and time on the gold candidates."""
    found = detector.detect([r["text"] for r in rows])
    gold_cand = np.array([r["candidate"] for r in rows])
    out = {"candidate": _prf(gold_cand, np.array([d.candidate for d in found]))}
    for head, vocab in (("content_type", CONTENT_TYPES), ("time_kind", TIME_KINDS)):
        gold = np.array([str(r[head]) for r in rows])[gold_cand]
        pred = np.array([str(getattr(d, head)) for d in found])[gold_cand]
        for value in vocab:
            out[f"{head}={value}"] = _prf(gold == str(value), pred == str(value))
    gold_s = np.array([r["sensitivity"] for r in rows])
    pred_s = np.array([str(d.sensitivity) for d in found])
    normal = str(Sensitivity.NORMAL)
    out["sensitive_vs_normal"] = _prf(gold_s != normal, pred_s != normal)
    # what the device decides with (device/writing.py): the lexicon can only raise a class
    raised = np.array(
        [str(sensitivity_of(r["text"], d.sensitivity)) for r, d in zip(rows, found, strict=True)]
    )
    out["sensitive_vs_normal_with_lexicon"] = _prf(gold_s != normal, raised != normal)
    for cls in SENSITIVITIES[1:]:
        if (gold_s == str(cls)).any():
            out[f"sensitivity={cls}"] = _prf(gold_s == str(cls), pred_s == str(cls))
    return out


def device_decisions(detector: Detector, texts: list[str]) -> tuple[list[str], list[bool]]:
    """What the device decides for each sentence typed alone (device/writing.py): the
    detector's class raised by the lexicon, and its mark (or a correction's)."""
    found = detector.detect(texts)
    classes = [str(sensitivity_of(t, d.sensitivity)) for t, d in zip(texts, found, strict=True)]
    marks = [
        d.candidate or follow_up.is_correction(t, []) for t, d in zip(texts, found, strict=True)
    ]
    return classes, marks


def sensitivity(detector: Detector) -> dict[str, Any]:
    """Both halves of the hand-written set: the device's decisions, the lexicon alone."""
    out: dict[str, Any] = {}
    for half in sensitivity_eval.HALVES:
        rows = sensitivity_eval.load(half)
        texts = [r["text"] for r in rows]
        classes, marks = device_decisions(detector, texts)
        lexicon = [str(sensitivity_of(t, None)) for t in texts]
        out[half] = {
            "device": sensitivity_eval.score(rows, classes, marks),
            "lexicon_only": sensitivity_eval.score(rows, lexicon),
        }
    return out


def _rate(detector: Detector, texts: list[str], batch: int) -> float:
    detector.detect(texts[:batch])  # warm-up: first-run allocations, the word cache
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        detector.detect(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - start)


def measure(smoke: bool = False) -> dict[str, Any]:
    """Held-out quality of the shipped model, its throughput on one core, and its size."""
    folder = detector_dir()
    detector = load_detector(folder, threads=1)
    rows = _test_split()
    texts = [r["text"] for r in rows]
    n_batched, n_single = (512, 100) if smoke else (len(texts) * 3, 2000)
    batched = (texts * (n_batched // len(texts) + 1))[:n_batched]
    return {
        "model_id": detector.model_id,
        "test_sentences": len(rows),
        "quality": quality(detector, rows),
        "sensitivity": sensitivity(detector),
        "detect_batch256_sentences_per_s": round(_rate(detector, batched, BATCH), 1),
        "detect_batch1_sentences_per_s": round(_rate(detector, texts[:n_single], 1), 1),
        "detector_model_bytes": (folder / MODEL_FILE).stat().st_size,
    }


def render(result: dict[str, Any]) -> list[Table]:
    """One table of held-out precision/recall/F1, one of speed and size."""
    quality_table = Table(
        title=f"Detector, held-out test split ({result['test_sentences']} sentences)"
    )
    for column in ("label", "precision", "recall", "F1", "support"):
        quality_table.add_column(column, justify="left" if column == "label" else "right")
    for label, m in result["quality"].items():
        quality_table.add_row(
            label,
            f"{m['precision']:.3f}",
            f"{m['recall']:.3f}",
            f"{m['f1']:.3f}",
            str(m["support"]),
        )
    tables = [quality_table, *render_sensitivity(result["sensitivity"])]
    speed = Table(title=f"Detector throughput, one core ({result['model_id']})")
    speed.add_column("measure")
    speed.add_column("value", justify="right")
    speed.add_row("sentences/s, batch 256", f"{result['detect_batch256_sentences_per_s']:,.0f}")
    speed.add_row("sentences/s, batch 1", f"{result['detect_batch1_sentences_per_s']:,.0f}")
    speed.add_row("model bytes", f"{result['detector_model_bytes']:,}")
    return [*tables, speed]


def render_sensitivity(result: dict[str, Any]) -> list[Table]:
    """Per class and overall, device beside the lexicon alone, on each half."""
    table = Table(title="Sensitivity on the hand-written set (device = detector + lexicon)")
    table.add_column("class", no_wrap=True)
    for half in sensitivity_eval.HALVES:
        for who in ("device", "lexicon"):
            table.add_column(f"{half} {who} P/R", justify="right")
    table.add_column("support tune/test", justify="right")
    names = ["sensitive", *sensitivity_eval.SENSITIVITIES[1:]]
    for name in names:
        cells = []
        support = []
        for half in sensitivity_eval.HALVES:
            for who in ("device", "lexicon_only"):
                part = result[half][who]
                m = part["sensitive"] if name == "sensitive" else part["per_class"][name]
                cells.append(f"{m['precision']:.2f}/{m['recall']:.2f}")
            support.append(str(m["support"]))
        table.add_row(name, *cells, "/".join(support))
    chatter = Table(title="Jokes, banter and chatter on the hand-written set (device)")
    chatter.add_column("measure")
    for half in sensitivity_eval.HALVES:
        chatter.add_column(half, justify="right")
    for key in (
        "jokes_banter_chatter_candidate_rate",
        "joke_candidate_rate",
        "banter_candidate_rate",
        "chatter_candidate_rate",
        "short_chatter_sensitive_rate",
        "candidate_accuracy",
    ):
        chatter.add_row(key, *(f"{result[h]['device'][key]:.3f}" for h in sensitivity_eval.HALVES))
    return [table, chatter]


if __name__ == "__main__":
    from rich.console import Console

    for table in render(measure()):
        Console().print(table)
