"""The session merge on turn blocks (gitmem.format.sessionlines): where it answers, the bytes
of the full parse-and-merge; everything else it leaves to that merge."""

from __future__ import annotations

import os
import random
import shlex
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import ConflictError, ParseError
from gitmem.format.parse import parse
from gitmem.format.render import render
from gitmem.format.sessionlines import merge_session_lines, read_session_lines
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.sync.merge import merge_texts
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2024, 4, 15, 15, 30, tzinfo=timezone(timedelta(hours=8)))
ZONES = [timezone.utc, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))]
SPEAKERS = ["User", "Assistant", "Claude Code", "bob_2", "用户"]
CONTENTS = [
    "hello",
    "",
    "two\nlines",
    "a\n\nblank inside",
    "  indented",
    "trailing \t",
    "### not a heading",
    "**User**: inside",
    "> quoted",
    "{#x} braces",
    "é ü 中文",
]
ESCAPED = ["bell \x07", "line\u2028sep"]  # escaped by render: left to the full merge
WORDS = ["alpha", "beta", "gamma", "delta"]


def _time(rng: random.Random, minute: int) -> datetime:
    zone = rng.choice(ZONES)
    return (T0 + timedelta(minutes=minute)).astimezone(zone)


def _turn(rng: random.Random, tid: str, minute: int) -> Interaction:
    messages = [
        Message(
            speaker=rng.choice(SPEAKERS),
            content=rng.choice(CONTENTS + ESCAPED if rng.random() < 0.05 else CONTENTS),
        )
        for _ in range(rng.choice([0, 1, 1, 2, 2, 3]))
    ]
    return Interaction(id=tid, timestamp=_time(rng, minute), messages=messages)


def _some(rng: random.Random, pool: list[str]) -> list[str]:
    return rng.sample(pool, rng.randint(0, 3))


def _base(rng: random.Random) -> Session:
    turns = [_turn(rng, f"t{n}", n) for n in range(rng.randint(0, 6))]
    return Session(
        id=rng.choice(["s", "chat-1", "proj/2024.x"]),
        created=_time(rng, 0),
        last_active=_time(rng, len(turns)),
        participants=_some(rng, ["User", "Assistant", "Ann Lee"]),
        tags=_some(rng, WORDS),
        project=rng.choice([None, None, "gitmem", "my project"]),
        links=_some(rng, ["a", "b-2", "c/d"]),
        extra=rng.choice([{}] * 9 + [{"Mood": "calm"}]),
        interactions=turns,
        summary=rng.choice([None] * 9 + [Summary(text="so far", generated=T0)]),
        language=rng.choice(["en"] * 19 + ["zh"]),
    )


def _side(rng: random.Random, base: Session, name: str, shared: list[Interaction]) -> Session:
    """A random revision of ``base``: turns appended, edited, deleted; metadata changed."""
    turns = list(base.interactions)
    for n in range(rng.choice([0, 1, 1, 2, 3])):
        turns.append(_turn(rng, f"{name}{n}", 10 + rng.randint(0, 5)))
    turns += shared
    if turns and rng.random() < 0.25:
        at = rng.randrange(len(turns))
        turns[at] = _turn(rng, turns[at].id, rng.randint(0, 9))
    if turns and rng.random() < 0.2:
        at = rng.randrange(len(turns))
        # the same turn, its time written in another zone
        turns[at] = turns[at].model_copy(
            update={"timestamp": turns[at].timestamp.astimezone(rng.choice(ZONES))}
        )
    if turns and rng.random() < 0.15:
        del turns[rng.randrange(len(turns))]
    if len(turns) > 1 and rng.random() < 0.05:
        turns.reverse()
    update: dict[str, object] = {"interactions": turns, "last_active": _time(rng, 20)}
    if rng.random() < 0.3:
        update["tags"] = _some(rng, WORDS)
    if rng.random() < 0.2:
        update["participants"] = _some(rng, ["User", "Assistant", "Zed"])
    if rng.random() < 0.1:
        update["project"] = rng.choice([None, "other"])
    if rng.random() < 0.1:
        update["created"] = _time(rng, -5)
    if rng.random() < 0.05:
        update["summary"] = Summary(text=f"by {name}", generated=T0)
    return base.model_copy(update=update)


def _hand_edit(rng: random.Random, text: str) -> str:
    """What a person might change in an editor: spacing, a label, a line."""
    edits = [
        ("> ", ">"),
        ("**: ", "**:  "),
        ("\n\n### ", "\n### "),
        ("**:\n", "** :\n"),
        ("+08:00", "+0800"),
        (":00+", "+"),
        ("## Conversation", "## conversation"),
        ("- **Tags**", "- **tags**"),
        ("\n>\n", "\n> \n"),
        ("[[", "[ ["),
    ]
    old, new = rng.choice(edits)
    if rng.random() < 0.2:
        return text + "\n"
    if rng.random() < 0.1:
        return text.replace("\n", "\r\n", 1)
    return text.replace(old, new, 1)


