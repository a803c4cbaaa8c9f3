"""The package's schema versions: which a reader reads, and version 1 read as version 2.

Invariants:
- A reader reads exactly ``READABLE_SCHEMA_VERSIONS``; any other ``schema_version``
  (absent, not a number, a version not yet known) is refused by ``check_version`` with a
  message naming the version found and the versions known.
- Version 2 differs from version 1 only in each record version: beside its content it
  states ``provenance`` and ``verification``. A version-1 package is read as the
  version-2 package it would have been: ``upgrade_record`` adds to each record version
  the provenance and verification ``protocol.provenance`` reads from its content (the
  content's own fields when it holds them), and the header reads as version 2. The
  content itself is left exactly as it was.
- A version-1 record version that already has a field beside its content that version 1
  did not have is refused (``PackageError``): version 1 refused unknown fields, so it
  is not a version-1 package. Anything else wrong is left for the models to refuse.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from protocol.errors import PackageError
from protocol.export.package import PACKAGE_SCHEMA_VERSION, READABLE_SCHEMA_VERSIONS, Section
from protocol.model import RecordContent
from protocol.provenance import provenance_of, verification_of

RECORD_SECTIONS = (Section.RECORDS, Section.BEHAVIOUR_RULES, Section.SENSITIVE_RECORDS)
NEW_IN_2 = ("provenance", "verification")  # beside a record version's content


def known_versions() -> str:
    """ "1 and 2": the versions this memsync reads, for a message."""
    *head, last = (str(v) for v in READABLE_SCHEMA_VERSIONS)
    return f"{', '.join(head)} and {last}" if head else last


def check_version(version: object) -> int:
    """``version`` when a reader reads it; else ``PackageError`` naming it and the known."""
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or version not in READABLE_SCHEMA_VERSIONS
    ):
        raise PackageError(
            f"the package has schema version {version!r}; this memsync reads schema "
            f"versions {known_versions()}"
        )
    return version


def upgrade_header(raw: dict[str, Any]) -> dict[str, Any]:
    """A version-1 header (or whole package) as version 2: its version number only."""
    return {**raw, "schema_version": PACKAGE_SCHEMA_VERSION}


def upgrade_record(raw: object) -> object:
    """A version-1 ``ExportedRecord`` (parsed JSON) as version 2: each version with the
    provenance and verification read from its content. What is not shaped like a record
    is returned unchanged, for the models to refuse with their reason."""
    if not isinstance(raw, dict) or not isinstance(raw.get("versions"), list):
        return raw
    return {**raw, "versions": [_upgrade_version(v) for v in raw["versions"]]}


def _upgrade_version(raw: object) -> object:
    if not isinstance(raw, dict):
        return raw
    present = [name for name in NEW_IN_2 if name in raw]
    if present:
        raise PackageError(
            f"a record version of a schema version 1 package has {', '.join(present)} beside "
            "its content, which version 1 does not have (version 2 does)"
        )
    try:
        content = RecordContent.model_validate(raw.get("content"))
    except ValidationError:
        return raw  # the models refuse it, naming where
    verification = verification_of(content)
    return {
        **raw,
        "provenance": provenance_of(content).model_dump(mode="json"),
        "verification": None if verification is None else verification.model_dump(mode="json"),
    }


def upgrade_package(raw: dict[str, Any]) -> dict[str, Any]:
    """A whole version-1 package (parsed JSON) as version 2."""
    out = upgrade_header(raw)
    for section in (Section.RECORDS, Section.BEHAVIOUR_RULES):
        held = out.get(section.value)
        if isinstance(held, list):
            out[section.value] = [upgrade_record(r) for r in held]
    sensitive = out.get("sensitive")
    if isinstance(sensitive, dict) and isinstance(sensitive.get("records"), list):
        records = [upgrade_record(r) for r in sensitive["records"]]
        out["sensitive"] = {**sensitive, "records": records}
    return out
