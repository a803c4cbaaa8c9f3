"""Cue lexicons the detector's features read: per sensitive class, and for chatter.

Invariants: pure and deterministic; every function reads only the text it is handed
(lowercased, apostrophes straightened: ``features.normalised``). ``sensitive_cues``
gives one 0/1 flag per sensitive class, in ``SENSITIVE_CLASSES`` order; a flag says
only that the words of that class are present (after ``IDIOMS`` are blanked out), not
that the sentence is sensitive: the model learns how far to trust each flag from the
labelled data. ``is_short_chatter`` is the rule that keeps short chatter ("Ugh,
Mondays.", "lol same") out of the candidates and the sensitive classes: at most
``SHORT_CHATTER_WORDS`` words and no first-person subject or possessive word.

The lists are written from general knowledge of each class (conditions, medicines,
faiths, parties, unions, peoples, money words), not copied from any evaluation set;
they are broader than ``protocol.consolidation.sensitivity`` (which can only raise a
class, so it must stay cautious), because here a flag is only evidence.
"""

from __future__ import annotations

import re

from protocol.model import Sensitivity

# every sensitive class, in the enum's order (the order of the features)
SENSITIVE_CLASSES = tuple(s.value for s in Sensitivity if s is not Sensitivity.NORMAL)

# Idioms blanked out before the class cues are looked for: they borrow a class's word
# and say nothing about it.
IDIOMS: tuple[str, ...] = (
    r"sick (?:and tired )?of",
    r"sick to death of",
    r"makes? me sick",
    r"(?:oh )?my god",
    r"thank (?:god|heavens|the lord)",
    r"for god's sake",
    r"god knows",
    r"god forbid",
    r"pray for (?:me|us)",
    r"god of war",
    r"doctor who",
    r"eric church",
    r"(?:gave|give|giving|gives) (?:me|a man|you|us|someone|her|him) "
    r"a (?:heart attack|stroke|headache|migraine)",
    r"(?:nearly|almost) had a (?:heart attack|stroke)(?= when| at| over)",
    r"(?:a |such a |what a )?pain in the (?:neck|ass|arse|butt)",
    r"retail therapy",
    r"debt of gratitude",
    r"i owe you(?: one| a \w+)?",
    r"(?:human|rat|arms) race",
    r"race (?:day|car|track|against)",
    r"(?:a |the )?\d+k (?:race|run)",
    r"(?:running|marathon|bike|horse|relay) race",
    r"stroke of (?:luck|genius)",
    r"union (?:station|square|street|road|jack|pier|terrace)",
    r"(?:european|soviet|student|students'|credit|civil) union",
    r"union of (?:people|everyone|us)",
    r"(?:bowling|tube|rail|train|bus|postal|airport) strikes?",
    r"strik(?:e|es|ing) out",
    r"fingerprints (?:all )?over",
    r"good genes",
    r"gene's",
    r"in (?:my|our|his|her|their) dna",
    r"bank holidays?",
    r"river ?banks?",
    r"loan officer",
    r"piggy bank",
    r"broke (?:my|his|her|the) (?:arm|leg|wrist|ankle|nose|finger|toe|foot|hand)s?(?= [a-z])",
    r"in the spirit of",
    r"spirit animal",
    r"party (?:planner|animal|games?|bus|food|dress|hat)",
    r"birthday party",
    r"dinner party",
    r"(?:book|film|movie|season|readers'?) (?:vote|poll)",
    r"(?:office|school|family) politics",
    r"vot(?:e|ed|ing) (?:for|on) (?:pizza|takeaway|curry|chinese|burgers|tacos|lunch|dinner|"
    r"the (?:team|band|group) name)",
    r"(?:everyone|we|they) voted (?:to|for) (?:get|order|have|go)",
    r"liberal with",
)

