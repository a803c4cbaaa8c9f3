"""Protocol versions: the range this code speaks, and how a field says when it was born.

Invariants:
- Every wire message carries ``protocol_version``; a side accepts exactly one closed
  range of versions and refuses anything else naming that range.
- This code speaks ``LOWEST_VERSION`` to ``PROTOCOL_VERSION``; a cloud may be
  configured to accept a narrower range, never a wider one.
- A field added after version 1 is declared once, on its model, with a ``Since``
  marker in its metadata; ``protocol.versioned`` renders and parses a message for one
  version from that marker. There is no per-version copy of any model.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import UnsupportedProtocolVersion

LOWEST_VERSION: int = 1
PROTOCOL_VERSION: int = 4  # the newest version this code speaks
SUPPORTED_VERSIONS: tuple[int, int] = (LOWEST_VERSION, PROTOCOL_VERSION)

VersionRange = tuple[int, int]


@dataclass(frozen=True)
class Since:
    """Field metadata: the field exists on the wire from protocol ``version`` on."""

    version: int


def check_range(versions: object) -> VersionRange:
    """Return ``versions`` if it is a non-empty range inside what this code speaks."""
    if (
        not isinstance(versions, tuple)
        or len(versions) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in versions)
    ):
        raise ValueError(f"a protocol version range is a pair (low, high), got {versions!r}")
    low, high = versions
    if not LOWEST_VERSION <= low <= high <= PROTOCOL_VERSION:
        raise ValueError(
            f"protocol version range {low} to {high} is not inside the versions this code "
            f"speaks ({LOWEST_VERSION} to {PROTOCOL_VERSION}), or is empty"
        )
    return (low, high)


def check_version(version: object, supported: VersionRange = SUPPORTED_VERSIONS) -> int:
    """Return ``version`` if it is in ``supported``, else raise ``UnsupportedProtocolVersion``."""
    low, high = supported
    if isinstance(version, bool) or not isinstance(version, int) or not low <= version <= high:
        raise UnsupportedProtocolVersion(version, low, high)
    return version


def common_version(mine: VersionRange, theirs: VersionRange) -> int | None:
    """The highest version both ranges hold, or None when they do not overlap."""
    low = max(mine[0], theirs[0])
    high = min(mine[1], theirs[1])
    return high if low <= high else None
