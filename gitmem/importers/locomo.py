"""The LoCoMo long-conversation benchmark: reading its JSON and scoring retrieval.

LoCoMo (Maharana et al., ACL 2024) gives long two-person conversations split into dated
sessions, and questions whose evidence names the turns (``dia_id`` like ``D3:7``) that
hold the answer. Each LoCoMo session becomes a gitmem session ``<sample_id>-session_<N>``
and each turn an interaction whose id is its ``dia_id``; image turns keep their caption as
``[image: caption]``. Scores: turn recall R@k (share of a question's evidence turns among
the top k hits) and session recall S@k (share of its evidence sessions among the first k
distinct sessions of the hit list), per question category and overall.

Importing is additive (``gitmem.importers.engine``): importing a file again adds only the
turns a session lacks, keeps every turn the store has (also turns saved by hand in between), and
reports a turn whose stored text differs from the file instead of overwriting it.
:func:`import_locomo` drives that through a ``MemoryManager`` (one commit);
:func:`bench_locomo` scores ``search`` on fresh stores (``gitmem bench locomo``).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitmem.errors import ValidationError
from gitmem.importers.engine import ImportResult, run_import
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, ModelValidationError, Session, describe_errors

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

TURN_KS = (5, 10, 25)

SESSION_KS = (1, 3)

_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)

_MONTHS = {
    name: at + 1
    for at, name in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ]
    )
}

_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class Question:
    """One retrieval question: its text, category and the turns that answer it."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    """One LoCoMo sample as gitmem sessions plus its questions."""

    sample_id: str
    sessions: list[Session]
    questions: list[Question] = field(default_factory=list)

    def session_of(self, dia_id: str) -> str:
        """The gitmem session id holding turn ``dia_id``."""
        return f"{self.sample_id}-session_{dia_id[1:].split(':', 1)[0]}"


def parse_date(value: str) -> datetime:
    """Parse LoCoMo's "1:56 pm on 8 May, 2023" (taken as UTC)."""
    match = _DATE.search(value or "")
    if match is None:
        raise ValidationError(f"LoCoMo date {value!r} is not like '1:56 pm on 8 May, 2023'")
    hour, minute, half, day, month, year = match.groups()
    month_no = _MONTHS.get(month.lower())
    if month_no is None:
        raise ValidationError(f"LoCoMo date {value!r} names no month")
    hour_no = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), month_no, int(day), hour_no, int(minute), tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    """A turn's text with its image caption kept as ``[image: caption]``."""
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [image: {caption}]".strip()
    return text


def _speaker(name: object) -> str:
    cleaned = re.sub(r"[*`\\\[\]<>|\x00-\x1f]", "", str(name or "")).strip()
    return cleaned or "unknown"


# an evidence id as upstream writes it, also malformed: "D3:7", "D:11:26", "D30:05"
_EVIDENCE_ID = re.compile(r"D:?0*(\d+):0*(\d+)", re.I)


def evidence_id(part: str) -> str:
    """The ``dia_id`` an evidence string names, normalised: ``D:11:26`` -> ``D11:26``,
    ``D30:05`` -> ``D30:5`` (anything else is returned as it is)."""
    match = _EVIDENCE_ID.fullmatch(part.strip())
    return f"D{int(match[1])}:{int(match[2])}" if match else part.strip()


def _evidence(raw: Sequence[object], known: set[str]) -> tuple[str, ...]:
    """The turns a question's evidence names, in order; ids that name no turn are dropped."""
    found: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            part = part.strip()
            if part not in known:
                part = evidence_id(part)
            if part in known and part not in found:
                found.append(part)
    return tuple(found)


def load(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo JSON file into conversations (sessions in order, questions 1-5)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path}: cannot read a LoCoMo JSON file ({exc})") from None
    if not isinstance(data, list):
        raise ValidationError(f"{path}: a LoCoMo file is a JSON list of samples")
    out: list[Conversation] = []
    for at, sample in enumerate(data):
        try:
            out.append(_conversation(sample, at))
        except ModelValidationError as exc:
            raise ValidationError(
                f"{path}: sample {at} does not follow the LoCoMo schema ({describe_errors(exc)})"
            ) from None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValidationError(
                f"{path}: sample {at} does not follow the LoCoMo schema "
                f"({type(exc).__name__}: {exc})"
            ) from None
    return out