_DEMONYMS = (
    r"nigerian|yoruba|igbo|hausa|ghanaian|somali|ethiopian|eritrean|kenyan|ugandan|"
    r"zimbabwean|congolese|sudanese|jamaican|trinidadian|barbadian|caribbean|african|"
    r"indian|pakistani|bangladeshi|punjabi|gujarati|bengali|tamil|sinhalese|sri lankan|"
    r"nepali|kashmiri|chinese|cantonese|hakka|hokkien|taiwanese|japanese|korean|"
    r"vietnamese|filipino|filipina|thai|malaysian|indonesian|hmong|cambodian|mexican|"
    r"puerto rican|cuban|dominican|colombian|brazilian|salvadoran|guatemalan|peruvian|"
    r"chilean|argentinian|venezuelan|zapotec|mayan|irish|scottish|welsh|italian|sicilian|"
    r"greek|polish|ukrainian|russian|turkish|kurdish|armenian|lebanese|syrian|palestinian|"
    r"iraqi|iranian|persian|afghan|moroccan|egyptian|algerian|dutch|german|french|spanish|"
    r"portuguese|scandinavian|swedish|norwegian|danish|finnish|hungarian|romanian|"
    r"bulgarian|serbian|croatian|bosnian|albanian|arab|arabic|berber|maori|samoan|tongan|"
    r"hawaiian|cherokee|navajo|cree|ojibwe|lakota|inuit|métis|metis|romani|roma|gypsy|"
    r"ashkenazi|sephardi|mizrahi|jewish|hapa|latina|latino|latinx|chicano|chicana|"
    r"hispanic|asian|black|white|brown|mixed|biracial|multiracial"
)
_COUNTRIES = (
    r"nigeria|ghana|somalia|ethiopia|eritrea|kenya|uganda|zimbabwe|congo|sudan|jamaica|"
    r"trinidad|barbados|india|pakistan|bangladesh|punjab|gujarat|bengal|sri lanka|nepal|"
    r"kashmir|china|hong kong|taiwan|japan|korea|vietnam|the philippines|philippines|"
    r"thailand|malaysia|indonesia|cambodia|mexico|puerto rico|cuba|colombia|brazil|"
    r"el salvador|guatemala|peru|chile|argentina|venezuela|oaxaca|ireland|scotland|italy|"
    r"sicily|greece|poland|ukraine|russia|turkey|armenia|lebanon|syria|palestine|gaza|"
    r"iraq|iran|afghanistan|morocco|egypt|algeria|the netherlands|holland|germany|"
    r"portugal|romania|albania|bosnia|samoa|tonga|[a-z]+ province|guangzhou|chennai|"
    r"mumbai|delhi|lagos|accra|karachi|lahore|dhaka|manila|saigon|amritsar"
)
_KIN = (
    r"(?:my |our )?(?:family|parents|folks|grandparents|grandmother|grandfather|grandma|"
    r"grandpa|granny|nan|nana|nonna|nonno|abuela|abuelo|ancestors|great-grand\w*|mum|mom|"
    r"mother|dad|father|wife|husband|partner|boyfriend|girlfriend|fiancée?|in-laws|people)"
)

