""" "How do you know this?" for a statement that relates to another: a correction names
what it replaced and when, an addition, exception or conflict says so with its date and
evidence, a superseded record says what replaced it; only the user's words are quoted,
and a forgotten record is named as forgotten."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from protocol.confidence import ConfidenceClass
from protocol.explain import Known, explain
from protocol.model import (
    EpistemicState,
    RecordContent,
    RelationNote,
    SourceKind,
    StatementRelation,
)

ROME, OSLO = "I live in Rome.", "Actually, we moved, it's Oslo now."
JULY = datetime(2026, 7, 1, 9, 5, tzinfo=UTC)
DECEMBER = datetime(2026, 12, 1, 14, 2, tzinfo=UTC)
OLD = "rec_0000000001"
EPISODES = {"ep_0000000002": (DECEMBER, OSLO)}


def content(text: str = OSLO, *notes: RelationNote, **kw: object) -> RecordContent:
    fields: dict[str, object] = {
        "text": text,
        "source_episode_ids": ["ep_0000000002"],
        "said_at": DECEMBER,
        "relations": list(notes),
    }
    return RecordContent.model_validate({**fields, **kw})


def note(kind: StatementRelation, evidence: str = "same subject: where you live") -> RelationNote:
    return RelationNote(kind=kind, record_id=OLD, evidence=evidence, at=DECEMBER)


def why(c: RecordContent, known: Known | None = None, **kw: object) -> str:
    related = {} if known is None else {OLD: known}
    return explain(c, ConfidenceClass.YOU_TOLD_ME, EPISODES, related=related, **kw)  # type: ignore[arg-type]


def test_a_correction_says_what_it_replaced_and_when() -> None:
    text = why(content(OSLO, note(StatementRelation.CORRECTION)), Known(content(ROME), JULY))
    assert (
        f'You corrected this on 2026-12-01 at 14:02: "{OSLO}" replaces "{ROME}" '
        "(same subject: where you live)."
    ) in text
    assert text.startswith("You told me so: on 2026-12-01 you wrote:")


def test_a_forgotten_or_unknown_replaced_record_is_never_quoted() -> None:
    corrected = content(OSLO, note(StatementRelation.CORRECTION))
    gone = why(corrected, Known(None))
    assert "replaces a record that was permanently forgotten" in gone and ROME not in gone
    unknown = why(corrected)
    assert f'"{OSLO}" replaces an earlier record' in unknown


def test_an_inference_that_was_replaced_is_named_not_quoted() -> None:
    inferred = content(
        ROME, epistemic_state=EpistemicState.INFERRED, source_kind=SourceKind.USER_BEHAVIOUR
    )
    text = why(content(OSLO, note(StatementRelation.CORRECTION)), Known(inferred, JULY))
    assert "replaces a record that was not your words (inferred)" in text
    assert f'"{ROME}"' not in text


@pytest.mark.parametrize(
    "kind, says",
    [
        (
            StatementRelation.ADDITION,
            f'On 2026-12-01 at 14:02 you added this beside "{ROME}", which still holds',
        ),
        (
            StatementRelation.EXCEPTION,
            f'On 2026-12-01 at 14:02 you made this an exception to "{ROME}"',
        ),
        (
            StatementRelation.CONFLICT,
            f'On 2026-12-01 at 14:02 this came to disagree with "{ROME}"; I keep both',
        ),
    ],
)
def test_an_addition_exception_or_conflict_says_so_with_its_date_and_evidence(
    kind: StatementRelation, says: str
) -> None:
    text = why(
        content(OSLO, note(kind, "another value of the same thing")), Known(content(ROME), JULY)
    )
    assert says in text and "(another value of the same thing)." in text
    assert "corrected" not in text


def test_an_unrelated_note_adds_nothing() -> None:
    plain = why(content(OSLO))
    assert why(content(OSLO, note(StatementRelation.UNRELATED)), Known(content(ROME))) == plain


def test_a_superseded_record_says_what_replaced_it_and_when() -> None:
    text = explain(
        content(ROME),
        ConfidenceClass.YOU_TOLD_ME,
        EPISODES,
        superseded=True,
        replaced_by=Known(content(OSLO), DECEMBER),
    )
    assert (
        f'You said something newer on the same subject on 2026-12-01 at 14:02: "{OSLO}" '
        "replaces it, so I use that instead."
    ) in text
    forgotten = explain(
        content(ROME),
        ConfidenceClass.YOU_TOLD_ME,
        EPISODES,
        superseded=True,
        replaced_by=Known(None),
    )
    assert "You said something newer on the same subject, so I use that instead." in forgotten
