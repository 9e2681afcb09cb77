"""``gitmem.mcp.paging``: load_session's pages put back together give every turn exactly,
whatever the budget, the turn limit or the characters JSON has to escape."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from gitmem.errors import ValidationError
from gitmem.mcp import paging
from gitmem.models import Interaction, Message

pytest.importorskip("mcp")


def _turns(seed: int) -> list[Interaction]:
    rng = random.Random(seed)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        Interaction(
            id=f"i{k}",
            timestamp=when,
            messages=[
                Message(
                    speaker=rng.choice(["user", "assistant", "bob"]),
                    content="".join(
                        rng.choice('ab "\\\n\x01é漢') for _ in range(rng.randint(0, 3000))
                    ),
                )
                for _ in range(rng.randint(0, 4))
            ],
        )
        for k in range(30)
    ]


def _read_all(turns: list[Interaction], budget: int, limit: int | None) -> list[dict[str, Any]]:
    joined: list[dict[str, Any]] = []
    cursor = paging.parse_cursor(None)
    for _ in range(10_000):
        found = paging.page(turns, cursor, limit, budget)
        for at, turn in enumerate(found.turns):
            messages = [m.model_dump() for m in turn.messages]
            if joined and joined[-1]["id"] == turn.id:
                if messages and found.continues == at:
                    joined[-1]["messages"][-1]["content"] += messages.pop(0)["content"]
                joined[-1]["messages"] += messages
            else:
                joined.append({"id": turn.id, "messages": messages})
        if found.next is None:
            return joined
        cursor = paging.parse_cursor(str(found.next))
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize("budget", [700, 1500, 5000, 100_000])
@pytest.mark.parametrize("limit", [None, 1, 3])
def test_pages_join_back_into_every_turn(budget: int, limit: int | None) -> None:
    turns = _turns(budget)
    assert _read_all(turns, budget, limit) == [
        {"id": t.id, "messages": [m.model_dump() for m in t.messages]} for t in turns
    ]


def test_a_cursor_the_server_never_gave_is_refused() -> None:
    turns = _turns(1)
    for bad, said in (
        ("x", "not a cursor"),
        ("31", "past the session's 30 turns"),
        ("2.9.0", "does not point into turn 2"),
    ):
        with pytest.raises(ValidationError, match=said):
            paging.page(turns, paging.parse_cursor(bad), None)
