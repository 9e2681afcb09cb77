"""The pure parts of the time machine: session diffs, undo, unified text, log parsing."""

from __future__ import annotations

import hashlib
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gitmem.history.diff import diff_sessions, unified_diff
from gitmem.history.undo import undo
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.store.gitlog import ere_escape, parse_log
from gitmem.store.objects import MODE_FILE, MODE_TREE, Tree, find_tree_entry
from tests.conftest import git

T0 = datetime(2024, 4, 15, tzinfo=timezone.utc)


def turn(iid: str, text: str = "hello", speaker: str = "User") -> Interaction:
    return Interaction(id=iid, timestamp=T0, messages=[Message(speaker=speaker, content=text)])


def session(*turns: Interaction, **update: object) -> Session:
    base = Session(
        id="s",
        created=T0,
        last_active=T0,
        interactions=list(turns),
        participants=sorted({m.speaker for t in turns for m in t.messages}),
    )
    return base.model_copy(update=update)


def test_diff_sessions_by_part() -> None:
    old = session(turn("a"), turn("b"), tags=["x"], extra={"k": "1"})
    new = session(
        turn("a", "changed"),
        turn("c"),
        tags=["x", "y"],
        extra={"k": "2"},
        summary=Summary(text="sum", generated=T0),
    )
    d = diff_sessions(old, new, "s", "sessions/s.md")
    assert (d.interactions_added, d.interactions_removed, d.interactions_changed) == (
        ["c"],
        ["b"],
        ["a"],
    )
    assert set(d.metadata) == {"tags", "extra:k"}
    assert d.summary is not None and (d.summary.old, d.summary.new) == (None, "sum")
    assert d.labels() == [
        "added interaction c",
        "removed interaction b",
        "changed interaction a",
        "added summary",
        "changed metadata tags",
        "changed metadata extra:k",
    ]
    assert diff_sessions(old, old, "s", "p").labels() == []
    assert diff_sessions(None, old, "s", "p").labels()[:2] == [
        "added session",
        "added interaction a",
    ]


def test_undo_restores_touched_parts_and_keeps_the_rest() -> None:
    before = session(turn("a"), turn("b"))
    after = session(turn("a"), turn("b"), summary=Summary(text="bad", generated=T0))
    current = session(
        turn("a"),
        turn("b"),
        turn("c", speaker="Carol"),
        summary=Summary(text="bad", generated=T0),
        tags=["later"],
    )
    result = undo(before, after, current)
    assert result.conflicts == [] and result.session is not None
    assert result.session.summary is None
    assert [i.id for i in result.session.interactions] == ["a", "b", "c"]
    assert result.session.tags == ["later"]
    assert "Carol" in result.session.participants


def test_undo_puts_a_removed_turn_back_in_place_and_reports_conflicts() -> None:
    before = session(turn("a"), turn("b"), turn("c"))
    after = session(turn("a"), turn("c"))
    current = session(turn("a"), turn("c"), turn("d"))
    result = undo(before, after, current)
    assert result.session is not None
    assert [i.id for i in result.session.interactions] == ["a", "b", "c", "d"]
    # a turn edited by the change and edited again later conflicts
    edited = session(turn("a", "v2"))
    again = session(turn("a", "v3"))
    clash = undo(session(turn("a", "v1")), edited, again)
    assert clash.conflicts == ["interaction 'a' was changed again by a later commit"]
    assert clash.session == again
    # so does the summary
    s1, s2, s3 = (Summary(text=t, generated=T0) for t in ("1", "2", "3"))
    assert undo(session(summary=s1), session(summary=s2), session(summary=s3)).conflicts == [
        "the summary was changed again by a later commit"
    ]


def test_undo_creation_and_deletion() -> None:
    created = session(turn("a"))
    assert undo(None, created, created).session is None
    grown = session(turn("a"), turn("b"))
    kept = undo(None, created, grown).session
    assert kept is not None and [i.id for i in kept.interactions] == ["b"]
    assert undo(created, None, None).session == created
    assert undo(created, grown, None).conflicts == ["the session was deleted by a later commit"]


def test_unified_diff_is_a_patch_git_accepts(tmp_path: Path) -> None:
    old = "".join(f"line {n}\n" for n in range(40))
    new = old.replace("line 5\n", "line five\n").replace("line 30\n", "") + "tail"
    patch = unified_diff(old, new, "f.txt")
    assert patch.count("@@ -") == 3
    assert patch.endswith("+tail\n\\ No newline at end of file\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f.txt").write_text(old)
    (tmp_path / "p.patch").write_text(patch)
    git(tmp_path, "apply", "p.patch")
    assert (tmp_path / "f.txt").read_text() == new
    assert unified_diff(old, old, "f.txt") == ""
    assert unified_diff(None, "x\n", "f.txt").splitlines()[1:4] == [
        "--- /dev/null",
        "+++ b/f.txt",
        "@@ -0,0 +1 @@",
    ]


def test_find_tree_entry_matches_the_parsed_tree() -> None:
    tree = Tree.empty()
    for n in range(3000):
        tree.set(f"s{n}.md".encode(), MODE_FILE, hashlib.sha1(str(n).encode()).digest())
    tree.set(b"sub", MODE_TREE, bytes(20))
    data = tree.serialize()
    for name, entry in tree.entries.items():
        assert find_tree_entry(data, name) == entry
    assert find_tree_entry(data, b"1.md") is None  # a suffix of s1.md is not an entry
    assert find_tree_entry(data, b"missing") is None


def test_parse_log_keeps_odd_messages_intact(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a").write_text("a")
    git(tmp_path, "add", "a")
    message = "Subject with \x1e and \x1f\n\nbody: looks like a trailer\n\nGitmem-Op: save\n"
    git(tmp_path, "commit", "-q", "-m", message)
    out = subprocess.run(
        [
            "git",
            "log",
            "-z",
            "--raw",
            "--no-abbrev",
            "--format=\x1eGITMEM-LOG\x1f%H%x00%P%x00%an%x00%ae%x00%cI%x00"
            "%(trailers:only,unfold)%x00%B",
        ],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    ).stdout
    [entry] = parse_log(out)
    assert entry.subject == "Subject with \x1e and \x1f"
    assert entry.trailers == {"Gitmem-Op": ["save"]}
    assert entry.body == "body: looks like a trailer"
    assert [(f.path, f.old) for f in entry.files] == [("a", None)]
    assert entry.time.tzinfo is not None and entry.time > T0 - timedelta(days=1)
    assert ere_escape("a.b*(c)") == "a\\.b\\*\\(c\\)"
