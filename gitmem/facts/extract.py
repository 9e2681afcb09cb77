"""The offline fact extractor: which sentences of new turns and summaries are worth keeping.

Consolidation without an LLM (``mm.consolidate(offline=True)``) cannot rewrite or judge
facts, so it only adds, and must choose well within a token budget: a memory file is read
into every context. It weighs each sentence by how specific its words are across the
material (rare words weigh more: "Sweden", "Marley flooring", not "great" or "today"),
prefers statements with names, numbers, dates and first-person facts ("I have", "my ..."),
drops questions and small talk, trims interjections and vocatives, and skips anything the
memory already holds (same words, or most of them). Each kept fact names the turn it came
from. General rules only: nothing here knows a benchmark's questions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gitmem.format.facts import DEFAULT_SECTION, Fact, FactSource, section_problem
from gitmem.models import Interaction
from gitmem.text import dates, is_cjk, name_terms, split_sentences, terms, topic_terms, words

USER_LABELS = frozenset({"user", "用户", "human", "me", "you"})
ASSISTANT_LABELS = frozenset({"assistant", "助手", "ai", "bot", "system", "model", "tool"})

# a fact's cost beyond its words: the bullet, its id and one source in braces (tokens)
FACT_OVERHEAD = 18

_IMAGE = re.compile(r"\s*\[image: [^\]]*\]")
_FIRST_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|my|mine|we|our|we're|we've|me)\b|我", re.IGNORECASE
)
# a statement about the speaker: "I am", "I have", "my ..."
_ABOUT_ME = re.compile(
    r"\b(?:I am|I'm|I have|I've|I had|I was|my|we have|we've|our)\b|"
    r"\b(?:I|we)\s+(?!think|guess|hope|wish|feel|mean|know|bet|agree|can't wait|love that)"
    r"[a-z]+",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:prefer|prefers|favou?rite|like to|love to|enjoy|enjoys|hate|dislike|can't stand|"
    r"allergic|vegan|vegetarian)\b|喜欢|偏好|讨厌",
    re.IGNORECASE,
)
_PROJECT = re.compile(
    r"\b(?:project|repo|repository|deadline|release|launch|working on|building|roadmap|"
    r"milestone|sprint)\b|项目",
    re.IGNORECASE,
)
# a leading interjection or greeting: "Wow, ", "Hey Mel! ", "Thanks, Caroline. "
_LEAD = re.compile(
    r"^(?:(?:oh|wow|whoa|woah|yeah|yes|yep|yup|well|so|and|but|btw|by the way|anyway|"
    r"unfortunately|haha|hey|hi|hello|thanks|thank you|aw+|ah|omg|ok|"
    r"okay|hmm|gosh|absolutely|totally|definitely|cool|great|awesome|nice|sure|right|true|"
    r"congrats|congratulations)\b[\s,!.:;-]*)+",
    re.IGNORECASE,
)
# where a sentence turns to a new clause with its own subject: "..., and it was great"
_CLAUSE = re.compile(
    r"(?:,\s*|\s+)(?:and|but|so|because|which)\s+(?=(?:it|it's|that|that's|this|i|i'm|i've|"
    r"we|we're|they|they're|he|she|you|you're)\b)|\s+[-–—]+\s+|;\s+|(?<=\w)[:]\s+",
    re.IGNORECASE,
)
# words that add emphasis, not information
_FILLER = re.compile(
    r"\b(?:really|super|just|actually|totally|truly|honestly|absolutely|"
    r"definitely|literally|basically|pretty much)\s+",
    re.IGNORECASE,
)
_CHATTY = re.compile(
    r"^(?:that'?s|it'?s|you'?re|you|how|what|glad|good|great|sounds|so happy|"
    r"keep it up|can't wait|take care|bye|see you)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class KeyFact:
    """A key fact of a session's summary, and the turns that summary covers."""

    text: str
    session: str
    covers: tuple[str, ...] = ()


@dataclass(frozen=True)
class NewTurn:
    """A turn saved since the last consolidation."""

    session: str
    turn: Interaction


@dataclass(frozen=True)
class FactCandidate:
    """A fact the extractor proposes to add."""

    text: str
    section: str
    sources: tuple[FactSource, ...]
    score: float
    origin: str  # "summary" or "turn"
    order: tuple[int, int]  # where its source comes in the input, for file order


def cost(text: str) -> int:
    """A token estimate on the high side of BPE tokenizers (a word costs one token per
    four characters, punctuation one each), plus the fact's bullet and braces."""
    total = 0
    for piece in re.findall(r"[A-Za-z0-9]+|\S", text):
        total += (
            max(1, math.ceil(len(piece) / 4))
            if piece[0].isascii() and piece[0].isalnum()
            else 2
            if is_cjk(piece)
            else 1
        )
    return total + FACT_OVERHEAD


