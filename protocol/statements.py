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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

USER = "i"

_CONTRACTIONS = {
    "i'm": "i am",
    "im": "i am",
    "i've": "i have",
    "i'd": "i would",
    "i'll": "i will",
    "we're": "we are",
    "we've": "we have",
    "we'll": "we will",
    "they're": "they are",
    "it's": "it is",
    "that's": "that is",
    "there's": "there is",
    "he's": "he is",
    "she's": "she is",
    "isn't": "is not",
    "aren't": "are not",
    "wasn't": "was not",
    "don't": "do not",
    "doesn't": "does not",
    "didn't": "did not",
    "can't": "cannot",
    "won't": "will not",
    "haven't": "have not",
}
_CONTRACTION_RE = re.compile(r"\b(?:" + "|".join(re.escape(c) for c in _CONTRACTIONS) + r")\b")
_POSSESSIVE_RE = re.compile(r"\b(\w+)'s\b")

# Leading discourse markers, longest first. A correction marker says "what I said before
# was wrong"; an additive one says "and also".
CORRECTION_MARKERS = (
    "no wait",
    "wait no",
    "no no",
    "scratch that",
    "let me correct that",
    "correction",
    "i meant to say",
    "i meant",
    "i mean",
    "my mistake",
    "my bad",
    "on second thought",
    "change of plans",
    "change of plan",
    "update",
    "actually",
    "sorry",
    "oops",
    "wait",
    "nope",
    "no",
)
STRONG_MARKERS = frozenset(
    {
        "no wait",
        "wait no",
        "no no",
        "scratch that",
        "let me correct that",
        "correction",
        "i meant to say",
        "i meant",
        "i mean",
        "my mistake",
        "my bad",
        "oops",
        "wait",
        "nope",
        "no",
    }
)
ADDITIVE_MARKERS = ("oh and also", "oh and", "and also", "oh also", "also", "plus", "and")
NEUTRAL_MARKERS = (
    "just so you know",
    "for the record",
    "by the way",
    "please remember that",
    "remember that",
    "note that",
    "fyi",
    "btw",
    "well",
    "okay",
    "ok",
    "so",
    "hey",
    "hi",
    "hmm",
    "um",
    "uh",
    "oh",
    "anyway",
    "yes",
    "yeah",
    "right",
    "ah",
)
_ALL_MARKERS = sorted(
    {*CORRECTION_MARKERS, *ADDITIVE_MARKERS, *NEUTRAL_MARKERS}, key=lambda m: -len(m)
)
_MARKER_RE = re.compile(
    r"^(?:" + "|".join(re.escape(m) for m in _ALL_MARKERS) + r")(?:\b|(?=[,:;.!-]))[\s,:;.!\-]*"
)

# Words inside a sentence that say the value changed.
CHANGE_WORDS = frozenset(
    {
        "now",
        "anymore",
        "nowadays",
        "currently",
        "longer",  # "no longer"
        "switched",
        "changed",
        "moved",
        "instead",
        "new",
        "since",
        "lately",
    }
)
EXCEPTION_WORDS = (
    "just this once",
    "this time",
    "for today",
    "today",
    "tonight",
    "this morning",
    "this afternoon",
    "this evening",
    "for this trip",
    "this weekend",
    "just for now",
    "for once",
)
_EXCEPTION_RE = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in EXCEPTION_WORDS) + r")\b")

FILLER = frozenset(
    """a an the my our your his her their its is are was were be been am to of
    now anymore nowadays currently really actually still also too just lately these days
    any more longer new very so then at in on for with and or that this it one not never
    no last every""".split()
)

