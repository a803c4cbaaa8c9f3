"""The consolidator's extractors: the ONNX candidate detector chained before the rules,
then the cloud's own sensitivity checks.

Invariants:
- Every extractor satisfies ``protocol.consolidation.extract.Extractor`` (a ``name`` and
  ``extract(sentence, *, said_at, hints) -> Extraction``); the consolidator only ever
  calls that protocol, so the chain can grow without touching the jobs.
- ``OnnxExtractor`` turns the detector's labels (content type, sensitivity, time kind)
  into an extraction; the caller's hints win over the model, a sensitive hint is never
  lowered. ``RuleExtractor`` runs after it (``ChainExtractor``): it takes the content
  type as given, lets words in the sentence ("tomorrow", "until June") decide the
  time, and can only raise sensitivity. The last steps are the cloud's second
  classifier over the sentence embedding and its broader lexicon
  (``cloud.consolidator.sensitivity``), each only able to raise.
- Sensitivity is the union of the device and the cloud (``cloud.sensitivity.union``):
  the device's class (the ``MarkCandidate`` label, kept sealed with its work item,
  migration 15) comes in as the hint, and the cloud's detector run, the device
  lexicon, the embedding classifier and the broader lexicon can each only raise it.
  The device's other labels are advisory: the cloud runs the same detector model on
  the opened sentence (``OnnxExtractor.detect``) for the candidate check, content type
  and time. One sentence is run once per process (a small cache), so the candidate
  check and the extraction share one model call.

Plugging in a language model later: write a class with ``name`` and ``extract`` that
returns an ``Extraction`` (it sees the previous step's answer as ``hints``) and pass
``ChainExtractor([onnx, RuleExtractor(), YourModel(), *cloud_checks])`` as ``extractor=`` to
``cloud.consolidator.worker.Consolidator``. It must stay a function of the sentence,
the moment it was said and the hints: the record's text stays the user's sentence,
and the rules still decide what may be *said*, what waits for the user and what can
never become a rule.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime

from cloud.consolidator.sensitivity import EmbeddingSensitivity, TermsSensitivity
from protocol.consolidation.areas import life_areas
from protocol.consolidation.extract import ChainExtractor, Extraction, Extractor, Hints
from protocol.consolidation.extract import RuleExtractor as RuleExtractor
from protocol.consolidation.timeexpr import read_time
from protocol.detection import Detection, Detector
from protocol.model import Sensitivity

CACHE_SIZE = 512


class OnnxExtractor:
    """The detector's labels as an extraction (content type, sensitivity, time kind)."""

    def __init__(self, detector: Detector) -> None:
        self.detector = detector
        self.name = f"onnx({detector.model_id})"
        self._cache: OrderedDict[str, Detection] = OrderedDict()
        self._lock = threading.Lock()

    def detect(self, sentence: str) -> Detection:
        """The detector's verdict on one sentence (cached per process)."""
        with self._lock:
            found = self._cache.get(sentence)
            if found is not None:
                self._cache.move_to_end(sentence)
                return found
        detection = self.detector.detect([sentence])[0]
        with self._lock:
            self._cache[sentence] = detection
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return detection

    def extract(self, sentence: str, *, said_at: datetime, hints: Hints) -> Extraction:
        detection = self.detect(sentence)
        content_type = hints.content_type or detection.content_type
        sensitivity = detection.sensitivity
        if hints.sensitivity is not None and hints.sensitivity is not Sensitivity.NORMAL:
            sensitivity = hints.sensitivity
        time = read_time(sentence, said_at=said_at, hint=hints.time_kind or detection.time_kind)
        return Extraction(
            content_type=content_type,
            time=time,
            life_areas=tuple(life_areas(sentence, content_type)),
            sensitivity=sensitivity,
            subject=None,
            type_cue=None,
        )


def default_chain(onnx: OnnxExtractor, embedding: EmbeddingSensitivity) -> Extractor:
    """The detector first, then the keyword and date rules, then the cloud's sensitivity
    checks (the embedding classifier, the broader lexicon), each only able to raise."""
    return ChainExtractor([onnx, RuleExtractor(), embedding, TermsSensitivity()])


__all__ = ["OnnxExtractor", "RuleExtractor", "default_chain"]
