"""How a new statement relates to one the user had: correction, addition, exception,
conflict, or unrelated. Decided once, here, for device, cloud and consolidator alike.

Invariants:
- ``relate`` is pure and deterministic; its inputs are the two sentences (each with the
  sentence that gave it its subject, if any) and where each came from.
- Only two statements about the same holder and the same attribute can be anything but
  unrelated; statements about different people or things never touch each other.
- A correction needs evidence: a correction cue ("actually", "no wait", "not X", "no
  longer", "now", "these days", "switched"...) or a negation of the old value. Two
  values of a single-valued attribute with no cue are a conflict, whether or not the
  attribute ordinarily changes (where one lives, a favorite): age alone never makes
  the newer win. The same value said again is an addition: nothing became untrue;
  two sentences that name only different numbers never say the same value.
- A follow-up with no subject of its own, said after a sentence no frame reads, is
  about that very sentence (``Statement.after``) and nothing else.
  A many-valued attribute (allergies, languages, pets...) gains an addition unless the
  user denies the old value or says plainly they misspoke.
- Where it is unsure it says *conflict* (both kept, flagged, retrieved together), never
  a silent supersede; a statement from another kind of source that disagrees with the
  user is a conflict too.
- A one-off ("make it decaf today") beside a lasting record is an exception: the
  lasting record is untouched; a one-off that corrects ("No wait, it's on the 17th.")
  is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocol import subjects
from protocol.model import StatementRelation
from protocol.statements import Statement, parse, with_context


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: StatementRelation
    evidence: str


def statement_of(text: str, context_text: str | None = None) -> Statement:
    """A record's statement, read with the sentence that gave it its subject."""
    own = parse(text)
    if context_text and own.needs_context:
        return with_context(own, parse(context_text))
    return own


def _cues(s: Statement) -> str:
    cues = [*s.markers, *s.change_words]
    if s.rejected:
        cues.append("not " + " ".join(s.rejected))
    if s.negated:
        cues.append("negation")
    return ", ".join(dict.fromkeys(cues))


