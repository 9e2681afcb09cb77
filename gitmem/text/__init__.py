"""The one text analyser: what counts as "the same word" for search, summaries and context.

Everything that cuts text into words goes through here, so the index, the ranker, the
summarizers, the topic-shift trigger, the loss guard and the token estimate agree:

- :func:`terms`: English words case-folded, stripped of :data:`STOPWORDS` (function words) and
  reduced with the Porter stemmer ("decorators" and "decorated" both become ``decor``). Runs of
  Chinese, Japanese or Korean characters have no spaces between words, so each run gives its
  single characters and its overlapping pairs: "装饰器" gives 装, 饰, 器, 装饰, 饰器, and a query
  about "Python装饰器" matches a memory that mentions 装饰器 anywhere.
- :func:`topic_terms`: the same terms without :data:`CHATTER` (small talk such as "great",
  "today", "love"). Summaries weigh sentences by topic; search keeps these words because a
  question may ask exactly about them (dropping them from search costs LoCoMo recall).
- :func:`words` (unstemmed, for fuzzy matching and display), :func:`name_terms` (speakers),
  :func:`find_term` (where a term first occurs, for snippets), :func:`split_sentences`,
  :func:`dates` (the dates a text names) and :func:`is_cjk`.
- :func:`one_line`: text folded onto one shortened line, for commit subjects and messages.
- :func:`wiki_links` and :func:`link_targets`: the one rule for ``[[session-id]]`` links
  (in text, outside code; and in a ``links`` metadata value).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz

# Function words that carry no topic. Question words are in it because a question's
# "what did ... when" says nothing about which memory holds the answer.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he hed hes her
    here heres hers herself him himself his how hows i id ill im ive if in into is isn it its
    itself lets me more most mustn my myself no nor not of off on once only or other ought our
    ours ourselves out over own same shan she shed shes should shouldn so some such than that
    thats the their theirs them themselves then there theres these they theyd theyll theyre
    theyve this those through to too under until up very was wasn we wed well were weve weren
    what whats when whens where wheres which while who whos whom why whys with won would
    wouldn you youd youll youre youve your yours yourself yourselves also just will shall may
    might must us oh yeah yes ok okay hey hi hello really thing things get got gets getting
    much many lot lots like thank thanks sure kind kinds s t d ll re ve m
"""

STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Small talk and vague words: terms for search, but no topic for a summary.
_CHATTER_TEXT = """
    ah always amazing anything awesome cool cute day days definitely even ever everything fun
    glad go going gonna good great haha happy hmm know last lately lol love made make maybe
    need never nice nope now one pretty recently said say see something sort sound sounds still
    stuff super tell think time times today tomorrow totally two use used using wanna want way
    ways wow yep yesterday let
"""

CHATTER = frozenset(_CHATTER_TEXT.split())

# Very frequent Chinese single characters (particles, pronouns): dropped as unigrams only,
# so that bigrams containing them still match.
CJK_STOP_CHARS = frozenset("的了是在我你他她它们这那有和就不也都吗呢吧啊么个之与及或被把给")

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

_CONTRACTION = re.compile(r"(?<=[^\W_])'(?:s|t|d|ll|re|ve|m)\b", re.IGNORECASE)

_CJK_CLASS = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # compatibility ideographs
    "\U00020000-\U0002fa1f"  # extensions B.. and compatibility supplement
)

_CJK_CHAR = re.compile(f"[{_CJK_CLASS}]")

# a run of CJK characters, or a run of other letters and digits
_PIECE = re.compile(f"([{_CJK_CLASS}]+)|((?:(?![{_CJK_CLASS}])[^\\W_])+)")


def is_cjk(ch: str) -> bool:
    """Whether ``ch`` (one character, or the first of a string) is Chinese, Japanese or Korean."""
    return _CJK_CHAR.match(ch) is not None


