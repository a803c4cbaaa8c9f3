"""Issue 18: is a sensitive statement caught, by the device, by the cloud, by both?

``measure(smoke)`` reads both halves of the hand-labelled sensitivity data
(``bench/sensitivity_data/tune.jsonl`` and ``test.jsonl``; one sentence per line with
its gold ``sensitivity``) and scores, on each half, every checker the cloud has beside
the union it applies:

- ``device_detector``: the ONNX detector's sensitivity head alone;
- ``device_sent``: what the device puts in ``MarkCandidate`` (the detector raised by
  the device lexicon, ``protocol.consolidation.sensitivity``);
- ``cloud_classifier``: the cloud's classifier over the sentence embedding alone;
- ``cloud_terms``: the cloud's broader lexicon alone;
- ``union``: the consolidator's own chain (``default_chain``) given the device's class
  as its hint: what a record's sensitivity actually is.

Each checker is also scored on the gold candidates only (``<checker>_on_candidates``):
the sentences that can become records (chatter, questions and commands never do).

Figures: overall sensitive-vs-normal recall, precision and F1, and per class precision
and recall (a class is right only when the class itself is). ``smoke`` scores the first
``SMOKE_ROWS`` sentences of each half.

Discipline: tuning reads only ``tune.jsonl``; ``tune_errors`` lists the union's misses
and false alarms on the tuning half (``python -m bench.sensitivity --tune-errors``);
the held-out half's sentences are never printed, only its figures.

Invariant: nothing here asserts a score; ``tests/cloud/test_sensitivity_quality.py``
holds the floor.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from cloud.consolidator.extractors import OnnxExtractor, default_chain
from cloud.consolidator.sensitivity import EmbeddingSensitivity
from cloud.detector import default_detector
from cloud.embedder import default_embedder
from cloud.sensitivity.loader import default_classifier
from cloud.sensitivity.terms import terms_class
from protocol.consolidation.extract import Extractor, Hints
from protocol.consolidation.sensitivity import sensitivity_of
from protocol.detection import Detector
from protocol.model import Sensitivity

DATA = Path(__file__).resolve().parent / "sensitivity_data"
TUNE_FILE = DATA / "tune.jsonl"
TEST_FILE = DATA / "test.jsonl"
HALVES = {"tune": TUNE_FILE, "test": TEST_FILE}
CHECKERS = ("device_detector", "device_sent", "cloud_classifier", "cloud_terms", "union")
SMOKE_ROWS = 20
SAID_AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SPECIAL = tuple(s for s in Sensitivity if s is not Sensitivity.NORMAL)


@dataclass(frozen=True)
class Row:
    text: str
    gold: Sensitivity
    candidate: bool  # gold: a statement worth remembering (what can become a record)


def load_half(path: Path) -> list[Row]:
    """One row per labelled sentence; ``ValueError`` names the line of a bad label."""
    rows: list[Row] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        doc = json.loads(line)
        try:
            rows.append(
                Row(str(doc["text"]), Sensitivity(doc["sensitivity"]), bool(doc["candidate"]))
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{path}:{number}: {exc}") from exc
    return rows


class Checkers:
    """Every checker over one list of sentences, sharing one detector and embedder run."""

    def __init__(self, detector: Detector, embedding: EmbeddingSensitivity) -> None:
        self.detector = detector
        self.embedding = embedding
        self.chain: Extractor = default_chain(OnnxExtractor(detector), embedding)

    @classmethod
    def load(cls) -> Checkers:
        embedder = default_embedder()
        return cls(
            default_detector(),
            EmbeddingSensitivity(default_classifier(embedder.model_id), embedder),
        )

    def run(self, texts: Sequence[str]) -> dict[str, list[Sensitivity]]:
        detections = self.detector.detect(list(texts))
        detector = [d.sensitivity for d in detections]
        sent = [sensitivity_of(t, d) for t, d in zip(texts, detector, strict=True)]
        vectors = self.embedding.embedder.embed(list(texts))
        classifier = [v.sensitivity for v in self.embedding.classifier.classify(vectors)]
        union = [self.union(t, s) for t, s in zip(texts, sent, strict=True)]
        return {
            "device_detector": detector,
            "device_sent": sent,
            "cloud_classifier": classifier,
            "cloud_terms": [terms_class(t) for t in texts],
            "union": union,
        }

    def union(self, text: str, device: Sensitivity) -> Sensitivity:
        """The consolidator's chain on one sentence, the device's class as its hint."""
        hints = Hints(sensitivity=device)
        return self.chain.extract(text, said_at=SAID_AT, hints=hints).sensitivity


def _ratio(n: int, d: int) -> float:
    return round(n / d, 3) if d else 0.0


def figures(gold: Sequence[Sensitivity], pred: Sequence[Sensitivity]) -> dict[str, Any]:
    """Sensitive-vs-normal recall/precision/F1 and per-class precision/recall."""
    g = [x is not Sensitivity.NORMAL for x in gold]
    p = [x is not Sensitivity.NORMAL for x in pred]
    tp = sum(a and b for a, b in zip(g, p, strict=True))
    fp = sum(b and not a for a, b in zip(g, p, strict=True))
    fn = sum(a and not b for a, b in zip(g, p, strict=True))
    recall, precision = _ratio(tp, tp + fn), _ratio(tp, tp + fp)
    f1 = round(2 * recall * precision / (recall + precision), 3) if recall + precision else 0.0
    per_class: dict[str, dict[str, float]] = {}
    for cls in SPECIAL:
        c_tp = sum(a is cls and b is cls for a, b in zip(gold, pred, strict=True))
        c_gold = sum(a is cls for a in gold)
        c_pred = sum(b is cls for b in pred)
        per_class[cls.value] = {
            "precision": _ratio(c_tp, c_pred),
            "recall": _ratio(c_tp, c_gold),
            "support": c_gold,
        }
    return {
        "sensitive_recall": recall,
        "sensitive_precision": precision,
        "sensitive_f1": f1,
        "caught": tp,
        "missed": fn,
        "false_alarms": fp,
        "sensitive": tp + fn,
        "sentences": len(gold),
        "per_class": per_class,
    }


def score_half(checkers: Checkers, rows: Sequence[Row]) -> dict[str, Any]:
    verdicts = checkers.run([r.text for r in rows])
    gold = [r.gold for r in rows]
    out = {name: figures(gold, verdicts[name]) for name in CHECKERS}
    # only what can become a record: the sentences whose gold label is a candidate
    keep = [i for i, r in enumerate(rows) if r.candidate]
    for name in CHECKERS:
        out[f"{name}_on_candidates"] = figures(
            [gold[i] for i in keep], [verdicts[name][i] for i in keep]
        )
    return out


def tune_errors(checkers: Checkers, rows: Sequence[Row] | None = None) -> list[dict[str, str]]:
    """The union's misses and false alarms on the TUNING half only."""
    rows = load_half(TUNE_FILE) if rows is None else rows
    verdicts = checkers.run([r.text for r in rows])
    out: list[dict[str, str]] = []
    for index, row in enumerate(rows):
        got = verdicts["union"][index]
        if (got is Sensitivity.NORMAL) != (row.gold is Sensitivity.NORMAL):
            out.append(
                {
                    "text": row.text,
                    "gold": row.gold.value,
                    "union": got.value,
                    **{name: verdicts[name][index].value for name in CHECKERS[:-1]},
                }
            )
    return out