def has_specifics(text: str, people: frozenset[str] = frozenset()) -> bool:
    """Names (a capitalised word not opening a sentence, other than the speakers' own
    ``people``, who are named in every other line), digits, dates or CJK text."""
    if any(ch.isdigit() for ch in text) or dates(text) or any(is_cjk(ch) for ch in text):
        return True
    for sentence in split_sentences(text) or [text]:
        tokens = re.findall(r"[A-Za-z][\w'-]*", sentence)
        if any(
            t[0].isupper()
            and t != "I"
            and not t.startswith("I'")
            and t.lower().split("'")[0] not in people
            for t in tokens[1:]
        ):
            return True
    return False


def dedupe_key(text: str) -> str:
    """Text normalised for exact-duplicate checks (case, punctuation, stopwords)."""
    return " ".join(words(text))


def similar(a: frozenset[str], b: frozenset[str]) -> bool:
    """Fuzzy duplicate: the smaller term set mostly inside the other (token overlap)."""
    if not a or not b:
        return False
    shared = len(a & b)
    return shared / min(len(a), len(b)) >= 0.75 or shared / len(a | b) >= 0.6


def section_for(text: str, speaker: str | None) -> str:
    """Where a fact goes: a named person's own section; ``User`` for the user's first-person
    statements; ``Preferences`` / ``Projects`` by simple cues; else ``Notes``."""
    label = (speaker or "").strip()
    if (
        label
        and label.lower() not in USER_LABELS | ASSISTANT_LABELS
        and (section_problem(label) is None)
    ):
        return label  # several people talk: a fact without its person would be ambiguous
    if _PREFERENCE.search(text):
        return "Preferences"
    if _PROJECT.search(text):
        return "Projects"
    if (
        label.lower() in USER_LABELS
        or _FIRST_PERSON.match(text)
        or text.lower().startswith(("the user", "user "))
    ):
        return "User"
    return DEFAULT_SECTION


def trim(sentence: str, speakers: Iterable[str] = ()) -> str:
    """A sentence without its opening interjections and vocatives (``Wow, Mel, ...``)."""
    text = _IMAGE.sub("", sentence).strip()
    for _ in range(3):
        before = text
        text = _LEAD.sub("", text).strip()
        for name in speakers:
            for form in {name, name[:3]}:
                if len(form) >= 3 and text.lower().startswith(form.lower()):
                    rest = text[len(form) :]
                    if rest[:1] in (",", "!", "."):
                        text = rest[1:].strip()
        if text == before:
            break
    text = (
        re.sub(
            r",\s*(?:" + "|".join(re.escape(s) for s in speakers if s) + r")\s*([.!])$", r"\1", text
        )
        if speakers
        else text
    )
    return text[:1].upper() + text[1:] if text else text


