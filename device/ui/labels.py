"""Words for every enum value the inspector shows: the one place a page turns a stored
value ("candidate", "personal_fact", "health", ...) into what a person reads ("Waiting
for your OK", "A fact about you", "Your health", ...).

Invariants:
- Every member of every enum in ``SHOWN`` has a label (checked at import, and by
  ``tests/device/test_ui_labels.py`` member by member), so a new member cannot reach a
  page as its raw name.
- ``label(enum, value)`` never raises for a value a page may meet: a value outside the
  enum (a custom content type, a value from a newer version) is shown in words made
  from it ("my_recipe" -> "My recipe"); the raw value always stays on the page as a
  ``data-value`` / ``title`` attribute (``Badge``), so nothing is lost.
- Times are shown in UTC (the inspector has no time zone setting) and say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from device.sync_state import SyncState
from protocol.confidence import ConfidenceClass
from protocol.model import (
    ContentType,
    EpistemicState,
    Layer,
    LifeArea,
    LifecycleState,
    Sensitivity,
    SourceKind,
    TimeKind,
)
from protocol.subset import Reason


class Kind(StrEnum):
    """Who produced a record's words and who verified it, as the page tells them apart
    (each is a CSS class ``kind-<value>`` and a labelled badge)."""

    WORDS = "words"  # the user typed it: the only kind quoted
    CONFIRMED = "confirmed"  # not the user's words; the user confirmed it
    CORROBORATED = "corroborated"  # not the user's words; independent sources agree
    RULE = "rule"  # a behaviour rule the user accepted
    PROPOSED_RULE = "proposed-rule"  # a behaviour rule proposed, not (or no longer) accepted
    SOURCE = "source"  # a source's words (web page, email, ...), not verified
    IMPORT = "import"  # imported, not verified
    INFERRED = "inferred"  # the assistant's observation or inference


LIFECYCLE = {
    LifecycleState.CANDIDATE: "Waiting for your OK",
    LifecycleState.ACTIVE: "Active",
    LifecycleState.NOT_IN_USE: "Not in use",
    LifecycleState.FORGOTTEN: "Permanently forgotten",
}
CONTENT_TYPE = {
    ContentType.PREFERENCE: "Something you prefer",
    ContentType.ROUTINE: "A habit or routine",
    ContentType.GOAL: "A goal of yours",
    ContentType.CONSTRAINT: "A limit to respect",
    ContentType.RELATIONSHIP: "About someone in your life",
    ContentType.PERSONAL_FACT: "A fact about you",
    ContentType.OPINION: "An opinion",
    ContentType.EVENT: "An event",
}
EPISTEMIC_STATE = {
    EpistemicState.SAID: "You said it",
    EpistemicState.OBSERVED: "Seen, not checked",
    EpistemicState.INFERRED: "I worked it out",
    EpistemicState.HYPOTHESIS: "A guess I have not checked",
    EpistemicState.VERIFIED: "Checked",
    EpistemicState.INVALID: "No longer true",
}
# the confidence classes are already sentences; they are listed so none slips through
CONFIDENCE = {
    ConfidenceClass.YOU_TOLD_ME: "You told me",
    ConfidenceClass.I_THINK_SO: "I think so",
    ConfidenceClass.NOT_SURE: "I'm not sure",
    ConfidenceClass.SOURCE_NOT_VERIFIED: "I saw it in a source, not verified",
    ConfidenceClass.IMPORTED_NOT_VERIFIED: "Imported, not verified",
    ConfidenceClass.CORROBORATED: "Seen in independent sources, not confirmed by you",
    ConfidenceClass.CONFIRMED_BY_YOU: "You confirmed it",
}
TIME_KIND = {
    TimeKind.PERMANENT: "Lasting",
    TimeKind.FOR_NOW: "For now",
    TimeKind.SEASONAL: "Seasonal",
    TimeKind.ONE_OFF: "Just once",
    TimeKind.PAST: "In the past",
}
LAYER = {
    Layer.EVENT: "A single event",
    Layer.CONSOLIDATED_FACT: "A lasting fact",
    Layer.BEHAVIOUR_RULE: "A rule for how I behave",
}
SENSITIVITY = {
    Sensitivity.NORMAL: "Not sensitive",
    Sensitivity.HEALTH: "Your health",
    Sensitivity.SEX_LIFE: "Your sex life",
    Sensitivity.ETHNIC_ORIGIN: "Your ethnic origin",
    Sensitivity.POLITICAL_OPINION: "Your political opinions",
    Sensitivity.RELIGIOUS_BELIEF: "Your religion or beliefs",
    Sensitivity.TRADE_UNION: "Trade union membership",
    Sensitivity.GENETIC: "Your genetic data",
    Sensitivity.BIOMETRIC: "Your biometric data",
    Sensitivity.FINANCIAL_DETAIL: "Your financial details",
}
SOURCE_KIND = {
    SourceKind.USER_STATEMENT: "Something you typed",
    SourceKind.USER_BEHAVIOUR: "What you did in an app",
    SourceKind.CONNECTED_SOURCE: "A source you connected",
    SourceKind.EXTERNAL_CONTENT: "A web page, email or document",
    SourceKind.IMPORT: "An import",
}
LIFE_AREA = {
    LifeArea.WORK: "Work",
    LifeArea.HEALTH: "Health",
    LifeArea.FINANCE: "Finance",
    LifeArea.RELATIONSHIPS: "Relationships",
    LifeArea.HOME: "Home",
    LifeArea.TRAVEL: "Travel",
    LifeArea.SHOPPING: "Shopping",
    LifeArea.LEARNING: "Learning",
    LifeArea.LEISURE: "Leisure",
    LifeArea.GENERAL: "General",
}
SYNC_STATE = {
    SyncState.PENDING: "Not synced yet",
    SyncState.SYNCED: "Synced",
    SyncState.REFUSED: "Refused by the cloud",
}
KIND = {
    Kind.WORDS: "Your words",
    Kind.CONFIRMED: "Confirmed by you \u00b7 not your words",
    Kind.CORROBORATED: "Corroborated by sources \u00b7 not your words",
    Kind.RULE: "Rule you accepted",
    Kind.PROPOSED_RULE: "Proposed rule",
    Kind.SOURCE: "From a source \u00b7 not your words",
    Kind.IMPORT: "Imported \u00b7 not your words",
    Kind.INFERRED: "Inferred \u00b7 not your words",
}
# why this device keeps a record (``protocol.subset.Reason``), after "because"
HELD_BECAUSE = {
    Reason.PINNED: "you pinned it here",
    Reason.RULE: "it is a behaviour rule in force",
    Reason.PREFERENCE: "it is a preference in force",
    Reason.UPCOMING: "it is an upcoming event",
    Reason.FOR_NOW: "it is a \u201cfor now\u201d record in force",
    Reason.PEOPLE: "it is about people in your life",
    Reason.FREQUENT: "you use it often",
    Reason.RECENT: "it was learned, changed or used recently",
}

# every enum a page shows, with its labels (what the page calls the field, for titles)
SHOWN: Mapping[type[StrEnum], tuple[str, Mapping[Any, str]]] = MappingProxyType(
    {
        LifecycleState: ("state", LIFECYCLE),
        ContentType: ("type", CONTENT_TYPE),
        EpistemicState: ("how I know it", EPISTEMIC_STATE),
        ConfidenceClass: ("confidence", CONFIDENCE),
        TimeKind: ("time", TIME_KIND),
        Layer: ("layer", LAYER),
        Sensitivity: ("sensitive class", SENSITIVITY),
        SourceKind: ("source kind", SOURCE_KIND),
        LifeArea: ("life area", LIFE_AREA),
        SyncState: ("sync", SYNC_STATE),
        Kind: ("whose words", KIND),
        Reason: ("kept because", HELD_BECAUSE),
    }
)


def _missing() -> list[str]:
    return [
        f"{enum.__name__}.{member.name}"
        for enum, (_, labels) in SHOWN.items()
        for member in enum
        if not labels.get(member)
    ]


if _missing():  # pragma: no cover - the labels test names them too
    raise RuntimeError(f"the inspector has no words for {', '.join(_missing())}")


def in_words(value: str) -> str:
    """A value outside its enum, shown in words made from it: "my_recipe" -> "My recipe"."""
    spaced = " ".join(value.replace("_", " ").replace("-", " ").split())
    return spaced[:1].upper() + spaced[1:]


def label(enum: type[StrEnum], value: str | StrEnum | None) -> str:
    """The words for ``value`` of ``enum`` ("" for None)."""
    if value is None or value == "":
        return ""
    labels = SHOWN[enum][1]
    try:
        return labels[enum(value)]
    except ValueError:
        return in_words(str(value))


@dataclass(frozen=True, slots=True)
class Badge:
    """One badge: its words, and (for an enum value) the raw value and the field it is,
    kept on the page as ``data-value`` and ``title``."""

    text: str
    value: str | None = None
    field: str | None = None

    @property
    def title(self) -> str | None:
        return None if self.value is None else f"{self.field}: {self.value}"


def badge(enum: type[StrEnum], value: str | None) -> Badge | None:
    """The badge of an enum value (None for no value)."""
    if not value:
        return None
    return Badge(label(enum, value), value, SHOWN[enum][0])


def when(iso: str | datetime | None) -> str:
    """A moment in words, in UTC: "1 March 2026 at 09:30 UTC" ("" for None)."""
    if iso is None or iso == "":
        return ""
    moment = iso if isinstance(iso, datetime) else datetime.fromisoformat(iso)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    month = _MONTHS[moment.month - 1]
    return f"{moment.day} {month} {moment.year} at {moment:%H:%M} UTC"


_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
