"""The offline fact extractor: which statements of new turns and summaries are worth keeping.

Consolidation without an LLM (``mm.consolidate(offline=True)``) cannot judge facts, so it only
adds, and must choose well within a token budget: a memory file is read into contexts. Each
sentence a person said is trimmed (interjections, vocatives, emphasis, clauses that add no
specific word) and restated as a note about someone (:func:`gitmem.text.voice.restate`:
"I went there yesterday" -> "Caroline went there (7 May 2023)."); questions, small talk,
commands, the assistant's suggestions and sentences that name nobody are never facts. The
choice is greedy for what the file can answer: rare words added per token, given what is
chosen. Near-duplicates become one fact citing every source; what the memory holds is
skipped. General rules only: nothing here knows a benchmark's questions.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gitmem.format.factlines import section_problem
from gitmem.format.facts import DEFAULT_SECTION, Fact, FactSource
from gitmem.models import Interaction
from gitmem.summary.account import split_turn
from gitmem.text import (
    dates,
    is_cjk,
    name_terms,
    near_duplicate,
    split_sentences,
    terms,
    topic_terms,
    words,
)
from gitmem.text.voice import (
    Speakers,
    display_name,
    is_assistant,
    is_small_talk,
    is_user,
    person_section,
    restate,
    statement_problem,
)

# a fact's cost beyond its words: the bullet, its id and one source in braces (tokens)
FACT_OVERHEAD = 18

_IMAGE = re.compile(r"\s*\[image: [^\]]*\]")
_PREFERENCE = re.compile(
    r"\b(?:prefer|prefers|favou?rite|like to|love to|enjoy|enjoys|hate|dislike|can't stand|"
    r"allergic|vegan|vegetarian)\b|喜欢|偏好|讨厌",
    re.IGNORECASE,
)
_PROJECT = re.compile(
    r"\b(?:project|repo|repository|deadline|release|launch|working on|building|roadmap|"
    r"milestone|sprint|thesis)\b|项目",
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


@dataclass
class _Statement:
    """A restated sentence the extractor may keep, with what it would add."""

    text: str
    section: str
    sources: tuple[FactSource, ...]
    terms: frozenset[str]
    bonus: float
    origin: str
    order: tuple[int, int, int]
    price: int = 0


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

    def statements(
        self, key_facts: Sequence[KeyFact], turns: Sequence[NewTurn]
    ) -> list[_Statement]:
        """The sentences of the new turns and key facts, restated in the third person."""
        speakers = sorted(
            {m.speaker for t in turns for m in t.turn.messages} - {""}, key=len, reverse=True
        )
        by_id = {(t.session, t.turn.id): t.turn for t in turns}
        kept = [k for k in key_facts if not _restates_a_new_turn(k, by_id)]
        self._weigh([m.content for t in turns for m in t.turn.messages] + [k.text for k in kept])
        skip = name_terms(*speakers, short_forms=True) if speakers else frozenset()
        out: list[_Statement] = []
        for at, fact in enumerate(kept):
            found = self._key_statement(fact, speakers, by_id, skip)
            if found is not None:
                found.order = (0, at, 0)
                out.append(found)
        partners = _partners(turns)
        for at, item in enumerate(turns):
            for message in item.turn.messages:
                if is_assistant(message.speaker):
                    continue  # suggestions are not what the user is or wants
                who = Speakers(
                    message.speaker,
                    partners.get((item.session, message.speaker)),
                    chinese=any(is_cjk(ch) for ch in message.content),
                )
                cited = (FactSource(session=item.session, interaction=item.turn.id),)
                said_here: list[str] = []
                for raw in split_sentences(message.content):
                    said = self.compress(trim(raw, speakers), skip)
                    if len(said) < 12 or _CHATTY.match(said):
                        continue
                    restated = restate(said, who, item.turn.timestamp)
                    if restated is not None:
                        said_here.append(restated)
                for n, text in enumerate(_units(said_here)):
                    mine = frozenset(t for t in terms(text) if t not in skip)
                    if len(mine) < 2:
                        continue
                    out.append(
                        _Statement(
                            text,
                            fact_section(text, message.speaker),
                            cited,
                            mine,
                            _bonus(text, has_specifics(text, skip)),
                            "turn",
                            (1, at, n),
                        )
                    )
        return out

    def _key_statement(
        self,
        fact: KeyFact,
        speakers: Sequence[str],
        by_id: dict[tuple[str, str], Interaction],
        skip: frozenset[str],
    ) -> _Statement | None:
        """A summary's key point as a statement to weigh, or None when it is none."""
        said, turn_id = split_turn(fact.text)
        text = " ".join(said.split())
        if (
            not text
            or not has_specifics(text)
            or statement_problem(text, speakers)
            or is_small_talk(text)
            or text.startswith(_ASSISTANT_VOICES)
        ):
            return None  # offline keeps a note's statements with names, numbers or dates
        source = (
            FactSource(session=fact.session, interaction=turn_id)
            if turn_id is not None and (turn_id in fact.covers or not fact.covers)
            else _best_source(fact, text, by_id)
        )
        turn = by_id.get((fact.session, source.interaction or ""))
        speaker = (
            turn.messages[0].speaker
            if turn is not None and turn.messages
            else next((p for p in speakers if text.startswith(display_name(p))), "")
        )
        if speaker and is_assistant(speaker):
            return None  # what the assistant suggested is not what anyone is or wants
        section = fact_section(text, speaker) if speaker else topic_section(text, DEFAULT_SECTION)
        mine = frozenset(t for t in terms(text) if t not in skip)
        return _Statement(text, section, (source,), mine, 1.1, "summary", (0, 0, 0))

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
        if text and text[-1] not in ".!?。！？":
            text += "。" if is_cjk(text[-1]) else "."
        return text[:1].upper() + text[1:]

    def _rare(self, text: str, skip: frozenset[str]) -> float:
        return sum(self.idf.get(t, 5.0) for t in dict.fromkeys(topic_terms(text)) if t not in skip)

    def _value(self, statement: _Statement, covered: set[str]) -> float:
        """What ``statement`` adds to the file per token: the rarity of its words (the ones
        the file already holds count less), times its bonus for names, numbers and dates."""
        rare = sum(
            self.idf.get(t, 3.0) * (_COVERED if t in covered else 1.0) for t in statement.terms
        )
        price: float = max(1, statement.price) ** _PRICE_POWER
        return statement.bonus * rare / price

    def choose(self, statements: Sequence[_Statement]) -> list[FactCandidate]:
        """Greedy choice for what the file can answer: each step takes the statement that
        adds most rare words per token, given what is chosen (a word the file holds counts
        less, so distinct people, things and events win over a tenth remark on one topic).
        Near-duplicates of a chosen statement add their source to it instead."""
        for statement in statements:
            statement.price = cost(statement.text)
        covered: set[str] = set()
        chosen: list[_Statement] = []
        spent = 0
        # lazy greedy: a value only falls as ``covered`` grows, so a stale top is re-weighed
        heap = [(-self._value(s, covered), n) for n, s in enumerate(statements)]
        heapq.heapify(heap)
        while heap:
            negative, n = heapq.heappop(heap)
            statement = statements[n]
            value = self._value(statement, covered)
            if value <= 0:
                continue
            if heap and value < -heap[0][0] - 1e-9 and value < -negative - 1e-9:
                heapq.heappush(heap, (-value, n))
                continue
            twin = _twin(statement, chosen)
            if twin is not None:
                twin.sources = tuple(dict.fromkeys(twin.sources + statement.sources))
                continue
            key = dedupe_key(statement.text)
            if (
                not key
                or key in self.seen_keys
                or any(similar(statement.terms, s) for s in self.seen_terms)
            ):
                continue  # the memory holds it already
            if spent + statement.price > self.budget:
                continue
            spent += statement.price
            self.seen_keys.add(key)
            chosen.append(statement)
            covered |= statement.terms
        chosen.sort(key=lambda s: s.order)
        return [
            FactCandidate(
                s.text, s.section, s.sources, self._value(s, set()), s.origin, s.order[:2]
            )
            for s in chosen
        ]


