"""Offline text statistics and the extractive summarizer (no network, deterministic).

:class:`SummaryExtractor` (wrapped by :class:`~gitmem.summary.engines.ExtractiveSummarizer`,
gitmem's default) scores every sentence of the covered turns by its TF-IDF cosine similarity
to the conversation's centroid (the sentences that say what the whole conversation is about),
prefers ones that carry facts (numbers, names, the user's own words), removes near-duplicates
and keeps those that read as statements about someone; they are written as an account in the
third person (:mod:`gitmem.summary.account`). Keywords are the terms with the highest TF-IDF
mass, entities the capitalised names, both without markup and words every session uses.
Terms come from :mod:`gitmem.text` (``topic_terms``: the search terms without small talk),
and the same vectors serve the topic-shift trigger and the
loss guard, so search and summaries agree on what "the same word" means.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime

from gitmem.models import USER_SPEAKERS, Interaction, StructuredSummary, Summary
from gitmem.summary.account import (
    GENERIC_TERMS,
    is_request,
    keyword_ok,
    opening,
    quoted,
    reported,
    suggestion,
    voiced,
    with_turn,
    without_markup,
)
from gitmem.text import is_cjk, name_terms, split_sentences, stem, topic_terms, words
from gitmem.text.voice import (
    Speakers,
    display_name,
    is_assistant,
    is_question,
    is_user,
    restate,
)

EXTRACTIVE_MODEL = "gitmem-extractive"

_NUMBER = re.compile(r"\d")

_GENERIC_SPEAKERS = frozenset({"user", "assistant", "human", "ai", "bot", "system", "i"})

Vector = dict[str, float]


def tf_vector(words: Iterable[str], idf: dict[str, float] | None = None) -> Vector:
    """Term-frequency vector, weighted by ``idf`` when given (unknown terms weigh 1)."""
    counts: dict[str, int] = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    if idf is None:
        return {t: float(c) for t, c in counts.items()}
    return {t: c * idf.get(t, 1.0) for t, c in counts.items()}


def norm(vector: Vector) -> float:
    """Euclidean length of a sparse vector."""
    return math.sqrt(sum(v * v for v in vector.values()))


def cosine(a: Vector, b: Vector, norm_a: float | None = None, norm_b: float | None = None) -> float:
    """Cosine similarity of two sparse vectors (0 when either is empty)."""
    if len(a) > len(b):
        a, b, norm_a, norm_b = b, a, norm_b, norm_a
    dot = sum(v * b[t] for t, v in a.items() if t in b)
    if dot == 0.0:
        return 0.0
    na = norm(a) if norm_a is None else norm_a
    nb = norm(b) if norm_b is None else norm_b
    return dot / (na * nb) if na and nb else 0.0


def coverage(needle: Sequence[str], haystack: set[str]) -> float:
    """Share of ``needle``'s distinct terms found in ``haystack`` (numbers count double)."""
    distinct = set(needle)
    if not distinct:
        return 1.0
    weight = {t: 2.0 if _NUMBER.search(t) else 1.0 for t in distinct}
    found = sum(w for t, w in weight.items() if t in haystack)
    return found / sum(weight.values())


def summary_facts(summary: Summary | StructuredSummary | None) -> list[str]:
    """The facts a summary asserts: its key facts, else its bullet lines / sentences."""
    if summary is None:
        return []
    facts = summary.facts if isinstance(summary, Summary) else summary.key_facts
    if facts:
        return list(facts)
    text = summary.text if isinstance(summary, Summary) else summary.summary
    return [s for s in split_sentences(text) if not s.endswith(":") and len(topic_terms(s)) >= 2]


def summary_terms(summary: StructuredSummary) -> set[str]:
    """Every content term a structured summary mentions anywhere."""
    parts = [summary.summary, *summary.key_facts, *summary.entities, *summary.tags]
    return set(topic_terms("\n".join(parts)))


