"""When to summarize: the trigger settings, and the checks that decide whether a session is due."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import chain
from typing import Literal

from gitmem.errors import ConfigError
from gitmem.llm.config import LLMConfig
from gitmem.models import Interaction, Summary, as_aware
from gitmem.store.config import (
    is_off,
    parse_bool,
    parse_choice,
    parse_float,
    parse_int,
    unknown_key,
)
from gitmem.summary.engines import IDLE, MANUAL, TOPIC_SHIFT, TURNS
from gitmem.summary.extractive import cosine, tf_vector
from gitmem.text import name_terms, topic_terms

TRIGGERS = (MANUAL, TURNS, TOPIC_SHIFT, IDLE)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|s)", re.IGNORECASE)

_UNITS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str | timedelta) -> timedelta:
    """``"30m"``, ``"2h"``, ``"1d12h"``, ``"90s"`` or ``"2w"`` as a timedelta."""
    if isinstance(text, timedelta):
        return text
    compact = text.strip().replace(" ", "")
    matches = list(_DURATION.finditer(compact))
    if not compact or "".join(m.group(0) for m in matches) != compact:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30m, 2h, 1d, 90s)")
    return timedelta(seconds=sum(float(m[1]) * _UNITS[m[2].lower()] for m in matches))


@dataclass(frozen=True)
class Triggers:
    """When to summarize automatically after a save (None switches a trigger off).

    Attributes:
        every_turns: summarize once this many turns are not covered by the summary.
        topic_shift: summarize the earlier turns when the lexical similarity between the
            last ``shift_window`` turns and the earlier uncovered turns drops below this.
        shift_window: recent turns compared for the topic shift.
        shift_history: earlier uncovered turns needed before a shift can be judged.
        idle: sessions quiet for this long count as idle (``summarize_idle``).
    """

    every_turns: int | None = 20
    topic_shift: float | None = 0.02
    shift_window: int = 3
    shift_history: int = 4
    idle: timedelta | None = None


@dataclass(frozen=True)
class Decision:
    """A trigger that fired, why, and how many of the uncovered turns to summarize."""

    trigger: str
    reason: str
    count: int | None = None


def uncovered(turns: Sequence[Interaction], summary: Summary | None) -> list[Interaction]:
    """The turns the summary does not cover yet, in order."""
    covered = set(summary.covers) if summary is not None else set()
    return [t for t in turns if t.id not in covered]


def topic_similarity(recent: Sequence[Interaction], earlier: Sequence[Interaction]) -> float:
    """TF-IDF cosine similarity between two groups of turns (1 = same words).

    Words every turn uses and the speakers' names (vocatives) weigh nothing; a side with
    fewer than 5 distinct content words is too short to judge and counts as similar.
    """
    names = name_terms(
        *{m.speaker for t in (*recent, *earlier) for m in t.messages}, short_forms=True
    )
    docs = [[w for w in topic_terms(t.text) if w not in names] for t in (*earlier, *recent)]
    split = len(earlier)
    if (
        min(
            len(set(chain.from_iterable(docs[split:]))), len(set(chain.from_iterable(docs[:split])))
        )
        < 5
    ):
        return 1.0
    df: dict[str, int] = {}
    for doc in docs:
        for word in set(doc):
            df[word] = df.get(word, 0) + 1
    idf = {word: math.log((len(docs) + 1) / n) for word, n in df.items()}
    a = tf_vector(chain.from_iterable(docs[split:]), idf)
    b = tf_vector(chain.from_iterable(docs[:split]), idf)
    return cosine(a, b)


def check_triggers(
    turns: Sequence[Interaction],
    summary: Summary | None,
    triggers: Triggers,
    *,
    last_active: datetime | None = None,
    now: datetime | None = None,
) -> Decision | None:
    """The first automatic trigger that fires for a session's turns, or None."""
    pending = uncovered(turns, summary)
    if not pending:
        return None
    if triggers.every_turns is not None and len(pending) >= triggers.every_turns:
        return Decision(
            TURNS, f"{len(pending)} turns since the last summary (threshold {triggers.every_turns})"
        )
    window = triggers.shift_window
    if triggers.topic_shift is not None and len(pending) >= window + triggers.shift_history:
        # the recent window against at most the 12 turns before it: cheap on every save
        earlier = pending[-window - max(triggers.shift_history, 12) : -window]
        similarity = topic_similarity(pending[-window:], earlier)
        if similarity < triggers.topic_shift:
            return Decision(
                TOPIC_SHIFT,
                f"similarity {similarity:.3f} between the last {window} turns and the "
                f"{len(earlier)} before them (threshold {triggers.topic_shift:g})",
                count=len(pending) - window,
            )
    if triggers.idle is not None and last_active is not None:
        moment = as_aware(now or datetime.now(UTC))
        quiet = moment - as_aware(last_active)
        if quiet >= triggers.idle:
            return Decision(IDLE, f"idle for {_human(quiet)} (threshold {_human(triggers.idle)})")
    return None


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds}s"


