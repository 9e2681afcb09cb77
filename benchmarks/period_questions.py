"""Questions that name a period, written from the turns themselves, and their recall.

No question file is read: each question is built from one turn of a conversation, so the
data (LoCoMo is CC BY-NC) and the questions stay generated at run time, never stored.

Construction, per conversation (deterministic for a seed):

1. Every turn's content words: five letters or more, not a stopword, not a date word
   (month, weekday, "yesterday", ...), not a speaker's name; counted by their stem over the
   conversation's turns.
2. A turn T (speaker S, said at time t) qualifies with a word w when w is in T, no other
   turn of T's month holds w, and more than ``OTHERS`` (15) turns of three or more months
   do, more than the first hits can hold: the question's words alone are ambiguous across
   the conversation, and only the period decides. Of the qualifying words the rarest is
   taken (ties: alphabetical).
3. The question names S, w and the period of T in one of four forms, in turn: "What did S
   mention about w in June 2023?", "... in June?" (no year: resolved against the store's
   time span), "... on 8 May 2023?", and, when T holds a relative phrase naming one day
   ("last Friday"), that day as :func:`gitmem.text.events.span_label` writes it.
4. At most ``--per-conv`` turns, sampled at random among those that qualify.

A second set, ``blind``, shares no content word with its evidence: "What did S talk about
on 8 May 2023?" (or "... on 8 May?") for a day on which S spoke, a hit being any turn of
S said that day; and, in turn, the same question for a day on which nobody spoke but that
a turn of S talks about ("yesterday" said the day after), a hit being such a turn. Only the
speaker and the period can find them.

The evidence of a word question is T alone; R@k is the share of questions whose T is among the
first k hits, in three columns: ``period`` (the ranker as configured), ``dates`` (the
period feature off: the older date support only) and ``none`` (no date support at all:
how ambiguous the words alone are).

    python benchmarks/period_questions.py /work/shared/data/locomo/locomo-dev.json
    python benchmarks/period_questions.py FILE --blind
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitmem.importers import locomo
from gitmem.models import Interaction, Session
from gitmem.search.index import SearchIndex
from gitmem.search.rank import Ranker
from gitmem.search.rankconfig import RankConfig
from gitmem.text import STOPWORDS, stem
from gitmem.text.events import DATE_TERMS, relative_phrases, span_label

_WORD = re.compile(r"[A-Za-z]{5,}")

FORMS = ("month", "month-only", "day", "event")

BLIND_FORMS = ("blind-day", "blind-day-only", "blind-event")

# the columns: the period feature on; off (today's date support only); no date support
CONFIGS: dict[str, dict[str, object]] = {
    "period": {},
    "dates": {"period_weight": 0.0},
    "none": {"period_weight": 0.0, "temporal_weight": 0.0},
}

# a question's word is in at least this many turns of other months: more than the top 5
OTHERS = 15


@dataclass(frozen=True)
class PeriodQuestion:
    text: str
    evidence: str  # the interaction id of the turn it was written from
    form: str
    # the interaction ids that count as a hit (empty: the evidence alone)
    accepted: frozenset[str] = frozenset()

    def found(self, ids: Sequence[str | None]) -> bool:
        """Whether one of the accepted turns is among ``ids``."""
        wanted = self.accepted or {self.evidence}
        return any(i in wanted for i in ids)


def _words(text: str, names: set[str]) -> dict[str, str]:
    """stem -> the first surface form of each content word of ``text``."""
    out: dict[str, str] = {}
    for word in _WORD.findall(text):
        low = word.lower()
        key = stem(low)
        if low in STOPWORDS or low in names or key in DATE_TERMS:
            continue
        out.setdefault(key, low)
    return out


def build(
    sessions: Sequence[Session], *, seed: int = 0, per_conv: int = 40
) -> list[PeriodQuestion]:
    """The period questions of one conversation (see the module docs)."""
    turns = [i for s in sessions for i in s.interactions if i.messages]
    names = {part.lower() for i in turns for m in i.messages for part in m.speaker.split()}
    words = {i.id: _words(" ".join(m.content for m in i.messages), names) for i in turns}
    months_of: dict[str, set[tuple[int, int]]] = defaultdict(set)
    count: dict[str, int] = defaultdict(int)
    by_month: dict[tuple[str, tuple[int, int]], int] = defaultdict(int)
    for inter in turns:
        month = (inter.timestamp.year, inter.timestamp.month)
        for key in words[inter.id]:
            count[key] += 1
            months_of[key].add(month)
            by_month[key, month] += 1
    chosen: list[tuple[Interaction, str]] = []
    for inter in turns:
        month = (inter.timestamp.year, inter.timestamp.month)
        fits = [
            key
            for key in words[inter.id]
            if by_month[key, month] == 1 and count[key] > OTHERS and len(months_of[key]) >= 3
        ]
        if fits:
            key = min(fits, key=lambda k: (count[k], k))
            chosen.append((inter, words[inter.id][key]))
    rng = random.Random(seed)
    picked = rng.sample(chosen, min(per_conv, len(chosen)))
    out: list[PeriodQuestion] = []
    for at, (inter, word) in enumerate(picked):
        when = inter.timestamp
        speaker = inter.messages[0].speaker
        text = " ".join(m.content for m in inter.messages)
        form = FORMS[at % len(FORMS)]
        days = [s for _a, _b, s in relative_phrases(text, when) if (s[1] - s[0]).days == 1]
        if form == "event" and not days:
            form = "month"
        if form == "month":
            period = f"in {when:%B %Y}"
        elif form == "month-only":
            period = f"in {when:%B}"
        elif form == "day":
            period = f"on {when.day} {when:%B %Y}"
        else:
            period = f"on {span_label(days[0])}"
        out.append(
            PeriodQuestion(
                f"What did {speaker} mention about {word} {period}?",
                inter.id,
                form,
            )
        )
    return out


def build_blind(
    sessions: Sequence[Session], *, seed: int = 0, per_conv: int = 40
) -> list[PeriodQuestion]:
    """Questions naming a speaker and a day only (see the module docs)."""
    said: dict[tuple[str, str], set[str]] = defaultdict(set)
    about: dict[tuple[str, str], set[str]] = defaultdict(set)
    for session in sessions:
        for inter in session.interactions:
            if not inter.messages:
                continue
            when, speaker = inter.timestamp, inter.messages[0].speaker
            said[speaker, f"{when.day} {when:%B %Y}"].add(inter.id)
            text = " ".join(m.content for m in inter.messages)
            for _a, _b, span in relative_phrases(text, when):
                if (span[1] - span[0]).days == 1 and span[0].date() != when.date():
                    about[speaker, span_label(span)].add(inter.id)
    rng = random.Random(seed)
    # the event days nobody spoke on: only the turns about them can answer
    spoken_days = {day for _s, day in said}
    events = sorted(key for key in about if key[1] not in spoken_days)
    pools = {
        "blind-day": sorted(said),
        "blind-day-only": sorted(said),
        "blind-event": events,
    }
    picks = {form: rng.sample(pool, len(pool)) for form, pool in pools.items()}
    out: list[PeriodQuestion] = []
    seen: set[tuple[str, str]] = set()
    for at in range(per_conv * len(BLIND_FORMS)):
        if len(out) >= per_conv:
            break
        form = BLIND_FORMS[at % len(BLIND_FORMS)]
        while picks[form] and picks[form][-1] in seen:
            picks[form].pop()
        if not picks[form]:
            continue
        speaker, day = key = picks[form].pop()
        seen.add(key)
        ids = (about if form == "blind-event" else said)[key]
        named = day.rsplit(" ", 1)[0] if form == "blind-day-only" else day
        out.append(
            PeriodQuestion(
                f"What did {speaker} talk about on {named}?", min(ids), form, frozenset(ids)
            )
        )
    return out


def score(
    sessions: Sequence[Session], questions: Sequence[PeriodQuestion], config: RankConfig
) -> dict[str, float]:
    """Hits at 5 and 10 (counts) of ``questions`` over an in-memory index of ``sessions``."""
    index = SearchIndex(":memory:")
    with index.writing():
        for session in sessions:
            index.put_session(session, path=session.id, blob="")
    ranker = Ranker(index, config)
    found = {"R@5": 0.0, "R@10": 0.0, "n": float(len(questions))}
    for question in questions:
        ids = [h.interaction_id for h in ranker.rank(question.text, k=10).hits]
        found["R@5"] += question.found(ids[:5])
        found["R@10"] += question.found(ids)
    index.close()
    return found


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--convs", default=None, help="conversation indexes, e.g. 0-2")
    parser.add_argument("--per-conv", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--show", action="store_true", help="print the questions too")
    parser.add_argument(
        "--blind", action="store_true", help="the questions sharing no word with the turns"
    )
    args = parser.parse_args()
    convs = locomo.load(args.file)
    chosen = locomo.parse_range(args.convs, len(convs))
    changes = {k: _value(v) for k, _, v in (s.partition("=") for s in args.set)}
    configs = {name: RankConfig().tuned(**{**changes, **off}) for name, off in CONFIGS.items()}
    head = " | ".join(f"{name} R@{k}" for name in CONFIGS for k in (5, 10))
    print(f"| conversation | n | {head} |")
    print("|---|---|" + "---|" * 2 * len(CONFIGS))
    totals: dict[str, dict[str, float]] = {name: defaultdict(float) for name in configs}
    # per form: (form, column) -> summed counts
    by_form: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for at in chosen:
        sessions = convs[at].sessions
        write = build_blind if args.blind else build
        questions = write(sessions, seed=args.seed, per_conv=args.per_conv)
        if args.show:
            for q in questions:
                print(f"  {q.evidence:8} {q.form:10} {q.text}", file=sys.stderr)
        row = {name: score(sessions, questions, config) for name, config in configs.items()}
        for name, found in row.items():
            for key, value in found.items():
                totals[name][key] += value
        print(_row(convs[at].sample_id, row))
        for form in sorted({q.form for q in questions}):
            asked = [q for q in questions if q.form == form]
            for name, config in configs.items():
                for key, value in score(sessions, asked, config).items():
                    by_form[form, name][key] += value
    print(_row("overall", totals))
    for form in sorted({form for form, _ in by_form}):
        print(_row(f"form {form}", {name: by_form[form, name] for name in configs}))


def _row(label: str, row: dict[str, dict[str, float]]) -> str:
    n = row["period"]["n"] or 1
    cells = [f"{100 * row[name][k] / n:.1f}" for name in CONFIGS for k in ("R@5", "R@10")]
    return f"| {label} | {int(row['period']['n'])} | " + " | ".join(cells) + " |"


if __name__ == "__main__":
    main()