def measure(smoke: bool = False, load: Callable[[], Checkers] = Checkers.load) -> dict[str, Any]:
    checkers = load()
    halves: dict[str, Any] = {}
    for half, path in HALVES.items():
        rows = load_half(path)
        if smoke:
            rows = rows[:SMOKE_ROWS]
        halves[half] = score_half(checkers, rows)
    return {
        "halves": halves,
        "classifier_model_id": checkers.embedding.classifier.model_id,
        "classifier_normal_floor": checkers.embedding.classifier.normal_floor,
        "detector_model_id": checkers.detector.model_id,
        "smoke": smoke,
    }


def render(result: dict[str, Any]) -> list[Table]:
    """Per half: the overall figures of every checker, then recall per class."""
    tables: list[Table] = []
    for half, by_checker in result["halves"].items():
        first = by_checker[CHECKERS[0]]
        overall = Table(
            title=f"sensitivity, {half} half ({first['sentences']} sentences, "
            f"{first['sensitive']} sensitive)"
        )
        for column in ("checker", "recall", "precision", "F1", "missed", "false alarms"):
            overall.add_column(column, justify="left" if column == "checker" else "right")
        for name in (*CHECKERS, "device_sent_on_candidates", "union_on_candidates"):
            f = by_checker[name]
            overall.add_row(
                name,
                f"{f['sensitive_recall']:.3f}",
                f"{f['sensitive_precision']:.3f}",
                f"{f['sensitive_f1']:.3f}",
                str(f["missed"]),
                str(f["false_alarms"]),
            )
        per_class = Table(title=f"per class precision/recall, {half} half")
        per_class.add_column("class")
        per_class.add_column("n", justify="right")
        for name in CHECKERS:
            per_class.add_column(name, justify="right")
        for cls in SPECIAL:
            row = [cls.value, str(first["per_class"][cls.value]["support"])]
            for name in CHECKERS:
                c = by_checker[name]["per_class"][cls.value]
                row.append(f"{c['precision']:.2f}/{c['recall']:.2f}")
            per_class.add_row(*row)
        tables += [overall, per_class]
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument(
        "--tune-errors", action="store_true", help="print the union's errors on the TUNING half"
    )
    args = parser.parse_args()
    from rich.console import Console

    console = Console()
    if args.tune_errors:
        for error in tune_errors(Checkers.load()):
            console.print(error)
    for table in render(measure(args.smoke)):
        console.print(table)


if __name__ == "__main__":
    main()
