"""A proposal of fact changes: read, checked, applied to a memory file, diffed.

``mm.consolidate()`` (:mod:`gitmem.facts.consolidation`) gathers new summaries' key facts and
turns, asks an LLM for a proposal (or runs the offline extractor, :mod:`gitmem.facts.extract`)
and hands it here. A proposal is a list of :class:`Change` (``add``, ``update``,
``supersede``, ``forget``, each with a reason and the source turns). This module reads an
LLM's JSON answer into changes (rejecting, one by one, changes that name unknown fact ids),
applies changes to a :class:`~gitmem.format.facts.MemoryFile` (a contradiction is a
supersede: the old fact stays with ``valid until`` and ``replaced by``), runs the loss guard
(too many facts removed, or a fact written by hand touched) and renders the diff. It writes
nothing: :class:`~gitmem.facts.consolidation.Consolidator` commits.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from gitmem.errors import ConfigError
from gitmem.facts.extract import KeyFact, NewTurn
from gitmem.format.facts import DEFAULT_SECTION, Fact, FactSource, MemoryFile, derived_id
from gitmem.store.config import is_off, parse_bool, parse_choice, parse_float, parse_int
from gitmem.text import json_in, one_line
from gitmem.text.voice import statement_problem

OPS = ("add", "update", "supersede", "forget")
Op = Literal["add", "update", "supersede", "forget"]
OFFLINE = "offline"
MAX_ANSWER_CHARS = 200_000
MAX_CHANGES = 500

SYSTEM = """You curate the long-term memory of an AI assistant: a list of short facts about \
the user, their preferences and projects, each with an id. Given the existing facts and new \
material (summary key facts and conversation turns, each with a source id), propose changes. \
Keep names, numbers and dates exactly. Add only lasting, specific facts, each a \
third-person statement naming whom it is about ("The user lives in Berlin", "Caroline \
adopted a dog (7 May 2023)"): never a question, a "User:" label or the first person. \
When new material \
contradicts an existing fact (same subject, new value, e.g. "lives in Berlin" then "moved to \
Lisbon"), use "supersede" with the old fact's id and the new text, never "forget". Use \
"update" to correct or sharpen a fact, "forget" only for facts that are plainly wrong or \
that the user asked to forget. Name sources as "session#turn" from the material. Answer with \
only a JSON object: {"changes": [{"op": "add|update|supersede|forget", "id": "<existing fact \
id, not for add>", "text": "<fact text, not for forget>", "section": "<User, Preferences, \
Projects or another heading; for add>", "reason": "<why>", "sources": ["session#turn"]}]}"""


class Unusable(Exception):
    """An LLM's answer cannot be used at all (not JSON, wrong shape, too large)."""


@dataclass(frozen=True)
class Change:
    """One proposed change to the memory file.

    Attributes:
        op: ``add``, ``update``, ``supersede`` or ``forget``.
        id: the fact it changes (None for ``add``).
        text: the new text (``add``, ``update``, ``supersede``).
        section: where an added fact goes (default: the old fact's, or ``Notes``).
        reason: why, in a few words.
        sources: the turns it was learned from.
    """

    op: Op
    id: str | None = None
    text: str | None = None
    section: str | None = None
    reason: str = ""
    sources: tuple[FactSource, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "id": self.id,
            "text": self.text,
            "section": self.section,
            "reason": self.reason,
            "sources": [str(s) for s in self.sources],
        }

    def describe(self) -> str:
        target = f" {self.id}" if self.id else ""
        text = f": {one_line(self.text, 70)}" if self.text else ""
        why = f" ({one_line(self.reason, 60)})" if self.reason else ""
        return f"{self.op}{target}{text}{why}"


