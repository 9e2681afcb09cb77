"""``gitmem import nanobot`` on the shared fixture written by nanobot's own code (0.3.5 and
0.1.4), and on copies changed the way nanobot changes them (/new, new turns, Dream)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from gitmem.importers import nanobot
from gitmem.importers.engine import ImportFormatError
from gitmem.manager import MemoryManager
from gitmem.models import Session
from tests.conftest import git
from tests.nanobot_env import copy_home, unpack

TELEGRAM = "telegram:8812345"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("nanobot-fixture"))


@pytest.fixture
def home(unpacked: Path, tmp_path: Path) -> Path:
    return copy_home(unpacked, tmp_path / "nanobot-home")


@pytest.fixture
def legacy(unpacked: Path, tmp_path: Path) -> Path:
    """A private copy of the 0.1.4 workspace."""
    target = tmp_path / "legacy-workspace"
    shutil.copytree(unpacked / "v0.1.4" / "workspace", target)
    return target


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager(store, init=True, agent="importer")


def session_file(home: Path, key: str) -> Path:
    found = [
        p
        for p in (home / "sessions").glob("*/*.jsonl")
        if json.loads(p.read_text().splitlines()[0]).get("key") == key
    ]
    assert len(found) == 1
    return found[0]


def append(path: Path, *records: dict[str, object]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def loaded(mm: MemoryManager, session_id: str) -> Session:
    session = mm.load_memory(session_id)
    assert session is not None, session_id
    return session


def test_nanobot_home_imports_sessions_summary_memory_and_history(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    result = nanobot.import_nanobot(mm, home, tz="Europe/Berlin")
    assert sorted(result.sessions) == sorted(
        ["cli:direct", TELEGRAM, "nanobot:memory", "nanobot:history"]
    )
    assert result.commit == git(store, "rev-parse", "HEAD").strip()
    assert git(store, "status", "--porcelain") == ""
    trailers = git(store, "log", "-1", "--format=%(trailers)")
    assert "Gitmem-Op: import" in trailers and "Gitmem-Source: nanobot >=0.3.5" in trailers

    telegram = loaded(mm, TELEGRAM)
    assert len(telegram.interactions) == 3  # the hidden checkpoint is not a turn
    assert "telegram" in telegram.tags and "nanobot" in telegram.tags
    first, second, _third = telegram.interactions
    assert first.messages[0].speaker == "user" and "I'm Alice" in first.messages[0].content
    assert first.timestamp.utcoffset() is not None and first.timestamp.hour == 10
    text = second.text
    assert '[tool: read_file {"path": "memory/MEMORY.md"}]' in text
    assert "(End of file" not in text  # tool results only with --tools full
    assert "working-memory checkpoint" not in "".join(i.text for i in telegram.interactions)
    summary = telegram.summary
    assert summary is not None and summary.model == "nanobot-consolidator"
    assert summary.facts[0].startswith("User is Alice, a backend developer in Berlin")
    assert len(summary.facts) == 3
    assert summary.covers == [i.id for i in telegram.interactions]

    assert len(loaded(mm, "cli:direct").interactions) == 2
    memory = loaded(mm, "nanobot:memory")
    files = [i.messages[0].content.splitlines()[0] for i in memory.interactions]
    # one interaction per commit and file: the init commit's three files, then Dream's edit
    assert sum("MEMORY.md" in f for f in files) == 2
    assert any(f.startswith("[file: memory/MEMORY.md · dream:") for f in files)
    assert {i.messages[0].speaker for i in memory.interactions} == {"nanobot"}
    history = loaded(mm, "nanobot:history")
    assert len(history.interactions) == 2
    assert history.interactions[1].messages[0].content.startswith("[session: cli:direct]")


def test_the_workspace_path_finds_the_same_sessions(
    mm: MemoryManager, home: Path, tmp_path: Path
) -> None:
    by_workspace = nanobot.import_nanobot(mm, home / "workspace", tz="UTC")
    other = MemoryManager(tmp_path / "second", init=True)
    by_home = nanobot.import_nanobot(other, home, tz="UTC")
    assert sorted(by_workspace.sessions) == sorted(by_home.sessions)
    for sid in by_home.sessions:
        assert [i.id for i in loaded(mm, sid).interactions] == [
            i.id for i in loaded(other, sid).interactions
        ]


def test_legacy_layout_with_history_md(mm: MemoryManager, legacy: Path) -> None:
    result = nanobot.import_nanobot(mm, legacy, tz="UTC")
    assert result.source == "nanobot <=0.2"
    assert sorted(result.sessions) == sorted(
        ["cli:direct", TELEGRAM, "nanobot:memory", "nanobot:history"]
    )
    telegram = loaded(mm, TELEGRAM)
    assert len(telegram.interactions) == 2
    assert "[tool: read_file" in telegram.interactions[1].text
    history = loaded(mm, "nanobot:history")
    # split as nanobot splits it: the [RAW] entry keeps its message lines
    assert len(history.interactions) == 2
    raw = history.interactions[1].messages[0].content
    assert raw.startswith("[RAW] 2 messages") and "ASSISTANT:" in raw
    assert history.interactions[0].timestamp.isoformat().startswith("2026-01-05T09:14")
    assert len(loaded(mm, "nanobot:memory").interactions) == 1


def test_second_import_makes_no_commit_and_hand_turns_survive(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    nanobot.import_nanobot(mm, home)
    mm.save_interaction(TELEGRAM, "a note I added by hand", "noted")
    head = git(store, "rev-parse", "HEAD")
    again = nanobot.import_nanobot(mm, home)
    # the session files merged before are not read again; memory and history are
    assert again.commit is None and again.added == [] and again.unchanged_files == 2
    assert git(store, "rev-parse", "HEAD") == head
    assert "a note I added by hand" in loaded(mm, TELEGRAM).interactions[-1].text


def test_new_turns_append_and_turns_nanobot_dropped_are_kept(mm: MemoryManager, home: Path) -> None:
    nanobot.import_nanobot(mm, home)
    path = session_file(home, TELEGRAM)
    head = path.read_text().splitlines()[0]
    # nanobot's /new: the file keeps only its metadata line; then a new conversation starts
    path.write_text(head + "\n")
    append(
        path,
        {
            "role": "user",
            "content": "New topic: rotate the DB password",
            "timestamp": "2026-12-02T09:00:00",
        },
        {"role": "assistant", "content": "Use ALTER ROLE.", "timestamp": "2026-12-02T09:00:05"},
    )
    result = nanobot.import_nanobot(mm, home)
    assert len(result.added) == 1 and result.commit is not None
    telegram = loaded(mm, TELEGRAM)
    assert len(telegram.interactions) == 4
    assert "rotate the DB password" in telegram.interactions[-1].text
    # a reply nanobot writes later grows that turn instead of being a conflict
    append(
        path,
        {
            "role": "assistant",
            "content": "And update the app's secret.",
            "timestamp": "2026-12-02T09:00:09",
        },
    )
    grown = nanobot.import_nanobot(mm, home)
    assert grown.extended == [(TELEGRAM, telegram.interactions[-1].id)]
    assert grown.differing == []
    assert "update the app's secret" in loaded(mm, TELEGRAM).interactions[-1].text


def test_a_changed_turn_is_reported_not_overwritten(mm: MemoryManager, home: Path) -> None:
    nanobot.import_nanobot(mm, home)
    path = session_file(home, "cli:direct")
    lines = path.read_text().splitlines()
    reply = json.loads(lines[2])
    reply["content"] = "Something else entirely."
    lines[2] = json.dumps(reply)
    path.write_text("\n".join(lines) + "\n")
    before = loaded(mm, "cli:direct")
    result = nanobot.import_nanobot(mm, home)
    assert result.differing == [("cli:direct", before.interactions[0].id)]
    assert result.commit is None
    assert loaded(mm, "cli:direct").interactions == before.interactions


def test_memory_versions_without_git_are_all_kept(mm: MemoryManager, legacy: Path) -> None:
    nanobot.import_nanobot(mm, legacy)
    memory = legacy / "memory" / "MEMORY.md"
    old = memory.read_text()
    memory.write_text("# Long-term Memory\n\n- Alice moved to Lisbon.\n")  # Dream's rewrite
    nanobot.import_nanobot(mm, legacy)
    texts = [i.messages[0].content for i in loaded(mm, "nanobot:memory").interactions]
    assert len(texts) == 2
    assert texts[0].endswith(old) and "moved to Lisbon" in texts[1]


def test_a_malformed_line_names_file_and_line_and_changes_nothing(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    nanobot.import_nanobot(mm, home)
    head = git(store, "rev-parse", "HEAD")
    path = session_file(home, "cli:direct")
    append(path, {"role": "user", "content": "fine", "timestamp": "2026-12-02T10:00:00"})
    with open(path, "a") as handle:
        handle.write('{"role": "assistant", "content": "cut off\n')
    with pytest.raises(ImportFormatError) as caught:
        nanobot.import_nanobot(mm, home)
    assert f"{path}:7:" in str(caught.value)
    assert git(store, "rev-parse", "HEAD") == head
    assert git(store, "status", "--porcelain") == ""
    out = CliRunner().invoke(cli, ["--repo", str(store), "import", "nanobot", str(home)])
    assert out.exit_code == 1 and f"{path.name}:7" in out.output


def test_dry_run_and_json(home: Path, store: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["--repo", str(store), "init"]).exit_code == 0
    head = git(store, "rev-parse", "HEAD")
    out = runner.invoke(
        cli, ["--repo", str(store), "--json", "import", "nanobot", str(home), "--dry-run"]
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["dry_run"] is True and report["commit"] is None
    assert report["turns_added"] == 11 and report["conflicts"] == []
    assert git(store, "rev-parse", "HEAD") == head
    out = runner.invoke(cli, ["--repo", str(store), "import", "nanobot", str(home)])
    assert out.exit_code == 0 and "11 new turn(s)" in out.output
    assert git(store, "rev-parse", "HEAD") != head


def test_secrets_are_redacted_and_stay_idempotent(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    key = "sk-proj-" + "Zq9xW8vU7tS6" * 4
    append(
        session_file(home, "cli:direct"),
        {"role": "user", "content": f"my key is {key}", "timestamp": "2026-12-02T10:00:00"},
    )
    nanobot.import_nanobot(mm, home)
    stored = next(p for p in git(store, "ls-files").split() if "cli" in p)
    assert key not in (store / stored).read_text()
    assert key not in git(store, "log", "-p")
    assert nanobot.import_nanobot(mm, home).commit is None


@pytest.mark.parametrize("key", ["../x", "a\x00b", "k" * 500, "CON", "/etc/passwd"])
def test_hostile_keys_stay_inside_the_store(
    mm: MemoryManager, home: Path, store: Path, key: str
) -> None:
    folder = next(p for p in (home / "sessions").iterdir() if p.is_dir())
    path = folder / "hostile.jsonl"
    append(
        path,
        {
            "_type": "metadata",
            "key": key,
            "created_at": "2026-12-01T10:00:00",
            "updated_at": "2026-12-01T10:00:00",
            "metadata": {},
        },
        {"role": "user", "content": "hello", "timestamp": "2026-12-01T10:00:00"},
    )
    outside = {f for f in git(store, "ls-files").split("\n") if not f.startswith("sessions/")}
    result = nanobot.import_nanobot(mm, home)
    hostile = [
        sid
        for sid in result.sessions
        if sid not in ("cli:direct", TELEGRAM, "nanobot:memory", "nanobot:history")
    ]
    assert len(hostile) == 1
    files = git(store, "ls-files").split("\n")
    assert {f for f in files if not f.startswith("sessions/")} == outside
    assert len([f for f in files if f.startswith("sessions/")]) == 5
    assert loaded(mm, hostile[0]).interactions[0].text == "user: hello"
    assert nanobot.import_nanobot(mm, home).commit is None  # the same key maps the same way


def test_tools_full_keeps_tool_results_as_their_own_speaker(mm: MemoryManager, home: Path) -> None:
    nanobot.import_nanobot(mm, home, tools="full")
    turn = loaded(mm, TELEGRAM).interactions[1]
    tool = [m for m in turn.messages if m.speaker == "tool"]
    assert len(tool) == 1 and tool[0].content.startswith("[result: read_file]")


def test_bad_arguments_are_clear(mm: MemoryManager, home: Path, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="not a known time zone"):
        nanobot.import_nanobot(mm, home, tz="Mars/Olympus")
    with pytest.raises(Exception, match="no nanobot workspace or sessions"):
        (tmp_path / "empty").mkdir()
        nanobot.import_nanobot(mm, tmp_path / "empty")


def test_watched_paths_cover_sessions_and_memory(home: Path) -> None:
    watched = nanobot.watched_paths(home)
    assert session_file(home, TELEGRAM).parent in watched
    assert home / "workspace" / "memory" / "MEMORY.md" in watched


def test_a_huge_import_is_checked_first_then_committed_in_parts(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    head = git(store, "rev-parse", "HEAD").strip()
    path = session_file(home, "cli:direct")
    with open(path, "a") as handle:
        handle.write("{not json\n")
    # parts of ~100 characters: the first batch stops early, the check pass finds the line
    with pytest.raises(ImportFormatError, match=f"{path}:6"):
        nanobot.import_nanobot(mm, home, part_size=100)
    assert git(store, "rev-parse", "HEAD").strip() == head
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    result = nanobot.import_nanobot(mm, home, part_size=100)
    assert len(result.commits) > 1 and result.commit == result.commits[-1]
    assert git(store, "rev-list", "--count", f"{head}..HEAD").strip() == str(len(result.commits))
    assert "Gitmem-Import-Part: 2" in git(store, "log", "--format=%(trailers)")
    one = MemoryManager(store.parent / "one", init=True)
    whole = nanobot.import_nanobot(one, home)
    for sid in whole.sessions:
        assert loaded(mm, sid).interactions == loaded(one, sid).interactions
    assert nanobot.import_nanobot(mm, home, part_size=100).commits == []


def _import_within(store: Path, source: Path) -> subprocess.CompletedProcess[str]:
    """``gitmem import nanobot`` in its own process: a read that blocks fails the test at
    the timeout instead of hanging the suite."""
    return subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(store), "import", "nanobot", str(source)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_files_that_are_not_regular_or_link_outside_are_left_out(
    mm: MemoryManager, home: Path, store: Path, tmp_path: Path
) -> None:
    folder = session_file(home, "cli:direct").parent
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "folder.jsonl").mkdir()
    private = tmp_path / "private.txt"
    private.write_text(
        '{"key": "stolen", "role": "user", "content": "PRIVATE-DIARY-LINE"}\nPRIVATE-DIARY-LINE\n'
    )
    (folder / "linked.jsonl").symlink_to(private)
    memory = home / "workspace" / "memory" / "MEMORY.md"
    memory.unlink()
    memory.symlink_to(private)
    done = _import_within(store, home)
    assert done.returncode == 0, done.stderr
    for name in ("pipe.jsonl", "folder.jsonl", "linked.jsonl", "MEMORY.md"):
        assert any(
            name in line and line.startswith("warning: ") for line in done.stderr.splitlines()
        ), (name, done.stderr)
    assert "Traceback" not in done.stderr
    assert "PRIVATE-DIARY-LINE" not in git(store, "log", "-p", "--all")


def test_hostile_nesting_is_a_clear_error(mm: MemoryManager, home: Path, store: Path) -> None:
    head = git(store, "rev-parse", "HEAD")
    path = session_file(home, "cli:direct")
    with open(path, "a") as handle:
        handle.write("[" * 200_000 + "\n")
    lines = len(path.read_text().splitlines())
    done = _import_within(store, home)
    assert done.returncode == 1, done.stderr
    assert f"{path}:{lines}: not JSON that can be read: nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr
    assert git(store, "rev-parse", "HEAD") == head


def test_a_reimport_skips_unchanged_files_but_reads_changed_ones(
    mm: MemoryManager, home: Path, store: Path
) -> None:
    first = nanobot.import_nanobot(mm, home)
    assert first.unchanged_files == 0
    again = nanobot.import_nanobot(mm, home)
    assert again.unchanged_files == 2 and again.skipped < first.skipped + 11
    assert git(store, "rev-parse", "HEAD").strip() == first.commit
    state = list((store / ".git" / "gitmem").glob("import-digests-nanobot-*.json"))
    assert len(state) == 1 and git(store, "status", "--porcelain") == ""
    # a changed file is read again, an unchanged one still is not
    append(
        session_file(home, TELEGRAM),
        {"role": "user", "content": "one more", "timestamp": "2026-05-01T10:00:00"},
        {"role": "assistant", "content": "sure", "timestamp": "2026-05-01T10:00:05"},
    )
    third = nanobot.import_nanobot(mm, home)
    assert third.unchanged_files == 1 and third.commit is not None
    # a store reset to before the import reads every file again
    git(store, "reset", "-q", "--hard", "HEAD~2")
    fourth = nanobot.import_nanobot(mm, home)
    assert fourth.unchanged_files == 0 and fourth.commit is not None
    assert nanobot.import_nanobot(mm, home, dry_run=True).unchanged_files == 2
