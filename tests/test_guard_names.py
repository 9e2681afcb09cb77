"""Session files survive a clone onto case-insensitive, normalising file systems (macOS,
Windows): device names and case/normalisation twins are refused when created."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import InvalidSessionId
from gitmem.format.paths import encode_id, fold_name, portability_problem


@pytest.mark.parametrize("session_id", ["CON", "nul", "com1", "lpt1.x", "Aux.notes", "COM¹"])
def test_windows_device_names_are_refused_at_creation(store: Path, session_id: str) -> None:
    mm = MemoryManager.init(store)
    with pytest.raises(InvalidSessionId, match="reserved device name on Windows"):
        mm.save_interaction(session_id, "a question", "an answer")
    assert mm.session_ids() == []


@pytest.mark.parametrize("session_id", ["console", "nul_", "com10", "lpt", "x.con", "CON "])
def test_names_that_only_look_like_devices_are_fine(session_id: str) -> None:
    try:
        encode_id(session_id)
    except InvalidSessionId:
        return  # refused for another reason (e.g. a trailing space)
    assert portability_problem(session_id) is None


def test_a_case_twin_is_refused_and_existing_sessions_keep_working(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("Alice", "first question", "answer")
    with pytest.raises(InvalidSessionId, match="'Alice' only in letter case"):
        mm.save_interaction("alice", "second question", "answer")
    mm.save_interaction("Alice", "more", "fine")  # the existing session itself still saves
    mm.save_interaction("bob", "third", "answer")
    with pytest.raises(InvalidSessionId, match="'bob'"):
        mm.save_interaction("BOB", "fourth", "answer")
    mm.delete_session("bob")
    mm.save_interaction("BOB", "fifth", "answer")  # no twin any more
    assert mm.session_ids() == ["Alice", "BOB"]


def test_twins_made_by_another_writer_are_seen(store: Path) -> None:
    first = MemoryManager.init(store)
    first.save_interaction("seed", "a question", "answer")
    second = MemoryManager(store)
    second.save_interaction("Carol", "from elsewhere", "answer")  # first's cache is older
    with pytest.raises(InvalidSessionId, match="'Carol'"):
        first.save_interaction("CAROL", "mine", "answer")


def test_a_normalisation_twin_is_refused(store: Path) -> None:
    mm = MemoryManager.init(store)
    angstrom, ring = "\u212b-notes", "\u00c5-notes"  # one name on macOS (same NFD)
    assert encode_id(angstrom) != encode_id(ring)
    assert fold_name(encode_id(angstrom)) == fold_name(encode_id(ring))
    mm.save_interaction(angstrom, "a question", "answer")
    with pytest.raises(InvalidSessionId, match="Unicode normalisation"):
        mm.save_interaction(ring, "another", "answer")
    nfc, nfd = "café", unicodedata.normalize("NFD", "café")
    mm.save_interaction(nfc, "q", "a")
    mm.save_interaction(nfd, "q", "a")  # different, portable names: café.md, cafe%CC%81.md
    assert {encode_id(nfc), encode_id(nfd)} == {"café", "cafe%CC%81"}


def test_twins_inside_one_batch_are_refused(store: Path) -> None:
    mm = MemoryManager.init(store)
    with pytest.raises(InvalidSessionId, match="'Dave'"), mm.batch("import"):
        mm.save_interaction("Dave", "q", "a")
        mm.save_interaction("dave", "q", "a")
    assert mm.session_ids() == []


@pytest.mark.parametrize(
    ("namespace", "existing"), [("CON", None), ("nul.x", None), ("team", "Team"), ("SS", "ß")]
)
def test_a_new_namespace_is_held_to_the_same_rules(
    store: Path, namespace: str, existing: str | None
) -> None:
    # a namespace names a folder: namespaces/CON/ cannot exist on Windows, and Team/ and team/
    # are one folder on macOS and Windows, where their sessions would overwrite each other
    MemoryManager.init(store).close()
    if existing is not None:
        MemoryManager(store, namespace=existing).save_interaction("s", "a question", "answer")
    with pytest.raises(InvalidSessionId, match="namespace"):
        MemoryManager(store, namespace=namespace).save_interaction("s", "a question", "answer")
    if existing is not None:  # the existing one keeps working
        assert MemoryManager(store, namespace=existing).load_memory("s") is not None
