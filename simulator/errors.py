"""The simulator's errors: each names what was asked and why it cannot be done.

Invariant: an error is raised before anything is changed (a bad rate or size refuses
the run before a cloud, a user or a device exists).
"""

from __future__ import annotations


class SimulatorError(Exception):
    """Base of every error the simulator raises on purpose."""


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