def _overlap(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return bool(set(a) & set(b))


def _same_value(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return False
    x, y = set(a), set(b)
    small = min(len(x), len(y))
    return x == y or (small >= 2 and (x <= y or y <= x))


NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def _numbers(s: Statement) -> set[str]:
    return set(NUMBER.findall(s.core))


def _different_numbers(new: Statement, old: Statement) -> bool:
    """Both sentences name numbers and no number is shared: "married in 2004" and
    "married in 2006" are not the same value, whatever the frame kept of them."""
    a, b = _numbers(new), _numbers(old)
    return bool(a and b and not (a & b))


def _grew(new: Statement, old: Statement) -> bool:
    """Both name one whole number and the new one is larger (an age said later)."""
    a, b = _numbers(new), _numbers(old)
    if len(a) != 1 or len(b) != 1 or not (a | b) <= {n for n in a | b if n.isdigit()}:
        return False
    return int(next(iter(a))) > int(next(iter(b)))


def same_subject(new: Statement, old: Statement) -> str | None:
    """Why the two are about the same holder and attribute (None: they are not)."""
    if (new.after is not None and new.after == old.core) or (
        old.after is not None and old.after == new.core
    ):
        # a follow-up of a sentence no frame reads ("The party starts at seven.
        # Actually, it's at eight now."): about what that very sentence said
        return "it goes on from the sentence you had just said"
    if new.framed and old.framed:
        if new.whom != old.whom or not _same_attribute(new, old):
            return None
        if new.np and old.np and not (set(new.np) <= set(old.np) or set(old.np) <= set(new.np)):
            return None  # "spare key" is not "car key"
        return f"both say {_what(new)} of {_whom(old.holder)}"
    if new.whom is not None and old.whom is not None and new.whom != old.whom:
        return None  # about different people or things
    if subjects.same_subject(new.text, None, old.text, None):
        return "both sentences open with the same words"
    return None


def _same_attribute(new: Statement, old: Statement) -> bool:
    """The same attribute; "we switched memberships" names the thing, not whether its
    place or its value changed, so it meets any attribute of that thing."""
    if new.attribute == old.attribute:
        return True
    assert new.attribute is not None and old.attribute is not None
    if "favorite" in (new.attribute, old.attribute) and (
        new.attribute.startswith("favorite") and old.attribute.startswith("favorite")
    ):
        return True  # "my favourite is rooibos now" after "my favourite tea is ..."
    name = new.attribute.partition(" #")[0]
    if name != old.attribute.partition(" #")[0]:
        return False
    # where one works and as what are two attributes, unless the user says they changed
    # ("I changed jobs, I'm a sound designer at Parallax now")
    return new.switch or old.switch or (name == "work" and new.corrects)


def _what(s: Statement) -> str:
    assert s.attribute is not None
    name, _, kind = s.attribute.partition(" #")
    return repr(f"{' '.join(s.np) or name} ({kind})" if kind else (" ".join(s.np) or name))


def _whom(holder: str | None) -> str:
    if holder is None:
        return "it"
    return "you" if holder == "i" else holder if holder.startswith("the ") else f"your {holder}"


def relate(
    new: Statement,
    old: Statement,
    *,
    same_source: bool = True,
    new_one_off: bool = False,
    old_one_off: bool = False,
) -> Verdict:
    """How ``new`` (said later) relates to ``old``. ``same_source``: both are the user's
    own statements (else a disagreement is a conflict, never a correction)."""
    why = same_subject(new, old)
    if why is None:
        return Verdict(StatementRelation.UNRELATED, "about something else")
    cues = _cues(new)
    same_value = (
        _same_value(new.value, old.value)
        and new.negated == old.negated
        and not _different_numbers(new, old)
    )
    denies_old = (
        new.negated and not old.negated and (not new.value or _overlap(new.value, old.value))
    ) or _overlap(new.rejected, old.value)
    one_off = new.exception is not None or new_one_off != old_one_off
    if one_off and not (new.corrects or denies_old):
        # a one-off beside a lasting record ("make it decaf today"); two one-offs (two
        # dates of one event) relate like any two statements
        word = new.exception or "a one-off"
        return Verdict(
            StatementRelation.EXCEPTION,
            f"{why}; {word!r} makes it a one-off, the lasting record stands",
        )
    if same_value:
        # said again (or a source agrees): nothing became untrue, so both stay current
        who = "you said the same again" if same_source else "another source says the same"
        return Verdict(StatementRelation.ADDITION, f"{why}; {who}")
    if not same_source:
        return Verdict(StatementRelation.CONFLICT, f"{why}, and the sources disagree")
    if new.follows and not (new.corrects or denies_old):
        # "It's the only hour I really switch off." after "My yoga class is on ...": it
        # says more about what was just said, it does not replace it
        return Verdict(StatementRelation.ADDITION, f"{why}; it goes on from what you said")
    if new.negated and not old.negated and not denies_old:
        # "my favorite number is not 1729" leaves "my favorite number is 7" standing
        return Verdict(StatementRelation.ADDITION, f"{why}; the denial does not touch it")
    if denies_old:
        return Verdict(StatementRelation.CORRECTION, f"{why}; you denied the old value ({cues})")
    if new.many or old.many:
        if new.strong_correction and not new.additive:
            return Verdict(StatementRelation.CORRECTION, f"{why}; you corrected yourself ({cues})")
        if new.markers and not new.additive and not new.change_words:
            return Verdict(
                StatementRelation.CONFLICT,
                f"{why}; it can hold several values and '{cues}' may or may not replace one",
            )
        return Verdict(
            StatementRelation.ADDITION, f"{why}; it can hold several values, so both stand"
        )
    if new.corrects:
        return Verdict(StatementRelation.CORRECTION, f"{why}; you changed it ({cues})")
    if new.attribute == "age" and _grew(new, old):
        return Verdict(
            StatementRelation.CORRECTION, f"{why}; an age only goes up, so the newer wins"
        )
    if (new.single or old.single) and (new.mutable or old.mutable):
        # it may well have changed, but nothing the user said says it did: the newer
        # is not allowed to win on its age alone (both kept, flagged, asked together)
        return Verdict(
            StatementRelation.CONFLICT,
            f"{why}; it holds one value that can change, the two differ and nothing "
            "says the new one replaces the old",
        )
    if new.single or old.single:
        return Verdict(
            StatementRelation.CONFLICT,
            f"{why}; it holds one value, the two differ and nothing says which is wrong",
        )
    return Verdict(
        StatementRelation.CONFLICT,
        f"{why}, with another value and no sign that one replaces the other",
    )
