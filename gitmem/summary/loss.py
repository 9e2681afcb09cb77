"""The loss guard: which facts of the previous summary a new one drops, and whether that
is too many."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gitmem.models import Interaction, StructuredSummary, Summary, _Model
from gitmem.summary.extractive import coverage, summary_facts, summary_terms
from gitmem.text import topic_terms as terms  # a summary's terms: no small talk


class LossReport(_Model):
    """What a new summary drops of the previous one's facts and entities.

    Attributes:
        previous_facts: the facts the previous summary asserted.
        dropped: those the new summary no longer states (by content words).
        dropped_entities: previous entities/keywords the new summary never mentions.
        recoverable: dropped facts whose words are still in the stored turns.
        unsupported: new key facts whose words appear neither in the turns nor in the
            previous summary (possibly invented).
        threshold: the share of dropped facts that is tolerated.
    """

    previous_facts: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    dropped_entities: tuple[str, ...] = ()
    recoverable: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()
    threshold: float = 0.25

    @property
    def share(self) -> float:
        """Share of the previous facts that were dropped (0 without previous facts)."""
        return len(self.dropped) / len(self.previous_facts) if self.previous_facts else 0.0

    @property
    def fires(self) -> bool:
        """True when the new summary drops more than ``threshold`` of the previous facts."""
        return self.share > self.threshold

    def render(self) -> str:
        """A human-readable report (used in errors, review commits and the CLI)."""
        lines = [
            f"The new summary drops {len(self.dropped)} of {len(self.previous_facts)} facts of "
            f"the previous summary ({self.share:.0%}; at most {self.threshold:.0%} allowed)."
        ]
        for title, items in (
            ("Dropped facts", self.dropped),
            ("Dropped entities", self.dropped_entities),
            ("Dropped but still in the stored turns", self.recoverable),
            ("New facts not found in the turns", self.unsupported),
        ):
            if items:
                lines.append(f"{title}:")
                lines.extend(f"- {item}" for item in items)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form, with the derived ``share`` and ``fires`` first (not the
        fields as ``model_dump`` gives them: this is what ``--json`` has always printed)."""
        return {
            "share": round(self.share, 4),
            "threshold": self.threshold,
            "fires": self.fires,
            "previous_facts": list(self.previous_facts),
            "dropped": list(self.dropped),
            "dropped_entities": list(self.dropped_entities),
            "recoverable": list(self.recoverable),
            "unsupported": list(self.unsupported),
        }


def check_loss(
    previous: Summary | None,
    new: StructuredSummary,
    turns: Sequence[Interaction],
    *,
    threshold: float = 0.25,
    keep: float = 0.5,
) -> LossReport:
    """Compare ``new`` with the previous summary and the covered ``turns``.

    A previous fact counts as kept when at least ``keep`` of its content words (numbers
    weigh double) appear anywhere in the new summary.
    """
    facts = summary_facts(previous)
    new_words = summary_terms(new)
    new_text = "\n".join([new.summary, *new.key_facts, *new.entities]).casefold()
    dropped = tuple(f for f in facts if coverage(terms(f), new_words) < keep)
    old_entities = previous.keywords if previous else []
    dropped_entities = tuple(e for e in old_entities if e.casefold() not in new_text)
    turn_words = set(terms("\n".join(t.text for t in turns)))
    recoverable = tuple(f for f in dropped if coverage(terms(f), turn_words) >= keep)
    known = turn_words | (set(terms("\n".join(facts))) if facts else set())
    if previous is not None:
        known |= set(terms(previous.text))
    unsupported = tuple(f for f in new.key_facts if coverage(terms(f), known) < keep)
    return LossReport(
        previous_facts=tuple(facts),
        dropped=dropped,
        dropped_entities=dropped_entities,
        recoverable=recoverable,
        unsupported=unsupported,
        threshold=threshold,
    )


def covers_label(ids: Sequence[str]) -> str:
    """A short trailer value for the interactions a summary covers."""
    if not ids:
        return "0 interactions"
    if len(ids) <= 3:
        return ", ".join(ids)
    return f"{len(ids)} interactions, {ids[0]}..{ids[-1]}"