def normalize(text: str) -> str:
    """NFKC, case-folded text with curly apostrophes made straight and contractions dropped."""
    if text.isascii():  # NFKC and the apostrophe table change nothing in ASCII
        text = text.lower()
    else:
        text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold()
    return _CONTRACTION.sub("", text) if "'" in text else text  # most text has none


def strip_controls(text: str) -> str:
    """``text`` with control and format characters made spaces (a query may come from anywhere)."""
    return "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") else ch for ch in text
    )


# --- wiki links ---------------------------------------------------------------------------

# what may stand between [[ and ]]: the index, the ranker's link following, the metadata
# parser and the HTML renderer all use this, so they agree on what a link is
WIKI_TARGET = r"[^\[\]\n]{1,240}"
WIKI_LINK = re.compile(rf"\[\[({WIKI_TARGET})\]\]")
# code is quoted text, not a link (the renderer shows [[x]] in code as written, too):
# fenced blocks (``` or ~~~, to the closing fence or the end) and inline `spans`
_CODE = re.compile(
    r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^ {0,3}\1[`~]*[ \t]*$|\Z)|(`+)(?!`).+?(?<!`)\2(?!`)",
    re.MULTILINE | re.DOTALL,
)


def wiki_links(text: str) -> list[str]:
    """The targets of the ``[[session-id]]`` links in ``text``, trimmed, each once, in order;
    a link inside a code span or a fenced code block does not count."""
    if "[[" not in text:  # most text has no link: skip the code scan
        return []
    if "`" in text or "~~~" in text:
        text = _CODE.sub(" ", text)
    return list(dict.fromkeys(t for t in (m.strip() for m in WIKI_LINK.findall(text)) if t))


def link_targets(value: str | Collection[str]) -> list[str]:
    """A ``links`` metadata value as session ids: ``"a, b"``, ``"[[a]], [[b]]"`` or a list
    of either form (``[[x]]`` becomes ``x``); what is not a link is kept as written, so
    that the model's check can name it."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        item = item.strip() if isinstance(item, str) else item
        if isinstance(item, str) and item.startswith("[[") and item.endswith("]]"):
            item = item[2:-2].strip()
        if item not in out:
            out.append(item)
    return out


_ASCII_PIECE = re.compile(r"[A-Za-z0-9]+")


def _pieces(text: str) -> list[tuple[str, bool]]:
    """Word-character runs split into (piece, is_cjk) parts."""
    if text.isascii():  # the common case, and several times faster than _PIECE
        return [(piece, False) for piece in _ASCII_PIECE.findall(text)]
    return [(cjk or other, bool(cjk)) for cjk, other in _PIECE.findall(text)]


def words(text: str) -> list[str]:
    """Case-folded words without stopwords, not stemmed (for fuzzy matching and display).

    CJK runs are kept whole here: fuzzy matching compares them character by character.
    """
    return [
        piece
        for piece, cjk in _pieces(normalize(text))
        if cjk or (piece not in STOPWORDS and (len(piece) > 1 or piece.isdigit()))
    ]


# per stopword set: ASCII word -> its term ("" when it is dropped), bounded
_ASCII_TERMS: dict[frozenset[str], dict[str, str]] = {}


def _ascii_terms(text: str, skip: frozenset[str]) -> list[str]:
    """``_terms`` of normalised ASCII text: one dictionary look-up per word once it is known
    (the hot path of an index rebuild)."""
    known = _ASCII_TERMS.get(skip)
    if known is None or len(known) > 200_000:
        known = _ASCII_TERMS[skip] = {}
    pieces = _ASCII_PIECE.findall(text)
    found = list(map(known.get, pieces))
    if None in found:
        for at, piece in enumerate(pieces):
            if found[at] is None:
                keep = piece not in skip and (len(piece) > 1 or piece.isdigit())
                found[at] = known[piece] = stem(piece) if keep else ""
    return [term for term in found if term]


def _terms(text: str, skip: frozenset[str]) -> list[str]:
    text = normalize(text)
    if text.isascii():
        return _ascii_terms(text, skip)
    out: list[str] = []
    for piece, cjk in _pieces(text):
        if cjk:
            out.extend(ch for ch in piece if ch not in CJK_STOP_CHARS)
            out.extend(piece[at : at + 2] for at in range(len(piece) - 1))
        elif piece not in skip and (len(piece) > 1 or piece.isdigit()):
            out.append(stem(piece))
    return out


def terms(text: str) -> list[str]:
    """The terms of ``text`` in order: stemmed English words and CJK n-grams."""
    return _terms(text, STOPWORDS)


_QUIET = STOPWORDS | CHATTER


def topic_terms(text: str) -> list[str]:
    """:func:`terms` without the words of small talk (:data:`CHATTER`): what a summary weighs.

    Chatter is matched before stemming, so "totally" is dropped but "total" is kept."""
    return _terms(text, _QUIET)


def name_terms(*names: str, short_forms: bool = False) -> frozenset[str]:
    """The terms of people's names; with ``short_forms`` also the first 3+ letters of each
    word (Mel of Melanie, Caro of Caroline), which people use as nicknames."""
    if len(names) == 1:
        return _name_terms(names[0], short_forms)
    return frozenset().union(*(_name_terms(name, short_forms) for name in names))


@lru_cache(maxsize=4096)
def _name_terms(name: str, short_forms: bool) -> frozenset[str]:
    found = set(terms(name))
    if short_forms:
        found.update(t[:n] for t in list(found) if not is_cjk(t) for n in range(3, len(t)))
    return frozenset(found)


def find_term(text: str, wanted: Collection[str]) -> int | None:
    """Where in ``text`` the first word or CJK n-gram whose term is in ``wanted`` starts."""
    for match in _PIECE.finditer(text):
        cjk, other = match.groups()
        if other:
            piece = normalize(other)
            if piece and stem(piece) in wanted:
                return match.start()
            continue
        for at in range(len(cjk)):
            if cjk[at : at + 2] in wanted or cjk[at] in wanted:
                return match.start() + at
    return None


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9\u00C0-\u024F])|(?<=[。！？；])")

_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences (or bullet items / lines) of a message, stripped of list markers; code
    fences, headings and table rows are left out."""
    out: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line.strip().lstrip(">").strip())
        if not line or line.startswith(("```", "#", "|")):
            continue
        out.extend(part.strip() for part in _SENTENCE_END.split(line) if part.strip())
    return out


def near_duplicate(a: str, b: str, threshold: float = 85.0) -> bool:
    """Whether two texts say the same in nearly the same words (rapidfuzz's token-sort
    ratio of their :func:`words`, 0-100, at least ``threshold``)."""
    return fuzz.token_sort_ratio(" ".join(words(a)), " ".join(words(b))) >= threshold


def one_line(text: str, limit: int) -> str:
    """``text`` with its white space folded to single spaces, cut to at most ``limit``
    characters (the last one then an ellipsis)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_VOWELS = frozenset("aeiou")


def _consonant(word: str, at: int) -> bool:
    ch = word[at]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return at == 0 or not _consonant(word, at - 1)
    return True


def _measure(stem_: str) -> int:
    """m in [C](VC)^m[V]: the number of vowel-consonant sequences."""
    count = 0
    previous_vowel = False
    for at in range(len(stem_)):
        vowel = not _consonant(stem_, at)
        if previous_vowel and not vowel:
            count += 1
        previous_vowel = vowel
    return count


def _has_vowel(stem_: str) -> bool:
    return any(not _consonant(stem_, at) for at in range(len(stem_)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (e.g. hop, not snow)."""
    if len(word) < 3:
        return False
    return (
        _consonant(word, len(word) - 3)
        and not _consonant(word, len(word) - 2)
        and _consonant(word, len(word) - 1)
        and word[-1] not in "wxy"
    )


def _replace(word: str, rules: tuple[tuple[str, str], ...], min_measure: int) -> str:
    """Apply the longest matching suffix rule if the remaining stem is long enough."""
    for suffix, replacement in rules:
        if word.endswith(suffix):
            base = word[: len(word) - len(suffix)]
            return base + replacement if _measure(base) > min_measure else word
    return word


_STEP2: tuple[tuple[str, str], ...] = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)