@dataclass
class _Sentence:
    turn: int
    order: int
    speaker: str
    text: str
    words: list[str]
    vector: Vector
    length: float = 0.0
    score: float = 0.0
    turn_id: str = ""
    who: Speakers | None = None
    said_at: datetime | None = None
    # the sentence as a key point ("" until worked out, None when it is none)
    stated: str | None = ""

    def statement(self) -> str | None:
        """The sentence as a key point, worked out on first use (most never are)."""
        if self.stated == "":
            self.stated = _stated(self.text, self.who or Speakers(self.speaker), self.said_at)
        return self.stated


_CAPITALISED = re.compile(r"(?<![\w'’-])[A-ZÀ-ÖØ-Þ][\w'’-]*(?:[ ][A-ZÀ-ÖØ-Þ][\w'’-]*)*")


def _entities(sentences: Sequence[_Sentence], speakers: Iterable[str]) -> list[str]:
    """Capitalised names (runs of capitalised words not opening a sentence), by frequency."""
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    cleaned: dict[str, str | None] = {}
    for at, sentence in enumerate(sentences):
        for match in _CAPITALISED.finditer(without_markup(sentence.text), 1):
            run = match.group(0).rstrip("'’-")
            name = cleaned.get(run, "")
            if name == "":
                words = [w for w in run.split(" ") if _may_name(w)]
                name = cleaned[run] = " ".join(words) if words and len(words[0]) > 1 else None
            if name is not None:
                counts[name] += 1
                first_seen.setdefault(name, at)
    for speaker in speakers:
        if speaker.casefold() not in _GENERIC_SPEAKERS and speaker[:1].isupper():
            counts[speaker] += 1
            first_seen.setdefault(speaker, -1)
    return sorted(counts, key=lambda name: (-counts[name], first_seen[name], name))