@dataclass
class LossCheck:
    """What the loss guard found in a proposal."""

    existing: int
    removed: list[str] = field(default_factory=list)  # forgotten or superseded ids
    by_hand: list[str] = field(default_factory=list)  # hand-written facts it changes
    threshold: float = 0.25

    @property
    def fires(self) -> bool:
        share = len(self.removed) / self.existing if self.existing else 0.0
        return bool(self.by_hand) or share > self.threshold

    def render(self) -> str:
        lines = [
            f"Loss guard: removes {len(self.removed)} of {self.existing} facts "
            f"(threshold {self.threshold:.0%})"
        ]
        if self.removed:
            lines.append("  removed or replaced: " + ", ".join(self.removed))
        if self.by_hand:
            lines.append("  written by hand: " + ", ".join(self.by_hand))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "existing": self.existing,
            "removed": self.removed,
            "by_hand": self.by_hand,
            "threshold": self.threshold,
            "fires": self.fires,
        }


@dataclass
class Consolidation:
    """The outcome of ``mm.consolidate()``.

    Attributes:
        changes: the changes proposed (after rejecting those that name unknown ids).
        diff: unified diff of the memory file, before -> after.
        engine: ``offline`` or the LLM's model name.
        status: ``committed``, ``review`` (on the review branch), ``refused`` (nothing
            written), ``proposed`` (``apply=False``) or ``unchanged``.
        commit: the commit made (on the branch, or on the review branch).
        branch: the review branch, when held for review.
        fallback: why the LLM was not used, when it was configured but failed.
        rejected: the changes left out, each with why (e.g. an unknown fact id).
        loss: the loss guard's findings.
    """

    changes: list[Change]
    diff: str
    engine: str
    status: str = "proposed"
    commit: str | None = None
    branch: str | None = None
    fallback: str | None = None
    rejected: list[str] = field(default_factory=list)
    loss: LossCheck | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "engine": self.engine,
            "commit": self.commit,
            "branch": self.branch,
            "fallback": self.fallback,
            "rejected": self.rejected,
            "changes": [c.to_dict() for c in self.changes],
            "diff": self.diff,
            "loss": None if self.loss is None else self.loss.to_dict(),
        }


# --- settings --------------------------------------------------------------------------------


@dataclass
class FactsConfig:
    """``git config gitmem.facts.*``: every (consolidate after every N new summaries), idle
    (a duration: consolidate when the last consolidation is that old and there is new
    material), onLoss (review, refuse), threshold (0-1), offline (never ask the LLM),
    budget (tokens of new facts one offline consolidation may add)."""

    every: int | None = None
    idle: timedelta | None = None
    on_loss: Literal["review", "refuse"] = "review"
    threshold: float = 0.25
    offline: bool = False
    budget: int = 2400

    @classmethod
    def from_git(cls, values: Mapping[str, str]) -> FactsConfig:
        config = cls()
        for raw_key, value in values.items():
            name = raw_key.rsplit(".", 1)[-1].lower()
            key = f"gitmem.facts.{FACTS_KEYS.get(name, name)}"
            if name == "every":
                config.every = None if is_off(value) else parse_int(key, value, 1, 100_000)
            elif name == "idle":
                config.idle = None if is_off(value) else duration(key, value)
            elif name == "onloss":
                config.on_loss = parse_choice(key, value, ("review", "refuse"))  # type: ignore[assignment]
            elif name == "threshold":
                config.threshold = parse_float(key, value, 0, 1)
            elif name == "offline":
                config.offline = parse_bool(key, value)
            elif name == "budget":
                config.budget = parse_int(key, value, 50, 1_000_000)
            else:
                known = ", ".join(FACTS_KEYS.values())
                raise ConfigError(
                    f"unknown setting {key} (known: {known}); remove it with "
                    f"`git config --unset {key}`"
                )
        return config


FACTS_KEYS = {k.lower(): k for k in ("every", "idle", "onLoss", "threshold", "offline", "budget")}

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(w|d|h|m|s)", re.IGNORECASE)
_UNITS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def duration(key: str, value: str) -> timedelta:
    """``30m``, ``2h``, ``1d12h`` as a timedelta; ConfigError naming ``key`` otherwise."""
    compact = value.strip().replace(" ", "")
    found = list(_DURATION.finditer(compact))
    seconds = sum(float(m[1]) * _UNITS[m[2].lower()] for m in found)
    if not compact or "".join(m[0] for m in found) != compact or seconds <= 0:
        raise ConfigError(
            f"{key} = {value!r} is not valid: expected a duration such as 30m, "
            f"2h, 1d or off; fix it with `git config {key} <value>`"
        )
    return timedelta(seconds=seconds)


