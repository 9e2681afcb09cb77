"""What callers hand a save, checked and built into models before the save path guards it.

A turn's messages come as ``Message`` objects or plain mappings (``{"role": "user", ...}``),
metadata as a mapping of keys to values; both are turned into validated models here, and a
value pydantic refuses becomes a ``ValidationError`` naming the message or field.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gitmem.errors import ValidationError
from gitmem.models import Message, ModelValidationError, Session, describe_errors
from gitmem.text import link_targets

T = TypeVar("T")


def validated(build: Callable[[], T], where: str) -> T:
    """Run a model constructor, turning pydantic's error into gitmem's, naming the field."""
    try:
        return build()
    except ModelValidationError as exc:
        raise ValidationError(f"{where}: {describe_errors(exc)}") from None


def as_message(item: Message | Mapping[str, str], at: int) -> Message:
    """Message number ``at`` of a turn, given as a ``Message`` or a ``{"speaker"|"role": ...,
    "content": ...}`` mapping (the roles user/assistant/system are capitalised)."""
    if isinstance(item, Message):
        return item
    if not isinstance(item, Mapping):
        raise ValidationError(
            f"message {at}: expected a Message or a mapping with "
            f"speaker and content, got {type(item).__name__}"
        )
    speaker = item.get("speaker") or item.get("role")
    if speaker in ("user", "assistant", "system"):
        speaker = speaker.capitalize()
    return validated(
        lambda: Message(speaker=speaker or "", content=item.get("content", "")), f"message {at}"
    )


def fresh_interaction_id(taken: set[str]) -> str:
    """A new random interaction id (``i`` + 8 hex digits) not in ``taken``."""
    while True:
        candidate = "i" + secrets.token_hex(4)
        if candidate not in taken:
            return candidate


def with_metadata(
    session: Session, update: dict[str, Any], metadata: Mapping[str, Any] | None
) -> Session:
    """``session`` with ``update`` (field -> value) and ``metadata`` applied: ``project``,
    ``links`` and ``tags`` go to their fields (links and tags are added), any other key to
    ``extra`` (``None`` removes it)."""
    extra = dict(session.extra)
    for key, value in (metadata or {}).items():
        if key == "project":
            update["project"] = value
        elif key == "links":
            links = link_targets(value)  # "[[a]], [[b]]", "a, b" or a list of either
            update["links"] = list(dict.fromkeys([*session.links, *links]))
        elif key == "tags":
            update["tags"] = list(dict.fromkeys([*update.get("tags", session.tags), *value]))
        elif value is None:
            extra.pop(key, None)
        else:
            extra[key] = str(value)
    update["extra"] = extra
    merged = {**session.model_dump(exclude={"interactions", "summary"}), **update}
    merged.setdefault("interactions", session.interactions)
    merged["summary"] = session.summary
    return validated(lambda: Session(**merged), f"session {session.id!r} metadata")
