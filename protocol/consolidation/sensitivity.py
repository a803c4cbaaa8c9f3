"""Which sensitive class a sentence belongs to, from a keyword lexicon per class.

Invariants:
- The lexicon can only *raise* sensitivity: a hint naming a sensitive class is kept as
  it is; a ``normal`` (or absent) hint becomes the class the lexicon finds, if any.
- Matching is lowercase and on word boundaries (``lexicon.fold``); when several classes
  match, the first in ``PRIORITY`` wins (the more specific class before the broader one:
  a genetic test for a disease is ``genetic``).
- The trade-off is deliberate: a false "sensitive" only means the record waits for the
  user's confirmation (a candidate), a false "normal" writes a health or belief record
  without asking. So the lexicon leans cautious ("doctor", "pray", "vote for" all count)
  and removes only idioms that plainly say nothing about the class ("sick of waiting",
  "retail therapy", "oh my god", "God of War", "gave me a heart attack", "fingerprints
  all over", "I'm a physiotherapist": a job in health care is not the speaker's health).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocol.consolidation.lexicon import compile_lexicon, fold
from protocol.model import Sensitivity

# fmt: off
LEXICON: dict[Sensitivity, tuple[str, ...]] = {
    Sensitivity.GENETIC: (
        "genetic*", "gene", "genome*", "dna", "23andme", "hereditary", "brca*",
        "inherited condition", "inherited disease", "carrier of the", "ancestry test",
    ),
    Sensitivity.BIOMETRIC: (
        "biometric*", "fingerprint*", "face id", "facial recognition", "face scan",
        "iris scan", "retina scan", "retinal scan", "voiceprint*", "palm scan",
    ),
    Sensitivity.HEALTH: (
        "allerg*", "anaphyla*", "epipen", "intoleran*", "coeliac", "celiac", "diagnos*",
        "medication", "medicine", "meds", "prescription", "prescribed", "insulin",
        "antidepressant", "therap*", "psychiatri*", "psycholog*", "counsel*",
        "pregnan*", "miscarriage", "ivf", "fertility", "infertil*", "menopaus*",
        "menstrua*", "contracepti*", "disease", "disorder", "illness", "ill", "cancer",
        "tumor", "tumour", "chemo*", "diabet*", "asthma*", "epilep*", "seizure",
        "migraine", "adhd", "autis*", "dyslexi*", "depression", "depressed", "anxiety",
        "panic attack", "bipolar", "schizophreni*", "ptsd", "ocd", "eating disorder",
        "anorexi*", "bulimi*", "hiv", "std", "sti", "hepatitis", "surgery", "surgeon",
        "blood pressure", "cholesterol", "heart condition", "heart attack", "stroke",
        "injur*", "disabilit*", "disabled", "wheelchair", "hearing aid", "rehab",
        "addict*", "alcoholi*", "sober", "sobriety", "relapse", "doctor", "gp",
        "hospital*", "clinic", "physio*", "symptom", "chronic", "vaccin*", "covid",
        "pain", "sick", "sickness", "sick leave", "mental health", "health condition",
        "blood test", "dentist", "dental", "contact lenses", "hearing loss",
        "broke my arm", "broke my leg", "broken arm", "broken leg", "broken bone*", "fractur*",
    ),
    Sensitivity.SEX_LIFE: (
        "gay", "lesbian", "bisexual", "queer", "homosexual*", "heterosexual*",
        "asexual*", "pansexual*", "transgender", "nonbinary", "non-binary",
        "sexual orientation", "sexuality", "sex life", "sexual*", "libido", "erectile",
        "came out", "coming out", "come out", "lgbt*", "polyamor*", "kink*",
    ),
    Sensitivity.ETHNIC_ORIGIN: (
        "ethnic*", "my race", "racial*", "mixed race", "heritage", "descent", "indigenous",
        "aboriginal", "roma", "latino", "latina", "latinx", "hispanic",
        "african-american", "asian-american", "first nations", "native american",
    ),
    Sensitivity.RELIGIOUS_BELIEF: (
        "religio*", "church", "mosque", "synagogue", "temple", "pray*", "god",
        "christian*", "catholic*", "protestant*", "evangelical", "mormon", "muslim",
        "islam*", "jewish", "jew", "judaism", "hindu*", "buddhis*", "sikh*", "atheis*",
        "agnostic", "bible", "quran", "koran", "torah", "ramadan", "kosher", "halal",
        "during lent", "for lent", "sabbath", "faith", "spiritual*", "go to mass", "bar mitzvah",
        "bat mitzvah", "baptis*",
    ),
    Sensitivity.POLITICAL_OPINION: (
        "politic*", "vote for", "voted for", "voting for", "vote against", "election",
        "democrat*", "republican*", "labour party", "labor party", "tory", "tories",
        "conservative party", "conservatives", "socialis*", "communis*", "liberal",
        "libertarian*", "left-wing", "right-wing", "leftist", "far-right", "far-left",
        "activis*", "protest*", "feminis*", "green party", "party member",
    ),
    Sensitivity.TRADE_UNION: (
        "trade union", "labor union", "labour union", "union member*", "my union",
        "join the union", "joined the union", "in the union", "unionised", "unionized",
        "union dues", "union rep",
        "shop steward", "collective bargaining", "on strike", "going on strike",
    ),
    Sensitivity.FINANCIAL_DETAIL: (
        "salary", "salaries", "earn", "earning*", "income", "wage", "paycheck",
        "paycheque", "payslip", "debt", "owe", "loan", "mortgage", "credit score",
        "credit rating", "credit card number", "card number", "account number", "iban",
        "bank account", "routing number", "sort code", "bankrupt*", "overdraft",
        "overdrawn", "net worth", "tax return", "pin number", "pin code", "savings",
        "in the red", "credit card debt", "student loan*",
    ),
}
# fmt: on

PRIORITY: tuple[Sensitivity, ...] = (
    Sensitivity.GENETIC,
    Sensitivity.BIOMETRIC,
    Sensitivity.HEALTH,
    Sensitivity.SEX_LIFE,
    Sensitivity.ETHNIC_ORIGIN,
    Sensitivity.RELIGIOUS_BELIEF,
    Sensitivity.POLITICAL_OPINION,
    Sensitivity.TRADE_UNION,
    Sensitivity.FINANCIAL_DETAIL,
)

# Idioms removed before matching: they use a class's word but say nothing about it.
IDIOMS: tuple[str, ...] = (
    r"sick (?:and tired )?of",
    r"sick to death of",
    r"make[s]? me sick",
    r"retail therapy",
    r"(?:oh )?my god",
    r"thank god",
    r"for god's sake",
    r"god knows",
    r"god forbid",
    r"(?:a |such a |what a )?pain in the (?:neck|ass|arse|butt)",
    r"growing pains",
    r"no pain,? no gain",
    r"debt of gratitude",
    r"i owe you(?: one)?",
    r"human race",
    r"rat race",
    r"race (?:day|car|track|against)",
    r"(?:running|marathon|bike|horse) race",
    r"stroke of (?:luck|genius)",
    r"pain au",
    r"on the (?:right|left) track",
    r"labou?r of love",
    # issue 18: names and hyperbole that borrow a class's word
    r"sick(?=!)",  # "sick!": slang praise
    r"that'?s (?:so )?sick",
    r"god of war",
    r"doctor who",
    r"eric church",
    r"pray for (?:me|us)",
    r"(?:^|(?<=[.!?] ))(?:god|lord)(?=[,!])",
    r"(?:gave|give|giving|gives) (?:me|a man|you|us|someone|her|him) a (?:heart attack|stroke)",
    r"(?:nearly|almost) had a (?:heart attack|stroke) (?:when|at|over)",
    r"fingerprints (?:all )?over",
    r"good genes",
    r"gene's",
    r"in (?:my|our|his|her|their) dna",
    r"loan officers?",
    r"(?:readers'?|book|film|movie) votes?",
    r"vote[ds]? for (?:pizza|takeaway|curry|chinese|burgers|tacos)",
    # an occupation in health care says nothing about the speaker's health
    r"(?:i'm|i am|she's|he's|work as|working as|training as|training to be|studying to be|"
    r"want to be) an? (?:\w+ )?(?:nurse|doctor|physio\w*|(?:physical |occupational |speech )?"
    r"therapist|surgeon|dentist|psychologist|psychiatrist|counsell?or|pharmacist)",
)
_IDIOM = re.compile(r"\b(?:" + "|".join(IDIOMS) + r")\b")
_PATTERNS: dict[Sensitivity, re.Pattern[str]] = {
    cls: compile_lexicon(words) for cls, words in LEXICON.items()
}


@dataclass(frozen=True, slots=True)
class SensitiveMatch:
    sensitivity: Sensitivity
    cue: str  # the words that matched, for "how do you know this?"


def find_sensitive(text: str) -> list[SensitiveMatch]:
    """Every sensitive class the lexicon finds in ``text``, in ``PRIORITY`` order."""
    folded = _IDIOM.sub(" ", fold(text))
    found: list[SensitiveMatch] = []
    for cls in PRIORITY:
        hit = _PATTERNS[cls].search(folded)
        if hit is not None:
            found.append(SensitiveMatch(cls, hit.group(0)))
    return found


def sensitivity_of(text: str, hint: Sensitivity | None) -> Sensitivity:
    """The hint if it names a sensitive class, else the lexicon's class, else normal."""
    if hint is not None and hint is not Sensitivity.NORMAL:
        return hint
    found = find_sensitive(text)
    return found[0].sensitivity if found else Sensitivity.NORMAL
