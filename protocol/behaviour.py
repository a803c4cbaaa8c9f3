"""Behaviour rules: what a rule about the assistant's own conduct may say.

Invariants:
- A behaviour rule is about how the assistant itself behaves (how it answers, in what
  tone, language or format, when it reminds or interrupts). It is never authority: a
  rule that would act in the world ("pay my bills", "order my coffee"), move money,
  share data, or grant a permission ("you may … without asking") is refused with a
  reason, whoever proposes it and however it is phrased.
- The check is pure and deterministic; ``rule_problem`` returns the reason or None.
"""

from __future__ import annotations

import re

# Verbs (and their common forms) that act in the world or on someone else's behalf.
_ACTIONS = (
    "pay|pays|paying|paid|transfer|transfers|transferring|wire|wiring|send money|"
    "buy|buys|buying|purchase|purchasing|order(?:s|ing)? (?:a|an|the|my|me|some|food|coffee)|"
    "book|books|booking|"
    "reserve|reserving|subscribe|subscribing|unsubscribe|cancel|cancelling|canceling|"
    "sign|signing|approve|approving|accept payment|invest|investing|sell|selling|"
    "donate|donating|withdraw|withdrawing|deposit|depositing|delete|deleting|"
    "share|sharing|forward|forwarding|post|posting|publish|publishing|email|emailing|"
    "text|texting|call|calling|log in|login|unlock|open the door|renew|renewing|"
    "settle|settling|refund|charge|charging|spend|spending"
)
_ACTION = re.compile(rf"\b(?:{_ACTIONS})\b")
_PERMISSION = re.compile(
    r"\b(?:without (?:asking|confirmation|checking|telling)|you may|you can always|"
    r"allowed to|permission|authori[sz]e[sd]?|on my behalf|in my name|automatically)\b"
)
_MONEY = re.compile(r"(?:\baccount\b|\biban\b|\bbank\b|\bcard\b|[$€£]\s?\d|\b\d{6,}\b)")
# What a rule about the assistant's own conduct talks about.
_ASPECTS = re.compile(
    r"\b(?:answer|answers|reply|replies|response|responses|tone|language|format|"
    r"formatting|summary|summaries|summar\w*|explanation|explanations|explain|detail|"
    r"details|short|shorter|brief|concise|longer|bullet|bullets|list|lists|emoji|emojis|"
    r"formal|informal|casual|polite|remind|reminders?|notify|notifications?|interrupt|"
    r"suggest|suggestions?|ask|questions?|greet|greeting|units?|metric|imperial|"
    r"celsius|fahrenheit|voice|speak|talk|call me|address me|jargon|examples?|quiet|"
    r"morning|evening|weekend|weekends)\b"
)


def rule_problem(text: str) -> str | None:
    """Why ``text`` cannot be a behaviour rule, or None if it can."""
    lowered = " ".join(text.lower().split())
    action = _ACTION.search(lowered.replace("call me", "address me"))
    if action is not None:
        return (
            f"a behaviour rule is about how the assistant behaves, never an action in the "
            f"world: {text!r} asks it to {action.group(0)!r}; memory is not authority"
        )
    permission = _PERMISSION.search(lowered)
    if permission is not None:
        return (
            f"a behaviour rule cannot grant a permission: {text!r} says "
            f"{permission.group(0)!r}; memory is not authority"
        )
    if _MONEY.search(lowered) is not None:
        return f"a behaviour rule cannot name accounts, cards or amounts: {text!r}"
    if _ASPECTS.search(lowered) is None:
        return (
            f"{text!r} does not say how the assistant should answer, sound or remind; "
            "a behaviour rule is only about the assistant's own conduct"
        )
    return None


def is_assistant_aspect(subject: str) -> bool:
    """Whether an observed subject is about the assistant's own conduct (a rule may
    be proposed from it) rather than about the world."""
    lowered = " ".join(subject.lower().split())
    return _ASPECTS.search(lowered) is not None and _ACTION.search(lowered) is None


def rule_text(subject: str, value: str) -> str:
    """The proposed rule for an observed preference about the assistant's conduct."""
    return f"Use {value.strip()} {subject.strip()}."