# fmt: off
CUES: dict[str, tuple[str, ...]] = {
    "health": (
        r"diagnos\w*", r"diabet\w*", r"insulin", r"blood (?:sugar|pressure|thinners|test|"
        r"clot)s?", r"asthma\w*", r"inhaler", r"epilep\w*", r"seizures?", r"migraines?",
        r"arthritis", r"cancer", r"tumou?rs?", r"chemo\w*", r"radiotherapy", r"remission",
        r"oncolog\w*", r"dementia", r"alzheimer'?s?", r"parkinson'?s?", r"strokes?",
        r"heart (?:attack|condition|failure|surgery|bypass|problems?|disease)", r"bypass",
        r"pacemaker", r"cholesterol", r"kidneys?", r"liver", r"thyroid", r"an(?:a)?emi\w*",
        r"hiv", r"prep", r"stis?", r"stds?", r"hepatitis", r"multiple sclerosis",
        r"crohn'?s", r"colitis", r"ibs", r"c[oe]eliac", r"lactose", r"intoleran\w*",
        r"allerg\w*", r"anaphyla\w*", r"epipen", r"adhd", r"autis\w*", r"dyslexi\w*",
        r"dyspraxi\w*", r"ocd", r"ptsd", r"bipolar", r"schizo\w*", r"depress\w*",
        r"anxiety", r"anxious", r"panic attacks?", r"eating disorder", r"anorexi\w*",
        r"bulimi\w*", r"self[- ]harm\w*", r"suicid\w*", r"therap(?:y|ist|ists)",
        r"counsell?(?:ing|or|ors)", r"psychiatr\w*", r"psycholog\w*", r"antidepressants?",
        r"ssris?", r"sertraline", r"prozac", r"fluoxetine", r"citalopram", r"lexapro",
        r"concerta", r"ritalin", r"adderall", r"metformin", r"statins?", r"painkillers?",
        r"opioids?", r"morphine", r"meds", r"medications?", r"medicine", r"pills?",
        r"tablets?", r"prescri\w*", r"cpap", r"apno?ea", r"insomnia", r"surgery",
        r"operation", r"(?:hip|knee) replacement", r"(?:get|getting|had|have) (?:it|them|"
        r"\w+) (?:both )?replaced", r"transplant", r"dialysis", r"biopsy", r"mri", r"x-ray",
        r"pregnan\w*", r"weeks pregnant", r"miscarr\w*", r"ivf", r"fertility",
        r"infertil\w*", r"c-section", r"caesarean", r"postnatal", r"postpartum",
        r"menopaus\w*", r"endometriosis", r"pcos", r"contracepti\w*", r"the pill",
        r"vasectomy", r"hysterectomy", r"mastectomy", r"disab\w*", r"wheelchair",
        r"walker", r"crutches", r"hearing aids?", r"deaf", r"blind", r"colou?r ?blind\w*",
        r"stutter", r"stammer", r"sober", r"sobriety", r"relapse\w*", r"rehab",
        r"recovering", r"alcoholi\w*", r"addict\w*", r"(?:had|have) a drink in",
        r"injur\w*", r"fractur\w*", r"broke my \w+", r"sprain\w*", r"slipped disc",
        r"(?:my|bad) (?:back|knees?|hips?|joints?)(?: \w+)? (?:is|are|'s|been|pain|aches?)",
        r"chronic", r"fibromyalgia", r"long covid", r"covid", r"infection", r"antibiotics?",
        r"ill", r"illness", r"sick", r"hospital\w*", r"a&e", r"gp", r"doctors?",
        r"doctor's orders", r"specialist", r"consultant", r"clinic", r"physio\w*",
        r"prostate", r"kidney stones?", r"gout", r"vertigo", r"tinnitus", r"cataracts?",
        r"glaucoma", r"eczema", r"psoriasis", r"hernia", r"ulcers?", r"osteopor\w*",
        r"mental health", r"burnout", r"falls", r"pain", r"aches?", r"symptoms?",
        r"nhs", r"hormone\w*", r"thyroid", r"vaccin\w*", r"disease", r"disorder",
        r"condition",
    ),
    "sex_life": (
        r"gay", r"lesbian", r"bi", r"bisexual", r"i'm pan", r"pansexual", r"asexual",
        r"aroace", r"aromantic", r"queer", r"homosexual\w*", r"heterosexual\w*",
        r"(?:i'm|i am|he's|she's|they're) straight", r"trans", r"transgender",
        r"transition\w*", r"non-?binary", r"they/them", r"he/him", r"she/her", r"came out",
        r"come out", r"coming out", r"closet", r"sexuality", r"sexual\w*", r"sex",
        r"sex drive", r"libido", r"virgin", r"celiba\w*", r"hook ?ups?", r"slept with",
        r"sleep(?:ing)? (?:together|with)", r"slept together", r"open (?:marriage|"
        r"relationship)", r"polyamor\w*", r"poly", r"bdsm", r"kink\w*", r"fetish\w*",
        r"grindr", r"tinder", r"hinge", r"bumble", r"erectile", r"viagra", r"condoms?",
        r"attracted to", r"attraction", r"(?:dated|date|dating|like|into) (?:only )?"
        r"(?:men|women|guys|girls|boys)", r"a guy who", r"a girl who", r"lgbt\w*",
    ),
    "ethnic_origin": (
        r"ethnic\w*", r"race", r"racial\w*", r"racis\w*", r"mixed[- ]race", r"heritage",
        r"descent", r"ancestry", r"ancestors?", r"roots", r"indigenous", r"aboriginal",
        r"first nations", r"native american", r"full-blooded", r"immigra\w*",
        r"emigra\w*", r"refugees?", r"diaspora", r"adopted from",
        rf"(?:i'm|i am|we're|we are|he's|she's|they're|is|are|was|were|as an?) "
        rf"(?:(?:half|a quarter|quarter|part|ethnically|full|proud|a proud|an?) )*"
        rf"(?:{_DEMONYMS})",
        rf"(?:{_DEMONYMS})[- ](?:american|british|canadian|australian|brazilian|"
        rf"italian|descent|heritage|roots|background|ancestry|side)",
        rf"(?:{_DEMONYMS}) on my \w+'s side",
        rf"(?:half|quarter) (?:{_DEMONYMS})",
        rf"(?:{_DEMONYMS}) (?:nation|woman|women|man|men|girl|girls|boy|boys|guy|kid|kids|"
        rf"person|people|family|families|mum|mom|dad|lady|folks|community|roots)",
        rf"{_KIN}(?: \w+){{0,4}} (?:from|in|came from|came over from|immigrated from|"
        rf"fled|left) (?:{_COUNTRIES})",
        rf"{_KIN} (?:is|are|was|were|'s|'re) (?:\w+ )?(?:{_DEMONYMS})",
        rf"born in (?:{_COUNTRIES})",
    ),
    "political_opinion": (
        r"politic\w*", r"vot(?:e|ed|es|ing|er|ers)", r"ballot\w*", r"elections?",
        r"campaign\w* for", r"canvass\w*", r"party members?", r"labour", r"tory", r"tories",
        r"conservative\w*", r"liberals?", r"lib dems?", r"green party", r"greens",
        r"vote green", r"snp", r"plaid", r"reform uk", r"ukip", r"democrat\w*",
        r"republican\w*", r"gop", r"maga", r"trump", r"biden", r"obama", r"sanders",
        r"bernie", r"dsa", r"ndp", r"bjp", r"trudeau", r"starmer", r"corbyn", r"farage",
        r"socialis\w*", r"communis\w*", r"marxis\w*", r"anarchis\w*", r"capitalis\w*",
        r"libertarian\w*", r"progressive", r"left-wing", r"right-wing", r"leftist",
        r"centrist", r"far[- ](?:right|left)", r"fascis\w*", r"antifa", r"feminis\w*",
        r"activis\w*", r"protest\w*", r"march(?:ed|ing)? (?:for|against)", r"rall(?:y|ies)",
        r"pro-life", r"pro-choice", r"abortion", r"gun control", r"second amendment",
        r"my guns", r"nra", r"aclu", r"immigration", r"brexit", r"voted (?:leave|remain)",
        r"the eu", r"monarch\w*", r"royal family", r"nationalis\w*", r"zionis\w*",
        r"anti-zionist", r"palestine", r"independence", r"climate strikes?",
        r"extinction rebellion", r"black lives matter", r"blm", r"death penalty",
        r"taxation", r"the government", r"the system is rigged", r"the state",
        r"mutual aid", r"councillor", r"congressman", r"senator", r"mp", r"parliament",
    ),
    "religious_belief": (
        r"religio\w*", r"faith", r"church(?:es|goers?|going)?", r"chapel", r"(?:go to|went to|at|"
        r"attend\w*|skip\w*) mass", r"mass every", r"catholic\w*", r"protestant\w*",
        r"anglican", r"church of england", r"methodist", r"baptist", r"pentecostal",
        r"evangelical", r"orthodox", r"lutheran", r"presbyterian", r"quaker", r"mormon",
        r"latter-day", r"lds", r"jehovah'?s?", r"christian\w*", r"jesus", r"christ",
        r"god", r"the lord", r"bible", r"gospel", r"pray\w*", r"rosary", r"say grace",
        r"baptis\w*", r"born-again", r"lent", r"muslim", r"islam\w*", r"mosque",
        r"qur'?an", r"koran", r"hijab", r"niqab", r"ramadan", r"eid", r"hajj", r"umrah",
        r"halal", r"imam", r"sunni", r"shia", r"zakat", r"jewish", r"judaism", r"jews?",
        r"synagogue", r"shul", r"rabbi", r"torah", r"kosher", r"shabbat", r"sabbath",
        r"passover", r"yom kippur", r"rosh hashanah", r"hanukkah", r"bar mitzvah",
        r"bat mitzvah", r"hindu\w*", r"temple", r"puja", r"pooja", r"diwali", r"navratri",
        r"mandir", r"hanuman", r"krishna", r"shiva", r"ganesh\w*", r"jain\w*", r"sikh\w*",
        r"gurdwara", r"langar", r"amritdhari", r"turban", r"khalsa", r"gurpurab",
        r"buddhis\w*", r"buddha", r"dharma", r"shrine", r"shinto", r"pagan\w*", r"wicca\w*",
        r"solstice", r"atheis\w*", r"agnostic", r"humanis\w*", r"believ\w* in god",
        r"devout", r"practising", r"practicing", r"spiritual\w*", r"tithe\w*", r"deacon",
        r"pastor", r"priest", r"vicar", r"nun", r"monk", r"churchwarden", r"lay preacher",
        r"sermon", r"worship\w*", r"convert(?:ed)? to", r"(?:served|serve|on) a mission",
        r"d[ií]a de (?:los )?muertos", r"sin", r"sins", r"heaven", r"salvation",
        r"confirmed in", r"confirmation", r"meeting for worship", r"fast(?:ing)? for",
        r"keep a fast",
    ),
    "trade_union": (
        r"unions?", r"unionis\w*", r"unioniz\w*", r"guild", r"teamsters?", r"steward",
        r"shop steward", r"picket\w*", r"strik(?:e|es|ing)", r"on strike", r"walk(?:ing)? out",
        r"walkout", r"ballot\w*", r"dues", r"bargaining", r"collective agreement",
        r"organis(?:ing|er|ers)", r"organiz(?:ing|er|ers)", r"(?:union|branch) rep",
        r"local \d+", r"brotherhood", r"union card", r"strike pay", r"branch secretary",
        r"unison", r"unite", r"gmb", r"rcn", r"bma", r"neu", r"nasuwt", r"nut", r"pcs",
        r"rmt", r"aslef", r"cwu", r"ucu", r"num", r"equity", r"usdaw", r"fbu", r"seiu",
        r"afl-cio", r"uaw", r"aft", r"nea", r"ibew", r"sag-aftra", r"ufcw", r"cwa",
        r"afscme", r"iww",
    ),
    "genetic": (
        r"genetic\w*", r"genes?", r"genom\w*", r"dna", r"23andme", r"ancestry(?:\.com)?",
        r"carriers?", r"hereditary", r"inherit\w*", r"runs in (?:my|our|the) family",
        r"mutations?", r"variants?", r"brca\w*", r"apoe\w*", r"mthfr", r"lynch syndrome",
        r"huntington'?s?", r"cystic fibrosis", r"sickle cell", r"thalass?a?emia\w*",
        r"tay-sachs", r"down syndrome", r"down's syndrome", r"fragile x", r"ehlers-danlos",
        r"ha?emochromatosis", r"familial", r"x-linked", r"chromosom\w*", r"sequenced",
        r"spit", r"biological (?:father|mother|dad|mum|mom|parents?)",
    ),
    "biometric": (
        r"biometric\w*", r"fingerprints?", r"thumbprints?", r"face id",
        r"facial recognition", r"face (?:scan\w*|match\w*|verification|recognition|"
        r"unlock|template)", r"(?:with|by) my face", r"my face to", r"irises", r"iris",
        r"retina\w*", r"palm (?:scan\w*|print|vein)", r"palm scanner", r"voiceprints?",
        r"voice (?:id|recognition|password|verification|print)", r"voice is the password",
        r"selfie", r"liveness", r"motion[- ]capture", r"gait", r"(?:face|faces) (?:gets? )?"
        r"scanned", r"scans? my (?:iris|face|eyes?|finger\w*|palm)",
    ),
    "financial_detail": (
        r"salary", r"salaries", r"wages?", r"pay ?(?:check|slip|cheque)s?",
        r"(?:get|got|getting) paid", r"paid myself", r"earn\w*", r"income", r"debts?",
        r"owe\w*", r"loans?", r"mortgage\w*", r"remortgag\w*", r"credit (?:score|card|"
        r"cards|rating|history)", r"my credit", r"overdraft", r"overdrawn", r"in the red",
        r"bankrupt\w*", r"repossess\w*", r"arrears", r"behind on", r"payday", r"savings",
        r"saved", r"saving \d+", r"isa", r"401k", r"401\(k\)", r"ira", r"pension\w*",
        r"premium bonds", r"investments?", r"stocks", r"shares", r"crypto", r"net worth",
        r"inherit\w*", r"my will", r"benefits", r"universal credit", r"welfare",
        r"food stamps", r"allowance", r"stipend", r"take home", r"tax", r"skint",
        r"(?:i'm|i am|we're|we are) broke", r"to my name", r"child support", r"alimony",
        r"sort code", r"account number", r"iban", r"pin", r"bank account",
        r"business account", r"joint account", r"payment plan", r"bills", r"fees",
        r"grand", r"\d+k", r"[£$€] ?\d[\d,.]*", r"\d[\d,.]* (?:pounds|dollars|euros|quid|"
        r"bucks|a month|a week|a year)", r"half a million", r"a million", r"millionaire",
        r"send money", r"rent (?:is|eats)", r"emergency fund", r"deposit",
    ),
}
# fmt: on

