"""Redacting secrets out of sessions, labels, metadata and commit trailers before a commit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from gitmem.errors import SecretRefused
from gitmem.format.facts import Fact, FactSource, MemoryFile
from gitmem.guard.secrets import Finding, SecretConfig, find_secrets, redact, trailer_value
from gitmem.models import Session


def _secrets_in(data: bytes, config: SecretConfig) -> list[Finding]:
    return list(find_secrets(data.decode("utf-8", "replace"), config))


def _refuse(value: str, what: str, config: SecretConfig) -> None:
    """Raise SecretRefused if ``value`` (a name) holds a secret; the value is not shown."""
    for found in find_secrets(value, config):
        raise SecretRefused(
            f"{what} holds a secret ({found.kind} {found.masked}); a name cannot be "
            "redacted without changing it, so nothing was written: choose another one"
        )


def with_redacted_trailer(message: str, counts: Mapping[str, int]) -> str:
    """``message`` with ``counts`` added to its ``Gitmem-Redacted`` trailer (made if none)."""
    lines = message.rstrip("\n").split("\n")
    for at in range(len(lines) - 1, -1, -1):
        if not lines[at].strip():
            break
        key, sep, value = lines[at].partition(": ")
        if sep and key == "Gitmem-Redacted":
            total: Counter[str] = Counter(counts)
            for item in value.split(","):
                kind, _, n = item.strip().partition("=")
                if kind and n.isdigit():
                    total[kind] += int(n)
            lines[at] = f"Gitmem-Redacted: {trailer_value(total)}"
            return "\n".join(lines) + "\n"
    last = lines[-1] if lines else ""
    in_trailers = len(lines) > 1 and ": " in last and last.split(": ", 1)[0].startswith("Gitmem-")
    sep = "\n" if in_trailers else "\n\n"
    return "\n".join(lines) + f"{sep}Gitmem-Redacted: {trailer_value(counts)}\n"


def _redact_into(
    text: str, config: SecretConfig, counts: Counter[str], *, label: bool = False
) -> str:
    clean, found = redact(text, config, label=label)
    counts.update(found)
    return clean


def _redact_labels(
    new: list[str], old: list[str], config: SecretConfig, counts: Counter[str]
) -> list[str]:
    known = set(old)
    return [
        item if item in known else _redact_into(item, config, counts, label=True) for item in new
    ]


def _redact_metadata(
    updated: Session, current: Session | None, config: SecretConfig, counts: Counter[str]
) -> dict[str, Any]:
    """Redacted metadata that is new or changed: values get markers; project, links, tags
    and participants are one-line labels, so their marker has no brackets; a new key with a
    secret is refused."""
    changes: dict[str, Any] = {}
    old_extra = current.extra if current else {}
    extra = dict(updated.extra)
    for key, value in updated.extra.items():
        if key not in old_extra:
            _refuse(key, f"a metadata key of session {updated.id!r}", config)
        if old_extra.get(key) != value:
            extra[key] = _redact_into(value, config, counts)
    if extra != updated.extra:
        changes["extra"] = extra
    if updated.project and updated.project != (current.project if current else None):
        project, found = redact(updated.project, config, label=True)
        if found:
            counts.update(found)
            changes["project"] = project
    for name in ("links", "tags", "participants"):
        items: list[str] = getattr(updated, name)
        guarded = _redact_labels(items, getattr(current, name) if current else [], config, counts)
        if guarded != items:
            changes[name] = list(dict.fromkeys(guarded))
    return changes


def redact_fact(fact: Fact, config: SecretConfig) -> tuple[Fact, Counter[str]]:
    """``fact`` with the secrets in its text, tags, section and sources redacted (a model or
    a prompt injection chooses all of them), and how many of each kind."""
    text, counts = redact(fact.text, config)

    def label(value: str) -> str:
        cleaned, found = redact(value, config, label=True)
        counts.update(found)
        return cleaned

    tags = tuple(label(t) for t in fact.tags)
    section = label(fact.section)
    sources = tuple(
        FactSource(
            session=label(source.session),
            interaction=None if source.interaction is None else label(source.interaction),
        )
        for source in fact.sources
    )
    if not counts:
        return fact, counts
    return fact.model_copy(
        update={"text": text, "tags": tags, "section": section, "sources": sources}
    ), counts


def redact_sections(memory: MemoryFile, config: SecretConfig) -> tuple[MemoryFile, Counter[str]]:
    """``memory`` with the secrets in its section headings redacted, also of sections that
    hold no fact, and how many of each kind."""
    counts: Counter[str] = Counter()
    sections: list[str] = []
    for section in memory.sections:
        cleaned, found = redact(section, config, label=True)
        counts.update(found)
        sections.append(cleaned)
    if not counts:
        return memory, counts
    return memory.model_copy(update={"sections": tuple(dict.fromkeys(sections))}), counts
