"""Hypothesis strategies for operations over a small, colliding pool of ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from protocol.ids import make_id
from protocol.model import (
    ArtifactKind,
    ContentType,
    EpistemicState,
    Initiator,
    Layer,
    LifeArea,
    RecordContent,
    Sensitivity,
    SourceKind,
    TimeKind,
    UsageRestriction,
)
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    Confirm,
    Correct,
    DontUse,
    ForgetArea,
    ForgetPermanently,
    Infer,
    Reaffirm,
    Remember,
    RestrictUsage,
    SetProject,
    UseAgain,
)
from protocol.sentences import split_sentences

AT = datetime(2026, 9, 21, 12, 0, tzinfo=UTC)
RECORDS = [make_id("rec", bytes([i]) * 10) for i in range(4)]
EPISODES = [make_id("ep", bytes([i]) * 10) for i in range(3)]
ARTIFACTS = [make_id("art", bytes([i]) * 10) for i in range(2)]
CONVERSATIONS = ["c1", "c2"]
PROJECTS = ["renovation", "thesis"]
TYPED = [
    "I grew up in Duluth. My favorite number is not 1729.",
    "I drink my coffee iced. I drink my coffee hot now.",
    "My sister lives in Oslo! I grew up in Bergen.",
]
CLAIMS = [
    "I grew up in Duluth.",
    "My favorite number is not 1729.",
    "1729",
    "I drink my coffee iced",
    "I drink my coffee hot now",
    "My sister lives in Oslo",
    "I grew up in Bergen.",
    "I was raised in Duluth.",
]

initiators = st.sampled_from(list(Initiator))


@st.composite
def contents(draw: st.DrawFn) -> RecordContent:
    return RecordContent(
        text=draw(st.sampled_from(CLAIMS)),
        content_type=draw(st.sampled_from(list(ContentType))),
        epistemic_state=draw(
            st.sampled_from(
                [EpistemicState.OBSERVED, EpistemicState.INFERRED, EpistemicState.HYPOTHESIS]
            )
        ),
        layer=draw(st.sampled_from(list(Layer))),
        time_kind=draw(st.sampled_from(list(TimeKind))),
        source_episode_ids=draw(st.lists(st.sampled_from(EPISODES), min_size=1, max_size=2)),
        source_kind=draw(st.sampled_from(list(SourceKind))),
        life_areas=draw(
            st.lists(st.sampled_from(list(LifeArea)), min_size=1, max_size=2, unique=True)
        ),
        sensitivity=draw(st.sampled_from([Sensitivity.NORMAL, Sensitivity.HEALTH])),
        derived_from=draw(st.lists(st.sampled_from(RECORDS), max_size=1)),
    )


@st.composite
def operations(draw: st.DrawFn, op_number: int) -> AnyOperation:
    base = {
        "op_id": make_id("op", op_number.to_bytes(10, "big")),
        "made_at": AT + timedelta(minutes=op_number),
        "initiated_by": draw(initiators),
    }
    record = draw(st.sampled_from(RECORDS))
    kind = draw(
        st.sampled_from(
            ["add_episode"] * 3
            + ["remember"] * 3
            + ["correct", "dont_use", "use_again", "restrict_usage", "confirm", "reaffirm"]
            + ["forget_permanently", "forget_area", "infer", "add_artifact", "set_project"]
        )
    )
    episode = draw(st.integers(0, len(EPISODES) - 1))
    if kind == "add_episode":
        # An episode id always carries the same text and conversation, as a real log would.
        return AddEpisode(
            **base,
            episode_id=EPISODES[episode],
            conversation_id=CONVERSATIONS[episode % 2],
            text=TYPED[episode],
            typed_at=base["made_at"],
        )
    if kind in ("remember", "correct"):
        own = split_sentences(TYPED[episode])
        said = {
            "record_id": record,
            "text": draw(st.sampled_from(own + own + CLAIMS)),
            "conversation_id": draw(
                st.sampled_from([CONVERSATIONS[episode % 2]] * 3 + CONVERSATIONS)
            ),
            "source_episode_ids": [EPISODES[episode]],
        }
        if kind == "correct":
            return Correct(**base, **said)
        return Remember(
            **base,
            **said,
            time_kind=draw(st.sampled_from(list(TimeKind))),
            life_areas=draw(
                st.lists(st.sampled_from(list(LifeArea)), min_size=1, max_size=2, unique=True)
            ),
            project=draw(st.sampled_from([None, *PROJECTS])),
        )
    if kind == "dont_use":
        return DontUse(**base, record_id=record)
    if kind == "use_again":
        return UseAgain(**base, record_id=record)
    if kind == "restrict_usage":
        restriction = draw(
            st.sampled_from(
                [None, UsageRestriction(area=LifeArea.WORK), UsageRestriction(project=PROJECTS[0])]
            )
        )
        return RestrictUsage(**base, record_id=record, restriction=restriction)
    if kind == "confirm":
        return Confirm(**base, record_id=record)
    if kind == "reaffirm":
        return Reaffirm(**base, record_id=record, still_true=draw(st.booleans()))
    if kind == "forget_permanently":
        return ForgetPermanently(**base, record_id=record)
    if kind == "forget_area":
        area = draw(st.sampled_from([None, LifeArea.GENERAL, LifeArea.WORK]))
        return ForgetArea(**base, area=area, proof=b"\x00" * 64)
    if kind == "infer":
        return Infer(**base, record_id=record, content=draw(contents()))
    if kind == "add_artifact":
        return AddArtifact(
            **base,
            artifact_id=draw(st.sampled_from(ARTIFACTS)),
            artifact_kind=draw(st.sampled_from(list(ArtifactKind))),
            derived_from=draw(st.lists(st.sampled_from(RECORDS), min_size=1, max_size=2)),
            payload=draw(st.sampled_from(CLAIMS)),
        )
    return SetProject(**base, project=draw(st.sampled_from(PROJECTS)), open=draw(st.booleans()))


@st.composite
def op_sequences(draw: st.DrawFn, max_size: int = 30) -> list[AnyOperation]:
    size = draw(st.integers(min_value=0, max_value=max_size))
    return [draw(operations(n)) for n in range(size)]
