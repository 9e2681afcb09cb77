"""``built`` makes a model from values known valid: the same object validation makes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gitmem.format.render import render
from gitmem.models import Interaction, Message, Session, built


def test_built_equals_validated() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    message = built(Message, {"speaker": "user", "content": "hi\nthere"})
    checked = Message(speaker="user", content="hi\nthere")
    assert message == checked
    assert message.model_fields_set == checked.model_fields_set
    assert message.model_dump() == checked.model_dump()
    turn = built(Interaction, {"id": "nb-1", "timestamp": when, "messages": [message]})
    assert turn == Interaction(id="nb-1", timestamp=when, messages=[checked])
    # frozen like any other, and copied the usual way
    with pytest.raises(ValueError):
        turn.id = "x"  # type: ignore[misc]
    assert turn.model_copy(update={"id": "nb-2"}).id == "nb-2"
    session = Session(id="s", created=when, last_active=when, interactions=[turn])
    validated = Session(
        id="s",
        created=when,
        last_active=when,
        interactions=[Interaction(id="nb-1", timestamp=when, messages=[checked])],
    )
    assert render(session) == render(validated)


def test_built_needs_every_field() -> None:
    with pytest.raises(TypeError, match="every field"):
        built(Interaction, {"id": "nb-1", "timestamp": datetime.now(UTC)})