PERSON_WORDS = frozenset(
    """
    wife husband partner spouse boyfriend girlfriend fiance fiancee friend bestie brother
    sister sibling mother father mom mum dad mama papa parent son daughter kid child baby
    cousin uncle aunt grandma grandpa grandmother grandfather granddaughter grandson
    grandparent niece nephew boss colleague coworker neighbor neighbour roommate flatmate
    mentor teammate ex stepdad stepmom stepson stepdaughter twin godson goddaughter
    mother-in-law father-in-law sister-in-law brother-in-law manager landlord landlady
    """.split()
)
# Roles a user has one of at a time ("my plumber is ..."): a new value replaces the old.
ROLE_WORDS = frozenset(
    """
    plumber dentist doctor gp therapist vet electrician hairdresser barber accountant
    lawyer landlord landlady trainer coach tutor babysitter nanny mechanic pharmacist
    optician physio physiotherapist cleaner gardener banker advisor counselor
    """.split()
)
# Attributes that can hold several values at once.
MANY_VALUED = frozenset(
    """
    allergic allergy intolerant intolerance speak language hobby interest like love enjoy
    play collect pet sibling brother sister child kid son daughter friend cousin
    instrument sport hate dislike fan grandchild grandkid niece nephew medication
    volunteer support follow watch read listen
    """.split()
)
OCCUPATIONS = frozenset(
    """
    nurse teacher engineer designer developer programmer student doctor lawyer accountant
    manager chef cook architect pharmacist dentist journalist writer artist musician
    scientist researcher consultant analyst retired retiree freelancer waiter waitress
    driver pilot farmer electrician plumber carpenter mechanic firefighter police
    officer professor lecturer librarian photographer translator editor baker barista
    cashier clerk secretary paramedic therapist vet veterinarian surgeon entrepreneur
    """.split()
)
DIETS = frozenset(
    """vegan vegetarian pescatarian carnivore keto paleo omnivore flexitarian""".split()
)
MARITAL = frozenset("""married single divorced engaged widowed separated""".split())
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve no zero".split()
)

_IRREGULAR = {
    "lives": "live",
    "lived": "live",
    "living": "live",
    "works": "work",
    "worked": "work",
    "working": "work",
    "grew": "grow",
    "grown": "grow",
    "moved": "move",
    "moves": "move",
    "moving": "move",
    "studied": "study",
    "studies": "study",
    "studying": "study",
    "has": "have",
    "had": "have",
    "having": "have",
    "got": "have",
    "own": "have",
    "owns": "have",
    "drinks": "drink",
    "drank": "drink",
    "eats": "eat",
    "ate": "eat",
    "likes": "like",
    "liked": "like",
    "loves": "love",
    "loved": "love",
    "enjoys": "enjoy",
    "enjoyed": "enjoy",
    "speaks": "speak",
    "spoke": "speak",
    "plays": "play",
    "played": "play",
    "drives": "drive",
    "drove": "drive",
    "goes": "go",
    "went": "go",
    "takes": "take",
    "took": "take",
    "teaches": "teach",
    "taught": "teach",
    "prefers": "prefer",
    "preferred": "prefer",
    "hates": "hate",
    "hated": "hate",
    "uses": "use",
    "used": "use",
    "wants": "want",
    "needs": "need",
    "runs": "run",
    "ran": "run",
    "children": "child",
    "kids": "kid",
    "allergies": "allergy",
    "hobbies": "hobby",
    "languages": "language",
    "people": "person",
    "wives": "wife",
    "women": "woman",
    "men": "man",
    "born": "born",
}
_MANY_VERBS = frozenset({"speak", "like", "love", "enjoy", "play", "collect", "hate", "watch"})
_VALUE_OBJECT_VERBS = frozenset({"take", "drive", "ride", "use", "wear", "prefer", "commute"})
_LOCATIVE = {
    "live": "live in",
    "stay": "live in",
    "reside": "live in",
    "move": "live in",
    "relocate": "live in",
    "work": "work at",
    "grow": "grow up in",
    "study": "study at",
}