class SummaryExtractor:
    """Deterministic offline summarization: the most central, fact-bearing, non-redundant
    sentences of the covered turns, plus keywords and names found in them.

    Args:
        max_sentences: sentences picked from the new turns per summary.
        max_facts: key facts kept in total (previous summary's facts first).
        max_keywords: keywords/entities returned.
        max_drop_share: at most this share of the previous summary's facts may be aged out
            in one summary to make room for new ones (keeps it under the loss guard).
        redundancy: cosine similarity above which a sentence counts as a repeat.
    """

    name = EXTRACTIVE_MODEL

    def __init__(
        self,
        *,
        max_sentences: int = 8,
        max_facts: int = 24,
        max_keywords: int = 10,
        max_drop_share: float = 0.2,
        redundancy: float = 0.4,
    ) -> None:
        self.max_sentences = max_sentences
        self.max_facts = max_facts
        self.max_keywords = max_keywords
        self.max_drop_share = max_drop_share
        self.redundancy = redundancy
        # terms (stems) too common to be keywords: set to those in most sessions of a store
        self.common_terms: frozenset[str] = GENERIC_TERMS

    def structured(
        self, turns: Sequence[Interaction], previous: Summary | None = None
    ) -> StructuredSummary:
        """Summarize ``turns`` (continuing ``previous``) into a structured summary: an
        account in the third person (see :mod:`gitmem.summary.account`)."""
        speakers = list(dict.fromkeys(m.speaker for t in turns for m in t.messages if m.speaker))
        chinese = _mostly_chinese(turns)
        sentences = self._sentences(turns, speakers, chinese)
        muted = name_terms(*speakers, short_forms=True) | self.common_terms
        picked = self._select(sentences, speakers)
        old = [voiced(f, speakers, chinese) for f in summary_facts(previous)]
        new = [with_turn(_clip(s.statement() or s.text), s.turn_id) for s in picked]
        said_by = dict(zip(new, (s.speaker for s in picked), strict=True))
        facts = self._merge_facts(old, new)
        names = [
            n
            for n in _entities(sentences, speakers)
            if keyword_ok(n)
            and not set(topic_terms(n)) <= self.common_terms
            and n.casefold() not in _CALENDAR
        ][: max(1, self.max_keywords - 3)]
        # a keyword that is part of a name ("caleb" of "Caleb Hattingh") adds nothing
        in_names = {t for name in names for t in topic_terms(name)}
        keywords = self._keywords(sentences, muted | in_names)
        entities = [*names, *keywords][: self.max_keywords]
        old_entities = previous.keywords if previous else []
        merged = list(dict.fromkeys([*entities, *old_entities]))
        if not facts:
            return StructuredSummary(
                summary=f"- {len(turns)} turns without text",
                entities=merged[: self.max_keywords * 2],
                tags=keywords[:3],
            )
        head = self._opening(sentences, speakers, chinese, muted, keywords, old_entities)
        lines = [head, *(f"- {fact}" for fact in by_person(facts, speakers, chinese, said_by))]
        return StructuredSummary(
            summary="\n".join(lines),
            key_facts=facts,
            entities=merged[: self.max_keywords * 2],
            tags=keywords[:3],
        )

    def _opening(
        self,
        sentences: Sequence[_Sentence],
        speakers: Sequence[str],
        chinese: bool,
        muted: Set[str],
        keywords: Sequence[str],
        old_keywords: Sequence[str],
    ) -> str:
        """The account's first line: who talked about what (the user's topics and what the
        assistant suggested when they are the two speakers)."""
        asking = [s for s in sentences if is_user(s.speaker)]
        talked = sentences
        if asking and any(is_assistant(s) for s in speakers):
            talked = asking
        said = {t for s in talked for t in s.vector}
        names = [
            n
            for n in _entities(talked, ())
            if keyword_ok(n) and not set(topic_terms(n)) & muted and not is_assistant(n)
        ]
        topics = [*names[:2], *(k for k in keywords if stem(k.casefold()) in said)]
        topics += [k for k in old_keywords if k.islower()]
        topics = [t for t in dict.fromkeys(topics) if t.casefold() not in _CALENDAR]
        # "Python" says less than "Fluent Python" beside it
        topics = [
            t
            for t in topics
            if not any(t != o and t.casefold() in o.casefold().split() for o in topics)
        ]
        topics = topics[: 2 if chinese else 3]
        told = {t.casefold() for t in topics}
        advice = [s for s in sentences if is_assistant(s.speaker) and suggestion(s.text, _who(s))]
        offered = quoted(s.text for s in advice) or _entities(advice, ())
        suggested: list[str] = []
        for name in dict.fromkeys(offered):
            folded = name.casefold()
            if (
                keyword_ok(name)
                and folded not in told
                and not any(folded in s.casefold() for s in suggested)
            ):
                suggested.append(name)
        suggested = suggested[:2]
        if advice and not suggested:
            suggested = [k for k in self._keywords(advice, muted) if k.casefold() not in told][:2]
        return opening(
            speakers,
            topics,
            asked=any(is_request(s.text) for s in asking),
            suggested=suggested,
            chinese=chinese,
        )

    # --- internals -----------------------------------------------------------------------

    def keywords(self, text: str) -> list[str]:
        """Names first, then keywords, of a free text (e.g. an LLM's plain-text answer)."""
        sentences = self._vectorize(
            _Sentence(0, at, "", part, topic_terms(without_markup(part)), {})
            for at, part in enumerate(split_sentences(text))
        )
        names = [n for n in _entities(sentences, ()) if keyword_ok(n)]
        lowered = {n.casefold() for n in names}
        extra = [k for k in self._keywords(sentences) if k.casefold() not in lowered]
        return [*names, *extra][: self.max_keywords]

    @staticmethod
    def _sentences(
        turns: Sequence[Interaction], speakers: Sequence[str], chinese: bool
    ) -> list[_Sentence]:
        out: list[_Sentence] = []
        before: str | None = None
        for index, turn in enumerate(turns):
            for message in turn.messages:
                speaker = message.speaker
                who = Speakers(speaker, _addressee(speaker, speakers, before), chinese=chinese)
                before = speaker
                for text in split_sentences(message.content):
                    words = topic_terms(without_markup(text))
                    out.append(
                        _Sentence(
                            index,
                            0,
                            speaker,
                            text,
                            words,
                            {},
                            0.0,
                            0.0,
                            turn.id,
                            who,
                            turn.timestamp,
                        )
                    )
        return SummaryExtractor._vectorize(out)

    @staticmethod
    def _vectorize(candidates: Iterable[_Sentence]) -> list[_Sentence]:
        out = [s for s in candidates if s.words]
        df: dict[str, int] = {}
        for order, sentence in enumerate(out):
            sentence.order = order
            counts: dict[str, float] = {}
            for word in sentence.words:
                counts[word] = counts.get(word, 0.0) + 1.0
            sentence.vector = counts
            for term in counts:
                df[term] = df.get(term, 0) + 1
        total = len(out) + 1
        idf = {t: math.log(total / (n + 1)) + 1.0 for t, n in df.items()}
        for sentence in out:
            vector = sentence.vector
            for term in vector:
                vector[term] *= idf[term]
            sentence.length = math.sqrt(sum(v * v for v in vector.values()))
        return out

    def _select(self, sentences: list[_Sentence], speakers: Iterable[str]) -> list[_Sentence]:  # noqa: C901
        if not sentences:
            return []
        # a term weighs more the more often the conversation returns to it (topic) and the
        # fewer sentences use it (specific); speakers' own names (vocatives) weigh nothing.
        # The topic part is damped (square root): Porter stems gather every inflection of a
        # theme, and undamped the recurring themes crowd out one-off facts (LoCoMo evidence
        # kept in the facts: 60.1% undamped, 66.1% damped, 61.6% with the old stemmer).
        counts: dict[str, int] = {}
        for sentence in sentences:
            for term in sentence.vector:
                counts[term] = counts.get(term, 0) + 1
        total = len(sentences)
        muted = name_terms(*speakers, short_forms=True)
        weight = {
            t: 0.0
            if t in muted
            else math.sqrt(math.log1p(n)) * (math.log((total + 1) / (n + 1)) + 1.0)
            for t, n in counts.items()
        }
        for sentence in sentences:
            distinct = sentence.vector.keys()
            score = sum(weight[t] for t in distinct) / math.sqrt(len(distinct) + 4)
            text = sentence.text
            if _NUMBER.search(text):
                score *= 1.2
            if _CAPITALISED.search(text, 1):
                score *= 1.1
            if sentence.speaker.casefold() in USER_SPEAKERS:
                score *= 1.1
            if text.endswith("?"):
                score *= 0.8
            elif text.endswith("!"):
                score *= 0.85
            sentence.score = score
        # short inputs keep most of their sentences, long ones about sqrt(n), capped
        count = len(sentences)
        budget = max(1, min(self.max_sentences, max(2 + round(math.sqrt(count)), min(count, 5))))
        ranked = sorted(sentences, key=lambda s: (-s.score, s.order))
        picked: list[_Sentence] = []
        for candidate in ranked:
            if len(picked) >= budget:
                break
            if candidate.statement() is None:
                continue  # a question, small talk, a command: no key point
            if any(
                cosine(candidate.vector, chosen.vector, candidate.length, chosen.length)
                > self.redundancy
                for chosen in picked
            ):
                continue
            picked.append(candidate)
        return sorted(picked, key=lambda s: s.order)

    def _merge_facts(self, old: list[str], new: list[str]) -> list[str]:
        seen = {fact.casefold() for fact in old}
        fresh = [fact for fact in new if fact.casefold() not in seen]
        room = self.max_facts - len(old)
        if len(fresh) > room:
            may_drop = math.floor(len(old) * self.max_drop_share)
            drop = min(may_drop, len(fresh) - room)
            old = old[drop:]
            fresh = fresh[: max(0, self.max_facts - len(old))]
        return [*old, *fresh]

    def _keywords(self, sentences: Sequence[_Sentence], muted: Set[str] = frozenset()) -> list[str]:
        counts: dict[str, int] = {}
        df: dict[str, int] = {}
        for sentence in sentences:
            for term in sentence.vector:
                df[term] = df.get(term, 0) + 1
            for term in sentence.words:
                counts[term] = counts.get(term, 0) + 1
        total = len(sentences)
        scored = [
            (count * (math.log((total + 1) / (df[t] + 1)) + 0.1), t)
            for t, count in counts.items()
            if (len(t) >= 3 or (len(t) == 2 and is_cjk(t)))
            and not t.isdigit()
            and t not in muted
            and t not in self.common_terms
        ]
        scored.sort(key=lambda item: (-item[0], item[1]))
        spelled = _spelled([t for _, t in scored[: self.max_keywords * 2]], sentences)
        return [word for word in spelled if keyword_ok(word)][: self.max_keywords]


