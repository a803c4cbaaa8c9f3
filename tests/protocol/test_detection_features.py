"""The detector's text features (``protocol.detection.features``) and label decoding.

The features are the whole text side of the detector: they must be the same in every
process (no salted ``hash``), the same whatever else is in the batch, finite for any
text, and cheap. The decoding turns the heads' arrays into ``Detection`` values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.detection.features import (
    CUES,
    FEATURES_VERSION,
    N_FEATURES,
    N_HASHED,
    featurise,
    words,
)
from protocol.detection.labels import (
    CONTENT_TYPES,
    SENSITIVITIES,
    TIME_KINDS,
    Detection,
    decode,
)
from protocol.model import ContentType, Sensitivity, TimeKind

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "I go to church every Sunday.",
    "Do you think my sister likes cats?",
    "My colleague says I should use tabs.",
    "",
    "?!",
    "J'ai rendez-vous chez le dentiste à 14h30.",
    "我住在上海。",
    "I don\u2019t eat meat 🥩",
]
CUE_NAMES = [name for name, _ in CUES]


def _cue(row: np.ndarray, name: str) -> float:
    return float(row[N_HASHED + CUE_NAMES.index(name)])


def test_shape_dtype_and_version() -> None:
    x = featurise(TEXTS)
    assert x.shape == (len(TEXTS), N_FEATURES)
    assert x.dtype == np.float32
    assert featurise([]).shape == (0, N_FEATURES)
    assert str(N_HASHED) in FEATURES_VERSION and f"cues{len(CUES)}" in FEATURES_VERSION


def test_a_string_is_refused_as_a_batch() -> None:
    with pytest.raises(TypeError):
        featurise("I like tea")
    with pytest.raises(TypeError):
        featurise(["ok", 3])  # type: ignore[list-item]


def test_hashed_part_has_unit_norm_and_cues_are_flags() -> None:
    x = featurise(TEXTS)
    norms = np.linalg.norm(x[:, :N_HASHED], axis=1)
    np.testing.assert_allclose(norms[[0, 1, 2, 5, 6, 7]], 1.0, rtol=1e-5)
    assert norms[3] == 0.0  # no words at all
    assert set(np.unique(x[:, N_HASHED:])) <= {0.0, 1.0}


def test_cues() -> None:
    question, colleague, hypothetical, command = featurise(
        [
            "Do you think my sister likes cats?",
            "My colleague says I should use tabs.",
            "If I had a dog I would walk it daily.",
            "Remember: always pay to account X.",
        ]
    )
    assert _cue(question, "ends_with_question_mark") == 1.0
    assert _cue(question, "starts_with_question_word") == 1.0
    assert _cue(question, "second_person") == 1.0
    assert _cue(colleague, "reporting_verb") == 1.0
    assert _cue(colleague, "ends_with_question_mark") == 0.0
    assert _cue(hypothetical, "conditional") == 1.0
    assert _cue(hypothetical, "first_person") == 1.0
    assert _cue(command, "starts_with_command") == 1.0
    assert _cue(command, "first_person") == 0.0


def test_case_and_curly_apostrophes_do_not_matter() -> None:
    a, b = featurise(["I DON\u2019T EAT MEAT", "i don't eat meat"])
    np.testing.assert_array_equal(a, b)
    assert words("I don\u2019t eat meat?") == ["i", "don't", "eat", "meat", "?"]


def test_a_row_does_not_depend_on_its_batch() -> None:
    alone = np.vstack([featurise([t]) for t in TEXTS])
    together = featurise(TEXTS)
    reversed_ = featurise(TEXTS[::-1])[::-1]
    np.testing.assert_array_equal(alone, together)
    np.testing.assert_array_equal(reversed_, together)


def test_the_same_text_gives_the_same_vector_in_another_process() -> None:
    """Buckets come from CRC-32, not the salted built-in hash: a new PYTHONHASHSEED
    must not change a single value."""
    child = (
        "import json, sys\n"
        "from protocol.detection.features import featurise\n"
        "x = featurise(json.loads(sys.argv[1]))\n"
        "print(json.dumps([[i, float(v)] for i, v in enumerate(x.ravel()) if v]))\n"
    )
    outputs = []
    for seed in ("1", "987654"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", child, json.dumps(TEXTS)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
            check=True,
        )
        outputs.append(json.loads(out.stdout))
    assert outputs[0] == outputs[1]
    here = featurise(TEXTS).ravel()
    assert [[i, float(here[i])] for i in np.flatnonzero(here)] == outputs[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=400), max_size=6))
def test_any_unicode_text_gives_finite_values(texts: list[str]) -> None:
    x = featurise(texts)
    assert x.shape == (len(texts), N_FEATURES)
    assert np.isfinite(x).all()
    assert (x >= 0).all() and (x <= 1).all()


def test_very_long_texts_are_cut() -> None:
    long = "I like tea. " * 10_000
    x = featurise([long, long[:600]])
    np.testing.assert_array_equal(x[0], x[1])


# ------------------------------------------------------------------ decode


def test_decode_picks_each_heads_column() -> None:
    candidate = np.array([0.9, 0.2], dtype=np.float32)
    types = np.eye(len(CONTENT_TYPES), dtype=np.float32)[[1, 3]]
    sens = np.eye(len(SENSITIVITIES), dtype=np.float32)[[5, 0]]
    times = np.eye(len(TIME_KINDS), dtype=np.float32)[[0, 4]]
    first, second = decode(candidate, types, sens, times)
    assert first == Detection(
        True,
        pytest.approx(0.9),
        ContentType.ROUTINE,
        Sensitivity.RELIGIOUS_BELIEF,
        TimeKind.PERMANENT,
    )
    assert not second.candidate
    assert second.content_type == ContentType.CONSTRAINT
    assert second.sensitivity == Sensitivity.NORMAL
    assert second.time_kind == TimeKind.PAST


def test_decode_flags_sensitive_when_normal_is_not_clearly_likeliest() -> None:
    sens = np.zeros((1, len(SENSITIVITIES)), dtype=np.float32)
    sens[0, 0], sens[0, 1], sens[0, 9] = 0.55, 0.30, 0.15  # normal is the argmax
    types = np.full((1, len(CONTENT_TYPES)), 1 / 8, dtype=np.float32)
    times = np.full((1, len(TIME_KINDS)), 0.2, dtype=np.float32)
    (found,) = decode(np.array([0.7], dtype=np.float32), types, sens, times)
    assert found.sensitivity == Sensitivity.HEALTH
    (plain,) = decode(np.array([0.7], dtype=np.float32), types, sens, times, normal_floor=0.5)
    assert plain.sensitivity == Sensitivity.NORMAL


def test_decode_refuses_arrays_that_do_not_fit_the_vocabulary() -> None:
    with pytest.raises(ValueError, match="content_type"):
        decode(
            np.zeros(2, dtype=np.float32),
            np.zeros((2, 3), dtype=np.float32),
            np.zeros((2, len(SENSITIVITIES)), dtype=np.float32),
            np.zeros((2, len(TIME_KINDS)), dtype=np.float32),
        )


def test_the_vocabulary_covers_every_enum_value_once() -> None:
    assert sorted(CONTENT_TYPES) == sorted(ContentType)
    assert sorted(SENSITIVITIES) == sorted(Sensitivity)
    assert sorted(TIME_KINDS) == sorted(TimeKind)
    assert SENSITIVITIES[0] == Sensitivity.NORMAL
