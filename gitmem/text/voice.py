"""Statements in the third person: what someone said, as a note about them.

A memory file and a summary are read later by an agent that did not take part: "I went there
yesterday" means nothing there. :func:`restate` rewrites one sentence said by ``speaker`` to
``addressee`` so that it names them ("I" and "my" become the speaker, "you" the addressee;
我/我的/我们 the speaker) with the verb agreeing, and puts the date a relative phrase names in
place of the phrase ("yesterday", said on 8 May 2023, becomes "(7 May 2023)"). It refuses what
is not a statement about someone: questions, greetings and small talk, commands, and sentences
that name nobody after the rewrite ("It was great!").

:func:`statement_problem` is the same rule as a check, for text written elsewhere (an LLM's
facts and summaries, a benchmark): a question, a ``User:``/speaker prefix or the first person.
Pure functions on text; the role names are :data:`USER_NAMES` and :data:`ASSISTANT_NAMES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from gitmem.text import is_cjk
from gitmem.text.events import relative_phrases, span_label

USER_NAMES = frozenset({"user", "用户", "human", "me"})
ASSISTANT_NAMES = frozenset({"assistant", "助手", "ai", "bot", "system", "model", "tool"})

_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")

# words that may stand between a subject and its verb ("I really love")
_ADVERBS = frozenset(
    [
        "really",
        "just",
        "also",
        "always",
        "never",
        "still",
        "usually",
        "often",
        "recently",
        "finally",
        "actually",
        "even",
        "sometimes",
        "totally",
        "definitely",
        "already",
        "mostly",
        "only",
        "both",
        "all",
        "currently",
        "now",
        "then",
        "truly",
        "honestly",
        "absolutely",
        "seriously",
        "certainly",
        "probably",
        "generally",
        "typically",
        "rarely",
        "ever",
        "first",
        "once",
        "last",
        "lately",
        "later",
        "soon",
        "each",
    ]
)
# a verb form that does not change with the person ("I went" / "she went")
_KEEP = frozenset(
    [
        "can",
        "could",
        "will",
        "would",
        "should",
        "might",
        "must",
        "may",
        "shall",
        "can't",
        "couldn't",
        "won't",
        "wouldn't",
        "shouldn't",
        "mightn't",
        "mustn't",
        "didn't",
        "did",
        "had",
        "hadn't",
        "used",
        "ought",
        "went",
        "got",
        "made",
        "took",
        "saw",
        "came",
        "found",
        "felt",
        "gave",
        "knew",
        "left",
        "lost",
        "met",
        "paid",
        "ran",
        "said",
        "sat",
        "sent",
        "spent",
        "stood",
        "thought",
        "told",
        "won",
        "wore",
        "wrote",
        "bought",
        "brought",
        "built",
        "caught",
        "chose",
        "drew",
        "drove",
        "ate",
        "fell",
        "flew",
        "forgot",
        "grew",
        "heard",
        "held",
        "hid",
        "kept",
        "led",
        "lent",
        "lit",
        "meant",
        "rode",
        "rang",
        "rose",
        "sang",
        "sold",
        "shot",
        "slept",
        "spoke",
        "stole",
        "swam",
        "taught",
        "threw",
        "understood",
        "woke",
        "began",
        "became",
        "broke",
        "fought",
        "dug",
        "hung",
        "quit",
        "hit",
        "cut",
        "hurt",
        "put",
        "set",
        "let",
        "read",
        "spread",
        "cast",
        "cost",
        "shut",
        "split",
        "burst",
    ]
)
# "-eed" verbs are present tense ("need", "feed") but for these
_PAST_EED = frozenset({"freed", "agreed", "decreed", "guaranteed", "refereed"})
_BE_HAVE = {
    "am": "is",
    "are": "is",
    "were": "was",
    "was": "was",
    "have": "has",
    "haven't": "hasn't",
    "do": "does",
    "don't": "doesn't",
    "aren't": "isn't",
    "weren't": "wasn't",
    "'m": "is",
}
# contractions of a subject pronoun: the verb they hold, in the third person
_CONTRACTED = {"m": "is", "re": "is", "ve": "has", "ll": "will", "d": "would", "s": "is"}

# words that open small talk, thanks and reactions: never a fact
_SMALL_TALK = re.compile(
    r"^(?:hi|hello|hey|bye|goodbye|good (?:morning|night|evening|luck)|thanks?|thank you|"
    r"congrats|congratulations|wow|aw+|omg|lol|haha|cool|nice|great|awesome|sounds|"
    r"that'?s|it'?s (?:great|good|nice|awesome|so|really|amazing|wonderful)|glad|"
    r"so (?:glad|happy|proud)|i'?m (?:so )?(?:glad|happy|proud) (?:for|of) you|"
    r"take care|see you|talk (?:soon|later)|me too|same here|you too|no problem|"
    r"you'?re welcome|of course|sure|okay|ok|yes|yeah|yep|no|nope|"
    r"你好|谢谢|再见|好的|不客气)\b",
    re.IGNORECASE,
)
# an imperative or a suggestion: advice, not something known about anyone
_COMMAND = re.compile(
    r"^(?:try|check|keep|make|let'?s|let me|consider|remember|don'?t|do|go|use|take|"
    r"start|read|look|see|think about|feel free|be sure|you (?:should|could|might|can) "
    r"(?:try|check|consider|use|read|look))\b",
    re.IGNORECASE,
)
_QUESTION = re.compile(r"[?？]\s*$")
_FIRST_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|we|we're|we've|we'll|we'd|us|our|ours)\b|我",
)
_FIRST_PERSON_ANY_CASE = re.compile(
    r"(?<![\w'])(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'll|us|our|ours)"
    r"(?![\w'])|我",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Speakers:
    """Who says a sentence and to whom, as a note names them."""

    speaker: str
    addressee: str | None = None
    chinese: bool = False

    @property
    def name(self) -> str:
        return display_name(self.speaker, chinese=self.chinese)

    @property
    def other(self) -> str | None:
        if self.addressee is None:
            return None
        return display_name(self.addressee, chinese=self.chinese)


def is_user(speaker: str) -> bool:
    return speaker.strip().casefold() in USER_NAMES


def is_assistant(speaker: str) -> bool:
    return speaker.strip().casefold() in ASSISTANT_NAMES


def display_name(speaker: str, *, chinese: bool = False) -> str:
    """The name a note uses: the person's name, "The user" / "The assistant" for roles."""
    if is_user(speaker):
        return "用户" if chinese else "The user"
    if is_assistant(speaker):
        return "助手" if chinese else "The assistant"
    return speaker.strip()