# --- the LLM's proposal ----------------------------------------------------------------------


def prompt(
    existing: Sequence[Fact],
    key_facts: Sequence[KeyFact],
    turns: Sequence[NewTurn],
    max_chars: int = 48_000,
) -> str:
    """The user message: existing facts with ids, then the new material with source ids."""
    lines = ["Existing facts (id | section | text):"]
    lines += [f"{f.id} | {f.section} | {f.text}" for f in existing if f.current()] or ["(none)"]
    lines.append("\nNew key facts from summaries (source | fact):")
    lines += [f"{k.session} | {k.text}" for k in key_facts] or ["(none)"]
    lines.append("\nNew conversation turns (source | speaker: text):")
    used = sum(len(line) for line in lines)
    for item in turns:
        for message in item.turn.messages:
            line = f"{item.session}#{item.turn.id} | {message.speaker}: {message.content}"
            if used + len(line) > max_chars:
                lines.append("[... later turns left out]")
                return "\n".join(lines)
            used += len(line)
            lines.append(line)
    return "\n".join(lines)


def _json(text: str) -> Any:
    try:
        return json_in(text)
    except ValueError:
        raise Unusable("the answer is not valid JSON") from None


def _sources(raw: Any) -> tuple[FactSource, ...]:
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise ValueError("sources must be a list of 'session#turn' strings")
    out = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"source {item!r} is not a 'session#turn' string")
        session, _, turn = item.strip().partition("#")
        out.append(FactSource(session=session, interaction=turn or None))
    return tuple(dict.fromkeys(out))


def parse_proposal(
    content: str, memory: MemoryFile, speakers: Iterable[str] = ()
) -> tuple[list[Change], list[str]]:
    """An LLM's answer as changes, and the changes rejected (with why): unreadable ones,
    unknown ids, and texts that are not a note's statement (a question, a role or
    ``speakers`` label, the first person). Raises :class:`Unusable` when the answer as a
    whole cannot be read."""
    speakers = tuple(speakers)
    if len(content) > MAX_ANSWER_CHARS:
        raise Unusable(f"the answer is too large ({len(content):,} characters)")
    data = _json(content)
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        raise Unusable('the answer is not an object with a "changes" list')
    raw = data["changes"]
    if len(raw) > MAX_CHANGES:
        raise Unusable(f"the answer proposes {len(raw):,} changes (at most {MAX_CHANGES})")
    changes: list[Change] = []
    rejected: list[str] = []
    unknown: list[str] = []
    for at, item in enumerate(raw):
        try:
            change = _change(item)
        except (ValueError, TypeError) as exc:
            rejected.append(f"change {at + 1}: {exc}")
            continue
        if change.op != "add" and (change.id is None or memory.get(change.id) is None):
            unknown.append(str(change.id))
            rejected.append(f"change {at + 1} ({change.op}): unknown fact id {change.id!r}")
            continue
        problem = None if change.text is None else statement_problem(change.text, speakers)
        if problem is not None:
            rejected.append(f"change {at + 1} ({change.op}): the text is {problem}")
            continue
        changes.append(change)
    if unknown:
        rejected.append(
            "the proposal names fact ids the memory file does not have: "
            + ", ".join(repr(u) for u in unknown)
        )
    return changes, rejected


