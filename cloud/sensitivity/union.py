"""How sensitivity verdicts combine: a record is sensitive when any checker says so.

Invariants: pure. ``union`` never lowers: ``normal`` comes out only when every verdict
is ``normal`` (or absent); otherwise the first sensitive verdict in the order given
wins (the device's first, then the cloud's checks in chain order), so a class the
device named is kept as it was. The rules (``protocol.rules``) then keep a sensitive
background record a candidate until the user confirms it.
"""

from __future__ import annotations

from protocol.model import Sensitivity


def union(*verdicts: Sensitivity | None) -> Sensitivity:
    """The first sensitive verdict, else ``normal``."""
    for verdict in verdicts:
        if verdict is not None and verdict is not Sensitivity.NORMAL:
            return verdict
    return Sensitivity.NORMAL