def _spelled(keywords: list[str], sentences: Sequence[_Sentence], enough: int = 12) -> list[str]:
    """Each stemmed keyword as the word most often written for it ("decor" -> "decorators"),
    judged on its first ``enough`` uses (reading every sentence again costs too much)."""
    wanted = set(keywords)
    seen: dict[str, Counter[str]] = {term: Counter() for term in keywords}
    for sentence in sentences:
        if wanted.isdisjoint(sentence.vector):
            continue
        for word in words(sentence.text):
            term = stem(word)
            if term in wanted:
                seen[term][word] += 1
                if seen[term].total() >= enough:
                    wanted.discard(term)
        if not wanted:
            break
    out = []
    for term in keywords:
        forms = seen[term]
        out.append(min(forms, key=lambda w: (-forms[w], len(w), w)) if forms else term)
    return out


_LETTER = re.compile(r"[^\W\d_]")

_CALENDAR_TEXT = """
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december mon tue tues wed thu thur thurs fri
    sat sun jan feb mar apr jun jul aug sep sept oct nov dec
"""
_CALENDAR = frozenset(_CALENDAR_TEXT.split())


def _clip(text: str, most: int = 300) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _mostly_chinese(turns: Sequence[Interaction]) -> bool:
    """Whether the turns are written mostly in Chinese (the account is then written so)."""
    text = "".join(m.content for t in turns for m in t.messages)
    if text.isascii():
        return False
    letters = _LETTER.findall(text)
    return bool(letters) and sum(map(is_cjk, letters)) * 3 > len(letters)