def _full(base: bytes | None, ours: bytes, theirs: bytes) -> bytes | None:
    """The full parse-and-merge's bytes, or None where it notes, refuses or fails."""
    try:
        merged, notes = merge_texts(base, ours, theirs, "sessions/s.md")
    except (ParseError, ConflictError):
        return None
    return None if notes else merged


def _case(rng: random.Random, *, hand: bool) -> tuple[bytes | None, bytes, bytes]:
    base = _base(rng)
    shared = [_turn(rng, "both", 12)] if rng.random() < 0.15 else []
    ours = _side(rng, base, "o", shared)
    theirs = _side(rng, base, "p", shared if rng.random() < 0.7 else [])
    texts = [render(s) for s in (base, ours, theirs)]
    if hand:
        at = rng.randrange(3)
        texts[at] = _hand_edit(rng, texts[at])
    data = [t.encode() for t in texts]
    return (None if rng.random() < 0.1 else data[0]), data[1], data[2]


@pytest.mark.parametrize("hand", [False, True])
def test_where_the_block_merge_answers_it_writes_the_full_merges_bytes(hand: bool) -> None:
    rng = random.Random(1234 + hand)
    answered = declined = 0
    for _ in range(400):
        base, ours, theirs = _case(rng, hand=hand)
        fast = merge_session_lines(base, ours, theirs)
        if fast is None:
            declined += 1
            continue
        answered += 1
        assert fast == _full(base, ours, theirs), (base, ours, theirs)
    assert answered > 20 and declined > 40  # both paths were exercised


def test_a_text_the_block_reader_accepts_is_what_render_writes_for_its_parse() -> None:
    rng = random.Random(99)
    accepted = 0
    for _ in range(600):
        session = _side(rng, _base(rng), "o", [])
        text = render(session)
        if rng.random() < 0.7:
            text = _hand_edit(rng, text)
        if read_session_lines(text.encode()) is not None:
            accepted += 1
            assert render(parse(text)) == text
    assert accepted > 100


def test_the_usual_pull_two_clones_each_appended_a_turn_is_answered() -> None:
    rng = random.Random(7)
    base = Session(id="s", created=T0, last_active=T0, interactions=[_turn(rng, "t0", 0)])
    ours = base.model_copy(
        update={"interactions": [*base.interactions, _turn(rng, "a", 1)], "last_active": T0}
    )
    theirs = base.model_copy(
        update={
            "interactions": [*base.interactions, _turn(rng, "b", 2)],
            "last_active": T0 + timedelta(minutes=2),
        }
    )
    data = [render(s).encode() for s in (base, ours, theirs)]
    fast = merge_session_lines(*data)
    assert fast is not None
    assert fast == _full(*data)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("> ", ">"),  # a quote line render would write with a space
        ("### 2024-04-15T15:30:00+08:00", "### 2024-04-15T15:30:00"),  # naive: UTC to the model
        ("- **Created**", "- **Mood**: x\n- **Created**"),  # a custom key out of render's order
        ("\n\n## Conversation", "\n\n## Summary\n**Generated**: x\n\n## Conversation"),
    ],
)
def test_a_version_not_in_renders_form_is_left_to_the_full_merge(old: str, new: str) -> None:
    session = Session(id="s", created=T0, last_active=T0, interactions=[_turn_with_text()])
    text = render(session)
    assert read_session_lines(text.encode()) is not None
    edited = text.replace(old, new, 1)
    assert edited != text
    assert read_session_lines(edited.encode()) is None


def _turn_with_text() -> Interaction:
    return Interaction(
        id="t0", timestamp=T0, messages=[Message(speaker="User", content="hi\n\nthere")]
    )


def test_the_registered_driver_merges_a_session_without_the_models(tmp_path: Path) -> None:
    store = tmp_path / "store"
    MemoryManager.init(store).close()
    rng = random.Random(11)
    base = Session(id="s", created=T0, last_active=T0, interactions=[_turn(rng, "t0", 0)])
    sides = [
        base.model_copy(update={"interactions": [*base.interactions, _turn(rng, tid, 1)]})
        for tid in ("a", "b")
    ]
    paths = {}
    for key, session in zip("OAB", (base, *sides), strict=True):
        paths[key] = tmp_path / key
        paths[key].write_text(render(session))
    expected = _full(*(paths[k].read_bytes() for k in "OAB"))
    assert expected is not None
    command = git(store, "config", "merge.gitmem.driver").strip()
    for key in "OAB":
        command = command.replace(f"%{key}", shlex.quote(str(paths[key])))
    done = subprocess.run(
        ["sh", "-c", command.replace("%P", "sessions/s.md")],
        cwd=store,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert paths["A"].read_bytes() == expected
    loaded = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()}
    assert "gitmem.format.sessionlines" in loaded  # the probe saw the imports
    assert not {"pydantic", "gitmem.models", "gitmem.sync.merge", "mistune"} & loaded
