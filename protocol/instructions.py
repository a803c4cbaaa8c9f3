"""Instruction-shaped text: what external content may say but never makes true by itself.

Invariants:
- Pure and deterministic: ``instruction_shape(text)`` names the first reason the text
  reads as an instruction (an imperative to the assistant, a payment or an account, a
  credential, an "always/never" rule), or None.
- It leans to the safe side: a false alarm only means the user confirms a claim in two
  steps instead of one, or a claim stays a candidate until the user looks at it; a miss
  would let a page that says "remember: always pay to this account" become memory.
"""

from __future__ import annotations

import re

_IMPERATIVE = re.compile(
    r"^(?:please\s+|kindly\s+|note:\s*|important:\s*|reminder:\s*|assistant[,:]\s*)?"
    r"(?:remember|memori[sz]e|note|store|save|keep in mind|always|never|don'?t|do not|"
    r"make sure|be sure|ensure|ignore|disregard|forget|stop|start|send|pay|transfer|wire|"
    r"deposit|click|reply|respond|call|use|set|tell|update|change|add|delete|remove|"
    r"forward|share|sign|log in|login|verify|confirm|approve|buy|order|book|from now on)\b"
)
_TO_ASSISTANT = re.compile(
    r"\b(?:you (?:must|should|need to|have to|will|are to)|the assistant|ai assistant|"
    r"your instructions|new instructions|system prompt|from now on|going forward|"
    r"in future|in the future|next time)\b"
)
_PAYMENT = re.compile(
    r"\b(?:pay|pays|paid|paying|payment|payments|payee|transfer|transfers|wire|wiring|"
    r"invoice|invoices|iban|swift|bic|sort code|routing number|account number|account no|"
    r"bank details|bank account|beneficiary|remit|remittance|bitcoin|btc|crypto|wallet|"
    r"gift card|gift cards)\b|[$\u20ac\u00a3]\s?\d|\b\d{6,}\b|\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){3,}"
)
_CREDENTIAL = re.compile(
    r"\b(?:password|passwords|passcode|passphrase|pin|pin code|login|log-in|username|"
    r"one-time code|otp|2fa|verification code|security code|security question|api key|"
    r"access token|token|secret key|private key|seed phrase|recovery phrase|ssh key)\b"
)
_RULE = re.compile(r"\b(?:always|never|every time|whenever|at all times|no matter what)\b")


def instruction_shape(text: str) -> str | None:
    """Why ``text`` reads as an instruction rather than a plain claim, or None."""
    lowered = " ".join(text.casefold().replace("\u2019", "'").split())
    checks = (
        (_PAYMENT, "it names a payment, an account or an amount"),
        (_CREDENTIAL, "it names a password, code or other credential"),
        (_TO_ASSISTANT, "it tells the assistant what to do"),
        (_RULE, "it states an always/never rule"),
    )
    for pattern, reason in checks:
        found = pattern.search(lowered)
        if found is not None:
            return f"{reason} ({found.group(0).strip()!r})"
    imperative = _IMPERATIVE.search(lowered)
    if imperative is not None:
        return f"it is an instruction ({imperative.group(0).strip()!r})"
    return None
