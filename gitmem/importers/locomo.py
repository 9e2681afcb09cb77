"""The LoCoMo long-conversation benchmark's JSON, imported as gitmem sessions.

LoCoMo (Maharana et al., ACL 2024) gives long two-person conversations split into dated
sessions, and questions whose evidence names the turns (``dia_id`` like ``D3:7``) that
hold the answer. Each LoCoMo session becomes a gitmem session ``<sample_id>-session_<N>``
and each turn an interaction whose id is its ``dia_id``; image turns keep their caption as
``[image: caption]``. The questions are read too, for the retrieval benchmark in the
repository's ``benchmarks/`` folder.

Importing is additive (``gitmem.importers.engine``): importing a file again adds only the
turns a session lacks, keeps every turn the store has (also turns saved by hand in between), and
reports a turn whose stored text differs from the file instead of overwriting it.
:func:`import_locomo` drives that through a ``MemoryManager`` (one commit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitmem.errors import ValidationError
from gitmem.importers.engine import ImportResult, run_import
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, ModelValidationError, Session, describe_errors

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
class LocomoSample:
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


def load(path: str | Path) -> list[LocomoSample]:
    """Read a LoCoMo JSON file into conversations (sessions in order, questions 1-5)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path}: cannot read a LoCoMo JSON file ({exc})") from None
    if not isinstance(data, list):
        raise ValidationError(f"{path}: a LoCoMo file is a JSON list of samples")
    out: list[LocomoSample] = []
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


def _conversation(sample: dict[str, Any], at: int) -> LocomoSample:
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
    return LocomoSample(sample_id, sessions, questions)


_RANGE = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?")


def parse_range(spec: str | None, count: int) -> list[int]:
    """LocomoSample indexes from "0-2" or "0,2" (all when None).

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
