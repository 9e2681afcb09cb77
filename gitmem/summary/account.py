"""The offline summary as a short account in the third person, and what its keywords skip.

A summary is read later by an agent that was not there: a list of transcript lines ("User: I
moved...") makes it guess who "I" is. The account opens with one line of who talked about
what, then the key points grouped by the person they are about, each a statement naming
them (:func:`gitmem.text.voice.restate`) that ends with the id of the turn it came from
(``[D1:3]``), so consolidation and a reader can go back to the words said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gitmem.text import STOPWORDS, is_cjk, normalize, stem, topic_terms
from gitmem.text.voice import (
    Speakers,
    display_name,
    first_person,
    is_assistant,
    is_question,
    is_small_talk,
    is_user,
    restate,
    role_prefix,
)

# the id of the turn a key point came from, at its end
_TURN_REF = re.compile(r"\s*\[([A-Za-z0-9][A-Za-z0-9._:-]{0,63})\]$")

# markup that is no topic: tags, character entities, URLs, Markdown link targets and emphasis
_MARKUP = re.compile(
    r"<(script|style)\b.*?</\1\s*>"  # a script or style block, whole
    r"|</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>"  # an HTML/XML tag
    r"|&#?\w+;"  # a character entity
    r"|\]\([^)\s]*\)"  # the target of a Markdown link (its text stays)
    r"|\b(?:https?|ftp)://\S+|\bwww\.\S+|\S+@\S+\.\w+"  # URLs and mail addresses
    r"|[*_`~#>|]+",  # emphasis, code, heading, quote and table marks
    re.IGNORECASE | re.DOTALL,
)
# a character any of the markup above needs (most sentences have none)
_MARKUP_HINT = re.compile(r"[<&\]*_`~#>|@:]|www\.")

# words any conversation uses, on top of :data:`gitmem.text.CHATTER`: never a keyword
_GENERIC_TEXT = """
    night nights morning evening week weeks weekend month months year years life bit place
    people person guy guys pic pics photo photos picture image hope feel feeling felt enjoy
    enjoyed wait looking look lots sharing share talk talking chat catch hear heard mean
    thing better best happen happened keep kept try trying start started come came take took
    give gave help helps helped check course absolutely indeed true right wonderful beautiful
    exciting excited incredible special hard important interesting agree everyone anyone
    someone back instead prefer prefers preferred recommend recommended want wanted like liked
    love loved need needed think thought know knew make made fit ask asked say said tell told
    get got go went use used
"""
GENERIC_TERMS = frozenset(stem(w) for w in _GENERIC_TEXT.split())

# an imperative an assistant opens a suggestion with: reported as what it suggested
_SUGGESTION = re.compile(
    r"^(?:(?:then|so|also|and|just|maybe|perhaps|first|next),?\s+)?"
    r"(try|use|read|consider|check out|look at|install|run|start with|pick|choose|prefer|"
    r"switch to|add|set|enable|disable|upgrade|update|watch|visit|buy|get)\b\s*(.*)$",
    re.IGNORECASE | re.DOTALL,
)

# what a user asks with, question mark or not ("Recommend some books", "请推荐")
_REQUEST = re.compile(
    r"^(?:please |could you |can you |would you )?(?:recommend|suggest|tell|explain|show|help|"
    r"give|find|write|list|describe|compare|what|how|why|which|who|where|when|is there|"
    r"are there)\b|^请|推荐|帮我|告诉我|什么|怎么|为什么|吗[。？?]?$",
    re.IGNORECASE,
)
# a title or name given in quotes ('Using Asyncio in Python', 《书名》)
_QUOTED = re.compile(
    r"(?<!\w)'([^'\n]{3,80})'(?!\w)|\"([^\"\n]{3,80})\"|“([^”\n]{3,80})”|《([^》\n]{1,40})》"
)


def is_request(sentence: str) -> bool:
    """Whether ``sentence`` asks for something: a question or a request."""
    text = sentence.strip()
    return is_question(text) or bool(_REQUEST.search(text))


def quoted(texts: Iterable[str]) -> list[str]:
    """The quoted titles and names in ``texts``, in order."""
    found: list[str] = []
    for text in texts:
        for match in _QUOTED.finditer(text):
            found.append(next(g for g in match.groups() if g).strip())
    return found


def without_markup(text: str) -> str:
    """``text`` without tags, entities, URLs and Markdown marks (for keywords and weights)."""
    return _MARKUP.sub(" ", text) if _MARKUP_HINT.search(text) else text


def keyword_ok(word: str) -> bool:
    """Whether a written keyword is a word worth listing: 3+ letters (2+ CJK characters),
    not a number, not a stopword."""
    if any(is_cjk(ch) for ch in word):
        return len(word) >= 2
    letters = sum(ch.isalpha() for ch in word)
    return letters >= 3 and normalize(word) not in STOPWORDS


def with_turn(text: str, turn_id: str) -> str:
    """A key point ending with the id of the turn it came from."""
    return f"{text} [{turn_id}]"


def split_turn(fact: str) -> tuple[str, str | None]:
    """A key point's text and the turn id it ends with (None when it names none)."""
    found = _TURN_REF.search(fact)
    if found is None:
        return fact, None
    return fact[: found.start()], found.group(1)


