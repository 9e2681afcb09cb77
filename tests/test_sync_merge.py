"""The semantic merge of session versions (pure functions, no git)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.errors import ConflictError, ParseError
from gitmem.format import parse as markdown
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.sync.merge import merge_sessions, merge_texts

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=timezone(timedelta(hours=8)))


def turn(tid: str, minute: int, text: str = "") -> Interaction:
    return Interaction(
        id=tid,
        timestamp=T0 + timedelta(minutes=minute),
        messages=[
            Message(speaker="User", content=text or f"question {tid}"),
            Message(speaker="Assistant", content=f"answer {tid}"),
        ],
    )


def session(*turns: Interaction, **fields: object) -> Session:
    last = max([t.timestamp for t in turns], default=T0)
    values: dict[str, object] = {
        "id": "s",
        "created": T0,
        "last_active": last,
        "participants": ["User", "Assistant"],
    }
    values.update(fields)
    return Session(interactions=list(turns), **values)  # type: ignore[arg-type]


def ids(merged: Session) -> list[str]:
    return [t.id for t in merged.interactions]


def test_both_appended_gives_the_union_in_time_order() -> None:
    base = session(turn("t1", 0), turn("t2", 1))
    ours = session(*base.interactions, turn("a1", 2), turn("a2", 5))
    theirs = session(*base.interactions, turn("b1", 3), turn("b2", 4))
    result = merge_sessions(base, ours, theirs)
    assert ids(result.session) == ["t1", "t2", "a1", "b1", "b2", "a2"]
    assert result.notes == []
    # the same whichever side merges
    assert merge_sessions(base, theirs, ours).session == result.session


def test_same_timestamp_orders_by_id_and_keeps_each_sides_order() -> None:
    base = session(turn("t1", 0))
    ours = session(turn("t1", 0), turn("z", 1), turn("c", 1))  # one side's own order
    theirs = session(turn("t1", 0), turn("m", 1))
    merged = ids(merge_sessions(base, ours, theirs).session)
    assert merged == ["t1", "m", "z", "c"]
    assert merged.index("z") < merged.index("c")


def test_no_duplicates_when_both_sides_have_the_same_turn() -> None:
    base = session(turn("t1", 0))
    both = turn("x", 1)
    result = merge_sessions(base, session(turn("t1", 0), both), session(turn("t1", 0), both))
    assert ids(result.session) == ["t1", "x"]


def test_imported_order_is_kept_even_when_ids_do_not_sort() -> None:
    # LoCoMo-style ids with one timestamp per session: never re-sorted by id
    turns = [turn(f"D1:{n}", 0) for n in (1, 2, 10, 11)]
    base = session(*turns[:2])
    ours = session(*turns)
    theirs = session(*turns[:2], turn("D1:3", 0))
    merged = ids(merge_sessions(base, ours, theirs).session)
    assert merged[:4] == ["D1:1", "D1:2", "D1:10", "D1:11"] or merged[:2] == ["D1:1", "D1:2"]
    assert merged.index("D1:10") < merged.index("D1:11")
    assert set(merged) == {"D1:1", "D1:2", "D1:10", "D1:11", "D1:3"}


def test_deletion_on_one_side_is_kept_unless_the_other_edited_the_turn() -> None:
    base = session(turn("t1", 0), turn("t2", 1))
    ours = session(turn("t1", 0))  # deleted t2
    assert ids(merge_sessions(base, ours, base).session) == ["t1"]
    edited = session(turn("t1", 0), turn("t2", 1, "edited by hand"))
    result = merge_sessions(base, ours, edited)
    assert ids(result.session) == ["t1", "t2"]
    assert result.session.interactions[1].messages[0].content == "edited by hand"
    assert [n.kind for n in result.notes] == ["kept"]


def test_turn_edited_differently_on_both_sides_keeps_one_and_records_the_other() -> None:
    base = session(turn("t1", 0))
    ours = session(turn("t1", 0, "ours"))
    theirs = session(turn("t1", 0, "theirs"))
    result = merge_sessions(base, ours, theirs)
    assert merge_sessions(base, theirs, ours).session == result.session
    kept = result.session.interactions[0].messages[0].content
    (note,) = result.conflicts
    assert {kept, note.dropped.splitlines()[0].removeprefix("User: ")} == {"ours", "theirs"}


def test_metadata_lists_union_times_extreme_and_removals_honoured() -> None:
    base = session(turn("t1", 0), tags=["a", "gone"], links=["x"])
    ours = session(
        turn("t1", 0), tags=["a", "ours"], links=["x", "y"], created=T0 - timedelta(days=1)
    )
    theirs = session(
        turn("t1", 0),
        turn("t2", 9),
        tags=["a", "gone", "theirs"],
        links=["x", "z"],
        participants=["User", "Assistant", "Caroline"],
    )
    merged = merge_sessions(base, ours, theirs).session
    assert merged.tags == ["a", "ours", "theirs"]
    assert merged.links == ["x", "y", "z"]
    assert merged.participants == ["User", "Assistant", "Caroline"]
    assert merged.created == T0 - timedelta(days=1)
    assert merged.last_active == T0 + timedelta(minutes=9)


def test_scalar_changed_on_one_side_wins_and_both_changed_is_a_recorded_conflict() -> None:
    base = session(turn("t1", 0), project="p0", extra={"mood": "calm"})
    ours = session(turn("t1", 0), project="p1", extra={"mood": "calm", "k": "v"})
    theirs = session(turn("t1", 0), turn("t2", 1), project="p2", extra={"mood": "happy"})
    result = merge_sessions(base, ours, theirs)
    assert result.session.extra == {"mood": "happy", "k": "v"}
    # theirs was active more recently, so its value is kept; ours is recorded
    assert result.session.project == "p2"
    (note,) = result.conflicts
    assert (note.key, note.kept, note.dropped, note.dropped_side) == ("Project", "p2", "p1", "ours")
    assert merge_sessions(base, theirs, ours).session == result.session


def test_both_rewrote_the_summary_keeps_the_newer_and_records_the_other() -> None:
    old = Summary(text="old", generated=T0)
    base = session(turn("t1", 0), summary=old)
    ours = session(turn("t1", 0), summary=Summary(text="ours newer", generated=T0 + timedelta(1)))
    later = T0 + timedelta(hours=1)
    theirs = session(turn("t1", 0), summary=Summary(text="theirs", generated=later))
    result = merge_sessions(base, ours, theirs)
    assert result.session.summary is not None and result.session.summary.text == "ours newer"
    (note,) = result.conflicts
    assert note.kind == "summary" and note.dropped == "theirs" and note.dropped_side == "theirs"
    one_side = merge_sessions(base, base, theirs).session.summary
    assert one_side is not None and one_side.text == "theirs"


def test_different_session_ids_are_refused() -> None:
    with pytest.raises(ConflictError, match="ids differ"):
        merge_sessions(None, session(turn("t1", 0)), session(turn("t1", 0), id="other"))


def test_merge_texts_renders_and_refuses_unparseable_input() -> None:
    base = markdown.render(session(turn("t1", 0))).encode()
    ours = markdown.render(session(turn("t1", 0), turn("a", 1))).encode()
    theirs = markdown.render(session(turn("t1", 0), turn("b", 2))).encode()
    merged, notes = merge_texts(base, ours, theirs, "sessions/s.md")
    assert ids(markdown.parse_bytes(merged)) == ["t1", "a", "b"]
    assert b"<<<<<<<" not in merged and notes == []
    with pytest.raises(ParseError) as caught:
        merge_texts(base, ours, theirs.replace(b"### 2024", b"### someday"), "sessions/s.md")
    assert "sessions/s.md (theirs):" in str(caught.value)
    # no common ancestor (both created the session)
    merged, _ = merge_texts(None, ours, theirs, "sessions/s.md")
    assert ids(markdown.parse_bytes(merged)) == ["t1", "a", "b"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 30), max_size=6),
    st.lists(st.integers(0, 30), max_size=6),
    st.lists(st.integers(0, 30), max_size=6),
)
def test_every_turn_of_both_sides_survives_in_each_sides_order(
    base_minutes: list[int], ours_minutes: list[int], theirs_minutes: list[int]
) -> None:
    # appended turns come at or after the last shared one, as saves do
    start = max(base_minutes, default=0)
    base_turns = [turn(f"b{n}", m) for n, m in enumerate(sorted(base_minutes))]
    ours_turns = [turn(f"o{n}", start + m) for n, m in enumerate(sorted(ours_minutes))]
    theirs_turns = [turn(f"t{n}", start + m) for n, m in enumerate(sorted(theirs_minutes))]
    base = session(*base_turns)
    ours = session(*base_turns, *ours_turns)
    theirs = session(*base_turns, *theirs_turns)
    merged = ids(merge_sessions(base, ours, theirs).session)
    assert sorted(merged) == sorted(ids(ours) + [t.id for t in theirs_turns])
    for side in (ours, theirs):
        positions = [merged.index(t) for t in ids(side)]
        assert positions == sorted(positions)
    times = [t.timestamp for t in merge_sessions(base, ours, theirs).session.interactions]
    assert times == sorted(times)
    swapped = merge_sessions(base, theirs, ours).session.interactions
    assert swapped == merge_sessions(base, ours, theirs).session.interactions