def _change(item: Any) -> Change:
    if not isinstance(item, dict):
        raise ValueError(f"{item!r} is not an object")
    op = item.get("op")
    if op not in OPS:
        raise ValueError(f"op {op!r} is not one of {', '.join(OPS)}")
    text = item.get("text")
    if op != "forget" and (not isinstance(text, str) or not text.strip()):
        raise ValueError(f"{op} needs a non-empty text")
    fact_id = item.get("id")
    if fact_id is not None and not isinstance(fact_id, str):
        raise ValueError(f"id {fact_id!r} is not a string")
    section = item.get("section")
    if section is not None and (not isinstance(section, str) or not section.strip()):
        section = None
    reason = item.get("reason")
    return Change(
        op=op,
        id=fact_id if op != "add" else None,
        text=text.strip() if isinstance(text, str) else None,
        section=section.strip() if section else None,
        reason=reason.strip() if isinstance(reason, str) else "",
        sources=_sources(item.get("sources")),
    )


# --- applying --------------------------------------------------------------------------------


def apply_changes(
    memory: MemoryFile, changes: Sequence[Change], *, today: str, agent: str
) -> tuple[MemoryFile, list[str]]:
    """``memory`` with ``changes`` made, and notes on changes that no longer apply (their
    fact went away meanwhile). A fact without sources is written ``by`` ``agent``."""
    facts = list(memory.facts)
    notes: list[str] = []

    def find(fact_id: str | None) -> int | None:
        return next((n for n, f in enumerate(facts) if f.id == fact_id), None)

    for change in changes:
        taken = {f.id for f in facts}
        by = None if change.sources else agent
        if change.op == "add":
            assert change.text is not None
            facts.append(
                Fact(
                    id=derived_id(change.text, taken),
                    text=change.text,
                    section=change.section or DEFAULT_SECTION,
                    sources=change.sources,
                    by=by,
                )
            )
            continue
        at = find(change.id)
        if at is None:
            notes.append(f"{change.op} {change.id}: no such fact any more")
            continue
        old = facts[at]
        if change.op == "forget":
            del facts[at]
        elif change.op == "update":
            assert change.text is not None
            more = tuple(dict.fromkeys([*old.sources, *change.sources]))
            facts[at] = old.model_copy(
                update={
                    "text": change.text,
                    "sources": more,
                    "section": change.section or old.section,
                    "by": None if more else old.by,
                }
            )
        else:  # supersede: the old fact stays, ended and pointing at its replacement
            assert change.text is not None
            if old.replaced_by is not None:
                notes.append(f"supersede {old.id}: already replaced by {old.replaced_by}")
                continue
            new = Fact(
                id=derived_id(change.text, taken),
                text=change.text,
                section=change.section or old.section,
                sources=change.sources,
                by=by,
                tags=old.tags,
                valid_from=today,
            )
            facts[at] = old.model_copy(
                update={"valid_until": old.valid_until or today, "replaced_by": new.id}
            )
            facts.insert(at + 1, new)
    return memory.with_facts(facts), notes


def check_loss(memory: MemoryFile, changes: Sequence[Change], threshold: float) -> LossCheck:
    """How much a proposal removes: forgotten and superseded facts, and hand-written facts
    it forgets, updates or supersedes."""
    current = [f for f in memory.facts if f.current()]
    report = LossCheck(existing=len(current), threshold=threshold)
    for change in changes:
        if change.op == "add" or change.id is None:
            continue
        old = memory.get(change.id)
        if old is None:
            continue
        if change.op in ("forget", "supersede") and change.id not in report.removed:
            report.removed.append(change.id)
        if old.by_hand and change.id not in report.by_hand:
            report.by_hand.append(change.id)
    return report


def unified(before: str, after: str, path: str) -> str:
    """The readable diff of the memory file."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )


def rebase(base: MemoryFile, held: MemoryFile, current: MemoryFile) -> MemoryFile:
    """The changes from ``base`` to ``held``, made again on ``current`` by fact id (a held
    review is accepted on top of what was written since)."""
    old = {f.id: f for f in base.facts}
    new = {f.id: f for f in held.facts}
    gone = set(old) - set(new)
    changed = {i: f for i, f in new.items() if old.get(i) != f}
    facts = [changed.pop(f.id, f) for f in current.facts if f.id not in gone]
    return current.with_facts([*facts, *changed.values()])
