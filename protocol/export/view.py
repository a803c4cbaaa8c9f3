"""The human-readable view of a package: Markdown, rendered item by item.

Invariants: the view is made from the same items as the JSON, in one pass and flat
memory, and shows every item of every section (nothing the JSON holds is hidden
from the person reading it). Text from the package is escaped, so no stored word can
become a heading, a link, markup or HTML in the view.

Every record version says who produced its words and who verified it, from the
version's ``provenance`` and ``verification``: "you wrote this" only when the producer
is the user (a sentence the user typed); a source by its medium and reference; an
import; the assistant's inference. A version verified by independent sources says so,
and that the user did not confirm it; only one the user confirmed says "you confirmed".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import assert_never

from protocol.export.layout import Item
from protocol.export.package import (
    ConnectedAccount,
    ExportedDevice,
    ExportedProject,
    ExportedRecord,
    ExportedVersion,
    PackageHeader,
    Section,
    TaskEntry,
    Totals,
)
from protocol.model import Episode, Producer, Provenance, Skeleton, Verification, VerifiedBy
from protocol.provenance import MEDIUM_WORDS, shown_reference

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")

TITLES = {
    Section.RECORDS: "Memory records",
    Section.BEHAVIOUR_RULES: "Accepted behaviour rules",
    Section.SKELETONS: "Permanently forgotten (skeletons only)",
    Section.EPISODES: "Episodes (what the records came from)",
    Section.PROJECTS: "Projects",
    Section.CONNECTED_ACCOUNTS: "Connected accounts and capabilities",
    Section.DEVICES: "Devices",
    Section.TASKS: "Task history",
    Section.SENSITIVE_RECORDS: "Sensitive classes: records",
    Section.SENSITIVE_EPISODES: "Sensitive classes: episodes",
}


def escape(text: str) -> str:
    """Markdown-escape ``text`` and keep it on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _when(value: object) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else "—"


def _day(value: datetime | None) -> str:
    return value.date().isoformat() if value is not None else ""


def _reference(reference: str) -> str:
    """A source's reference as a line shows it, escaped for the view."""
    return escape(shown_reference(reference))


def produced(p: Provenance) -> str:
    """Who produced the words: "you wrote this ..." only for the user's own sentence."""
    day = f" on {_day(p.at)}" if p.at is not None else ""
    match p.producer:
        case Producer.USER:
            where = f" in conversation `{p.conversation_id}`" if p.conversation_id else ""
            return f"you wrote this{where}{day}"
        case Producer.SOURCE:
            medium = MEDIUM_WORDS.get(p.medium or "external", "external content")
            ref = f" ({_reference(p.reference)})" if p.reference else ""
            seen = f", seen{day}" if day else ""
            return f"from {medium}{ref}{seen}"
        case Producer.IMPORT:
            ref = f" from {_reference(p.reference)}" if p.reference else ""
            return f"imported{ref}{day}"
        case Producer.ASSISTANT:
            behaviour = " from your behaviour" if p.medium == "behaviour" else ""
            return f"inferred by the assistant{behaviour}"
        case unknown:
            assert_never(unknown)


def verified(v: Verification | None) -> str:
    """Who verified it: the user ("you confirmed"), or independent sources (not the user)."""
    if v is None:
        return "not verified"
    day = f" on {_day(v.at)}" if v.at is not None else ""
    match v.by:
        case VerifiedBy.USER:
            return f"you confirmed it{day}"
        case VerifiedBy.SOURCES:
            origins = f" ({', '.join(escape(o) for o in v.sources)})" if v.sources else ""
            return f"corroborated by independent sources{origins}{day}, not confirmed by you"
        case unknown:
            assert_never(unknown)


def _who(v: ExportedVersion) -> str:
    return f"{produced(v.provenance)}; verification: {verified(v.verification)}"


def _record(r: ExportedRecord) -> Iterator[str]:
    current = r.current.content
    areas = ", ".join(a.value for a in current.life_areas)
    yield (
        f"- **{escape(current.text)}**  \n"
        f"  {current.content_type.value}, {current.epistemic_state.value}, "
        f"{r.lifecycle_state.value}; areas: {areas}; sensitivity: {current.sensitivity.value}; "
        f"source: {current.source_kind.value}; id `{r.id}`, version {r.current_version}  \n"
        f"  Provenance: {_who(r.current)}.\n"
    )
    for v in r.versions:
        if v.version != r.current_version:
            yield (
                f"  - version {v.version} ({_when(v.recorded_at)}): {escape(v.content.text)} "
                f"(provenance: {_who(v)})\n"
            )


def _line(item: object) -> Iterator[str]:
    if isinstance(item, ExportedRecord):
        yield from _record(item)
    elif isinstance(item, Skeleton):
        yield f"- `{item.id}`: permanently forgotten at {_when(item.forgotten_at)}\n"
    elif isinstance(item, Episode):
        yield (
            f"- {_when(item.typed_at)} ({item.source_kind.value}): {escape(item.text)} "
            f"— `{item.id}`\n"
        )
    elif isinstance(item, ExportedProject):
        state = "open" if item.open else "closed"
        yield f"- {escape(item.name)}: {state} (since {_when(item.updated_at)})\n"
    elif isinstance(item, ConnectedAccount):
        yield (
            f"- {escape(item.source_id)}: {', '.join(item.capabilities)}; "
            f"{item.episodes} episode(s), {_when(item.first_episode_at)} to "
            f"{_when(item.latest_episode_at)}\n"
        )
    elif isinstance(item, ExportedDevice):
        revoked = f", revoked {_when(item.revoked_at)}" if item.revoked_at else ""
        enrolled = _when(item.enrolled_at)
        yield f"- {escape(item.name)} (`{item.device_id}`), enrolled {enrolled}{revoked}\n"
    elif isinstance(item, TaskEntry):
        yield f"- {escape(item.title)}: {item.state}, {_when(item.started_at)}\n"


def render_markdown(events: Iterable[PackageHeader | Item | Totals]) -> Iterator[str]:
    """Markdown lines for a package read by ``layout.read_package`` (or built in order)."""
    current: Section | None = None
    seen: set[Section] = set()
    for event in events:
        if isinstance(event, PackageHeader):
            yield "# Your memory, exported\n\n"
            yield (
                f"Export `{event.export_id}` of space `{event.space_id}`, made "
                f"{_when(event.exported_at)}. Package schema version {event.schema_version}. "
                + (
                    "Sensitive classes are included, in their own section.\n"
                    if event.includes_sensitive
                    else "Sensitive classes were left out.\n"
                )
                + "\nEach record says who produced its words (only a sentence you typed is "
                "marked as written by you) and who verified it: you, or independent sources.\n"
            )
        elif isinstance(event, Item):
            if event.section is not current:
                current = event.section
                seen.add(current)
                yield f"\n## {TITLES[current]}\n\n"
            yield from _line(event.model)
        else:
            for section in Section:
                if section not in seen and event.of(section) == 0:
                    yield f"\n## {TITLES[section]}\n\nNone.\n"
            counts = ", ".join(f"{s.value}: {event.of(s)}" for s in Section)
            yield f"\n---\n\nTotals: {counts}.\n"
