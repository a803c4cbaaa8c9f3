"""Why a candidate waits for the user, and what to warn before confirming it, in words.

Invariants:
- Pure: built only from the record's sealed content (sensitivity, layer, provenance,
  text); the same content gives the same reasons on every device and surface.
- Every reason is a plain sentence, never an enum name; a sensitive class is named in
  words ("your health"), an external source by its medium and reference.
- ``confirm_warning`` is not None exactly when confirming needs a second step: words
  from a source or an import; it says so, and warns again when the text reads as an
  instruction. A proposed rule is the assistant's own words, checked for authority by
  ``protocol.behaviour``; it needs no warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from protocol.instructions import instruction_shape
from protocol.model import Layer, Producer, RecordContent, Sensitivity
from protocol.provenance import provenance_of, source_words

CLASS_WORDS = {
    Sensitivity.HEALTH: "your health",
    Sensitivity.SEX_LIFE: "your sex life or sexual orientation",
    Sensitivity.ETHNIC_ORIGIN: "your ethnic or racial origin",
    Sensitivity.POLITICAL_OPINION: "your political opinions",
    Sensitivity.RELIGIOUS_BELIEF: "your religious or philosophical beliefs",
    Sensitivity.TRADE_UNION: "trade-union membership",
    Sensitivity.GENETIC: "genetic data",
    Sensitivity.BIOMETRIC: "biometric data",
    Sensitivity.FINANCIAL_DETAIL: "your financial details",
}


def class_words(sensitivity: Sensitivity) -> str:
    """A sensitive class in words ("your health"); "nothing sensitive" for normal."""
    return CLASS_WORDS.get(sensitivity, "nothing sensitive")


def waiting_reasons(content: RecordContent) -> list[str]:
    """Why a candidate with this content waits for the user's confirmation."""
    out: list[str] = []
    origin = provenance_of(content)
    if content.layer is Layer.BEHAVIOUR_RULE:
        out.append(
            "It is a rule I propose about how I behave; it takes effect only if you accept it."
        )
    match origin.producer:
        case Producer.SOURCE:
            out.append(
                f"It comes from {source_words(origin)}, not from you; a source's claim "
                "waits until you confirm it."
            )
        case Producer.IMPORT:
            where = f" ({origin.reference})" if origin.reference else ""
            out.append(f"It was imported{where} and is not verified.")
        case Producer.ASSISTANT:
            if content.layer is not Layer.BEHAVIOUR_RULE:
                out.append(f"I inferred it from {source_words(origin)}; you did not say it.")
        case Producer.USER:
            pass
        case unknown:
            assert_never(unknown)
    if content.sensitivity is not Sensitivity.NORMAL:
        out.append(
            f"It is about {class_words(content.sensitivity)}, a sensitive class: I keep it "
            "only if you confirm it."
        )
    return out or ["It waits for your confirmation."]


@dataclass(frozen=True, slots=True)
class ConfirmWarning:
    """What to show before confirming words that are not the user's."""

    source: str  # "a web page (pay.example)"
    reference: str | None  # the full reference (URL, message id, file)
    instruction: str | None  # why it reads as an instruction, if it does
    text: str  # the plain warning

    def __str__(self) -> str:
        return self.text


def confirm_warning(content: RecordContent) -> ConfirmWarning | None:
    """The warning a confirmation must show first (and then ask again), or None."""
    origin = provenance_of(content)
    if origin.producer not in (Producer.SOURCE, Producer.IMPORT):
        return None  # the user's own words, or the assistant's (a rule is checked apart)
    shape = instruction_shape(content.text)
    where = source_words(origin)
    parts = [
        f"These are not your words: they come from {where}. Confirming makes them part "
        "of your memory as if you had checked them."
    ]
    if shape is not None:
        parts.append(
            f"Warning: this reads as an instruction ({shape}). Pages and messages use this "
            "to plant instructions; memory never pays, sends or signs in for you, and you "
            "should confirm only if you know it is true."
        )
    return ConfirmWarning(
        source=where,
        reference=origin.reference,
        instruction=shape,
        text=" ".join(parts),
    )