def lemma(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


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
    def key(self) -> str | None:
        """The subject-index key of its frame (None: no frame)."""
        if not self.framed:
            return None
        return f"{self.holder}|{self.attribute}"


def fold(text: str) -> str:
    """Lower case, straight quotes, contractions expanded, whitespace collapsed."""
    s = text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "'").casefold()
    s = re.sub(r"[\"\u201c\u201d()\[\]]", " ", s)
    s = _CONTRACTION_RE.sub(lambda m: _CONTRACTIONS[m.group(0)], s)
    s = _POSSESSIVE_RE.sub(r"\1 's", s)
    return re.sub(r"\s+", " ", s).strip()


def strip_markers(folded: str) -> tuple[str, tuple[str, ...]]:
    """The sentence without its leading discourse markers, and the markers."""
    found: list[str] = []
    s = folded
    while True:
        m = _MARKER_RE.match(s)
        if m is None or m.end() == 0:
            break
        marker = re.sub(r"[\s,:;.!\-]+$", "", m.group(0))
        rest = s[m.end() :]
        # "no", "so", "well", "right", "yes" are markers only when punctuation follows
        # them ("No, it's ..."), so they never eat the subject of "so far" or "no one"
        punctuated = re.search(r"[,:;.!\-]", m.group(0)[len(marker) :]) is not None
        if not rest or (marker in _BARE_WORDS and not punctuated):
            break
        found.append(marker)
        s = rest
    return s, tuple(found)


# Words that judge what was said rather than say a value ("Sorry, that was wrong.")
META_WORDS = frozenset(
    """wrong right correct incorrect mistake typo true false fine ok okay good great bad
    so silly stupid confusing mess""".split()
)
_BARE_WORDS = frozenset({"no", "so", "well", "right", "yes", "wait"})
_FINAL = re.compile(r"[\s.!?\u2026]+$")
_CLAUSE_SPLIT = re.compile(r"\s*(?:[,;:]|\s-\s|\s\u2014\s|\bbut\b|\bso\b)\s*")
_WORD = re.compile(r"[a-z0-9][a-z0-9'\-./]*")


def _value_words(text: str) -> tuple[str, ...]:
    words = [w.strip("'.-/") for w in _WORD.findall(text)]
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
    while j < len(words) and words[j] not in _VERBISH and j - i < 3:
        j += 1
    return " ".join(lemma(w) for w in words[i:j]), j


_VERBISH = frozenset(
    """is are was were will 's has have had lives lived works worked live work moved
    called named does do did can could would should might must got gets just now also
    still never always usually often""".split()
)