# what a word the file already holds is still worth, and how steeply length costs
_COVERED = 0.3
_PRICE_POWER = 1.3


_DATED = re.compile(r"\([^()]*\d{4}\)\.?$")
_OPINION = re.compile(
    r"\b(?:thinks?|feels?|believes?|hopes?|wish(?:es)?|important|means|reminds?|glad)\b",
    re.IGNORECASE,
)


def _bonus(text: str, specific: bool) -> float:
    """How much a statement's words are worth beyond their rarity: names and numbers, an
    event with its date; less for an opinion or a feeling."""
    bonus = 1.3 if specific else 1.0
    if _DATED.search(text):
        bonus *= _DATED_BONUS
    if _OPINION.search(text):
        bonus *= _OPINION_FACTOR
    return bonus


def _units(statements: Sequence[str]) -> list[str]:
    """What one message says, as facts: its statements joined while short (one fact per
    message reads better than crumbs and costs one id and source), else one by one."""
    if statements and sum(len(s) for s in statements) <= _JOIN_CHARS:
        return [" ".join(statements)]
    return list(statements)


_DATED_BONUS = 1.2
_OPINION_FACTOR = 0.7
_JOIN_CHARS = 160


# how a summary reports what the assistant said: a suggestion, never a fact
_ASSISTANT_VOICES = ("The assistant", "the assistant", "助手")


def _partners(turns: Sequence[NewTurn]) -> dict[tuple[str, str], str]:
    """Whom each speaker of a session talks to: the one other speaker of the session (the
    assistant for the user), when there is one."""
    by_session: dict[str, set[str]] = {}
    for item in turns:
        by_session.setdefault(item.session, set()).update(
            m.speaker for m in item.turn.messages if m.speaker
        )
    out: dict[tuple[str, str], str] = {}
    for session, people in by_session.items():
        for person in people:
            others = people - {person}
            if len(others) == 1:
                out[(session, person)] = next(iter(others))
    return out


def _twin(statement: _Statement, chosen: Sequence[_Statement]) -> _Statement | None:
    """A chosen statement of the same section that says the same (token-set similarity)."""
    for other in chosen:
        if other.section == statement.section and near_duplicate(statement.text, other.text):
            return other
    return None


def fact_section(text: str, speaker: str) -> str:
    """A named person's statements go under their name; the user's under ``User`` or a
    topical section (``Preferences``, ``Projects``)."""
    if is_user(speaker) or not speaker.strip() or section_problem(speaker.strip()):
        return topic_section(text, "User")
    return person_section(speaker)


def topic_section(text: str, default: str) -> str:
    """``Preferences`` / ``Projects`` by simple cues in ``text``, else ``default``."""
    if _PREFERENCE.search(text):
        return "Preferences"
    if _PROJECT.search(text):
        return "Projects"
    return default


def _restates_a_new_turn(fact: KeyFact, turns: dict[tuple[str, str], Interaction]) -> bool:
    """Whether a key point cites a turn that is new material itself (its statements come)."""
    turn_id = split_turn(fact.text)[1]
    return turn_id is not None and (fact.session, turn_id) in turns


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
    return extractor.choose(extractor.statements(key_facts, turns))
