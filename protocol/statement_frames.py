"""The frames of one clause: possessive ("my sister's name is ..."), person, thing and
verb frames, each turning a folded clause into a ``Statement`` (holder, attribute,
value), and the ``Statement`` itself.

Invariants:
- Pure functions of the clause (already folded, markers stripped: ``statements``);
  where no frame fits, ``frame_clause`` gives None or a statement with no holder and
  attribute, so the caller stays unsure, never confident.
- ``holder`` "i" is the user (also "we"/"our"); values carry no filler words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from protocol.statement_words import (
    ADVERBS,
    CHANGE_WORDS,
    DETERMINERS,
    DIETS,
    FILLER,
    HAPPENS,
    LOCATIVE,
    MANY_VALUED,
    MANY_VERBS,
    MARITAL,
    META_WORDS,
    MOVED_BY_SOMEONE,
    MOVED_VERBS,
    MUTABLE_ATTRIBUTES,
    NOT_NAMES,
    NUMBER_WORDS,
    OCCUPATIONS,
    PARTICIPLES,
    PARTICIPLES_IRREGULAR,
    PERSON_WORDS,
    PREPOSITIONS,
    PRONOUNS,
    ROLE_WORDS,
    STRONG_MARKERS,
    TEMPORAL,
    USER,
    VALUE_OBJECT_VERBS,
    VERBISH,
    WORD,
    lemma,
)


@dataclass(frozen=True, slots=True)
class Statement:
    """What a sentence says, as far as frames and lexicons can tell."""

    text: str
    core: str  # lower case, contractions expanded, markers stripped, no final punctuation
    holder: str | None = None
    attribute: str | None = None
    value: tuple[str, ...] = ()
    negated: bool = False
    rejected: tuple[str, ...] = ()  # values explicitly denied: "..., not Rome"
    markers: tuple[str, ...] = ()  # leading discourse markers, as typed (folded)
    change_words: tuple[str, ...] = ()  # "now", "anymore", "switched", ...
    exception: str | None = None  # a time word that makes it a one-off ("today")
    additive: bool = False  # "also", "too", "another"
    many: bool = False  # the attribute can hold several values
    single: bool = False  # the attribute holds one value at a time
    needs_context: bool = False  # no subject of its own
    np: tuple[str, ...] = ()  # a thing's whole noun phrase ("gym membership")
    mutable: bool = False  # single-valued and ordinarily changes (where one lives)
    switch: bool = False  # "we switched plumbers": names the attribute, not the value
    follows: bool = False  # read with the subject of the sentence before it
    # a follow-up whose context sentence fits no frame: that sentence's core, so it
    # relates to that very sentence (and nothing else) without a guessed attribute
    after: str | None = None

    @property
    def framed(self) -> bool:
        return self.holder is not None and self.attribute is not None

    @property
    def strong_correction(self) -> bool:
        return any(m in STRONG_MARKERS for m in self.markers)

    @property
    def corrects(self) -> bool:
        return bool(self.markers and not self.additive) or bool(self.change_words)

    @property
    def whom(self) -> str | None:
        """The holder as one word: "brother diego" and "diego" are one person."""
        return None if self.holder is None else self.holder.split()[-1]

    @property
    def key(self) -> str | None:
        """The subject-index key of its frame (None: no frame)."""
        if not self.framed:
            return None
        assert self.attribute is not None
        # by name only: "membership" (switched) meets "membership #where", "work #as"
        # meets "work #at" (``protocol.relating`` decides whether they are one attribute)
        name = self.attribute.partition(" #")[0]
        if name.startswith("favorite"):
            name = "favorite"  # "my favourite is rooibos" meets "my favourite tea is ..."
        return f"{self.whom}|{name}"


def _singular(word: str) -> str:
    """ "gps" -> "gp", "flats" -> "flat" (a plural noun a switch names)."""
    if len(word) >= 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return lemma(word) if len(word) > 4 else word[:-1]
    return word


def says_change(clause: str) -> bool:
    """Whether a clause says its value is new ("our new landlord is ...", "... now")."""
    return bool(set(clause.split()) & CHANGE_WORDS)


def value_words(text: str) -> tuple[str, ...]:
    words = [w.strip("'.-/") for w in WORD.findall(text)]
    out = []
    for w in words:
        if not w or w in FILLER or w == "'s":
            continue
        out.append(lemma(w) if not w[0].isdigit() else w)
    return tuple(out)


def _np_head(words: list[str]) -> tuple[str, int]:
    """The head of a short noun phrase at the start of ``words`` (skipping "new",
    "current", "favorite" kept), and how many words it spans."""
    skip = {"new", "current", "old", "usual", "regular", "main", "only", "little", "big"}
    i = 0
    while i < len(words) and words[i] in skip:
        i += 1
    if i >= len(words):
        return "", i
    if words[i] in ("favorite", "favourite") and i + 1 < len(words):
        # "favorite color", "favorite ice cream flavor": up to the verb
        j = i + 1
        while j < len(words) and words[j] not in ("is", "are", "was", "'s", "has"):
            j += 1
        return "favorite " + " ".join(lemma(w) for w in words[i + 1 : j]), j
    # "cousin lena", "best friend", "wifi password"
    j = i + 1
    if words[i] == "best" and j < len(words):
        j += 1
    while j < len(words) and j - i < 3 and not _ends_np(words, j):
        j += 1
    return " ".join(lemma(w) for w in words[i:j]), j


def _ends_np(words: list[str], j: int) -> bool:
    """Whether a noun phrase ends before ``words[j]``: a verb, a preposition, or a word in
    -s that a preposition or determiner follows ("our choir rehearses on ...")."""
    w = words[j]
    if w in VERBISH or w in PREPOSITIONS:
        return True
    after = words[j + 1] if j + 1 < len(words) else ""
    return w.endswith("s") and after in (PREPOSITIONS | DETERMINERS)


def frame_clause(clause: str) -> Statement | None:
    """A frame for one clause, or None."""
    w = clause.split()
    if not w:
        return None
    neg = bool(re.search(r"\b(?:not|never|no longer|nobody|none)\b", clause))
    # --- subjectless: "it is on the 17th", "make that thursday", "the 17th" ---------
    if re.match(
        r"^(?:it|that|this|which)\s+(?:is|was|will be|should be|would be|'s)\b", clause
    ) or (re.match(r"^(?:make (?:it|that)|change (?:it|that) to|it should say)\b", clause)):
        rest = re.sub(
            r"^(?:it|that|this|which)\s+(?:is|was|will be|should be|would be|'s)\s*"
            r"|^(?:make (?:it|that)|change (?:it|that) to|it should say)\s*",
            "",
            clause,
        )
        value = value_words(rest)
        if set(value) <= META_WORDS:
            # "that was wrong", "it is fine": about what was said, no value of its own
            return Statement(text=clause, core=clause, negated=neg)
        return Statement(text=clause, core=clause, value=value, negated=neg, needs_context=True)
    # --- "allergic to kiwi too": the user's, with "i am" left out --------------------
    if re.match(r"^(?:allergic|intolerant) to\b", clause):
        return _verb_frame("am " + clause, neg, clause)
    # --- "my name is", "call me", "i go by" ------------------------------------------
    m = re.match(r"^(?:my name is|call me|i go by|i am called|my name 's)\s+(.+)$", clause)
    if m:
        return _st(clause, USER, "name", m.group(1), neg, single=True)
    # --- "my|our <np> ...", "the <np> ...": a person, or a thing of the user's -------
    m = re.match(r"^(?:my|our|the)\s+(.+)$", clause)
    if m:
        parts = m.group(1).split()
        head, n = _np_head(parts)
        tail = parts[n:]
        if head:
            first = head.split()[0]
            if first in PERSON_WORDS:
                return _person_frame(clause, head, tail, neg)
            if tail and tail[0] == "'s" and len(tail) > 1:
                # "our cat's vet is ...", "my car's insurance renews ..."
                owned, k = _np_head(tail[1:])
                if owned:
                    head, tail = f"{head} {owned}", tail[1 + k :]
            found = _thing_frame(clause, head, tail, neg)
            if found is not None:
                return found
    # --- "autumn is my favourite season", "sofie isn't my manager": value, then what --
    m = re.match(r"^(.+?)\s+(?:is|are|was)\s+(?:not\s+)?(?:my|our)\s+(.+)$", clause)
    if m and len(m.group(1).split()) <= 4 and m.group(1).split()[0] not in NOT_NAMES:
        said = m.group(2).split()
        head, n = _np_head([w for w in said if w not in ("anymore", "now", "still")])
        if head and n >= len([w for w in said if w not in ("anymore", "now", "still")]):
            if head.split()[0] in PERSON_WORDS:
                return _st(clause, head, "is", m.group(1), neg)
            return _thing_frame(clause, head, ["is", *m.group(1).split()], neg)
    # --- "elin's swimming lessons are on tuesdays": a named person's thing -----------
    m = re.match(r"^([a-z][a-z-]+) 's\s+(.+)$", clause)
    if m and m.group(1) not in NOT_NAMES:
        parts = m.group(2).split()
        head, n = _np_head(parts)
        if head:
            sub = _thing_frame(clause, head, parts[n:], neg)
            if sub is not None:
                return replace(sub, holder=m.group(1))
    # --- "they moved the wedding to granada": someone changed a thing's time or place -
    m = MOVED_BY_SOMEONE.match(clause)
    if m:
        head, _n = _np_head(m.group(1).split())
        if head:
            out = _thing_frame(clause, head, ["is", "at", *m.group(2).split()], neg)
            if out is not None:
                return replace(out, change_words=("moved",))
    # --- "book club is on wednesdays now": a thing named without "the" or "my" --------
    m = re.match(r"^([a-z][a-z-]+(?: [a-z][a-z-]+)?) (is|are) (.+)$", clause)
    if m and not set(m.group(1).split()) & (NOT_NAMES | VERBISH | PRONOUNS):
        head, n = _np_head(m.group(1).split())
        if head and n == len(m.group(1).split()) and head.split()[0] not in PERSON_WORDS:
            found = _thing_frame(clause, head, [m.group(2), *m.group(3).split()], neg)
            if found is not None and len(m.group(1).split()) == 2:
                return found
    # --- "<name> works as ...": someone the user named before ------------------------
    m = re.match(r"^([a-z][a-z'-]+)\s+(.+)$", clause)
    if (
        m
        and m.group(1) not in NOT_NAMES
        and (
            m.group(2).split()[0] in VERBISH or m.group(2).startswith(("no longer", "never", "now"))
        )
    ):
        sub = _verb_frame(m.group(2), neg)
        if sub is not None and sub.attribute is not None:
            return replace(sub, holder=m.group(1), text=clause, core=clause)
    # --- "i|we ..." ---------------------------------------------------------------
    m = re.match(r"^(?:i|we)\s+(.+)$", clause)
    if m:
        return _verb_frame(m.group(1), neg, clause)
    # --- a value alone: "the 5th", "at ada's house", "gate c4" -------------------------
    words = clause.split()
    if len(words) <= 4 and not (set(words) - {"'s"}) & (VERBISH | PRONOUNS):
        value = value_words(clause)
        if value and not set(value) <= META_WORDS:
            return Statement(text=clause, core=clause, value=value, negated=neg, needs_context=True)
    return None


def _person_frame(clause: str, head: str, tail: list[str], neg: bool) -> Statement | None:
    """ "my sister lives in oslo", "my cousin lena is a nurse", "my sister's name is ana"."""
    if not tail:
        return None
    if tail[0] == "'s" and len(tail) > 2 and tail[2] in ("is", "are", "was"):
        return _st(clause, head, lemma(tail[1]), " ".join(tail[3:]), neg, single=True)
    if tail[0] == "'s" and len(tail) > 1:
        # "my wife's car is a white peugeot": a thing of theirs
        owned, k = _np_head(tail[1:])
        if owned:
            sub = _thing_frame(clause, owned, tail[1 + k :], neg)
            if sub is not None:
                return replace(sub, holder=head)
    if tail[0] in ("is", "are", "was", "'s", "were"):
        # what the person is; a number is their age ("my daughter is 6")
        if tail[1:2] and (tail[1].isdigit() or tail[1] in NUMBER_WORDS):
            return _st(clause, head, "age", tail[1], neg, single=True)
        return _st(clause, head, "is", " ".join(tail[1:]), neg)
    sub = _verb_frame(" ".join(tail), neg)
    if sub is not None and sub.attribute is None and len(tail) > 1 and tail[1] in PREPOSITIONS:
        # "my sister ola lands at gate b12": where or when they do it
        kind = _where_or_when(tail[1:])
        return _st(clause, head, f"{lemma(tail[0])} #{kind}", " ".join(tail[2:]), neg, single=True)
    if sub is not None:
        return replace(sub, holder=head, text=clause, core=clause)
    return _st(clause, head, lemma(tail[0]), " ".join(tail[1:]), neg)


def _thing_frame(clause: str, head: str, tail: list[str], neg: bool) -> Statement | None:
    """A thing of the user's and what is said of it: its value ("our plumber is dave"),
    its name ("the boat is called ..."), where or when it is ("the play is on the 7th",
    "the key is in the lockbox"), or what it does ("the club meets on thursdays")."""
    if not tail:
        return None
    np = tuple(head.split())
    copulas = ("is", "are", "was", "were", "'s", "will")
    if tail[0] in PREPOSITIONS:
        # "the deposit for the flat is 900 pounds": the phrase belongs to the thing
        at = next((i for i, w in enumerate(tail[:6]) if w in copulas), None)
        if at is None:
            return None
        named = np
        np = np + tuple(lemma(w) for w in tail[1:at] if w not in FILLER)
        tail = tail[at:]
        return _thing_frame_of(clause, named, np, tail, neg)
    return _thing_frame_of(clause, np, np, tail, neg)


def _thing_frame_of(
    clause: str, named: tuple[str, ...], np: tuple[str, ...], tail: list[str], neg: bool
) -> Statement | None:
    """``_thing_frame`` once the noun phrase is known: ``named`` is its head phrase (what
    the attribute is named by), ``np`` the whole of it."""
    copulas = ("is", "are", "was", "were", "'s", "will")
    verb = tail[0]
    rest = tail[1:]
    skip = {"be", "now", "still", "not", "no", "longer", "actually", "currently", "usually",
            "always", "never", "normally"}  # fmt: skip
    while rest and rest[0] in skip:
        rest = rest[1:]
    if verb in ("starts", "start", "begins", "begin", "kicks") and _where_or_when(rest) == "when":
        # "the party starts at 8": when it is
        rest = rest[1:] if rest[:1] == ["off"] else rest
        return _thing(clause, named, "when", rest, neg, single=True, whole=np)
    if verb in MOVED_VERBS and rest:
        # "my yoga class moved to friday mornings": its time or place changed
        rest = rest[1:] if rest[0] in ("to", "into", "over") else rest
        out = _thing(clause, named, _where_or_when(["at", *rest]), rest, neg, single=True, whole=np)
        return replace(out, change_words=("moved",))
    if verb in copulas:
        if rest and rest[0] in ("called", "named"):
            return _thing(clause, named, "name", rest[1:], neg, single=True, whole=np)
        while rest and rest[0] in PARTICIPLES:
            rest = rest[1:]
        if rest and rest[0] in PREPOSITIONS:
            return _thing(clause, named, _where_or_when(rest), rest, neg, single=True, whole=np)
        many = any(lemma(x) in MANY_VALUED for x in np) and np[0] not in ("favorite", "best")
        return _thing(clause, named, "", rest, neg, single=not many, many=many, whole=np)
    if verb in VERBISH or verb.endswith("s"):
        kind = lemma(verb)
        if rest and rest[0] in PREPOSITIONS:
            where = _where_or_when(rest)
            # "the club meets on tuesdays" is when the club is
            kind = where if kind in HAPPENS else f"{kind} {where}"
        return _thing(clause, named, kind, rest, neg, single=True, whole=np)
    return None


def _where_or_when(rest: list[str]) -> str:
    """ "when" if the phrase after the preposition names a time, else "where" ("at Tobi's
    house this month" is a place)."""
    return "when" if TEMPORAL.search(" ".join(rest[:4])) else "where"


def _thing(
    clause: str,
    np: tuple[str, ...],
    kind: str,
    rest: list[str],
    neg: bool,
    *,
    single: bool = False,
    many: bool = False,
    whole: tuple[str, ...] = (),
) -> Statement:
    """The frame of a thing: the attribute is its head noun (two words when the head is
    generic) and what is said of it; the statement keeps the whole noun phrase
    (``whole``, else ``np``)."""
    # the head noun names it ("phone number" and "my number" meet; the whole noun
    # phrase, kept on the statement, keeps "phone number" from "employee number")
    name = np[-1] if not np[0].startswith("favorite") else " ".join(np)
    attribute = f"{name} #{kind}" if kind else name
    out = _st(clause, USER, attribute, " ".join(rest), neg, single=single, many=many)
    mutable = np[0] == "favorite" or bool(set(np) & ROLE_WORDS) or np[-1] in MUTABLE_ATTRIBUTES
    return replace(out, np=whole or np, mutable=mutable and not out.many)


def _st(
    clause: str,
    holder: str,
    attribute: str,
    value: str,
    neg: bool,
    *,
    single: bool = False,
    many: bool = False,
) -> Statement:
    attribute = attribute.strip()
    if not many and not single:
        many = any(lemma(a) in MANY_VALUED for a in attribute.split())
        if many and attribute.startswith(("favorite", "name", "best")):
            many = False  # one's favourite, one's best friend
    single = single and not many
    return Statement(
        text=clause,
        core=clause,
        holder=holder,
        attribute=attribute,
        value=value_words(value),
        negated=neg,
        many=many and not single,
        single=single,
        mutable=single and (attribute in MUTABLE_ATTRIBUTES or attribute.startswith("number of")),
    )


def _verb_frame(rest: str, neg: bool, clause: str | None = None) -> Statement | None:
    """The frame of "<verb> ..." after "i"/"we" (or a person: "lives in oslo")."""
    clause = clause or rest
    w = [x for x in rest.split() if x not in ADVERBS]
    if (
        len(w) > 1
        and w[0] in ("have", "has", "had", "'ve")
        and (w[1].endswith("ed") or w[1] in PARTICIPLES_IRREGULAR)
    ):
        w = w[1:]  # "we've moved to ...": the verb is the participle
    if not w:
        return None
    # "am/is/are ..."
    if w[0] in ("am", "is", "are", "was", "were", "'s"):
        tail = w[1:]
        text = " ".join(tail)
        if set(tail) & {"kilos", "kg", "kilograms", "pounds", "lbs", "stone"} and (
            not tail or tail[0] in ("down", "up", "at") or tail[0][0].isdigit()
        ):
            return _st(clause, USER, "weight", " ".join(tail), neg, single=True)
        if "tall" in tail[1:3]:
            return _st(clause, USER, "height", " ".join(tail), neg, single=True)
        if tail and tail[0] in ("allergic", "intolerant"):
            return _st(clause, USER, "allergic to", " ".join(tail[2:]), neg, many=True)
        if (
            tail
            and (tail[0].isdigit() or tail[0] in NUMBER_WORDS)
            and (len(tail) == 1 or tail[1] in ("years", "year"))
        ):
            return _st(clause, USER, "age", tail[0], neg, single=True)
        words = set(tail)
        if words & DIETS:
            return _st(clause, USER, "diet", text, neg, single=True)
        if words & MARITAL:
            return _st(clause, USER, "marital status", text, neg, single=True)
        if tail and tail[0] in ("a", "an") and len(tail) > 1:
            noun = tail[-1] if len(tail) <= 3 else tail[1]
            if set(tail[1:]) & OCCUPATIONS:
                return _st(clause, USER, "work #as", text, neg, single=True)
            return _st(clause, USER, "is a " + lemma(noun), text, neg, many=True)
        if tail and tail[0] in OCCUPATIONS:
            return _st(clause, USER, "work #as", text, neg, single=True)
        if tail and tail[0] in ("from",):
            return _st(clause, USER, "from", " ".join(tail[1:]), neg, single=True)
        if tail and tail[0] in ("based", "living", "staying"):
            return _st(clause, USER, "live in", " ".join(tail[2:]), neg, single=True)
        if tail and tail[0] == "working":
            return _st(clause, USER, "work #at", " ".join(tail[1:]), neg, single=True)
        if tail and tail[0] in ("learning", "studying", "reading", "watching", "training"):
            return _st(clause, USER, lemma(tail[0].removesuffix("ing")), " ".join(tail[1:]), neg,
                       many=True)  # fmt: skip
        if tail:
            return _st(clause, USER, "is " + tail[0], " ".join(tail[1:]), neg)
        return None
    verb = lemma(w[0])
    tail = w[1:]
    if verb in ("turn", "turned") and tail and (tail[0].isdigit() or tail[0] in NUMBER_WORDS):
        return _st(clause, USER, "age", tail[0], neg, single=True)  # "i turned 35"
    if set(tail) & MARITAL and verb in ("have", "get", "got", "become", "became"):
        # "i got engaged in june"
        return _st(clause, USER, "marital status", " ".join(x for x in tail if x in MARITAL),
                   neg, single=True)  # fmt: skip
    if set(tail) & DIETS and verb in ("go", "become", "turn", "went", "became", "turned"):
        # "i went vegan in the spring"
        return _st(clause, USER, "diet", " ".join(x for x in tail if x in DIETS), neg,
                   single=True)  # fmt: skip
    if verb == "was" and tail and tail[0] == "born":
        prep = tail[1] if len(tail) > 1 else ""
        return _st(clause, USER, f"born {prep}".strip(), " ".join(tail[2:]), neg, single=True)
    if verb in ("weigh", "weighed"):
        return _st(clause, USER, "weight", " ".join(tail), neg, single=True)
    moved_thing = (
        verb == "move"
        and bool(tail)
        and tail[0]
        not in PREPOSITIONS | {"back", "out", "in", "away", "abroad", "here", "there", "home"}
    )
    if moved_thing or verb in ("switch", "switched", "change", "changed", "swap", "swapped",
                "replace", "replaced", "fire", "fired", "dump", "dumped", "got", "find",
                "found", "hire", "hired"):  # fmt: skip
        # "we switched plumbers", "i changed dentists", "we got a new vet"
        objs = [x for x in tail if x not in ("our", "my", "a", "an", "the", "new")]
        named, k = _np_head(objs)
        if named and objs[0] not in NOT_NAMES:
            # the attribute it names, whatever it is ("we switched hiding places", "we
            # changed the wifi password to ...")
            np = tuple(_singular(w) for w in named.split())
            head = "work" if np[-1] in ("job", "employer", "company") else np[-1]
            head = "live in" if head in ("house", "home") and verb == "move" else head
            after = objs[k:]
            after = after[1:] if after[:1] == ["to"] else after
            return Statement(
                text=clause, core=clause, holder=USER, attribute=head,
                value=value_words(" ".join(after)), negated=neg, single=True,
                change_words=("switched",), switch=True, mutable=True, np=np,
            )  # fmt: skip
    if verb in LOCATIVE:
        preps = ("in", "at", "for", "near", "on", "to", "into", "back", "up", "out", "from", "with")
        i = 0
        while i < len(tail) and tail[i] in preps:
            i += 1
        attribute = LOCATIVE[verb]
        if verb == "work":
            # where one works, or as what ("i work as a radiographer")
            kind = "#as" if tail[:1] == ["as"] else "#at"
            return _st(clause, USER, f"work {kind}", " ".join(tail[i:]), neg, single=True)
        if verb == "study" and tail[:1] not in (["at"], ["in"]):
            return _st(clause, USER, "study", " ".join(tail), neg, many=True)
        out = _st(clause, USER, attribute, " ".join(tail[i:]), neg, single=True)
        if verb in ("move", "relocate"):
            out = replace(out, change_words=("moved",))
        return out
    if verb == "have" and tail:
        det = tail[0]
        if det.isdigit() or det in NUMBER_WORDS:
            noun = lemma(tail[1]) if len(tail) > 1 else ""
            return _st(clause, USER, f"number of {noun}", det, neg, single=True)
        objs = [x for x in tail if x not in ("a", "an", "the", "another", "some", "new")]
        if objs:
            if objs[0] in ("allergy", "allergies") and "to" in objs:
                return _st(clause, USER, "allergic to", " ".join(objs[objs.index("to") + 1 :]),
                           neg, many=True)  # fmt: skip
            return _st(clause, USER, "have " + lemma(objs[0]), " ".join(objs[1:]), neg,
                       many=True)  # fmt: skip
    if verb in MANY_VERBS:
        return _st(clause, USER, verb, " ".join(tail), neg, many=True)
    if verb in ("keep", "leave", "store", "park", "put", "hide") and tail:
        # "we keep the spare key under the flowerpot": where that thing is
        objs = [x for x in tail if x not in ("my", "our", "a", "an", "the")]
        at = next((i for i, x in enumerate(objs) if x in PREPOSITIONS), None)
        if at:
            head, _n = _np_head(objs[:at])
            if head:
                return _thing(clause, tuple(head.split()), "where", objs[at:], neg, single=True)
    if verb == "drive" and tail and tail[0] not in ("to", "into", "home", "back"):
        # "i drive an old saab": what car one has
        objs = [x for x in tail if x not in ("a", "an", "the", "my", "our")]
        return _thing(clause, ("car",), "", objs, neg, single=True)
    if verb in ("drink", "eat", "take", "drive", "ride", "use", "prefer", "go", "wear",
                "bike", "walk", "run", "commute", "cook", "sleep", "wake", "get"):  # fmt: skip
        # "i drink my coffee iced", "i go swimming every tuesday": verb + object head;
        # "i take the bus", "i drive a honda": the object is the value
        objs = [x for x in tail if x not in ("my", "our", "a", "an", "the", "to")]
        if verb in VALUE_OBJECT_VERBS and not (tail and tail[0] in ("my", "our")):
            return _st(clause, USER, verb, " ".join(objs), neg)
        if objs:
            return _st(clause, USER, f"{verb} {lemma(objs[0])}", " ".join(objs[1:]), neg)
        return _st(clause, USER, verb, "", neg)
    if tail and tail[0] in ("with", "at", "for", "to", "from", "by") and len(tail) > 1:
        # "i bank with monzo", "i shop at lidl": the verb and its preposition
        return _st(clause, USER, f"{verb} {tail[0]}", " ".join(tail[1:]), neg)
    # any other verb: who it is about is known, the attribute is not (the generic
    # same-beginning rule of ``protocol.subjects`` decides)
    return Statement(text=clause, core=clause, holder=USER, value=value_words(rest), negated=neg)