def person_section(speaker: str) -> str:
    """The section a person's statements go under: their name, ``User`` for the user role."""
    return "User" if is_user(speaker) else speaker.strip()


def is_question(sentence: str) -> bool:
    return bool(_QUESTION.search(sentence.strip()))


def is_small_talk(sentence: str) -> bool:
    """Greetings, thanks, reactions and suggestions: said, but not worth knowing later."""
    text = sentence.strip().lstrip("-*• ")
    return bool(_SMALL_TALK.match(text) or _COMMAND.match(text))


def first_person(text: str) -> bool:
    """Whether ``text`` speaks in the first person (I, my, we, 我...)."""
    return bool(_FIRST_PERSON.search(text) or _FIRST_PERSON_ANY_CASE.match(text.strip()))


def role_prefix(text: str, speakers: Iterable[str] = ()) -> str | None:
    """The speaker or role label a line starts with (``User:``, ``- Caroline:``), if any."""
    head = text.strip().lstrip("-*• ").split(":", 1)
    if len(head) < 2 or not head[0] or len(head[0]) > 40:
        head = text.strip().lstrip("-*• ").split("：", 1)
        if len(head) < 2 or not head[0] or len(head[0]) > 40:
            return None
    label = head[0].strip().strip("*_")
    names = {s.strip().casefold() for s in speakers} | USER_NAMES | ASSISTANT_NAMES
    return label if label.casefold() in names else None


def statement_problem(text: str, speakers: Iterable[str] = ()) -> str | None:
    """Why ``text`` is not a third-person statement, or None: a question, a role or
    speaker prefix, the first person."""
    if is_question(text):
        return "a question"
    prefix = role_prefix(text, speakers)
    if prefix is not None:
        return f"starts with the speaker label {prefix!r}"
    if first_person(text):
        return "in the first person"
    return None


def _third_person(verb: str) -> str:
    """``verb`` agreeing with a singular third-person subject ("go" -> "goes")."""
    low = verb.lower()
    if low in _BE_HAVE:
        return _BE_HAVE[low]
    past = low.endswith("ed") and not (low.endswith("eed") and low not in _PAST_EED)
    if low in _KEEP or past or low.endswith("n't") or "'" in low or "’" in low:
        return verb
    if low == "go":
        return verb + "es"
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 2 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") and not name.startswith("The ") else "'s")