_STEP2 = tuple(sorted(_STEP2, key=lambda rule: len(rule[0]), reverse=True))

_STEP3: tuple[tuple[str, str], ...] = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)

_STEP3 = tuple(sorted(_STEP3, key=lambda rule: len(rule[0]), reverse=True))

_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)

_STEP4_ORDERED = tuple(sorted(_STEP4, key=len, reverse=True))


def _step1(word: str) -> str:
    if word.endswith("sses") or word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    again = False
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    elif word.endswith("ed") and _has_vowel(word[:-2]):
        word, again = word[:-2], True
    elif word.endswith("ing") and _has_vowel(word[:-3]):
        word, again = word[:-3], True
    if again:
        if word.endswith(("at", "bl", "iz")):
            word += "e"
        elif _double_consonant(word) and word[-1] not in "lsz":
            word = word[:-1]
        elif _measure(word) == 1 and _cvc(word):
            word += "e"
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    return word


def _step4(word: str) -> str:
    for suffix in _STEP4_ORDERED:
        if word.endswith(suffix):
            base = word[: len(word) - len(suffix)]
            if suffix == "ion" and not base.endswith(("s", "t")):
                return word
            return base if _measure(base) > 1 else word
    return word


def _step5(word: str) -> str:
    if word.endswith("e"):
        base = word[:-1]
        if _measure(base) > 1 or (_measure(base) == 1 and not _cvc(base)):
            word = base
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


