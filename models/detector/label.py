"""Regenerates ``models/detector/data/labelled.jsonl``: the detector's labelled sentences.

Run ``.venv/bin/python models/detector/label.py`` (not part of ``make model``: the
committed jsonl is the source of truth for training; this script is how it was made).

Invariants: deterministic (no randomness; samples are chosen by CRC-32 of the text, so
the same inputs give the same bytes). Three origins, deduplicated on the normalised
text, and a later origin wins: ``persona`` and ``turn`` sentences from
Synthetic-Persona-Chat (CC BY 4.0, see models/detector/README.md) labelled by the
rules below, then ``hand`` (``data/hand_cases.txt``, written by hand), and last the
hand corrections of the audit (``data/overrides.tsv``) replace a rule label outright.
The split is ``test`` when CRC-32 of the normalised text is 0 mod 5, else ``train``.

Every rule is a regular expression over the lowercased sentence, tried in the order
written; the first that matches decides. ``explain`` names the rule that decided each
label, which is what the audit reads.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
DEFAULT_SOURCE = Path("/work/shared/data/synthetic-persona-chat")
SOURCE_FILES = ("Synthetic-Persona-Chat_test.csv", "Synthetic-Persona-Chat_valid.csv")
HAND = DATA / "hand_cases.txt"
OVERRIDES = DATA / "overrides.tsv"
OUT = DATA / "labelled.jsonl"
TURN_SENTENCES = 15_000  # how many conversation sentences to keep (by CRC-32 order)
TEST_MODULUS = 5

CONTENT_TYPES = (
    "preference",
    "routine",
    "goal",
    "constraint",
    "relationship",
    "personal_fact",
    "opinion",
    "event",
)
SENSITIVITIES = (
    "normal",
    "health",
    "sex_life",
    "ethnic_origin",
    "political_opinion",
    "religious_belief",
    "trade_union",
    "genetic",
    "biometric",
    "financial_detail",
)
TIME_KINDS = ("permanent", "for_now", "seasonal", "one_off", "past")


def rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# ------------------------------------------------------------------ candidate rules
# Applied to the sentence after leading interjections ("Oh, cool!", "Hi,") are
# stripped. A rule that matches makes the sentence NOT a candidate; a sentence no rule
# rejects is a candidate. Persona sentences skip the rules marked turn_only.
_INTERJECTION = rx(
    r"^(?:(?:hi|hello|hey|oh|ah|well|yeah|yes|yep|no|nope|wow|so|haha|hah|lol|um|uh|"
    r"hmm|okay|ok|sure|cool|great|nice|awesome|actually|honestly|really|right|"
    r"of course|absolutely|definitely|totally|indeed|ha|aw|ooh|whoa|man|dude|"
    r"thanks|thank you|me too|same here|same|exactly|true|good|interesting|"
    r"that's cool|that's great|that's awesome|that's nice|that's interesting)"
    r"(?:\s+there)?\s*[,!.]+\s*)+"
)
CANDIDATE_RULES: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    # (name, pattern, turn_only)
    ("question", rx(r"\?\s*[\"')]*\s*$"), False),
    ("placeholder", rx(r"\[[^\]]*\]"), False),
    ("too_short", rx(r"^(?!i'm |i am |my )\W*(?:\S+\s+){0,1}\S+\W*$"), True),
    (
        "context_bound",
        rx(
            r"^(?:mine|hers|his|ours) is\b|^(?:and |but )?i(?:'ve| have| am|'m)? (?:\w+ )?"
            r"(?:it|that|this|them|those|these|one)(?: (?:\w+|a few times|too|so much))?\W*$|"
            r"^it's (?:\w+ )*(?:that|which) (?:\w+ )*me\b|^i'm (?:really |so )?proud of it\b"
        ),
        True,
    ),
    ("listener", rx(r"\b(?:you|your|you're|you've|you'll|you'd|yours|yourself)\b"), False),
    (
        "reported",
        rx(
            r"\b(?:my|our|his|her|their)\s+(?:\w+\s+){0,2}(?:says?|said|thinks|told me|"
            r"tells me|believes|claims|reckons|insists|wants me to|keeps saying)\b|"
            r"\baccording to\b|\bapparently\b|^(?:they|he|she) (?:say|says|said|think|thinks|"
            r"want me|wants me|told me)\b"
        ),
        False,
    ),
    (
        "hypothetical",
        rx(
            r"^(?:if|unless|suppose|imagine|what if|in another life|maybe|perhaps)\b|"
            r"\b(?:would|could|might)\b(?!\s+(?:like|love)\s+to\s+(?!hear|know|see it|try it|"
            r"do that|meet|chat|talk))|\bi'd\b(?!\s+(?:like|love)\s+to\s+(?!hear|know|see it|"
            r"try it|do that|meet|chat|talk))"
        ),
        False,
    ),
    (
        "command",
        rx(
            r"^(?:please|remember|remind|book|call|tell|set|send|add|make sure|find|show|"
            r"let's|let me|let us|buy|schedule|don't forget|go|try|check|order|cancel|"
            r"keep|take care|have a|enjoy|good luck|congratulations|congrats|bye|goodbye)\b"
        ),
        True,
    ),
    (
        "chit_chat",
        rx(
            r"^(?:i think so|i agree|i know|i see|i understand|i'm glad|i am glad|"
            r"i'm sorry|i am sorry|i'm sure|i am sure|i hope|i guess|i bet|i mean|"
            r"i can imagine|i can't imagine|i can see|i'm not sure|i am not sure|"
            r"i don't know|i do not know|i'll have to|i'll check|i'll try|i'll definitely|"
            r"i'll let|i'll think|i'll keep|i'll be sure|i'll talk|i'll see|i'll text|"
            r"i'll call|i'll look|i'd love that|i'd like that|i'm happy to|i'm excited to|"
            r"i can't wait|i'm looking forward|i look forward|i'm doing|i'm good|"
            r"i'm fine|i'm great|i'm well|i'm ok|i'm okay|i've heard|i heard|i wonder|"
            r"i totally|i definitely agree|i couldn't agree|i appreciate|i'm impressed|"
            r"i thought so|i have to say|i must say|i'm curious|i have to admit|"
            r"i have to go|i gotta go|i should go|i need to go|i better go|"
            r"i'm so happy for|i'm happy for|i'm proud of|i can relate|i feel the same|"
            r"i'm jealous|i envy|i believe so|i think that's|i think it's|i think that would|"
            r"i love that|i like that|i love it|i like it|i love this|i like this|"
            r"i love the name|i like the name|i love those|i love them|i've never met|"
            r"i never met|i'm not surprised|i'm sure it|i was just|i'm just|i didn't know|"
            r"i did not know|i had no idea|i've always wanted to meet|i've never heard|"
            r"i haven't heard|we should (?:get|do|hang|meet|go|talk|play|watch|try)|we could|"
            r"we'll|we can|we will|i think i'll|i think i will|sounds|that sounds|"
            r"i (?:like|love|enjoy) (?:those|these|that|them|it)\b)\b"
        ),
        True,
    ),
    (
        "not_first_person",
        rx(r"^(?!.*\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|us)\b)"),
        False,
    ),
)


# ------------------------------------------------------------------ content type rules
_KIN = (
    r"(?:wife|husband|mom|mum|mother|dad|father|parents|sister|sisters|brother|brothers|"
    r"son|sons|daughter|daughters|kids|children|child|boyfriend|girlfriend|partner|"
    r"fianc[ée]e?|grandma|grandpa|grandmother|grandfather|grandparents|grandchildren|"
    r"grandkids|aunt|uncle|cousin|cousins|friend|friends|best friend|family|twin|"
    r"nephew|niece|in-laws|spouse|baby|stepson|stepdaughter|siblings|roommate|boss|"
    r"neighbou?r|neighbou?rs|colleague|coworker|co-worker)"
)
CONTENT_TYPE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "constraint",
        rx(
            r"\ballerg|\b(?:can't|cannot|can not|don't|do not|never|won't)\s+(?:eat|drink|"
            r"have|fly|drive|swim|walk|stand the taste)\b|\bi(?:'m| am) (?:a |also |also a )?"
            r"(?:vegan|vegetarian)\b|"
            r"\bgluten|\blactose|intoleran|\bkosher\b|\bhalal\b|\bwheelchair|\bblind\b(?! dates?)|"
            r"\bdeaf\b|\bafraid of\b|\bscared of\b|\bterrified of\b|\bfear of\b|phobia|"
            r"\bnot allowed\b|\bhave to avoid\b|\bavoid\b|\bcan't afford\b|\bbudget\b|"
            r"\bdon't drink\b|\bsober\b|\bmy diet\b|\bon a diet\b"
        ),
    ),
    (
        "routine",
        rx(
            r"\bevery\s+(?:day|morning|night|evening|week|weekend|weekday|monday|tuesday|"
            r"wednesday|thursday|friday|saturday|sunday|other)\b|\beach (?:day|week|"
            r"morning|night)\b|\bdaily\b|\bweekly\b|\busually\b|\boften\b|\bnormally\b|"
            r"\bon (?:weekends|the weekends|sundays|mondays|tuesdays|wednesdays|"
            r"thursdays|fridays|saturdays)\b|\bmost (?:days|mornings|nights|weekends)\b|"
            r"\b(?:once|twice|three times) a\b|\bin the mornings\b|\bat night\b|"
            r"\bregularly\b|\bhabit\b|\broutine\b|\bevery chance\b|\ball the time\b"
        ),
    ),
    (
        "goal",
        rx(
            r"\bwant to\b|\bwanna\b|\bplan(?:ning)? to\b|\bhop(?:e|ing) to\b|"
            r"\bdream(?:s|ing)? (?:of|is|to)\b|\bmy dream\b|\bgoals?\b|\bsomeday\b|"
            r"\bone day\b|\bi'd (?:like|love) to\b|\bwould (?:like|love) to\b|"
            r"\bsaving (?:up )?(?:for|to)\b|\btrying to\b|\baspir|\bstudying to\b|"
            r"\bworking (?:towards?|on becoming)\b|\baim(?:ing)? to\b|\bwish(?:es)? to\b|"
            r"\bbucket list\b|\bintend\b|\bgoing to (?:become|be a)\b|\blearning to\b|"
            r"\b(?:always |have always |'ve always )?wanted to\b|"
            r"\bin the future\b"
        ),
    ),
    (
        "event",
        rx(
            r"\byesterday\b|\blast (?:week|night|month|year|weekend|summer|winter|spring|"
            r"fall|autumn|time|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|"
            r"\b\w+ (?:days|weeks|months|years) ago\b|\bjust (?:bought|got|moved|graduated|"
            r"finished|started|adopted|had|came back|won|lost|returned|married|found|"
            r"retired|quit|completed|published|released|opened)\b|\brecently\b|"
            r"\btomorrow\b|\btonight\b|\bnext (?:week|month|year|weekend|summer|monday|"
            r"tuesday|wednesday|thursday|friday|saturday|sunday)\b|\bthis (?:weekend|"
            r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|"
            r"^(?:i|we) (?:went|visited|"
            r"traveled|travelled|won|bought|met|saw|competed|attended) |"
            r"\bi(?:'m| am) (?:thinking about|going to) (?:go|going)\b"
        ),
    ),
    (
        "preference_lead",
        rx(
            r"^(?:and |but )?(?:i|we) (?:also |really |just |absolutely )?(?:like|love|enjoy|"
            r"prefer|adore|hate)\b"
        ),
    ),
    (
        "relationship",
        rx(
            rf"\bmy {_KIN}\b|\bmy (?:\w+ )?{_KIN}\b|\bi(?:'m| am) (?:married|single|"
            r"divorced|widowed|engaged)\b|\bi have (?:\w+ )?(?:kids|children|sons|"
            r"daughters|sisters|brothers|siblings|grandchildren|grandkids|a son|a daughter|"
            r"a sister|a brother|a wife|a husband|a boyfriend|a girlfriend|a partner|"
            r"\w+ kids|\w+ children)\b|\bi(?:'m| am) dating\b|\bmarried\b"
        ),
    ),
    (
        "opinion",
        rx(
            r"^(?:i think|i believe|i feel (?:that|like)|in my opinion|personally,? i think)"
            r"|\bin my (?:opinion|view)\b|\b(?:is|are) (?:the best|the worst|overrated|"
            r"underrated|better than|worse than|so important|important)\b|\bshould\b|"
            r"\brespect for\b"
        ),
    ),
    (
        "preference",
        rx(
            r"\blike\b|\blikes\b|\bliked\b|\blove\b|\bloved\b|\bloves\b|\benjoy|\bfavou?rite|"
            r"\bprefer|\bfan of\b|\binto\b|\bhate\b|\bhated\b|\bdislike|\bcan't stand\b|"
            r"\badore\b|\bpassion|\bobsessed\b|\bfond of\b|\bcrazy about\b|\bbig fan\b|"
            r"\bnot a fan\b|\bmy weakness\b|\bi'm a (?:\w+ )?lover\b|\bhooked on\b|"
            r"\blooking for new\b"
        ),
    ),
)
DEFAULT_CONTENT_TYPE = "personal_fact"
# A rule named "<type>_lead" labels <type>: it catches a sentence by how it starts
# ("I love ...") before a later rule would catch a word inside it ("my friends").

# ------------------------------------------------------------------ sensitivity rules
# Occupations are facts about work, not about the user's health or beliefs: "I am a
# nurse" stays normal. These are removed from the text before the health rule runs.
_OCCUPATION = rx(
    r"\bi(?:'m| am| work as) an? (?:\w+ )?(?:doctor|nurse|surgeon|therapist|dentist|"
    r"physician|pharmacist|paramedic|vet|veterinarian|psychologist|psychiatrist|"
    r"physical therapist|medical \w+|pa)\b(?: (?:at|in) (?:a |the )?(?:\w+ )*hospital)?|"
    r"\bwork (?:at|in) (?:a |the )?(?:\w+ )?(?:hospital|clinic|pharmacy)\b|"
    r"\bstudying (?:medicine|nursing)\b|\bmedical school\b|\bphysical therap(?:y|ist)\b|"
    r"\bhelp(?:ing)? (?:out )?(?:people|doctors)\b.*$|\bin the hospital\b(?= and|\.)|"
    r"\bbabies in the hospital\b|\ba job at a hospital\b"
)
SENSITIVITY_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "genetic",
        rx(
            r"\bdna\b|\bgenetic|\bgenes?\b|\bbrca|\bhereditary (?:condition|disease)|"
            r"23andme|\bcarrier (?:of|for) (?:the )?(?:gene|cystic|sickle)"
        ),
    ),
    (
        "biometric",
        rx(r"\bfingerprint|\bface id\b|facial recognition|\biris\b|\bretina|voiceprint|biometric"),
    ),
    (
        "health",
        rx(
            r"\ballerg|\bdiabet|\bcancer\b|\basthma|\bmy depression\b|\bhave depression\b|"
            r"\banxiety\b|"
            r"\badhd\b|\bautis|\bdisease\b|\billness\b|\bsurgery\b|\bmedication\b|\bpills\b|"
            r"\bmy therap|\bin therapy\b|\bsee a therapist\b|\bphysio|\bmy doctor\b|"
            r"\bdisorder\b|\binjur|\bbroke my\b|\bchronic\b|\bpregnan|\bblind\b(?! dates?)|"
            r"\bdeaf\b|\bwheelchair|\bdisabilit|\bdisabled\b|"
            r"\binsomnia\b|\bmigraine|\bheart (?:attack|condition|disease|surgery|"
            r"outside)|\bamputat|\bparaly|\brecovering\b|\brehab\b|\bsober\b|\balcoholic\b|"
            r"\baddict(?:ed|ion)\b|\bmy mental health\b|\bptsd\b|\bbipolar\b|\bepilep|"
            r"\barthritis\b|"
            r"\bblood pressure\b|\bcholesterol\b|\bceliac\b|\bcoeliac\b|\bintoleran|"
            r"\bhearing aids?\b|\bprosthetic|\bremission\b|\bchemo|\bhiv\b|\bdyslex|"
            r"\bcrutches\b|\bi(?:'m| am| was| got| feel) sick\b|\bsick with\b|"
            r"\b(?:was|been|stay(?:ed)?) in (?:the )?hospital\b|\bdentist appointment\b|"
            r"\bto the dentist\b|\bsclerosis\b|\bdementia\b|\balzheimer|\bstroke\b|"
            r"\bcolou?r ?blind(?!ness)|\bantibiotics\b|\binsulin\b|\binhaler\b|"
            r"\bpanic attacks?\b|\bi (?:used to )?smoke\b|\bsmoker\b|\bquit smoking\b|"
            r"\bvaccin|\bmake me depressed\b|\bi(?:'m| am| was| feel) depressed\b"
        ),
    ),
    (
        "religious_belief",
        rx(
            r"(?<!eric )\bchurch|\bmosque\b|\bsynagogue\b|\btemple\b|\bpray(?! love)|"
            r"\bchristian|\bmuslim|"
            r"\bjewish\b|\bcatholic|\bhindu|\bbuddhis|\batheist|\bagnostic\b|\bbible\b|"
            r"\bquran\b|\bkoran\b|\btorah\b|\bgod\b(?! of war)|\bfaith\b|"
            r"\breligio(?!n\.)|\bramadan\b|"
            r"\bkosher\b|\bhalal\b|\bsabbath\b|\bmormon|\bbaptis|\bpastor\b|\bpriest\b|"
            r"\brabbi\b|\bimam\b|\bmass on\b|\blent\b|\bbar mitzvah\b|\bspiritual\b|"
            r"\bjesus\b|\bsikh"
        ),
    ),
    (
        "political_opinion",
        rx(
            r"\bdemocrat|\brepublican|\bliberal\b|\bconservative\b|"
            r"(?<!able to )(?<!can )(?<!finally )\bvot(?:e|ed|er|ing)\b|"
            r"\bpolitic|\bsocialist|\blibertarian|\belection|\bcampaign(?:ing|ed)? for\b|"
            r"\bprotest|\bleft-wing\b|\bright-wing\b|\blabour\b|\bgreen party\b|"
            r"\bpro-choice\b|\bpro-life\b|\bcanvass|\bparty member\b|\bcommunis|\bmarxis"
        ),
    ),
    (
        "ethnic_origin",
        rx(
            r"\bof \w+ (?:descent|heritage|origin|ancestry)\b|\bmy (?:ethnicity|heritage|"
            r"ancestry|ancestors)\b|\bethnic|\bi(?:'m| am) (?:half |a )?(?:black|african "
            r"american|hispanic|latino|latina|mixed race|biracial|native american|"
            r"indigenous|aboriginal|roma|kurdish)\b|\bmy family is (?:roma|black|hispanic)\b"
        ),
    ),
    (
        "sex_life",
        rx(
            r"\bgay\b|\blesbian|\bbisexual|\bqueer\b|\basexual|\bsexual(?! harass)|\bsex\b|"
            r"\bopen relationship\b|\bpolyamor|\bcelibate\b|\bcame out (?:to|as)\b|"
            r"\battracted to (?:men|women)\b|\bi(?:'m| am) straight\b"
        ),
    ),
    (
        "trade_union",
        rx(
            r"(?<!soviet )(?<!european )\bunion\b(?! jack)(?! station)|\bteamsters\b|"
            r"\bshop steward\b|\bunioni[sz]ed\b|\bon strike\b|\bunion dues\b"
        ),
    ),
    (
        "financial_detail",
        rx(
            r"\bsalary\b|\bi earn\b|\bi make \$|\b(?:earn|owe|save|saved|paid|make) (?:about |"
            r"around )?(?:\$|€|£)?\d|"
            r"\bincome\b|\bdebt\b|\bloans?\b|\bmortgage\b|\bcredit (?:card|score)\b|"
            r"\bbank account\b|\baccount number\b|\biban\b|\bsavings\b|"
            r"\b(?:went|go|declared|filed for) bankrupt|"
            r"\bpaycheck\b|\bpayday\b|\bmy rent\b|\bi owe\b|\b401k\b|\bpension\b|"
            r"\btax (?:return|bill)\b|\binherit|\bnet worth\b|\bmy investments?\b|"
            r"\bmoney is tight\b|\bbroke until\b|\bcan't afford\b|\bmy budget\b|"
            r"\b(?:a|my|pay) (?:\d+% )?raise\b"
        ),
    ),
)

# ------------------------------------------------------------------ time kind rules
_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
TIME_KIND_RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    # (name, label, pattern); the first match decides
    (
        "past_marker",
        "past",
        rx(
            r"\bused to\b|\bwhen i was\b|\b\w+ (?:days|weeks|months|years) ago\b|"
            r"\blast (?:week|night|month|year|weekend|summer|winter|spring|fall|autumn|"
            rf"election|{_DAYS})\b|\byesterday\b|\bgrowing up\b|\bas a (?:kid|child|"
            r"teen|teenager)\b|\bback in\b|\bformerly\b|\bin (?:19|20)\d\d\b"
        ),
    ),
    (
        "one_off_marker",
        "one_off",
        rx(
            rf"\btomorrow\b|\btonight\b|\bnext (?:week|month|year|weekend|summer|winter|"
            rf"spring|fall|autumn|{_DAYS})\b|\bthis (?:weekend|afternoon|evening|{_DAYS})\b|"
            rf"\bon {_DAYS}\b(?! nights?\b)|\blater today\b|\bin (?:two|three|a few|\d+) "
            r"(?:days|weeks)\b|\bupcoming\b|\bby (?:june|july|friday|the end of)\b|"
            r"\bi(?:'m| am) (?:thinking about|going to) (?:go|going)\b"
        ),
    ),
    (
        "seasonal_marker",
        "seasonal",
        rx(
            r"\bevery (?:summer|winter|spring|fall|autumn|christmas|holiday|thanksgiving|"
            r"easter|ramadan|lent|july|august|december)\b|\bin (?:the )?(?:summers?|"
            r"winters?|spring|springtime|fall|autumn)\b|\bsummers\b|\bwinters\b|"
            r"\bduring (?:the )?(?:holidays|summer|winter|ramadan|lent)\b|\bat christmas\b|"
            r"\beach (?:summer|winter|spring|autumn|fall)\b|\bin (?:july|august|december)\b"
        ),
    ),
    (
        "for_now_marker",
        "for_now",
        rx(
            r"\bfor now\b|\bthese days\b|\bat the moment\b|\bright now\b|\bcurrently\b|"
            r"\bfor the time being\b|\bthis (?:month|year|semester|week|term)\b|"
            r"\btemporar|\blately\b|\bnowadays\b|\bat present\b|\bbetween jobs\b|"
            r"\buntil (?:my|the|next|i)\b|\bi(?:'m| am) (?:staying|recovering|"
            r"working on|taking a break|on a diet|on medication|on sabbatical)\b|"
            r"^(?:\w+ \w+, )?just working on\b"
        ),
    ),
    (
        "past_verb",
        "past",
        rx(
            r"^(?:\W*\w+,?\s+)?(?:i|we) (?:just |recently |finally |also )?(?:was|were|had|went|"
            r"grew up|moved|lived|graduated|got|did|played|worked|retired|quit|lost|broke|"
            r"won|bought|visited|traveled|travelled|met|started|finished|studied|spent|"
            r"adopted|married|divorced|left|sold|built|wrote|ran|took|made|saw|learned|"
            r"learnt|became|joined|tried|gave|found|came|competed|served|received|"
            r"completed|switched|dropped out|volunteered|helped|designed|created|"
            r"was born|didn't)\b|^my \w+ (?:was|were|passed)\b|"
            r"\bjust (?:bought|got|moved|graduated|finished|started|"
            r"adopted|had|won|lost|retired|quit)\b|\brecently\b"
        ),
    ),
)
DEFAULT_TIME_KIND = "permanent"


@dataclass(frozen=True)
class Labelled:
    text: str
    candidate: bool
    content_type: str | None
    sensitivity: str
    time_kind: str | None
    origin: str
    rules: tuple[str, ...] = ()  # the rules that decided, for the audit


def norm(text: str) -> str:
    """The key sentences are deduplicated and split on."""
    return " ".join(text.lower().replace("\u2019", "'").split())


def split_of(text: str) -> str:
    return "test" if zlib.crc32(norm(text).encode()) % TEST_MODULUS == 0 else "train"


def stripped(text: str) -> str:
    lowered = norm(text)
    return _INTERJECTION.sub("", lowered).strip()


def label(text: str, origin: str) -> Labelled:
    """Rule labels for one dataset sentence (``origin`` is "persona" or "turn")."""
    body = stripped(text)
    rules: list[str] = []
    candidate = True
    for name, pattern, turn_only in CANDIDATE_RULES:
        if turn_only and origin != "turn":
            continue
        if pattern.search(body):
            candidate = False
            rules.append(f"not_candidate:{name}")
            break
    sensitivity, sens_rule = "normal", "sensitivity:default"
    health_text = _OCCUPATION.sub(" ", body)
    for name, pattern in SENSITIVITY_RULES:
        if pattern.search(health_text if name == "health" else body):
            sensitivity, sens_rule = name, f"sensitivity:{name}"
            break
    rules.append(sens_rule)
    if not candidate:
        return Labelled(text, False, None, sensitivity, None, origin, tuple(rules))
    content_type, type_rule = DEFAULT_CONTENT_TYPE, "type:default"
    for name, pattern in CONTENT_TYPE_RULES:
        if pattern.search(body):
            content_type, type_rule = name.removesuffix("_lead"), f"type:{name}"
            break
    time_kind, time_rule = DEFAULT_TIME_KIND, "time:default"
    for name, value, pattern in TIME_KIND_RULES:
        if pattern.search(body):
            time_kind, time_rule = value, f"time:{name}"
            break
    rules += [type_rule, time_rule]
    return Labelled(text, True, content_type, sensitivity, time_kind, origin, tuple(rules))


# ------------------------------------------------------------------ sources
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(]?[A-Z0-9])")
_SPEAKER = re.compile(r"^\s*user\s*\d\s*:\s*", re.IGNORECASE)


def clean(sentence: str) -> str:
    sentence = " ".join(sentence.split())
    return sentence


def source_rows(source: Path) -> Iterator[dict[str, str]]:
    for name in SOURCE_FILES:
        with (source / name).open(encoding="utf-8", newline="") as handle:
            yield from csv.DictReader(handle)


def persona_sentences(source: Path) -> list[str]:
    seen: dict[str, str] = {}
    for row in source_rows(source):
        for column in ("user 1 personas", "user 2 personas"):
            for line in row[column].splitlines():
                sentence = clean(line)
                if sentence:
                    seen.setdefault(norm(sentence), sentence)
    return sorted(seen.values(), key=norm)


def turn_sentences(source: Path) -> list[str]:
    seen: dict[str, str] = {}
    for row in source_rows(source):
        for turn in row["Best Generated Conversation"].splitlines():
            body = _SPEAKER.sub("", turn).strip()
            for part in _SENTENCE_END.split(body):
                sentence = clean(part)
                if 2 <= len(sentence) <= 300:
                    seen.setdefault(norm(sentence), sentence)
    # A deterministic sample: the TURN_SENTENCES with the smallest CRC-32.
    ranked = sorted(seen.values(), key=lambda s: (zlib.crc32(norm(s).encode()), norm(s)))
    return sorted(ranked[:TURN_SENTENCES], key=norm)


def hand_cases(path: Path = HAND) -> list[Labelled]:
    out: list[Labelled] = []
    header: list[str] | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            header = line[1:].split()
            continue
        if header is None:
            raise ValueError(f"{path}:{number}: a sentence before any '@' header")
        out.append(_from_header(line, header, "hand", f"{path.name}:{number}"))
    return out


def _from_header(text: str, fields: list[str], origin: str, where: str) -> Labelled:
    if fields[0] == "no":
        sensitivity = fields[1] if len(fields) > 1 else "normal"
        _check(sensitivity, SENSITIVITIES, where)
        return Labelled(text, False, None, sensitivity, None, origin)
    if fields[0] != "yes" or len(fields) != 4:
        raise ValueError(f"{where}: header must be 'yes TYPE SENSITIVITY TIME' or 'no [S]'")
    _, content_type, sensitivity, time_kind = fields
    _check(content_type, CONTENT_TYPES, where)
    _check(sensitivity, SENSITIVITIES, where)
    _check(time_kind, TIME_KINDS, where)
    return Labelled(text, True, content_type, sensitivity, time_kind, origin)


def _check(value: str, allowed: tuple[str, ...], where: str) -> None:
    if value not in allowed:
        raise ValueError(f"{where}: {value!r} is not one of {allowed}")


def overrides(path: Path = OVERRIDES) -> dict[str, list[str]]:
    """Audit corrections: normalised text -> header fields ("no" or "yes T S K")."""
    out: dict[str, list[str]] = {}
    if not path.exists():
        return out
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        text, fields, *_note = raw.split("\t")
        out[norm(text)] = fields.split()
        _from_header(text, fields.split(), "check", f"{path.name}:{number}")
    return out


def build(source: Path) -> list[Labelled]:
    rows: dict[str, Labelled] = {}
    for sentence in persona_sentences(source):
        rows[norm(sentence)] = label(sentence, "persona")
    for sentence in turn_sentences(source):
        rows.setdefault(norm(sentence), label(sentence, "turn"))
    fixes = overrides()
    for key, fields in fixes.items():
        if key not in rows:
            raise ValueError(f"override for a sentence that is not in the data: {key!r}")
        old = rows[key]
        new = _from_header(old.text, fields, old.origin, "overrides")
        rows[key] = Labelled(**{**new.__dict__, "rules": ("override",)})
    for case in hand_cases():
        rows[norm(case.text)] = case
    return sorted(rows.values(), key=lambda r: norm(r.text))


def as_json(row: Labelled) -> str:
    record = {
        "text": row.text,
        "candidate": row.candidate,
        "content_type": row.content_type,
        "sensitivity": row.sensitivity,
        "time_kind": row.time_kind,
        "origin": row.origin,
        "split": split_of(row.text),
    }
    return json.dumps(record, ensure_ascii=False, sort_keys=False)


def summary(rows: list[Labelled]) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {
        key: Counter() for key in ("origin", "candidate", "content_type", "sensitivity", "time")
    }
    for row in rows:
        counts["origin"][f"{row.origin}/{split_of(row.text)}"] += 1
        counts["candidate"][f"{row.origin}:{row.candidate}"] += 1
        counts["sensitivity"][row.sensitivity] += 1
        if row.candidate:
            counts["content_type"][str(row.content_type)] += 1
            counts["time"][str(row.time_kind)] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--audit-sample",
        type=int,
        default=0,
        help="print N rule-labelled sentences (chosen by CRC-32) with the rules that decided",
    )
    parser.add_argument("--audit-salt", default="audit:", help="which sample to draw")
    args = parser.parse_args(argv)
    rows = build(args.source)
    if args.audit_sample:
        ruled = [r for r in rows if r.origin != "hand" and r.rules != ("override",)]
        ruled.sort(key=lambda r: zlib.crc32((args.audit_salt + norm(r.text)).encode()))
        for row in ruled[: args.audit_sample]:
            fields = (
                f"yes {row.content_type} {row.sensitivity} {row.time_kind}"
                if row.candidate
                else f"no {row.sensitivity}"
            )
            print(f"{row.text}\t{fields}\t{row.origin}\t{','.join(row.rules)}")
        return 0
    args.out.write_text("".join(as_json(r) + "\n" for r in rows), encoding="utf-8")
    for key, counter in summary(rows).items():
        print(key, dict(sorted(counter.items())), file=sys.stderr)
    print(f"wrote {len(rows)} sentences to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