_IDIOM = re.compile(r"(?<![\w'])(?:" + "|".join(IDIOMS) + r")(?![\w])")
_CLASS_CUES = tuple(
    re.compile(r"(?<![\w'-])(?:" + "|".join(CUES[name]) + r")(?![\w-])")
    for name in SENSITIVE_CLASSES
)

SHORT_CHATTER_WORDS = 6
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_FIRST_PERSON = frozenset(
    {"i", "i'm", "im", "i've", "ive", "i'd", "i'll", "my", "mine", "myself", "we", "we're",
     "we've", "our", "ours"}
)  # fmt: skip
_LAUGH = re.compile(
    r"(?<![\w'])(?:lol\w*|lmf?ao+\w*|rofl|haha\w*|hehe\w*|jk|xd)(?![\w])|[\U0001F602\U0001F923\U0001F480]"
)
_HYPERBOLE = re.compile(
    r"(?<![\w'])(?:basically|literally|officially|certified|professional|100%|90%|"
    r"the true|fluent in|ceo of|phd in|spirit animal|love language|is my religion|"
    r"more \w+ than|as long as|in a committed relationship with|on speaking terms|"
    r"plotting|judging me|crying|send (?:help|snacks)|built different)(?![\w])"
)


def sensitive_cues(lowered: str) -> list[bool]:
    """One flag per ``SENSITIVE_CLASSES`` entry: that class's words occur in the text."""
    text = _IDIOM.sub(" ", lowered)
    return [pattern.search(text) is not None for pattern in _CLASS_CUES]


def chatter_cues(lowered: str) -> list[bool]:
    """Laughter, hyperbole, at most 2 words, at most ``SHORT_CHATTER_WORDS`` words."""
    n = len(_WORD.findall(lowered))
    return [
        _LAUGH.search(lowered) is not None,
        _HYPERBOLE.search(lowered) is not None,
        n <= 2,
        n <= SHORT_CHATTER_WORDS,
    ]


def is_short_chatter(lowered: str) -> bool:
    """At most ``SHORT_CHATTER_WORDS`` words and none of them a first-person subject."""
    tokens = _WORD.findall(lowered)
    return len(tokens) <= SHORT_CHATTER_WORDS and not _FIRST_PERSON.intersection(tokens)
