"""The package as a stream of lines: written and read one item at a time.

Invariants:
- ``write_package`` holds one item at a time: a package of any size is written in
  flat memory, as valid JSON whose every item sits on a line of its own.
- Sections are written in ``Section`` order, each present (possibly empty); the
  sensitive part is ``null`` when it was left out; ``totals`` closes the package and
  counts what was written, never what was claimed.
- ``read_package`` reads that layout back in flat memory, validating every item with
  its model; a line out of place, an item of the wrong shape, a section out of order,
  an unknown schema version, or totals that disagree with what was read raise
  ``PackageError`` naming the line and the reason. Reading stops at the first error.
- ``read_package`` also reads a signed package file (``protocol.export.signing``): the
  totals line ends ``},`` and the signature trailer closes the file. It checks only
  its place; the signature is checked over the file's bytes by ``signing.verify``.
- ``read_package`` reads every version of ``READABLE_SCHEMA_VERSIONS``: a version-1
  package's header and records are read as version 2 (``protocol.export.versions``), so
  what it yields is always the current models, whatever version was read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from protocol.errors import PackageError
from protocol.export.package import (
    FORMAT,
    ITEM_MODELS,
    SENSITIVE_SECTIONS,
    PackageHeader,
    Section,
    Totals,
)
from protocol.export.signing import TRAILER_PREFIX
from protocol.export.versions import RECORD_SECTIONS, check_version, upgrade_header, upgrade_record
from protocol.wire import WireModel

MAX_LINE_BYTES = 8 * 1024 * 1024  # one item; a record's whole chain stays well below


@dataclass(frozen=True, slots=True)
class Item:
    section: Section
    model: WireModel


def _header_line(header: PackageHeader) -> str:
    text = header.model_dump_json()
    assert text.endswith("}")
    return text[:-1] + ",\n"


def _section_name(section: Section) -> str:
    return section.value.split(".", 1)[-1]


def write_package(header: PackageHeader, items: Iterable[Item]) -> Iterator[str]:
    """The package's lines (each ends with a newline). ``items`` must come in section
    order; an item of a sensitive section in a package without it is refused."""
    counts = dict.fromkeys(Section, 0)
    source = iter(items)
    pending: Item | None = next(source, None)
    yield _header_line(header)
    for section in Section:
        if section in SENSITIVE_SECTIONS and not header.includes_sensitive:
            if section is SENSITIVE_SECTIONS[0]:
                yield '"sensitive":null,\n'
            continue
        if section is SENSITIVE_SECTIONS[0]:
            yield '"sensitive":{\n'
        yield f'"{_section_name(section)}":[\n'
        while pending is not None and pending.section is section:
            expected = ITEM_MODELS[section]
            if not isinstance(pending.model, expected):
                raise PackageError(
                    f"section {section.value}: expected a {expected.__name__}, "
                    f"got a {type(pending.model).__name__}"
                )
            prefix = "," if counts[section] else ""
            yield prefix + pending.model.model_dump_json() + "\n"
            counts[section] += 1
            pending = next(source, None)
        last_sensitive = section is SENSITIVE_SECTIONS[-1]
        yield "]\n" if last_sensitive else "],\n"
        if last_sensitive:
            yield "},\n"
    if pending is not None:
        order = ", ".join(s.value for s in Section)
        raise PackageError(
            f"an item of section {pending.section.value} came after its section was closed "
            f"(or its section was left out); items must come in the order {order}"
        )
    totals = Totals(**{Totals.field_of(s): n for s, n in counts.items()})
    yield f'"totals":{totals.model_dump_json()}}}\n'


def lines_of(chunks: Iterable[bytes], max_line: int = MAX_LINE_BYTES) -> Iterator[str]:
    """Split a byte stream into text lines (without their newline), in flat memory."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while True:
            cut = buffer.find(b"\n")
            if cut < 0:
                break
            yield _decode(buffer[:cut])
            buffer = buffer[cut + 1 :]
        if len(buffer) > max_line:
            raise PackageError(f"a line of the package is longer than {max_line} bytes")
    if buffer.strip():
        yield _decode(buffer)


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackageError(f"the package is not UTF-8 text: {exc}") from exc


