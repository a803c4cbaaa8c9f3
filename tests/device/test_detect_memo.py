"""The detector's memo (``device.detect_memo``): a sentence said then remembered is read
by the model once, a hit is the model's own answer, and the memo keeps no words."""

from __future__ import annotations

import pickle
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from device import ops
from device.detect_memo import SIZE, DetectionMemo
from device.detector import default_detector
from protocol.detection.labels import Detection
from protocol.model import ContentType, Sensitivity, TimeKind
from tests.device.conftest import MakeAgent

SENTENCE = "I keep the spare key under the blue flowerpot."


def _answer(sentences: Sequence[str]) -> list[Detection]:
    return [
        Detection(
            candidate=len(s) % 2 == 0,
            score=len(s) / 1000,
            content_type=ContentType.PERSONAL_FACT,
            sensitivity=Sensitivity.NORMAL,
            time_kind=TimeKind.PERMANENT,
        )
        for s in sentences
    ]


@settings(max_examples=60, deadline=None)
@given(asks=st.lists(st.lists(st.sampled_from(["a.", "bb.", "a. bb.", "é!", ""]), max_size=3)))
def test_a_hit_is_exactly_the_models_answer_for_the_same_list(asks: list[list[str]]) -> None:
    memo, model, runs = DetectionMemo(size=3), object(), []

    def run(sentences: Sequence[str]) -> list[Detection]:
        runs.append(list(sentences))
        return _answer(sentences)

    for sentences in asks:
        assert memo.detect(model, sentences, run, "m1") == (_answer(sentences), "m1")
        assert len(memo) <= 3
    distinct = {tuple(a) for a in asks}
    assert len(runs) >= len(distinct)  # every list was read by the model at least once


def test_another_model_is_never_answered_from_the_memo() -> None:
    memo, runs = DetectionMemo(), []

    def run(sentences: Sequence[str]) -> list[Detection]:
        runs.append(1)
        return _answer(sentences)

    first, second = object(), object()
    memo.detect(first, [SENTENCE], run, "m1")
    memo.detect(first, [SENTENCE], run, "m1")
    memo.detect(second, [SENTENCE], run, "m1")
    memo.detect(second, [SENTENCE], run, "m2")
    assert len(runs) == 3


def test_the_memo_is_bounded_and_holds_no_words() -> None:
    memo, model = DetectionMemo(), object()
    for i in range(SIZE + 5):
        memo.detect(model, [f"{SENTENCE} number {i}"], _answer, "m1")
    assert len(memo) == SIZE
    held = pickle.dumps(list(memo._entries.items()))  # what a copy of the memo would show
    assert b"flowerpot" not in held and b"spare key" not in held


def test_say_then_remember_reads_the_sentence_once(make_agent: MakeAgent) -> None:
    agent = make_agent()
    model = default_detector()
    read: list[str] = []
    real = model.detect

    def counting(texts: Sequence[str]) -> list[Detection]:
        read.extend(texts)
        return real(texts)

    object.__setattr__(model, "detect", counting)
    try:
        ops._MEMO._entries.clear()
        agent.say(SENTENCE, "c1")
        agent.remember(SENTENCE, "c1")
        agent.say(SENTENCE, "c2")  # the memo answers, whatever the conversation
    finally:
        object.__delattr__(model, "detect")
    assert read == [SENTENCE]