# Irregular forms -> base word, so "met" finds "meet" and "went" finds "go" (Porter only
# strips suffixes). Forms that are common nouns too (rose, wound, ground, left, lead, lay,
# bound) are left out: the noun would match the verb.
_IRREGULAR_TEXT = """
    arose:arise arisen:arise awoke:awake awoken:awake beaten:beat became:become began:begin
    begun:begin bent:bend bit:bite bitten:bite bled:bleed blew:blow blown:blow broke:break
    broken:break bred:breed brought:bring built:build burnt:burn bought:buy caught:catch
    chose:choose chosen:choose clung:cling came:come crept:creep dealt:deal dug:dig drew:draw
    drawn:draw dreamt:dream drank:drink drunk:drink drove:drive driven:drive ate:eat
    eaten:eat fed:feed felt:feel fought:fight found:find fled:flee flew:fly flown:fly
    forbade:forbid forbidden:forbid forgot:forget forgotten:forget forgave:forgive
    forgiven:forgive froze:freeze frozen:freeze gotten:get gave:give given:give went:go
    gone:go grew:grow grown:grow hung:hang heard:hear hid:hide hidden:hide held:hold
    kept:keep knelt:kneel knew:know known:know leant:lean leapt:leap learnt:learn lent:lend
    lost:lose meant:mean met:meet paid:pay proven:prove rode:ride ridden:ride rang:ring
    rung:ring risen:rise ran:run saw:see seen:see sought:seek sold:sell sent:send
    shook:shake shaken:shake shone:shine shot:shoot shown:show shrank:shrink shrunk:shrink
    sang:sing sung:sing sank:sink sunk:sink sat:sit slept:sleep slid:slide spoke:speak
    spoken:speak sped:speed spent:spend spun:spin spat:spit sprang:spring sprung:spring
    stood:stand stole:steal stolen:steal stuck:stick stung:sting struck:strike swore:swear
    sworn:swear swept:sweep swam:swim swum:swim swung:swing took:take taken:take
    taught:teach tore:tear torn:tear told:tell thought:think threw:throw thrown:throw
    understood:understand woke:wake woken:wake wore:wear worn:wear wove:weave woven:weave
    wept:weep wrote:write written:write withdrew:withdraw withdrawn:withdraw
    overcame:overcome underwent:undergo undergone:undergo undertook:undertake
    undertaken:undertake mistook:mistake mistaken:mistake children:child women:woman
    men:man feet:foot teeth:tooth mice:mouse geese:goose wives:wife knives:knife
"""