class _Reader:
    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = iter(lines)
        self.number = 0

    def next(self, what: str) -> str:
        for line in self.lines:
            self.number += 1
            if line.strip():
                return line.rstrip("\r\n")
        raise PackageError(
            f"the package ends after line {self.number}, before {what}: it was cut short"
        )

    def fail(self, why: str) -> PackageError:
        return PackageError(f"line {self.number} of the package: {why}")

    def expect(self, *allowed: str) -> str:
        line = self.next(" or ".join(repr(a) for a in allowed))
        if line not in allowed:
            raise self.fail(
                f"expected {' or '.join(repr(a) for a in allowed)}, found {line[:80]!r}"
            )
        return line


def read_header(line: str) -> tuple[int, PackageHeader]:
    """The schema version a package was written in, and its header (as the current
    version), from its first line (``PackageError`` if it is not one)."""
    text = line.strip()
    if not text.endswith(","):
        raise PackageError("line 1 of the package is not a memsync export header")
    try:
        raw = json.loads(text[:-1] + "}")
    except json.JSONDecodeError as exc:
        raise PackageError(f"line 1 of the package is not a JSON header: {exc}") from exc
    header = check_header(raw)
    return int(raw["schema_version"]), header  # check_header read it: 1 or 2


def check_header(raw: object) -> PackageHeader:
    """Validate a package's opening fields, the schema version first; a header of an
    older version that is read is read as the current version."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise PackageError(f"this is not a memsync export package (format is not {FORMAT!r})")
    if check_version(raw.get("schema_version")) == 1:
        raw = upgrade_header(raw)
    fields = {k: raw.get(k) for k in PackageHeader.model_fields if k in raw}
    try:
        return PackageHeader.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PackageError(f"package header field {where!r}: {first['msg']}") from exc


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PackageError(f"it is not JSON: {exc}") from exc


def read_package(lines: Iterable[str]) -> Iterator[PackageHeader | Item | Totals]:
    """The header, then every item in order, then the totals (checked against what was
    read). Raises ``PackageError`` at the first thing out of place."""
    r = _Reader(lines)
    version, header = read_header(r.next("the header"))
    yield header
    counts = dict.fromkeys(Section, 0)
    for section in Section:
        if section in SENSITIVE_SECTIONS and not header.includes_sensitive:
            if section is SENSITIVE_SECTIONS[0]:
                r.expect('"sensitive":null,')
            continue
        if section is SENSITIVE_SECTIONS[0]:
            r.expect('"sensitive":{')
        r.expect(f'"{_section_name(section)}":[')
        closing = "]" if section is SENSITIVE_SECTIONS[-1] else "],"
        model = ITEM_MODELS[section]
        while True:
            line = r.next(f"the end of section {section.value}")
            if line == closing:
                break
            text = line[1:] if counts[section] and line.startswith(",") else line
            if not text.startswith("{"):
                raise r.fail(f"expected an item of section {section.value} or {closing!r}")
            try:
                if version == 1 and section in RECORD_SECTIONS:
                    item = model.model_validate(upgrade_record(_json(text)))
                else:
                    item = model.model_validate_json(text)
            except PackageError as exc:
                raise r.fail(f"item {counts[section]} of section {section.value}: {exc}") from exc
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(item)"
                raise r.fail(
                    f"item {counts[section]} of section {section.value} is invalid at "
                    f"{where!r}: {first['msg']}"
                ) from exc
            counts[section] += 1
            yield Item(section, item)
        if section is SENSITIVE_SECTIONS[-1]:
            r.expect("},")
    last = r.next("the totals")
    signed = last.startswith('"totals":') and last.endswith("},")
    if not (last.startswith('"totals":') and last.endswith("}}")) and not signed:
        raise r.fail("expected the totals that close the package")
    try:
        totals = Totals.model_validate_json(last[len('"totals":') : -1])
    except ValidationError as exc:
        raise r.fail(f"the totals are invalid: {exc.errors()[0]['msg']}") from exc
    for section in Section:
        if totals.of(section) != counts[section]:
            raise PackageError(
                f"section {section.value} holds {counts[section]} item(s) but the totals "
                f"say {totals.of(section)}: the package is incomplete or was altered"
            )
    if signed:  # a signed file: its trailer closes it (checked by ``signing.verify``)
        trailer = r.next("the signature that closes a signed package")
        if not (trailer.startswith(TRAILER_PREFIX) and trailer.endswith("}}")):
            raise r.fail("expected the signature that closes a signed package")
    for extra in r.lines:
        if extra.strip():
            raise PackageError("there is text after the totals that close the package")
    yield totals
