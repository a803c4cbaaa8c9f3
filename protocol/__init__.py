"""memsync's pure protocol core: everything device and cloud must agree on.

Invariant: nothing in this package does I/O, reads a clock, or makes randomness it
was not handed. ``tests/protocol/test_purity.py`` enforces it.
"""

from protocol.version import PROTOCOL_VERSION, SUPPORTED_VERSIONS

__all__ = ["PROTOCOL_VERSION", "SUPPORTED_VERSIONS"]