def _conversation(sample: dict[str, Any], at: int) -> Conversation:
    sample_id = str(sample.get("sample_id") or f"sample-{at}")
    conv = sample["conversation"]
    names = [_speaker(conv.get("speaker_a")), _speaker(conv.get("speaker_b"))]
    numbers = sorted(
        int(m.group(1))
        for key in conv
        if (m := _SESSION_KEY.fullmatch(key)) and isinstance(conv[key], list)
    )
    sessions: list[Session] = []
    known: set[str] = set()
    for number in numbers:
        when = parse_date(str(conv.get(f"session_{number}_date_time", "")))
        interactions = []
        seen: set[str] = set()
        for turn in conv[f"session_{number}"]:
            dia_id = str(turn["dia_id"]).strip()
            if dia_id in seen:
                continue
            seen.add(dia_id)
            speaker = _speaker(turn.get("speaker"))
            interactions.append(
                Interaction(
                    id=dia_id,
                    timestamp=when,
                    messages=[Message(speaker=speaker, content=turn_text(turn))],
                )
            )
        known.update(seen)
        participants = list(
            dict.fromkeys(names + [m.speaker for i in interactions for m in i.messages])
        )
        sessions.append(
            Session(
                id=f"{sample_id}-session_{number}",
                created=when,
                last_active=when,
                participants=participants,
                tags=["locomo"],
                project=sample_id,
                interactions=interactions,
            )
        )
    questions = []
    for qa in sample.get("qa", []):
        category = int(qa.get("category", 0))
        evidence = _evidence(qa.get("evidence") or [], known)
        if evidence and str(qa.get("question") or "").strip():
            questions.append(Question(str(qa["question"]), category, evidence))
    return Conversation(sample_id, sessions, questions)


_RANGE = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?")


def parse_range(spec: str | None, count: int) -> list[int]:
    """Conversation indexes from "0-2" or "0,2" (all when None).

    Each part is checked against ``count`` before any index is listed, so a range like
    ``0-3000000000`` is refused at once instead of being built in memory.
    """
    if not spec:
        return list(range(count))
    bounds: list[tuple[int, int]] = []
    for part in spec.split(","):
        # ASCII digits only, both bounds given: int() would take "٣", "1_0" and "+1", and
        # "0-" must not quietly mean "0"
        found = _RANGE.fullmatch(part)
        if found is None:
            raise ValidationError(f"--convs {spec!r}: use a range like 0-2 or a list like 0,2")
        bounds.append((int(found[1]), int(found[2] or found[1])))
    for first, last in bounds:
        if not 0 <= first < count or not 0 <= last < count:
            raise ValidationError(f"--convs {spec!r}: the file has conversations 0-{count - 1}")
        if last < first:
            raise ValidationError(f"--convs {spec!r}: range {first}-{last} runs backwards")
    chosen: dict[int, None] = {}
    for first, last in bounds:
        chosen.update(dict.fromkeys(range(first, last + 1)))
    return list(chosen)