# a note the transcript adds after a sentence ("[image: a photo of ...]")
_ANNOTATION = re.compile(r"\s*\[[^\[\]]*\]\s*$")


def _stated(text: str, who: Speakers, said_at: datetime | None) -> str | None:
    """The sentence as a key point (a statement, or what the assistant suggested); None
    for a question even when a note follows its question mark."""
    if is_question(_ANNOTATION.sub("", text)):
        return None
    return restate(text, who, said_at) or suggestion(text, who) or reported(text, who)


def _addressee(speaker: str, speakers: Sequence[str], before: str | None) -> str | None:
    """Whom ``speaker`` talks to: the other one of two, else whoever spoke last."""
    others = [s for s in speakers if s != speaker]
    if len(others) == 1:
        return others[0]
    return before if before != speaker else None


def _who(sentence: _Sentence) -> Speakers:
    return sentence.who or Speakers(sentence.speaker)


def by_person(
    facts: Sequence[str],
    speakers: Sequence[str],
    chinese: bool,
    said_by: Mapping[str, str] | None = None,
) -> list[str]:
    """``facts`` grouped by the person each is about (the speaker it opens with, else the
    one who said it, else the first speaker it names), in the order the speakers first
    spoke; facts about no speaker last."""
    names = [display_name(s, chinese=chinese).casefold() for s in speakers]
    said_by = said_by or {}

    def owner(fact: str) -> int:
        folded = fact.casefold()
        starts = [at for at, name in enumerate(names) if folded.startswith(name)]
        if starts:
            return starts[0]
        if said_by.get(fact) in speakers:
            return speakers.index(said_by[fact])
        found = [(folded.find(name), at) for at, name in enumerate(names) if name in folded]
        return min(found)[1] if found else len(names)

    return sorted(facts, key=owner)


def _may_name(word: str) -> bool:
    """Whether a capitalised word can be part of a name (not "I'm", "Great", "User")."""
    return word.casefold() not in _GENERIC_SPEAKERS and bool(topic_terms(word))
