"""Feature extraction for the memory-candidate detector: text in, float32 rows out.

Invariants: pure and deterministic. A text's row depends only on the text and
``FEATURES_VERSION``, never on the process (buckets come from ``zlib.crc32``, not the
salted built-in ``hash``), the rest of its batch or the batch's order. Every value is
finite: the first ``N_HASHED`` columns are counts of hashed character n-grams (2 to 4
characters, within word boundaries) and of word unigrams and bigrams, scaled so the
row's hashed part has unit L2 norm (all zeros for a text with no words); then
``len(CUES)`` 0/1 cue flags, one 0/1 flag per sensitive class (``cues.sensitive_cues``)
and four chatter flags (``cues.chatter_cues``). Texts longer than ``MAX_CHARS`` are cut.

The ONNX model holds only numbers (onnxruntime's text operators need a locale the
device may not have), so this module is the whole text side of the detector; a model
records the ``FEATURES_VERSION`` it was trained on, and a model trained on other
features is refused (``protocol.detection.model``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from protocol.detection.cues import SENSITIVE_CLASSES, chatter_cues, sensitive_cues

N_HASHED = 8192
MAX_CHARS = 600
CHAR_NGRAMS = (2, 3, 4)

# Cue flags after the hashed columns, in this order. Each is a regular expression over
# the lowercased text with curly apostrophes straightened.
CUES: tuple[tuple[str, str], ...] = (
    ("ends_with_question_mark", r"\?\s*[\"')\]]*\s*$"),
    (
        "starts_with_question_word",
        r"^\W*(?:what|who|whom|whose|where|when|why|how|which|do|does|did|is|are|am|was|"
        r"were|can|could|would|will|should|shall|have|has|may|might|any)\b",
    ),
    ("first_person", r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|ours|us)\b"),
    (
        "reporting_verb",
        r"\b(?:says?|said|thinks|tells?|told|believes|claims|reckons|insists|"
        r"according to|wants me to|suggests?|suggested)\b",
    ),
    ("conditional", r"(?:^\W*|\b(?:what|even) )(?:if|suppose|imagine|unless)\b|\bwould\b"),
    ("second_person", r"\b(?:you|your|you're|yours|yourself|u)\b"),
    (
        "starts_with_command",
        r"^\W*(?:please|remember|remind|book|call|tell|set|send|add|make|find|show|let's|"
        r"let|buy|schedule|always|never|don't|do not|note|save|forget|cancel|order|"
        r"write|open|play|turn|check|ignore)\b",
    ),
    ("negation", r"\b(?:not|no|never|nothing|none|neither|nor)\b|n't\b"),
)
N_CHATTER = 4  # laughter, hyperbole, at most 2 words, at most 6 words
N_FLAGS = len(CUES) + len(SENSITIVE_CLASSES) + N_CHATTER
N_FEATURES = N_HASHED + N_FLAGS
FEATURES_VERSION = (
    f"memsync-detector-features-2:crc32:char{CHAR_NGRAMS[0]}-{CHAR_NGRAMS[-1]}"
    f"+word1-2:{N_HASHED}+cues{len(CUES)}+sensitive{len(SENSITIVE_CLASSES)}"
    f"+chatter{N_CHATTER}"
)

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*|[?!]")
_CUES = tuple(re.compile(pattern) for _, pattern in CUES)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


def _bucket(gram: str) -> int:
    return zlib.crc32(gram.encode("utf-8")) % N_HASHED


@lru_cache(maxsize=1 << 16)
def _word_buckets(word: str) -> tuple[int, ...]:
    """The buckets of one word: its unigram and its boundary-marked character n-grams."""
    out = [_bucket("w:" + word)]
    if word in ("?", "!"):
        return tuple(out)
    padded = f" {word} "
    for n in CHAR_NGRAMS:
        out.extend(_bucket("c:" + padded[i : i + n]) for i in range(len(padded) - n + 1))
    return tuple(out)


def normalised(text: str) -> str:
    """Lowercased, apostrophes straightened, cut to ``MAX_CHARS``."""
    return text[:MAX_CHARS].lower().translate(_APOSTROPHES)


def words(text: str) -> list[str]:
    """The word tokens features are made of (``?`` and ``!`` count as words)."""
    return _WORD.findall(normalised(text))


def _buckets(lowered: str) -> list[int]:
    tokens = _WORD.findall(lowered)
    out: list[int] = []
    for word in tokens:
        out.extend(_word_buckets(word))
    if not tokens:
        return out
    bounded = ["<s>", *tokens, "</s>"]
    out.extend(_bucket(f"b:{a} {b}") for a, b in pairwise(bounded))
    return out


def featurise(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """One row of ``N_FEATURES`` float32 values per text, in the order given."""
    if isinstance(texts, str):
        raise TypeError("featurise takes a sequence of texts, not one str")
    n = len(texts)
    rows: list[int] = []
    cols: list[int] = []
    cues = np.zeros((n, N_FLAGS), dtype=np.float32)
    for row, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{row}] is {type(text).__name__}, not str")
        lowered = normalised(text)
        buckets = _buckets(lowered)
        rows.extend([row] * len(buckets))
        cols.extend(buckets)
        flags = [cue.search(lowered) is not None for cue in _CUES]
        flags += sensitive_cues(lowered) + chatter_cues(lowered)
        cues[row] = flags
    # Sparse to dense once: the distinct (row, bucket) pairs and their counts, each row
    # scaled to unit L2 norm, written into a zeroed float32 matrix beside the cues.
    flat = np.asarray(rows, dtype=np.int64) * N_HASHED + np.asarray(cols, dtype=np.int64)
    cells, counts = np.unique(flat, return_counts=True)
    cell_rows = cells // N_HASHED
    squares = np.bincount(cell_rows, weights=counts.astype(np.float64) ** 2, minlength=n)
    norms = np.sqrt(np.maximum(squares, 1.0))
    out = np.zeros((n, N_FEATURES), dtype=np.float32)
    out.reshape(-1)[cell_rows * N_FEATURES + cells % N_HASHED] = counts / norms[cell_rows]
    out[:, N_HASHED:] = cues
    return out
