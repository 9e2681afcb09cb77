"""``gitmem import openclaw`` on the fixture OpenClaw's own code wrote (tests/data/openclaw),
through real stores and the real git binary."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.format.blocks import split_entries
from gitmem.importers.engine import ImportFormatError
from gitmem.importers.openclaw import import_openclaw
from tests.conftest import git

FIXTURE = Path(__file__).parent / "data" / "openclaw"
MAIN = "openclaw:main:3f6c2a9e-5b1d-4e7a-9c0f-1a2b3c4d5e6f"
GROUP = "openclaw:main:9a8b7c6d-0000-4000-8000-00000000beef-topic-42"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A copy of the fixture's ~/.openclaw (workspace/ and agents/ side by side)."""
    target = tmp_path / "openclaw"
    shutil.copytree(FIXTURE, target, ignore=shutil.ignore_patterns("*.md5", "make_*", "README*"))
    return target


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager.init(store)


def _commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD").strip())


def _main_file(home: Path) -> Path:
    return home / "agents" / "main" / "sessions" / f"{MAIN.rsplit(':', 1)[1]}.jsonl"


def test_fixture_imports_sessions_turns_memory_and_summary(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    result = import_openclaw(mm, home / "workspace", tz="UTC")
    assert result.sessions == [
        "openclaw:memory",
        "openclaw:2026-04-28",
        "openclaw:2026-04-29",
        "openclaw:2026-12-01",
        MAIN,
        GROUP,
    ]
    assert result.commit and git(store, "status", "--porcelain") == ""
    trailers = git(store, "log", "-1", "--format=%(trailers)")
    assert "Gitmem-Op: import" in trailers and "Gitmem-Source: openclaw" in trailers

    main = mm.load_memory(MAIN)
    assert main is not None
    assert [[m.speaker for m in t.messages] for t in main.interactions] == [
        ["User", "Assistant"]
    ] * 3
    first, second, third = main.interactions
    assert first.messages[0].content == "Remember that my sister Ana lives in Lisbon."
    # the tool call is one line, the thinking block and the tool result are left out
    assert first.messages[1].content == (
        '[tool: edit {"path": "memory/2026-04-29.md", "append": "- Ana (sister) lives in '
        'Lisbon"}]\nNoted: Ana lives in Lisbon.'
    )
    assert "[image: image/png]" in second.messages[0].content
    # the delivery mirror OpenClaw appended joins the last reply
    assert third.messages[1].content == "Any time.\nReminder: trains to Lisbon leave at 9."
    assert first.timestamp.isoformat().endswith("+00:00")
    assert main.summary is not None and main.summary.model == "openclaw-compaction"
    assert "Lisbon" in main.summary.text
    assert main.tags == ["openclaw", "main", "telegram"]
    assert main.extra["openclaw_key"] == "agent:main:main"
    assert main.extra["title"] == "Lisbon notes"
    group = mm.load_memory(GROUP)
    assert group is not None and group.extra["title"] == "Ops team"
    assert group.extra["chat_type"] == "group"

    memory = mm.load_memory("openclaw:memory")
    assert memory is not None and len(memory.interactions) == 1
    assert memory.interactions[0].messages[0].content.startswith("# Long-term memory")
    day = mm.load_memory("openclaw:2026-04-28")
    assert day is not None
    assert [t.messages[0].content.splitlines()[0] for t in day.interactions] == [
        "# 2026-04-28",
        "## 09:12 Morning check-in",
        "## 18:40 Trip planning",
    ]
    # "## ..." inside the code fence stays in its entry; a heading's clock gives the time
    assert "## not a heading: inside a fence" in day.interactions[2].messages[0].content
    assert day.interactions[1].timestamp.hour == 9
    # the session-memory hook's slug file joins its day
    slug_day = mm.load_memory("openclaw:2026-12-01")
    assert slug_day is not None and slug_day.participants == ["2026-12-01-1822.md"]


def test_second_import_makes_no_commit_and_hand_turn_survives(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    import_openclaw(mm, home / "workspace", tz="UTC")
    mm.save_interaction(MAIN, "a note I added by hand", "kept", tags=["mine"])
    before = _commits(store)
    again = import_openclaw(mm, home / "workspace", tz="UTC")
    assert again.commit is None and again.added == [] and _commits(store) == before
    main = mm.load_memory(MAIN)
    assert main is not None and len(main.interactions) == 4
    assert main.interactions[-1].messages[0].content == "a note I added by hand"


def test_new_messages_append_and_running_turn_waits(mm: MemoryManager, home: Path) -> None:
    import_openclaw(mm, home / "workspace", tz="UTC")
    path = _main_file(home)
    last = json.loads(path.read_text().splitlines()[-1])
    user = {
        "type": "message",
        "id": "aa000001",
        "parentId": last["id"],
        "timestamp": "2026-12-01T19:00:00.000Z",
        "message": {"role": "user", "content": "Book the 9am train.", "timestamp": 1796151600000},
    }
    call = {
        "type": "message",
        "id": "aa000002",
        "parentId": "aa000001",
        "timestamp": "2026-12-01T19:00:01.000Z",
        "message": {
            "role": "assistant",
            "stopReason": "toolUse",
            "timestamp": 1796151601000,
            "content": [
                {"type": "toolCall", "id": "c9", "name": "book", "arguments": {"train": "9am"}}
            ],
        },
    }
    with path.open("a") as handle:
        handle.write(json.dumps(user) + "\n" + json.dumps(call) + "\n")
    running = import_openclaw(mm, home / "workspace", tz="UTC")
    assert running.added == []  # the turn waits for its tool result and reply
    reply = {
        "type": "message",
        "id": "aa000003",
        "parentId": "aa000002",
        "timestamp": "2026-12-01T19:00:05.000Z",
        "message": {
            "role": "assistant",
            "stopReason": "stop",
            "timestamp": 1796151605000,
            "content": [{"type": "text", "text": "Booked."}],
        },
    }
    with path.open("a") as handle:
        handle.write(json.dumps(reply) + "\n")
    done = import_openclaw(mm, home / "workspace", tz="UTC")
    assert [s for s, _ in done.added] == [MAIN]
    main = mm.load_memory(MAIN)
    assert main is not None
    assert main.interactions[-1].messages[1].content == ('[tool: book {"train": "9am"}]\nBooked.')


def test_changed_memory_md_adds_a_version_and_keeps_the_old(mm: MemoryManager, home: Path) -> None:
    import_openclaw(mm, home / "workspace", tz="UTC")
    memory_file = home / "workspace" / "MEMORY.md"
    old = memory_file.read_text()
    memory_file.write_text(old.replace("short answers", "detailed answers"))
    result = import_openclaw(mm, home / "workspace", tz="UTC")
    assert [s for s, _ in result.added] == ["openclaw:memory"]
    memory = mm.load_memory("openclaw:memory")
    assert memory is not None
    texts = [t.messages[0].content for t in memory.interactions]
    assert texts == [old.strip("\n"), old.strip("\n").replace("short", "detailed")]
    # touching the file (new mtime, same text) adds nothing
    memory_file.touch()
    assert import_openclaw(mm, home / "workspace", tz="UTC").commit is None


def test_changed_turn_is_reported_not_overwritten(mm: MemoryManager, home: Path) -> None:
    import_openclaw(mm, home / "workspace", tz="UTC")
    path = _main_file(home)
    path.write_text(path.read_text().replace("Noted: Ana lives in Lisbon.", "Noted, Lisbon."))
    result = import_openclaw(mm, home / "workspace", tz="UTC")
    assert len(result.differing) == 1 and result.differing[0][0] == MAIN
    assert result.added == [] and result.commit is None
    main = mm.load_memory(MAIN)
    assert main is not None
    assert "Noted: Ana lives in Lisbon." in main.interactions[0].messages[1].content


def test_malformed_line_names_file_and_line_and_changes_nothing(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    import_openclaw(mm, home / "workspace", tz="UTC")
    (home / "workspace" / "memory" / "2026-04-30.md").write_text("- a new note\n")
    path = _main_file(home)
    with path.open("a") as handle:
        handle.write('{"type": "message", "message": {"role": "user"\n')
    lines = len(path.read_text().splitlines())
    before = _commits(store)
    with pytest.raises(ImportFormatError) as caught:
        import_openclaw(mm, home / "workspace", tz="UTC")
    assert str(caught.value).startswith(f"{path}:{lines}: not JSON")
    assert _commits(store) == before and git(store, "status", "--porcelain") == ""
    assert mm.load_memory("openclaw:2026-04-30") is None


def test_dry_run_writes_nothing(mm: MemoryManager, home: Path, store: Path) -> None:
    before = _commits(store)
    result = import_openclaw(mm, home / "workspace", tz="UTC", dry_run=True)
    assert result.dry_run and len(result.added) == 11 and result.commit is None
    assert _commits(store) == before and git(store, "status", "--porcelain") == ""
    assert mm.list_sessions() == []


def test_secret_in_transcript_is_redacted_in_the_store(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    import_openclaw(mm, home / "workspace", tz="UTC")
    tracked = git(store, "grep", "-c", "sk-proj-AbCdEf", check=False)
    assert tracked == ""
    main = mm.load_memory(MAIN)
    assert main is not None and "[REDACTED" in main.interactions[1].messages[0].content
    # the redacted turn is the same turn on the next import, not a conflict
    assert import_openclaw(mm, home / "workspace", tz="UTC").differing == []


def test_hostile_names_stay_inside_sessions(mm: MemoryManager, home: Path, store: Path) -> None:
    sessions = home / "agents" / "main" / "sessions"
    long_stem = "x" * 240
    header = {
        "type": "session",
        "version": 3,
        "id": "h",
        "timestamp": "2026-12-01T10:00:00Z",
        "cwd": "/",
    }
    turn = {
        "type": "message",
        "id": "m1",
        "parentId": None,
        "timestamp": "2026-12-01T10:00:00Z",
        "message": {"role": "user", "content": "hostile", "timestamp": 1796148000000},
    }
    for name in (f"{long_stem}.jsonl", "..%2Fx.jsonl", ".. .jsonl"):
        (sessions / name).write_text(json.dumps(header) + "\n" + json.dumps(turn) + "\n")
    store_file = sessions / "sessions.json"
    data = json.loads(store_file.read_text())
    data["../x\x00" + "k" * 500] = {
        "sessionId": "..",
        "sessionFile": "../../../../etc/passwd",
        "label": "a\nb\x00c",
    }
    data["agent:main:main"]["sessionFile"] = "/etc/passwd"
    store_file.write_text(json.dumps(data))
    weird = home / "agents" / "..x\u202e"
    (weird / "sessions").mkdir(parents=True)
    (weird / "sessions" / "s.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(turn) + "\n")
    outside = home.parent / "outside.jsonl"
    outside.write_text(json.dumps(header) + "\n" + json.dumps(turn) + "\n")
    (sessions / "link.jsonl").symlink_to(outside)  # a link could point anywhere: not read
    result = import_openclaw(mm, home / "workspace", tz="UTC")
    assert len(result.sessions) == 10
    assert not any(sid.endswith(":link") for sid in result.sessions)
    files = set(git(store, "ls-files", "-z").split("\0")) - {
        "",
        ".gitattributes",
        ".gitmem-layout",
        "README.md",
    }
    assert len(files) >= 10
    assert all(f.startswith("sessions/") and ".." not in f.split("/") for f in files)
    assert all(len(part.encode()) <= 255 for f in files for part in f.split("/"))
    assert git(store, "status", "--porcelain") == ""
    for sid in result.sessions:
        assert mm.load_memory(sid) is not None


def test_transcript_is_read_line_by_line(mm: MemoryManager, home: Path) -> None:
    path = _main_file(home)
    head = path.read_text().splitlines()[0]
    filler = "y" * 2000
    with path.open("w") as handle:
        handle.write(head + "\n")
        for n in range(3000):  # ~6 MB of assistant-less custom entries
            handle.write(
                json.dumps(
                    {
                        "type": "custom",
                        "id": f"c{n}",
                        "parentId": None,
                        "timestamp": "2026-12-01T10:00:00Z",
                        "customType": "x",
                        "data": filler,
                    }
                )
                + "\n"
            )
    tracemalloc.start()
    import_openclaw(mm, home / "workspace", tz="UTC", dry_run=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < path.stat().st_size / 2


def test_cli_json_document_and_dry_run(store: Path, home: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["--repo", str(store), "init"]).exit_code == 0
    dry = runner.invoke(
        cli,
        [
            "--repo",
            str(store),
            "import",
            "openclaw",
            str(home / "workspace"),
            "--tz",
            "UTC",
            "--dry-run",
        ],
    )
    assert dry.exit_code == 0, dry.output
    assert "would import 6 session(s), 11 new turn(s)" in dry.output
    done = runner.invoke(
        cli,
        [
            "--repo",
            str(store),
            "--json",
            "import",
            "openclaw",
            str(home / "workspace"),
            "--agents-dir",
            str(home / "agents"),
            "--tz",
            "UTC",
        ],
    )
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["source"] == "openclaw" and doc["turns_added"] == 11
    assert doc["commit"] and doc["conflicts"] == [] and MAIN in doc["sessions"]
    bad = runner.invoke(
        cli,
        [
            "--repo",
            str(store),
            "import",
            "openclaw",
            str(home / "workspace"),
            "--tz",
            "Nowhere/Land",
        ],
    )
    assert bad.exit_code == 1 and "--tz 'Nowhere/Land'" in bad.output


def test_default_paths_come_from_home(
    mm: MemoryManager, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(home))
    result = import_openclaw(mm, tz="UTC", dry_run=True)
    assert MAIN in result.sessions and "openclaw:memory" in result.sessions


def test_split_entries_uses_the_markdown_structure() -> None:
    text = (
        "intro line\n\n## 08:00 One\n\n- a\n\n```\n## fenced\n```\n\n"
        "Setext heading\n--------------\n\nbody\n"
    )
    entries = split_entries(text)
    assert [(e.heading, e.line) for e in entries] == [
        (None, 1),
        ("08:00 One", 3),
        ("Setext heading", 11),
    ]
    assert entries[1].text == "## 08:00 One\n\n- a\n\n```\n## fenced\n```"
    assert [e.text for e in split_entries("- a\n- b\n\npara\r\n")] == ["- a\n- b", "para"]
    assert split_entries("\n\n") == []


def test_a_huge_import_goes_in_parts_with_the_same_result(
    mm: MemoryManager, home: Path, store: Path, tmp_path: Path
) -> None:
    before = _commits(store)
    parted = import_openclaw(mm, home / "workspace", tz="UTC", part_size=50)
    assert len(parted.commits) > 1 and _commits(store) == before + len(parted.commits)
    whole_mm = MemoryManager(tmp_path / "whole", init=True)
    whole = import_openclaw(whole_mm, home / "workspace", tz="UTC")
    assert sorted(parted.sessions) == sorted(whole.sessions)
    for sid in whole.sessions:
        one, other = mm.load_memory(sid), whole_mm.load_memory(sid)
        assert one is not None and other is not None
        assert one.interactions == other.interactions and one.summary == other.summary
