"""Hypothesis strategies for operations over a small, colliding pool of ids."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import strategies as st

from protocol.ids import make_id
from protocol.operations import AddEpisode, ForgetPermanently, Remember

AT = datetime(2026, 9, 21, 12, 0, tzinfo=UTC)
RECORDS = [make_id("rec", bytes([i]) * 10) for i in range(3)]
EPISODES = [make_id("ep", bytes([i]) * 10) for i in range(3)]
CONVERSATIONS = ["c1", "c2"]
TYPED = [
    "I grew up in Duluth. My favorite number is not 1729.",
    "I drink my coffee hot now.",
    "My sister lives in Oslo!",
]
CLAIMS = [
    "I grew up in Duluth.",
    "My favorite number is not 1729.",
    "1729",
    "I drink my coffee hot now",
    "My sister lives in Oslo",
    "I was raised in Duluth.",
]


@st.composite
def operations(draw: st.DrawFn, op_number: int) -> AddEpisode | Remember | ForgetPermanently:
    op_id = make_id("op", op_number.to_bytes(10, "big"))
    kind = draw(st.sampled_from(["add_episode", "remember", "forget_permanently"]))
    if kind == "add_episode":
        return AddEpisode(
            op_id=op_id,
            episode_id=draw(st.sampled_from(EPISODES)),
            conversation_id=draw(st.sampled_from(CONVERSATIONS)),
            text=draw(st.sampled_from(TYPED)),
            typed_at=AT,
        )
    if kind == "remember":
        return Remember(
            op_id=op_id,
            record_id=draw(st.sampled_from(RECORDS)),
            text=draw(st.sampled_from(CLAIMS)),
            conversation_id=draw(st.sampled_from(CONVERSATIONS)),
            source_episode_ids=draw(st.lists(st.sampled_from(EPISODES), min_size=1, max_size=2)),
            made_at=AT,
        )
    return ForgetPermanently(op_id=op_id, record_id=draw(st.sampled_from(RECORDS)), made_at=AT)


@st.composite
def op_sequences(
    draw: st.DrawFn, max_size: int = 25
) -> list[AddEpisode | Remember | ForgetPermanently]:
    size = draw(st.integers(min_value=0, max_value=max_size))
    return [draw(operations(n)) for n in range(size)]
