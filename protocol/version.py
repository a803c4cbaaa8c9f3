"""Protocol versions.

Invariant: every wire message carries ``protocol_version``; a side accepts exactly
the closed range ``SUPPORTED_VERSIONS`` and refuses anything else by name.
"""

from __future__ import annotations

from protocol.errors import UnsupportedProtocolVersion

PROTOCOL_VERSION: int = 1
SUPPORTED_VERSIONS: tuple[int, int] = (1, 1)


def check_version(version: object) -> int:
    """Return ``version`` if it is supported, else raise ``UnsupportedProtocolVersion``."""
    low, high = SUPPORTED_VERSIONS
    if isinstance(version, bool) or not isinstance(version, int) or not low <= version <= high:
        raise UnsupportedProtocolVersion(version, low, high)
    return version
