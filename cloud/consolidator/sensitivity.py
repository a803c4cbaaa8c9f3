"""The cloud's own sensitivity checks as the last steps of the consolidator's chain.

Invariants:
- Each step satisfies ``protocol.consolidation.extract.Extractor`` and can only raise:
  it returns the chain's answer so far (content type and time from its hints, read
  again by the same rules, which do not move them) with ``union(hint, its own)`` as
  sensitivity, so a sensitive hint (the device's, the detector's, the device lexicon's)
  is never lowered and a ``normal`` one becomes the step's class when it finds one.
- ``EmbeddingSensitivity`` asks the classifier over the sentence's embedding
  (``cloud.sensitivity.classifier``; the embedder the cloud's search uses); each
  sentence is embedded once per process (a small cache shared by the candidate and
  external jobs; ``prefetch`` fills it for a claimed batch in one embedder call; a
  vector agrees with its batch-of-one value to float rounding, ~1e-7). ``TermsSensitivity``
  asks the broader lexicon (``cloud.sensitivity.terms``).
- Neither decides the lifecycle: the rules keep a sensitive background record a
  candidate until the user confirms it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from cloud.sensitivity.classifier import ClassifierVerdict, SensitivityClassifier
from cloud.sensitivity.terms import terms_class
from cloud.sensitivity.union import union
from protocol.consolidation.extract import Extraction, Hints, RuleExtractor
from protocol.embedding import Embedder
from protocol.model import Sensitivity

CACHE_SIZE = 512
_RULES = RuleExtractor()


def _carried(sentence: str, said_at: datetime, hints: Hints, own: Sensitivity) -> Extraction:
    """The chain's answer so far (from its hints), raised by ``own``."""
    base = _RULES.extract(sentence, said_at=said_at, hints=hints)
    return replace(base, sensitivity=union(hints.sensitivity, base.sensitivity, own))


class EmbeddingSensitivity:
    """Raises sensitivity with the classifier over the sentence embedding."""

    def __init__(self, classifier: SensitivityClassifier, embedder: Embedder) -> None:
        if classifier.embedder_model_id != embedder.model_id:
            raise ValueError(
                f"classifier {classifier.model_id} was trained over embedder "
                f"{classifier.embedder_model_id}, not {embedder.model_id}"
            )
        self.classifier = classifier
        self.embedder = embedder
        self.name = f"embedding-sensitivity({classifier.model_id})"
        self._cache: OrderedDict[str, ClassifierVerdict] = OrderedDict()
        self._lock = threading.Lock()

    def verdict(self, sentence: str) -> ClassifierVerdict:
        """The classifier's verdict on one sentence (cached per process)."""
        with self._lock:
            found = self._cache.get(sentence)
            if found is not None:
                self._cache.move_to_end(sentence)
                return found
        (verdict,) = self.classifier.classify(self.embedder.embed([sentence]))
        with self._lock:
            self._cache[sentence] = verdict
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return verdict

    def prefetch(self, sentences: Sequence[str]) -> int:
        """Embed the sentences not cached yet in one call (at most ``CACHE_SIZE``);
        returns how many were embedded."""
        with self._lock:
            missing = [s for s in dict.fromkeys(sentences) if s not in self._cache]
        missing = missing[:CACHE_SIZE]
        if not missing:
            return 0
        verdicts = self.classifier.classify(self.embedder.embed(missing))
        with self._lock:
            for sentence, verdict in zip(missing, verdicts, strict=True):
                self._cache[sentence] = verdict
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return len(missing)

    def extract(self, sentence: str, *, said_at: datetime, hints: Hints) -> Extraction:
        return _carried(sentence, said_at, hints, self.verdict(sentence).sensitivity)


class TermsSensitivity:
    """Raises sensitivity with the cloud's broader lexicon."""

    name = "terms-sensitivity-v1"

    def extract(self, sentence: str, *, said_at: datetime, hints: Hints) -> Extraction:
        return _carried(sentence, said_at, hints, terms_class(sentence))


__all__ = ["EmbeddingSensitivity", "TermsSensitivity"]
