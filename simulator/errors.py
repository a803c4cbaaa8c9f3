"""The simulator's errors.

Invariant: every error names what it is about (the device, process or fault) and why;
a refused request to the simulator changes nothing.
"""

from __future__ import annotations


class SimulatorError(Exception):
    """Base of every error the simulator raises itself."""


class FaultSpecError(SimulatorError, ValueError):
    """A fault, fault plan or clock was described wrongly."""


class FleetError(SimulatorError):
    """A fleet was asked for something it cannot do (a crashed device, an unknown name)."""


class CloudProcessError(SimulatorError):
    """A cloud process did not start, or was asked for something it cannot do."""
