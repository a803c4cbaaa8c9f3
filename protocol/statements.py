"""What one sentence the user typed says: about whom, which attribute, which value, and
the cues around it. No language model: discourse markers, contractions, possessive and
verb frames, and small lexicons.

Invariants:
- ``parse`` is a pure, deterministic function of the sentence (case, punctuation and
  curly quotes do not matter); device, cloud and consolidator read a sentence alike.
- Discourse markers ("Actually,", "No wait,", "Sorry,", "Oh and", "Correction:",
  "Scratch that,") never count as the subject: they are stripped and kept as cues.
- ``holder`` says whom the statement is about ("i" for the user, also "we"/"our");
  ``attribute`` says what about them; ``value`` is the rest, without filler words. A
  sentence with no subject of its own ("No wait, it's on the 17th.") has
  ``needs_context`` and takes holder and attribute from ``with_context``.
- Where no frame fits, ``holder`` and ``attribute`` are None: the caller must then be
  unsure, never confident (``protocol.relating``).

The frames are in ``protocol.statement_frames``, the tables of words in
``protocol.statement_words``; ``Statement`` and the marker sets are re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from protocol.statement_frames import Statement, frame_clause, says_change, value_words
from protocol.statement_words import (
    ADDITIVE_MARKERS,
    BARE_WORDS,
    CHANGE_WORDS,
    CLAUSE_SPLIT,
    CONTRACTION_RE,
    CONTRACTIONS,
    CORRECTION_MARKERS,
    EXCEPTION_RE,
    EXPLICIT_FOLLOW_UP,
    FINAL,
    GAVE_UP,
    LASTING_FROM,
    MARKER_RE,
    META_CLAUSE,
    META_WORDS,
    POSSESSIVE_RE,
    STRONG_MARKERS,
    USER,
)

__all__ = [
    "CORRECTION_MARKERS",
    "STRONG_MARKERS",
    "USER",
    "Statement",
    "fold",
    "needs_context",
    "parse",
    "strip_markers",
    "with_context",
]


def fold(text: str) -> str:
    """Lower case, straight quotes, contractions expanded, whitespace collapsed."""
    s = text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "'").casefold()
    s = re.sub(r"[\"\u201c\u201d()\[\]]", " ", s)
    s = CONTRACTION_RE.sub(lambda m: CONTRACTIONS[m.group(0)], s)
    s = POSSESSIVE_RE.sub(r"\1 's", s)
    return re.sub(r"\s+", " ", s).strip()


def strip_markers(folded: str) -> tuple[str, tuple[str, ...]]:
    """The sentence without its leading discourse markers, and the markers."""
    found: list[str] = []
    s = folded
    while True:
        m = MARKER_RE.match(s)
        if m is None or m.end() == 0:
            break
        marker = re.sub(r"[\s,:;.!\-]+$", "", m.group(0))
        rest = s[m.end() :]
        # "no", "so", "well", "right", "yes" are markers only when punctuation follows
        # them ("No, it's ..."), so they never eat the subject of "so far" or "no one"
        punctuated = re.search(r"[,:;.!\-]", m.group(0)[len(marker) :]) is not None
        if not rest or (marker in BARE_WORDS and not punctuated):
            break
        found.append(marker)
        s = rest
    return s, tuple(found)


@lru_cache(maxsize=8192)
def parse(text: str) -> Statement:
    """What ``text`` says (see the module's invariants). Cached: it is pure, and a
    write reads the same sentences for its keys, its lookup and its relations."""
    folded = FINAL.sub("", fold(text))
    core, markers = strip_markers(folded)
    core = re.sub(r"\b(?:actually|honestly|really)\b\s*,?\s*", "", core).strip()
    inner_markers = tuple(
        m for m in ("actually", "i meant") if re.search(rf"\b{m}\b", folded) and m not in markers
    )
    markers = markers + inner_markers
    if re.match(r"^(?:make (?:it|that)|change (?:it|that) to)\b", core) and not (
        EXCEPTION_RE.search(core)
    ):
        # "make that thursday" replaces; "make it decaf today" is a one-off
        markers = (*markers, "make that")
    change = tuple(
        sorted(
            {w for w in re.findall(r"[a-z]+", core) if w in CHANGE_WORDS}
            | ({"anymore"} if "any more" in core else set())
            | ({"used to"} if re.search(r"\bused to\b", core) else set())
            | ({"these days"} if re.search(r"\bthese days\b", core) else set())
            | ({"from now on"} if LASTING_FROM.search(core) else set())
        )
    )
    additive = bool(
        any(m in ADDITIVE_MARKERS for m in markers)
        or re.search(r"\b(?:also|too|as well|another|as well as|besides)\b", core)
    )
    # "from today on" starts a lasting change; "today" alone is a one-off
    exc = EXCEPTION_RE.search(LASTING_FROM.sub(" ", core))
    clauses = [c for c in CLAUSE_SPLIT.split(core) if c and not META_CLAUSE.match(c)]
    rejected: list[str] = []
    frames: list[Statement] = []
    for clause in clauses:
        m = re.match(r"^(?:and\s+)?(?:not|rather than|instead of)\s+(.+)$", clause)
        if m and frames:
            rejected.extend(value_words(m.group(1)))
            continue
        m = GAVE_UP.match(clause)
        if m:
            # "i gave up spanish, i'm learning italian now": what is no longer so
            rejected.extend(value_words(m.group(1)))
            continue
        inner = re.search(r"\b(?:instead of|rather than)\s+(.+)$", clause)
        if inner:
            rejected.extend(value_words(inner.group(1)))
            clause = clause[: inner.start()].strip()
        frame = frame_clause(clause)
        if frame is not None:
            frames.append(frame)
    framed = [f for f in frames if f.framed]
    opens_with_value = (
        clauses
        and frames
        and frames[0].text == clauses[0]
        and frames[0].needs_context
        and (bool(markers) or clauses[0].startswith(("it ", "that ", "make ", "change ")))
    )
    if opens_with_value:
        # it opens with a value and no subject ("no, the 5th, the garage called back"):
        # a follow-up of what was just said; the clauses after it explain it
        framed = []
    # the clause that says a value of its own wins over one that only names what changed
    # ("we switched plumbers, our plumber is rita now")
    chosen: Statement | None = next(
        (f for f in framed if f.value and not f.negated and says_change(f.text)),
        next(
            (f for f in framed if f.value and not f.negated),
            next((f for f in framed if f.value), framed[0] if framed else None),
        ),
    )
    switched = next((f for f in framed if f.switch), None)
    if switched is not None and not switched.value:
        # "i changed cars, i drive a skoda now": what changed is the switch's attribute,
        # its new value the next clause's
        said = next((f.value for f in frames if f is not switched and f.value), ())
        chosen = replace(switched, value=said) if said else switched
    if chosen is not None and not chosen.negated:
        # "sofie isn't my manager anymore, my manager is erik": the denied value
        for f in framed:
            if f.negated and f.key == chosen.key:
                rejected.extend(f.value)
    later = [f for f in frames if f.needs_context and f.value]
    if chosen is not None and not chosen.value and later:
        # "we switched plumbers, it is rita osei now": the value from a subjectless clause
        chosen = replace(chosen, value=later[0].value)
    elif chosen is not None and chosen.negated and later:
        # "the boat is not at långedrag anymore, it is in the dry dock": denied, then said
        rejected.extend(chosen.value)
        chosen = replace(chosen, value=later[0].value, negated=False)
    if chosen is None:
        sub = next((f for f in frames if f.needs_context), None)
        if sub is not None and not (markers or EXPLICIT_FOLLOW_UP.match(sub.text)):
            # a bare value with no cue ("Keep this other one.", "Thanks!") follows nothing
            sub = replace(sub, needs_context=False)
        if sub is not None:
            chosen = sub
        elif not frames:
            # a bare value: "the 17th", "thursday", "oslo, not rome"
            bare = value_words(clauses[0] if clauses else core)
            chosen = Statement(
                text=text, core=core, value=bare,
                needs_context=bool(markers) and not set(bare) <= META_WORDS,
            )  # fmt: skip
        else:
            chosen = frames[0]
    negated = chosen.negated
    value = chosen.value
    # "... in oslo, not rome" / "... not rome but oslo": split the affirmed from the denied
    m = re.search(r"\bnot\s+([a-z0-9' -]+?)\s+but\s+(.+)$", core)
    if m:
        rejected.extend(value_words(m.group(1)))
        negated = False
    if rejected and negated and not m:
        negated = bool(re.search(r"\b(?:not|never|no longer)\b", clauses[0] if clauses else ""))
    return replace(
        chosen,
        text=text,
        core=core,
        value=tuple(v for v in value if v not in rejected),
        negated=negated,
        rejected=tuple(rejected),
        markers=markers,
        change_words=tuple(sorted({*change, *chosen.change_words})),
        exception=exc.group(0) if exc else None,
        additive=additive and not (set(markers) & STRONG_MARKERS),
    )


def with_context(statement: Statement, context: Statement) -> Statement:
    """A subjectless statement read with the subject of the sentence before it. When
    that sentence fits no frame, the statement keeps no guessed holder or attribute: it
    is about whatever that one sentence said (``after``), so it relates to it alone."""
    if not statement.needs_context:
        return statement
    if not context.framed:
        if context.needs_context or not context.core:
            return statement
        return replace(statement, needs_context=False, follows=True, after=context.core)
    return replace(
        statement,
        holder=context.holder,
        attribute=context.attribute,
        many=context.many,
        single=context.single,
        mutable=context.mutable,
        np=context.np,
        needs_context=False,
        follows=True,
    )


def needs_context(text: str) -> bool:
    """Whether ``text`` has no subject of its own (it takes the previous sentence's)."""
    return parse(text).needs_context