_SUBJECT_AFTER = frozenset(
    [
        "and",
        "but",
        "so",
        "because",
        "that",
        "if",
        "when",
        "while",
        "since",
        "although",
        "though",
        "or",
        "then",
        "as",
        "until",
    ]
)


def _rewrite_english(text: str, who: Speakers) -> str:
    """The pronouns of ``text`` rewritten to names, verbs agreeing."""
    me, you = who.name, who.other
    out: list[str] = []
    at = 0
    tokens = list(_WORD.finditer(text))
    conjugate_next = False
    for n, match in enumerate(tokens):
        word = match.group(0).replace("’", "'")
        low = word.lower()
        before = text[at : match.start()]
        replacement: str | None = None
        if conjugate_next and low not in _ADVERBS:
            replacement = _third_person(word)
            conjugate_next = False
        else:
            base, _, tail = low.partition("'")
            subject_place = (
                n == 0
                or tokens[n - 1].group(0).lower() in _SUBJECT_AFTER
                or (re.search(r"[,.;:!]\s*$", before) is not None)
            )
            target = (
                me
                if base in ("i", "we", "me", "us", "my", "mine", "our", "ours")
                else you
                if base in ("you", "your", "yours")
                else None
            )
            if target is not None and (base != "i" or word[0] == "I"):
                if base in ("my", "mine", "our", "ours", "your", "yours"):
                    replacement = _possessive(target)
                elif tail:
                    verb = _CONTRACTED.get(tail, tail)
                    replacement = f"{target} {verb}"
                elif base in ("me", "us") or (base == "you" and not subject_place):
                    replacement = target
                else:
                    replacement = target
                    conjugate_next = True
            elif low in ("myself", "ourselves", "yourself", "yourselves"):
                replacement = "themself" if low.endswith("self") else "themselves"
        out.append(before)
        out.append(replacement if replacement is not None else match.group(0))
        at = match.end()
    out.append(text[at:])
    result = "".join(out)
    # "The user" inside a sentence reads "the user"
    for name in ("The user", "The assistant"):
        result = result[:1] + result[1:].replace(name, name.lower())
    return result


def _rewrite_chinese(text: str, who: Speakers) -> str:
    me, you = who.name, who.other
    text = text.replace("我们", me).replace("咱们", me).replace("我", me)
    if you:
        text = text.replace("您", you).replace("你们", you).replace("你", you)
    return text


# a hedge left without its phrase: "about [two years ago]"
_HEDGE = re.compile(r"\s*\b(?:about|around|roughly|like|since|from|until|just)$", re.IGNORECASE)


def _dated(text: str, said_at: datetime | None) -> tuple[str, bool]:
    """``text`` with its relative phrases replaced by the dates they name."""
    if said_at is None:
        return text, False
    found = relative_phrases(text, said_at)
    if not found:
        return text, False
    labels = [span_label(span) for _, _, span in found]
    for start, end, _ in reversed(found):
        before = _HEDGE.sub("", text[:start].rstrip())
        after = text[end:].lstrip()
        gap = "" if (before and is_cjk(before[-1])) or (after and is_cjk(after[0])) else " "
        text = f"{before}{gap}{after}".strip() if before else after
    text = re.sub(r"\s+([,;:])", r"\1", text).rstrip(" .!,;:。！")
    return f"{text} ({', '.join(dict.fromkeys(labels))})", True


def names_someone(text: str, names: Iterable[str]) -> bool:
    """Whether ``text`` names one of ``names`` (after the rewrite, the speaker or the
    addressee: a sentence that names neither says nothing known about them)."""
    folded = text.casefold()
    return any(n and n.casefold() in folded for n in names)


def restate(sentence: str, who: Speakers, said_at: datetime | None = None) -> str | None:
    """``sentence`` (said by ``who.speaker`` to ``who.addressee`` at ``said_at``) as a
    third-person statement naming them, with relative dates resolved; None when it is not a
    statement about someone (see the module docs)."""
    text = " ".join(sentence.split()).strip()
    if not text or is_question(text) or is_small_talk(text):
        return None
    cjk = any(is_cjk(ch) for ch in text)
    if cjk:
        text = _rewrite_chinese(text, who)
    text = _rewrite_english(text, who)
    text, _ = _dated(text, said_at)
    text = text.strip(" ,;")
    if not text:
        return None
    names = [who.name] + ([who.other] if who.other else [])
    if not names_someone(text, names) or _COMMAND.match(text):
        return None
    if text[-1] not in ".!。！":
        text += "。" if cjk and is_cjk(text[-1]) else "."
    elif text[-1] == "!":
        text = text[:-1] + "."
    return text[:1].upper() + text[1:]