@dataclass
class SummaryConfig:
    """How a store summarizes (also read from git config ``gitmem.summary.*``).

    Attributes:
        triggers: when ``maybe_summarize`` summarizes.
        auto: run the triggers after every save (off by default: a store gets summary
            commits only when asked, e.g. ``git config gitmem.summary.auto true``).
        archive: ``"keep"`` summarized turns in the session file, or ``"archive"`` them.
        loss_threshold: the loss guard fires above this share of dropped facts.
        on_loss: ``"refuse"`` (raise with the report) or ``"review"`` (side branch).
        auto_tag: add the summarizer's suggested tags to the session (a metadata commit).
        llm: the LLM to use; None reads ``GITMEM_LLM_*`` / ``OPENAI_*`` (offline if unset).
        offline: never call an LLM.
    """

    triggers: Triggers = field(default_factory=Triggers)
    auto: bool = False
    archive: Literal["keep", "archive"] = "keep"
    loss_threshold: float = 0.25
    on_loss: Literal["refuse", "review"] = "refuse"
    auto_tag: bool = False
    llm: LLMConfig | None = None
    offline: bool = False

    @classmethod
    def from_git(cls, values: Mapping[str, str]) -> SummaryConfig:
        """Settings from ``gitmem.summary.<key>`` values (keys as git prints them, any
        case): everyTurns (1-100000), topicShift (0-1), idle (a duration); ``off`` switches
        any of these three off; auto, autoTag, offline (git booleans); archive (keep,
        archive); lossThreshold (0-1); onLoss (refuse, review).

        Raises:
            ConfigError: a key gitmem does not know, or a value it cannot use (the message
                names the key and the accepted values).
        """
        config = cls()
        trig = config.triggers
        for raw_key, value in values.items():
            lowered = raw_key.rsplit(".", 1)[-1].lower()
            name = SUMMARY_KEYS.get(lowered)
            if name is None:
                raise unknown_key(f"gitmem.summary.{lowered}", tuple(SUMMARY_KEYS.values()))
            key = f"gitmem.summary.{name}"
            off = is_off(value)
            if lowered == "everyturns":
                trig = replace(trig, every_turns=None if off else parse_int(key, value, 1, 100_000))
            elif lowered == "topicshift":
                trig = replace(trig, topic_shift=None if off else parse_float(key, value, 0, 1))
            elif lowered == "idle":
                trig = replace(trig, idle=None if off else _duration(key, value))
            elif lowered in ("auto", "autotag", "offline"):
                setattr(
                    config, {"autotag": "auto_tag"}.get(lowered, lowered), parse_bool(key, value)
                )
            elif lowered == "archive":
                config.archive = parse_choice(key, value, ("keep", "archive"))  # type: ignore[assignment]
            elif lowered == "onloss":
                config.on_loss = parse_choice(key, value, ("refuse", "review"))  # type: ignore[assignment]
            else:
                config.loss_threshold = parse_float(key, value, 0, 1)
        config.triggers = trig
        return config


SUMMARY_KEYS = {
    k.lower(): k
    for k in (
        "auto",
        "everyTurns",
        "topicShift",
        "idle",
        "archive",
        "lossThreshold",
        "onLoss",
        "autoTag",
        "offline",
    )
}


def _duration(key: str, value: str) -> timedelta:
    try:
        quiet = parse_duration(value)
    except ValueError:
        quiet = timedelta(0)
    if quiet <= timedelta(0):
        raise ConfigError(
            f"{key} = {value!r} is not valid: expected a duration such as 30m, "
            f"2h, 1d or off; fix it with `git config {key} <value>`"
        )
    return quiet