@dataclass
class Scores:
    """Sums of per-question recalls, per category; ``table()`` turns them into percents."""

    sums: dict[int, dict[str, float]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add(
        self, question: Question, conv: Conversation, ranked: Sequence[tuple[str, str]]
    ) -> None:
        """Score one question given the ranked (session id, interaction id) hits."""
        per = self.sums.setdefault(question.category, {})
        self.counts[question.category] = self.counts.get(question.category, 0) + 1
        evidence = set(question.evidence)
        for k in TURN_KS:
            top = {iid for _sid, iid in ranked[:k]}
            per[f"R@{k}"] = per.get(f"R@{k}", 0.0) + len(evidence & top) / len(evidence)
        wanted = {conv.session_of(e) for e in evidence}
        order = list(dict.fromkeys(sid for sid, _iid in ranked))
        for k in SESSION_KS:
            per[f"S@{k}"] = per.get(f"S@{k}", 0.0) + len(wanted & set(order[:k])) / len(wanted)

    def rows(self) -> list[dict[str, Any]]:
        """One row per category plus "overall": n, each metric in percent, ms/query."""
        metrics = [f"R@{k}" for k in TURN_KS] + [f"S@{k}" for k in SESSION_KS]
        total_n = sum(self.counts.values())
        out = []
        for cat in sorted(self.counts):
            n = self.counts[cat]
            out.append(
                {
                    "category": f"{cat} {CATEGORIES.get(cat, '')}".strip(),
                    "n": n,
                    **{m: round(100 * self.sums[cat].get(m, 0.0) / n, 1) for m in metrics},
                }
            )
        if total_n:
            out.append(
                {
                    "category": "overall",
                    "n": total_n,
                    **{
                        m: round(100 * sum(s.get(m, 0.0) for s in self.sums.values()) / total_n, 1)
                        for m in metrics
                    },
                    "ms/query": round(1000 * self.seconds / total_n, 2),
                }
            )
        return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :meth:`Scores.rows`."""
    head = ["category", "n", "R@5", "R@10", "R@25", "S@1", "S@3", "ms/query"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(h, "")) for h in head) + " |")
    return "\n".join(lines)


Searcher = Callable[[Conversation, Question], Sequence[tuple[str, str]]]


# --- driving a store ----------------------------------------------------------------------


def import_locomo(
    mm: MemoryManager,
    path: str | Path,
    *,
    convs: str | None = None,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ImportResult:
    """Import a LoCoMo JSON file into ``mm`` as one commit: each session becomes a gitmem
    session ``<sample_id>-session_<N>`` with the turns' ``dia_id`` as interaction ids.

    Importing is additive and idempotent (see :func:`~gitmem.importers.engine.run_import`):
    only turns a session lacks are added, turns already stored (also ones saved by hand
    since) are kept, and importing an unchanged file again makes no commit. A stored turn
    whose text differs from the file is kept as stored and listed in ``result.differing``.
    ``progress(text)`` is told after each conversation.
    """
    conversations = load(path)
    chosen = [conversations[i] for i in parse_range(convs, len(conversations))]

    def sessions() -> Iterator[Session]:
        turns = count = 0
        for number, conv in enumerate(chosen, 1):
            for session in conv.sessions:
                yield session
                count += 1
                turns += len(session.interactions)
            if progress is not None:
                progress(
                    f"conversation {number}/{len(chosen)} ({conv.sample_id}): "
                    f"{count} sessions, {turns} turns so far"
                )

    return run_import(
        mm, sessions(), source="locomo", dry_run=dry_run, subject=f"Import LoCoMo {Path(path).name}"
    )


def bench_locomo(
    path: str | Path,
    *,
    convs: str | None = None,
    depth: int = 50,
    workdir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Score retrieval on a LoCoMo file through real stores.

    Each conversation is imported into a fresh store (under ``workdir``, else a temporary
    folder removed afterwards), then every question of categories 1-4 goes through
    ``search``. Returns the table rows and timings.
    """
    conversations = load(path)
    chosen = parse_range(convs, len(conversations))
    scores = Scores()
    timings = {"import_s": 0.0, "index_s": 0.0, "embed_s": 0.0}
    embedded: str | None = None  # the embedding model, when one is configured
    with _workdir(workdir) as base:
        for at in chosen:
            conv = conversations[at]
            if progress is not None:
                progress(f"conversation {at}: {conv.sample_id}")
            start = time.perf_counter()
            mm = MemoryManager.init(base / f"store-{at}")
            import_locomo(mm, path, convs=str(at))
            timings["import_s"] += time.perf_counter() - start
            start = time.perf_counter()
            mm.reindex()
            timings["index_s"] += time.perf_counter() - start
            embedding = mm.embedding_config()
            if embedding is not None:  # every vector first, not a few per search
                start = time.perf_counter()
                mm.embed_pending()
                timings["embed_s"] += time.perf_counter() - start
                embedded = embedding.model
            for question in conv.questions:
                if question.category not in CATEGORIES:
                    continue
                start = time.perf_counter()
                hits = mm.search(question.text, k=depth)
                scores.seconds += time.perf_counter() - start
                scores.add(question, conv, [(h.session_id, h.interaction_id or "") for h in hits])
            mm.close_index()
            mm.close()
    return {
        "file": str(path),
        "conversations": [conversations[i].sample_id for i in chosen],
        "rows": scores.rows(),
        "embeddings": embedded,
        **{key: round(value, 2) for key, value in timings.items()},
    }


@contextmanager
def _workdir(path: str | Path | None) -> Iterator[Path]:
    """A given folder, or a temporary one removed afterwards."""
    if path is not None:
        given = Path(path)
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="gitmem-locomo-") as temp:
        yield Path(temp)