class FactExtractor:
    """Picks facts from key facts and new turns (see the module docstring)."""

    def __init__(self, existing: Sequence[Fact], budget: int) -> None:
        self.budget = budget
        self.seen_keys = {dedupe_key(f.text) for f in existing}
        self.seen_terms = [frozenset(terms(f.text)) for f in existing]
        self.idf: dict[str, float] = {}

    def _weigh(self, texts: Sequence[str]) -> None:
        df: dict[str, int] = {}
        for text in texts:
            for term in set(topic_terms(text)):
                df[term] = df.get(term, 0) + 1
        total = len(texts) + 1
        self.idf = {t: math.log(total / n) for t, n in df.items()}

    def _score(self, text: str, skip: frozenset[str]) -> float:
        found = [t for t in dict.fromkeys(topic_terms(text)) if t not in skip]
        if len(found) < 2:
            return 0.0
        rare = sum(self.idf.get(t, math.log(len(self.idf) + 2)) for t in found)
        score = rare / math.sqrt(len(found) + 4)  # dense sentences beat long ones
        if has_specifics(text, skip):
            score *= 1.3
        if _FIRST_PERSON.search(text):
            score *= 1.15
        return score

    def candidates(
        self, key_facts: Sequence[KeyFact], turns: Sequence[NewTurn]
    ) -> list[FactCandidate]:
        """Every sentence worth considering, scored."""
        speakers = sorted(
            {m.speaker for t in turns for m in t.turn.messages} - {""}, key=len, reverse=True
        )
        self._weigh(
            [m.content for t in turns for m in t.turn.messages] + [k.text for k in key_facts]
        )
        skip = name_terms(*speakers, short_forms=True) if speakers else frozenset()
        by_id = {(t.session, t.turn.id): t.turn for t in turns}
        out: list[FactCandidate] = []
        for at, fact in enumerate(key_facts):
            text = " ".join(fact.text.split())
            if not text or not has_specifics(text) or text.endswith("?"):
                continue  # offline keeps statements with names, numbers or dates only
            source = _best_source(fact, text, by_id)
            out.append(
                FactCandidate(
                    text,
                    section_for(text, None),
                    (source,),
                    self._score(text, skip) * 1.5 + 1.0,
                    "summary",
                    (0, at),
                )
            )
        for at, item in enumerate(turns):
            for message in item.turn.messages:
                if message.speaker.strip().lower() in ASSISTANT_LABELS:
                    continue
                picked = self._sentences(message.content, speakers, skip)
                if not picked:
                    continue
                text = " ".join(s for _, s in picked)
                score = max(s for s, _ in picked) + 0.25 * min(s for s, _ in picked) * (
                    len(picked) - 1
                )
                out.append(
                    FactCandidate(
                        text,
                        section_for(text, message.speaker),
                        (FactSource(session=item.session, interaction=item.turn.id),),
                        score,
                        "turn",
                        (1, at),
                    )
                )
        return out

    def compress(self, sentence: str, skip: frozenset[str]) -> str:
        """The sentence without its emphasis words and without the clauses that add no
        specific word ("..., and it was so much fun")."""
        text = _FILLER.sub("", sentence)
        parts = [p.strip(" ,") for p in _CLAUSE.split(text) if p and p.strip(" ,")]
        if len(parts) > 1:
            weights = [self._rare(p, skip) for p in parts]
            best = max(weights)
            kept = [p for p, w in zip(parts, weights, strict=True) if w >= 0.35 * best]
            text = "; ".join(kept)
        text = text.strip()
        if text and text[-1] not in ".!?":
            text += "."
        return text[:1].upper() + text[1:]

    def _rare(self, text: str, skip: frozenset[str]) -> float:
        return sum(self.idf.get(t, 5.0) for t in dict.fromkeys(topic_terms(text)) if t not in skip)

    def _sentences(
        self, content: str, speakers: Sequence[str], skip: frozenset[str]
    ) -> list[tuple[float, str]]:
        scored = []
        for raw in split_sentences(content):
            sentence = self.compress(trim(raw, speakers), skip)
            if len(sentence) < 12 or sentence.endswith("?") or _CHATTY.match(sentence):
                continue
            if not has_specifics(sentence, skip) and not _ABOUT_ME.search(sentence):
                continue  # nothing that names, counts, dates or says who the speaker is
            score = self._score(sentence, skip)
            if score > 0:
                scored.append((score, sentence))
        scored.sort(key=lambda s: -s[0])
        best = scored[:2]
        if len(best) == 2 and best[1][0] < 0.6 * best[0][0]:
            best = best[:1]
        order = {s: n for n, (_, s) in enumerate(scored)}
        return sorted(best, key=lambda s: order[s[1]])

    def pick(self, candidates: Sequence[FactCandidate]) -> list[FactCandidate]:
        """The best candidates within the budget, without duplicates, in input order."""
        chosen: list[FactCandidate] = []
        spent = 0
        for cand in sorted(candidates, key=lambda c: (-c.score / cost(c.text), c.order)):
            if cand.score <= 0:
                break
            key = dedupe_key(cand.text)
            mine = frozenset(terms(cand.text))
            if not key or key in self.seen_keys or any(similar(mine, s) for s in self.seen_terms):
                continue
            price = cost(cand.text)
            if spent + price > self.budget:
                continue
            spent += price
            self.seen_keys.add(key)
            self.seen_terms.append(mine)
            chosen.append(cand)
        chosen.sort(key=lambda c: c.order)
        return chosen


def _best_source(fact: KeyFact, text: str, turns: dict[tuple[str, str], Interaction]) -> FactSource:
    """The covered turn that shares most words with the fact (the session if none does)."""
    wanted = set(terms(text))
    best, best_shared = None, 0
    for turn_id in fact.covers:
        turn = turns.get((fact.session, turn_id))
        if turn is None:
            continue
        shared = len(wanted & set(terms(turn.text)))
        if shared > best_shared:
            best, best_shared = turn_id, shared
    return FactSource(session=fact.session, interaction=best)


def extract(
    existing: Sequence[Fact], key_facts: Sequence[KeyFact], turns: Sequence[NewTurn], budget: int
) -> list[FactCandidate]:
    """The facts to add offline: salient, new, within ``budget`` tokens."""
    extractor = FactExtractor(existing, budget)
    return extractor.pick(extractor.candidates(key_facts, turns))