def _frame_clause(clause: str) -> Statement | None:
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
        value = _value_words(rest)
        if set(value) <= META_WORDS:
            # "that was wrong", "it is fine": about what was said, no value of its own
            return Statement(text=clause, core=clause, negated=neg)
        return Statement(text=clause, core=clause, value=value, negated=neg, needs_context=True)
    # --- "my name is", "call me", "i go by" ------------------------------------------
    m = re.match(r"^(?:my name is|call me|i go by|i am called|my name 's)\s+(.+)$", clause)
    if m:
        return _st(clause, USER, "name", m.group(1), neg, single=True)
    # --- "my|our <np> is|are|was <value>" ---------------------------------------------
    m = re.match(r"^(?:my|our)\s+(.+)$", clause)
    if m:
        parts = m.group(1).split()
        head, n = _np_head(parts)
        tail = parts[n:]
        if head:
            first = head.split()[0]
            # "my sister lives in oslo": the person holds the attribute
            if first in PERSON_WORDS and tail and tail[0] not in ("is", "are", "was", "'s"):
                sub = _verb_frame(" ".join(tail), neg)
                if sub is not None:
                    return replace(sub, holder=head, text=clause, core=clause)
                return _st(clause, head, lemma(tail[0]), " ".join(tail[1:]), neg)
            if tail and tail[0] == "'s" and len(tail) > 2 and tail[2] in ("is", "are", "was"):
                # "my sister's name is ana"
                return _st(clause, head, lemma(tail[1]), " ".join(tail[3:]), neg, single=True)
            if tail and tail[0] in ("is", "are", "was", "'s", "were"):
                said = " ".join(tail[1:])
                if first in PERSON_WORDS:
                    # "my cousin lena is a nurse": what the person is
                    return _st(clause, head, "is", said, neg)
                many = any(lemma(x) in MANY_VALUED for x in head.split()) or (
                    parts[0].endswith("s")
                    and not parts[0].endswith("ss")
                    and first not in ROLE_WORDS
                    and not head.startswith("favorite")
                )
                return _st(clause, USER, head, said, neg, single=not many, many=many)
            if tail:
                sub = _verb_frame(" ".join(tail), neg)
                if sub is not None:
                    return replace(sub, holder=head, text=clause, core=clause)
    # --- "the <np> is|starts|... <value>": a thing, an event -------------------------
    m = re.match(r"^the\s+(.+)$", clause)
    if m:
        parts = m.group(1).split()
        head, n = _np_head(parts)
        tail = parts[n:]
        verbs = ("is", "are", "was", "will", "starts", "start", "begins", "ends", "'s")
        if head and tail and tail[0] in verbs:
            i = 1
            while i < len(tail) and tail[i] in ("be", "now", "still", "actually"):
                i += 1
            prep = tail[i] if i < len(tail) and tail[i] in ("on", "at", "in", "from") else ""
            attribute = (
                ("is " + prep).strip()
                if tail[0] not in ("starts", "start", "begins", "ends")
                else lemma(tail[0])
            )
            return _st(clause, "the " + head, attribute, " ".join(tail[i:]), neg, single=True)
    # --- "i|we ..." ---------------------------------------------------------------
    m = re.match(r"^(?:i|we)\s+(.+)$", clause)
    if m:
        return _verb_frame(m.group(1), neg, clause)
    return None


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
        if many and attribute.startswith(("favorite", "name")):
            many = False
    return Statement(
        text=clause,
        core=clause,
        holder=holder,
        attribute=attribute,
        value=_value_words(value),
        negated=neg,
        many=many and not single,
        single=single and not many,
    )