def _gerund(verb: str) -> str:
    """ "try" -> "trying", "use" -> "using", "set" -> "setting" (first word only)."""
    head, _, tail = verb.partition(" ")
    low = head.lower()
    if low.endswith("e") and not low.endswith(("ee", "ye", "oe")) and len(low) > 2:
        low = low[:-1]
    elif (
        len(low) <= 4
        and len(low) >= 3
        and low[-1] not in "aeiouwxy"
        and low[-2] in "aeiou"
        and low[-3] not in "aeiou"
    ):
        low += low[-1]
    return f"{low}ing" + (f" {tail}" if tail else "")


def suggestion(sentence: str, who: Speakers) -> str | None:
    """An assistant's imperative as what it suggested ("Try X." -> "The assistant suggested
    trying X."); None for anything else or anyone else."""
    if not is_assistant(who.speaker):
        return None
    found = _SUGGESTION.match(" ".join(sentence.split()))
    if found is None or not found.group(2).strip(" .!"):
        return None
    rest = found.group(2).rstrip(" .!")
    return restate(f"{who.name} suggested {_gerund(found.group(1))} {rest}.", who)


# a lowercase word of three letters or more: a sentence of names only says nothing alone
_CONTENT_WORD = re.compile(r"(?<![\w'])[a-z]{3,}|[\u4e00-\u9fff]")


def reported(sentence: str, who: Speakers) -> str | None:
    """A statement that names nobody, as what the speaker said ("The deployment failed." ->
    "The user said the deployment failed."); None for questions, small talk, commands and
    sentences with fewer than two topic words ("It was great!")."""
    text = " ".join(sentence.split()).strip()
    if (
        not text
        or is_request(text)
        or is_small_talk(text)
        or first_person(text)
        or len(set(topic_terms(without_markup(text)))) < 2
        or not _CONTENT_WORD.search(text)  # a bare answer ("Luciano Ramalho.") needs its question
    ):
        return None
    if who.chinese:
        return f"{who.name}说：{text}" + ("" if text[-1] in "。！.!" else "。")
    head = text.split(" ", 1)[0]
    if normalize(head) in STOPWORDS or head.lower().endswith("ing"):
        text = text[:1].lower() + text[1:]
    return f"{who.name} said {text.rstrip('!')}" + ("" if text[-1] in ".!" else ".")


def voiced(fact: str, speakers: Sequence[str], chinese: bool = False) -> str:
    """A previous summary's key point in the voice of a note: a ``Name: text`` line (as the
    summaries before this account wrote) restated, else reported as said."""
    label = role_prefix(fact, speakers)
    if label is None:
        return fact
    body = fact.strip().lstrip("-*• ")[len(label) :].lstrip(" :：")
    who = Speakers(label, None, chinese=chinese)
    return restate(body, who) or f"{who.name} said: {body}"


def _join(items: Sequence[str], chinese: bool) -> str:
    if chinese:
        return "、".join(items[:-1]) + ("和" if len(items) > 1 else "") + items[-1]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def opening(
    speakers: Sequence[str],
    topics: Sequence[str],
    *,
    asked: bool,
    suggested: Sequence[str] = (),
    chinese: bool = False,
) -> str:
    """The account's first line: who talked about what ("Caroline and Melanie talked about
    painting and adoption.", "The user asked about asyncio; the assistant suggested ...")."""
    names = [display_name(s, chinese=chinese) for s in speakers] or [
        display_name("user", chinese=chinese)
    ]
    if not chinese:
        names = [
            names[0],
            *(n[:1].lower() + n[1:] if n.startswith("The ") else n for n in names[1:]),
        ]
    user = next((s for s in speakers if is_user(s)), None)
    assistant = next((s for s in speakers if is_assistant(s)), None)
    what = _join(list(topics), chinese) if topics else ""
    if chinese:
        if user is not None and assistant is not None and asked:
            line = f"用户询问了{what or '一些问题'}，助手作了回答"
            return line + (f"，建议了{_join(list(suggested), True)}。" if suggested else "。")
        return f"{_join(names, True)}谈到了{what or '一些事情'}。"
    if user is not None and assistant is not None:
        line = f"The user {'asked' if asked else 'talked'} about {what or 'a few things'}"
        if suggested:
            return f"{line}; the assistant suggested {_join(list(suggested), False)}."
        return f"{line}; the assistant answered."
    return f"{_join(names, False)} talked about {what or 'a few things'}."