IRREGULAR = dict(pair.split(":") for pair in _IRREGULAR_TEXT.split())


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The Porter stem of a lower-case word (of its base form when it is an irregular one,
    :data:`IRREGULAR`); words of one or two letters stay as they are."""
    if len(word) <= 2 or not word.isascii() or not word.isalpha():
        return word
    word = IRREGULAR.get(word, word)
    word = _step1(word)
    word = _replace(word, _STEP2, 0)
    word = _replace(word, _STEP3, 0)
    word = _step4(word)
    return _step5(word)


_MONTH_NAMES = {
    name: at + 1
    for at, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}

_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november"
    r"|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)

_ORD = r"(?:st|nd|rd|th)?"

_DATE_PATTERNS = (
    # 2023-07-31
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), ("y", "m", "d")),
    # 2023年7月31日, 2023年7月
    (re.compile(r"(\d{4})年(\d{1,2})月(?:(\d{1,2})[日号])?"), ("y", "m", "d")),
    # 31 July, 2023 / 31st of July 2023 / 31 July
    (
        re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MONTH},?(?:\s+(\d{{4}}))?\b", re.I),
        ("d", "M", "y"),
    ),
    # July 31, 2023 / July 31st / July 2023 / July
    (
        re.compile(rf"\b{_MONTH}(?:\s+(\d{{1,2}}){_ORD}(?!\d))?,?(?:\s+(\d{{4}}))?\b", re.I),
        ("M", "d", "y"),
    ),
    # a year on its own
    (re.compile(r"\b(19\d\d|20\d\d)\b"), ("y",)),
)


def dates(text: str) -> list[tuple[int | None, int | None, int | None]]:
    """The dates a text names, as (year, month, day) with unknown parts None.

    "July 2023" gives (2023, 7, None); "in June" gives (None, 6, None). The word "may"
    counts as a month only with a day or a year next to it.
    """
    found: list[tuple[int | None, int | None, int | None]] = []
    taken: list[tuple[int, int]] = []
    for pattern, fields in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue
            parts: dict[str, int | None] = {"y": None, "m": None, "d": None}
            for name, value in zip(fields, match.groups(), strict=True):
                if value is None:
                    continue
                if name == "M":
                    parts["m"] = _MONTH_NAMES[value.lower().rstrip(".")]
                    if value.lower() == "may" and not any(match.groups()[1:]):
                        parts["m"] = None
                else:
                    parts[name] = int(value)
            if parts["m"] is None and parts["y"] is None:
                continue
            if parts["m"] is not None and not 1 <= parts["m"] <= 12:
                continue
            if parts["d"] is not None and not 1 <= parts["d"] <= 31:
                parts["d"] = None
            taken.append((match.start(), match.end()))
            found.append((parts["y"], parts["m"], parts["d"]))
    return found


def json_in(text: str) -> Any:
    """The JSON value in a model's answer: the whole text, a fenced ```json block, or the
    outermost ``{...}`` in prose around it. Raises ValueError when there is none."""
    stripped = text.strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, flags=re.DOTALL)
    if fence:
        stripped = fence.group(1)
    try:
        return json.loads(stripped)
    except ValueError:
        start, end = stripped.find("{"), stripped.rfind("}")
        if 0 <= start < end:
            return json.loads(stripped[start : end + 1])
        raise
