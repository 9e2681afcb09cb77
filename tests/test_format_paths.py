from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.errors import InvalidSessionId
from gitmem.format.paths import (
    decode_id,
    encode_id,
    fanout_folder,
    fold_name,
    id_from_path,
    session_path,
)


@pytest.mark.parametrize(
    ("session_id", "name"),
    [
        ("session_20240415_153022", "session_20240415_153022"),
        ("a/b", "a%2Fb"),
        ("a_b", "a_b"),
        ("..", "%2E."),
        ("../x", "%2E.%2Fx"),
        ("/etc/passwd", "%2Fetc%2Fpasswd"),
        (".hidden", "%2Ehidden"),
        ("装饰器", "装饰器"),
        ("a b", "a%20b"),
        ("100%", "100%25"),
    ],
)
def test_encode_examples(session_id: str, name: str) -> None:
    assert encode_id(session_id) == name
    assert decode_id(name) == session_id


@pytest.mark.parametrize("bad", ["", " x", "x ", "x" * 300])
def test_refused_ids(bad: str) -> None:
    with pytest.raises(InvalidSessionId):
        session_path(bad)


def test_a_slash_b_and_a_underscore_b_never_share_a_file() -> None:
    assert session_path("a/b") != session_path("a_b")
    assert session_path("a/b") == f"sessions/{fanout_folder('a/b')}/a%2Fb.md"


def test_non_canonical_names_are_not_sessions() -> None:
    ok = fanout_folder("ok")
    assert id_from_path(f"sessions/{ok}/a%5fb.md") is None  # lower-case hex is not what we write
    assert id_from_path("sessions/sub/x.md") is None
    assert id_from_path(f"sessions/{ok}/x.txt") is None
    assert id_from_path("sessions/ok.md") is None  # a file directly in sessions/
    assert id_from_path(f"sessions/{ok}/ok.md") == "ok"


@settings(max_examples=1000)
@given(st.text(min_size=1, max_size=80))
def test_every_id_maps_inside_sessions_or_is_refused(session_id: str) -> None:
    try:
        path = session_path(session_id)
    except InvalidSessionId:
        return
    folder, sub, name = path.split("/")
    assert folder == "sessions" and sub == fanout_folder(session_id)
    assert name.endswith(".md") and not name.startswith(".")
    assert "/" not in name and "\\" not in name and "\0" not in name
    assert id_from_path(path) == session_id


@settings(max_examples=500)
@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_two_ids_never_collide(a: str, b: str) -> None:
    try:
        pa, pb = session_path(a), session_path(b)
    except InvalidSessionId:
        return
    assert (pa == pb) == (a == b)


def _reference_fold(name: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from("aZ09-_.%~ \u00df\u0130\u212a\u00e9\u88c5"), max_size=12))
def test_the_quick_paths_for_plain_names_agree_with_the_full_rules(name: str) -> None:
    # plain ASCII names skip the per-character work: the answer must not change
    assert fold_name(name) == _reference_fold(name)
    try:
        encoded = encode_id(name)
    except InvalidSessionId:
        return
    expected = "".join(
        ch
        if (ch.isascii() and (ch.isalnum() or ch in "-_.")) or (not ch.isascii() and ch.isalnum())
        else "".join(f"%{b:02X}" for b in ch.encode())
        for ch in name
    )
    if name.startswith("."):
        expected = "%2E" + expected[1:]
    assert encoded == expected
    assert decode_id(encoded) == name