def _verb_frame(rest: str, neg: bool, clause: str | None = None) -> Statement | None:
    """The frame of "<verb> ..." after "i"/"we" (or a person: "lives in oslo")."""
    clause = clause or rest
    w = [x for x in rest.split() if x not in ("also", "still", "now", "actually", "really",
                                              "just", "currently", "usually", "no", "longer",
                                              "never", "not", "do", "does", "did")]  # fmt: skip
    if not w:
        return None
    # "am/is/are ..."
    if w[0] in ("am", "is", "are", "was", "were", "'s"):
        tail = w[1:]
        text = " ".join(tail)
        if tail and tail[0] in ("allergic", "intolerant"):
            return _st(clause, USER, "allergic to", " ".join(tail[2:]), neg, many=True)
        if (
            tail
            and (tail[0].isdigit() or tail[0] in _NUMBER_WORDS)
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
                return _st(clause, USER, "occupation", text, neg, single=True)
            return _st(clause, USER, "is a " + lemma(noun), text, neg, many=True)
        if tail and tail[0] in OCCUPATIONS:
            return _st(clause, USER, "occupation", text, neg, single=True)
        if tail and tail[0] in ("from",):
            return _st(clause, USER, "from", " ".join(tail[1:]), neg, single=True)
        if tail and tail[0] in ("based", "living", "staying"):
            return _st(clause, USER, "live in", " ".join(tail[2:]), neg, single=True)
        if tail and tail[0] == "working":
            return _st(clause, USER, "work at", " ".join(tail[2:]), neg, single=True)
        if tail and tail[0] in ("learning", "studying", "reading", "watching", "training"):
            return _st(clause, USER, lemma(tail[0].removesuffix("ing")), " ".join(tail[1:]), neg,
                       many=True)  # fmt: skip
        if tail:
            return _st(clause, USER, "is " + tail[0], " ".join(tail[1:]), neg)
        return None
    verb = lemma(w[0])
    tail = w[1:]
    if verb == "was" and tail and tail[0] == "born":
        prep = tail[1] if len(tail) > 1 else ""
        return _st(clause, USER, f"born {prep}".strip(), " ".join(tail[2:]), neg, single=True)
    if verb in ("switch", "switched", "change", "changed", "swap", "swapped", "replace",
                "replaced", "fire", "fired", "dump", "dumped", "got", "find", "found",
                "hire", "hired"):  # fmt: skip
        # "we switched plumbers", "i changed dentists", "we got a new vet"
        objs = [x for x in tail if x not in ("our", "my", "a", "an", "the", "new", "to")]
        if objs:
            head = lemma(objs[0])
            if head in ROLE_WORDS or head in (
                "job",
                "school",
                "bank",
                "gym",
                "car",
                "phone",
                "number",
                "address",
                "email",
                "provider",
            ):
                return Statement(
                    text=clause, core=clause, holder=USER, attribute=head,
                    value=_value_words(" ".join(objs[1:])), negated=neg, single=True,
                    change_words=("switched",),
                )  # fmt: skip
    if verb in _LOCATIVE:
        preps = ("in", "at", "for", "near", "on", "to", "into", "back", "up", "out", "from", "with")
        i = 0
        while i < len(tail) and tail[i] in preps:
            i += 1
        attribute = _LOCATIVE[verb]
        if verb == "work" and tail[:1] == ["as"]:
            return _st(clause, USER, "occupation", " ".join(tail[1:]), neg, single=True)
        if verb == "study" and tail[:1] not in (["at"], ["in"]):
            return _st(clause, USER, "study", " ".join(tail), neg, many=True)
        out = _st(clause, USER, attribute, " ".join(tail[i:]), neg, single=True)
        if verb in ("move", "relocate"):
            out = replace(out, change_words=("moved",))
        return out
    if verb == "have" and tail:
        det = tail[0]
        if det.isdigit() or det in _NUMBER_WORDS:
            noun = lemma(tail[1]) if len(tail) > 1 else ""
            return _st(clause, USER, f"number of {noun}", det, neg, single=True)
        objs = [x for x in tail if x not in ("a", "an", "the", "another", "some", "new")]
        if objs:
            if objs[0] in ("allergy", "allergies") and "to" in objs:
                return _st(clause, USER, "allergic to", " ".join(objs[objs.index("to") + 1 :]),
                           neg, many=True)  # fmt: skip
            return _st(clause, USER, "have " + lemma(objs[0]), " ".join(objs[1:]), neg,
                       many=True)  # fmt: skip
    if verb in _MANY_VERBS:
        return _st(clause, USER, verb, " ".join(tail), neg, many=True)
    if verb in ("drink", "eat", "take", "drive", "ride", "use", "prefer", "go", "wear",
                "bike", "walk", "run", "commute", "cook", "sleep", "wake", "get"):  # fmt: skip
        # "i drink my coffee iced", "i go swimming every tuesday": verb + object head;
        # "i take the bus", "i drive a honda": the object is the value
        objs = [x for x in tail if x not in ("my", "our", "a", "an", "the", "to")]
        if verb in _VALUE_OBJECT_VERBS and not (tail and tail[0] in ("my", "our")):
            return _st(clause, USER, verb, " ".join(objs), neg)
        if objs:
            return _st(clause, USER, f"{verb} {lemma(objs[0])}", " ".join(objs[1:]), neg)
        return _st(clause, USER, verb, "", neg)
    # any other verb: who it is about is known, the attribute is not (the generic
    # same-beginning rule of ``protocol.subjects`` decides)
    return Statement(text=clause, core=clause, holder=USER, value=_value_words(rest), negated=neg)


@lru_cache(maxsize=8192)
def parse(text: str) -> Statement:
    """What ``text`` says (see the module's invariants). Cached: it is pure, and a
    write reads the same sentences for its keys, its lookup and its relations."""
    folded = _FINAL.sub("", fold(text))
    core, markers = strip_markers(folded)
    core = re.sub(r"\b(?:actually|honestly|really)\b\s*,?\s*", "", core).strip()
    inner_markers = tuple(
        m for m in ("actually", "i meant") if re.search(rf"\b{m}\b", folded) and m not in markers
    )
    markers = markers + inner_markers
    change = tuple(
        sorted(
            {w for w in re.findall(r"[a-z]+", core) if w in CHANGE_WORDS}
            | ({"anymore"} if "any more" in core else set())
            | ({"used to"} if re.search(r"\bused to\b", core) else set())
        )
    )
    additive = bool(
        any(m in ADDITIVE_MARKERS for m in markers)
        or re.search(r"\b(?:also|too|as well|another|as well as|besides)\b", core)
    )
    exc = _EXCEPTION_RE.search(core)
    clauses = [c for c in _CLAUSE_SPLIT.split(core) if c]
    rejected: list[str] = []
    frames: list[Statement] = []
    for clause in clauses:
        m = re.match(r"^(?:and\s+)?(?:not|rather than|instead of)\s+(.+)$", clause)
        if m and frames:
            rejected.extend(_value_words(m.group(1)))
            continue
        frame = _frame_clause(clause)
        if frame is not None:
            # "it is x, not y" inside one clause
            inner = re.search(r"\b(?:not|rather than|instead of)\s+(.+)$", clause)
            if inner and frame.value and not frame.negated:
                pass
            frames.append(frame)
    base = Statement(text=text, core=core)
    chosen: Statement | None = None
    for frame in frames:
        if frame.framed and (frame.value or chosen is None):
            chosen = frame
            if frame.value:
                break
    if chosen is not None and not chosen.value:
        # "we switched plumbers, it is rita osei now": the value from a subjectless clause
        for frame in frames:
            if frame.needs_context and frame.value:
                chosen = replace(chosen, value=frame.value)
                break
    if chosen is None:
        sub = next((f for f in frames if f.needs_context), None)
        if sub is not None:
            chosen = sub
        elif not frames:
            # a bare value: "the 17th", "thursday", "oslo, not rome"
            bare = _value_words(clauses[0] if clauses else core)
            chosen = Statement(
                text=text, core=core, value=bare,
                needs_context=(bool(markers) or len(core.split()) <= 3)
                and not set(bare) <= META_WORDS,
            )  # fmt: skip
        else:
            chosen = frames[0]
    negated = chosen.negated
    value = chosen.value
    if negated and re.search(r"\bnot\b.*\bbut\b", core) is None:
        pass
    # "... in oslo, not rome" / "... not rome but oslo": split the affirmed from the denied
    m = re.search(r"\bnot\s+([a-z0-9' -]+?)\s+but\s+(.+)$", core)
    if m:
        rejected.extend(_value_words(m.group(1)))
        negated = False
    if rejected and negated and not m:
        negated = bool(re.search(r"\b(?:not|never|no longer)\b", clauses[0] if clauses else ""))
    return (
        replace(
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
        if chosen is not base
        else base
    )


def with_context(statement: Statement, context: Statement) -> Statement:
    """A subjectless statement read with the subject of the sentence before it."""
    if not statement.needs_context or not context.framed:
        return statement
    return replace(
        statement,
        holder=context.holder,
        attribute=context.attribute,
        many=context.many,
        single=context.single,
        needs_context=False,
    )


def needs_context(text: str) -> bool:
    """Whether ``text`` has no subject of its own (it takes the previous sentence's)."""
    return parse(text).needs_context
