"""The simulator's errors: each names what it is about (the device, process, fault or
setting) and why.

Invariant: an error is raised before anything is changed (a bad rate or size refuses
the run before a cloud, a user or a device exists; a refused request to the simulator
changes nothing).
"""

from __future__ import annotations


class SimulatorError(Exception):
    """Base of every error the simulator raises on purpose."""


class FaultSpecError(SimulatorError, ValueError):
    """A fault, fault plan or clock was described wrongly."""


class FleetError(SimulatorError):
    """A fleet was asked for something it cannot do (a crashed device, an unknown name)."""


class CloudProcessError(SimulatorError):
    """A cloud process did not start, or was asked for something it cannot do."""


class InvalidRunSettings(SimulatorError):
    """A run's sizes or rates are out of range (the message names the setting)."""


class ProcessDidNotDie(SimulatorError):
    """A device process meant to SIGKILL itself at a sync point ended another way."""


class CrashPointNotReached(ProcessDidNotDie):
    """The device process finished its sync (exit 0) without reaching the crash point,
    e.g. ``push_answered`` when the queue emptied before the push (a pull shredded the
    record its ops named). The sync did complete."""


class UnknownCrashPoint(SimulatorError):
    """A crash point that ``device.faults`` does not know."""


class DeviceNotReady(SimulatorError):
    """An action needs a device in another state (e.g. online to be killed mid-sync)."""
