"""The CLI and library surface under awkward input: special files, huge ranges, --json
errors, quoting in hints, empty turns and odd agent names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import SessionNotFound, ValidationError
from gitmem.importers import locomo
from tests.conftest import git


def run(store: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real ``gitmem`` command in a subprocess (a hang fails the test, never blocks it)."""
    return subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(store), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_special_file_named_like_a_session_is_reported_not_opened(store: Path, kind: str) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("x", "marathon training plan", "run slowly")
    mm.close()
    target = store / "sessions" / "11" / "x.md"
    target.unlink()
    if kind == "folder":
        target.mkdir()
    else:
        os.mkfifo(target)
    out = run(store, "check")
    assert out.returncode == 1, out.stderr
    assert "sessions/11/x.md:1: not a regular file" in out.stdout
    assert "Traceback" not in out.stderr
    out = run(store, "save", "x", "--user", "more", "--assistant", "text")
    assert out.returncode == 1
    assert "sessions/11/x.md:1: not a regular file" in out.stderr
    assert "Traceback" not in out.stderr
    out = run(store, "search", "marathon")  # the index never reads through the FIFO either
    assert out.returncode == 0, out.stderr
    assert "marathon" in out.stdout


def test_check_reads_the_archive_parts_too(store: Path) -> None:
    # `gitmem check` validated sessions/ only: a broken archive part (which load_memory(...,
    # include_archive=True) reads) or a FIFO in its place passed as clean
    mm = MemoryManager.init(store)
    mm.save_interaction("x", "marathon training plan", "run slowly")
    mm.close()
    (store / "archive" / "11").mkdir(parents=True)
    (store / "archive" / "95").mkdir()
    (store / "archive" / "11" / "x.md").write_text("# Session: x\n\n### not a time\n")
    os.mkfifo(store / "archive" / "95" / "y.md")
    (store / "archive" / "bad name.md").write_text("# Session: bad name\n")
    out = run(store, "check")
    assert out.returncode == 1, out.stderr
    assert "archive/11/x.md:3:" in out.stdout
    assert "archive/95/y.md:1: not a regular file" in out.stdout
    assert "archive/bad name.md:1: file name is not an encoded session id" in out.stdout
    git(store, "add", "archive/11/x.md")
    git(store, "commit", "-qm", "a broken archive part", "--no-verify")
    (store / "archive" / "11" / "x.md").unlink()
    mm = MemoryManager(store)
    problems = mm.check(commit=mm.head())
    assert {p.path for p in problems} == {"archive/11/x.md"} and 3 in {p.line for p in problems}


def test_a_huge_conversation_range_is_refused_before_it_is_built() -> None:
    with pytest.raises(ValidationError, match="conversations 0-9"):
        locomo.parse_range("1,2,0-1000000000000", 10)
    with pytest.raises(ValidationError, match="conversations 0-9"):
        locomo.parse_range("0-3000000000", 10)
    with pytest.raises(ValidationError, match="backwards"):
        locomo.parse_range("3-1", 10)
    assert locomo.parse_range("2,0-1,1", 10) == [2, 0, 1]
    assert git  # the helper is used by the CLI tests below


@pytest.mark.parametrize("spec", ["0-", "-", "1-,2", "\u0663", "1_0", "+1"])
def test_a_conversation_range_with_a_missing_bound_or_odd_digits_is_refused(spec: str) -> None:
    # "0-" read as "0" imported one conversation where the person meant "0 to the end"
    with pytest.raises(ValidationError, match="use a range like 0-2"):
        locomo.parse_range(spec, 20)


def _leaf_commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _leaf_commands(command, f"{prefix}{name} ")
        else:
            found.append((prefix + name, command))
    return found


def test_every_command_takes_json() -> None:
    commands = _leaf_commands(cli)
    assert {"init", "demo", "clone", "remote add", "hooks install"} <= {n for n, _ in commands}
    for name, command in commands:
        assert any("--json" in p.opts for p in command.params if isinstance(p, click.Option)), name


@pytest.mark.parametrize("where", ["global", "command"])
def test_json_errors_are_one_document_on_stdout(store: Path, where: str) -> None:
    runner = CliRunner()
    flag = ["--json"]
    init = runner.invoke(cli, ["--repo", str(store), "init", "--json"])
    assert init.exit_code == 0, init.output
    assert json.loads(init.stdout)["path"] == str(store.resolve())
    args = (flag if where == "global" else []) + ["--repo", str(store), "show", "nope"]
    out = runner.invoke(cli, args + ([] if where == "global" else flag))
    assert out.exit_code == 1
    assert json.loads(out.stdout) == {
        "error": f"no session 'nope' in {store.resolve()}",
        "kind": "SessionNotFound",
    }
    out = runner.invoke(cli, ["--repo", str(store), "save", "--json"])  # no SESSION_ID
    assert out.exit_code == 2
    assert json.loads(out.stdout)["kind"] == "MissingParameter"
    out = runner.invoke(cli, ["--json", "--bogus", "list"])
    assert out.exit_code == 2
    assert json.loads(out.stdout)["kind"] == "NoSuchOption"
    out = runner.invoke(cli, ["--repo", str(store), "remote", "add", "o", "/nowhere", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"name": "o", "url": "/nowhere"}


def test_demo_speaks_json(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["demo", "--json", "--path", str(tmp_path / "demo")])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["path"] == str(tmp_path / "demo") and data["log"]


def _locomo(path: Path, dia_id: str = "D1:1", samples: int = 1) -> Path:
    data = [
        {
            "sample_id": f"c{n}",
            "conversation": {
                "speaker_a": "Ana",
                "speaker_b": "Ben",
                "session_1_date_time": "1:15 pm on 3 May, 2023",
                "session_1": [{"speaker": "Ana", "dia_id": dia_id, "text": "the pottery class"}],
            },
            "qa": [],
        }
        for n in range(samples)
    ]
    path.write_text(json.dumps(data))
    return path


def test_hints_quote_session_ids_for_the_shell(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("my notes; rm -rf x", "pottery class", "yes")
    mm.delete_session("my notes; rm -rf x")
    with pytest.raises(SessionNotFound) as caught:
        mm.blame("my notes; rm -rf x")
    assert "`gitmem restore 'my notes; rm -rf x'`" in str(caught.value)


def test_messages_carry_no_pydantic_wording(store: Path, tmp_path: Path) -> None:
    mm = MemoryManager.init(store)
    with pytest.raises(ValidationError) as caught:
        mm.save_interaction("s", "hi there", "hello", tags=["a,b"])
    assert "Value error" not in str(caught.value)
    assert "tags: participant/tag may not contain a comma: 'a,b'" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        locomo.load(_locomo(tmp_path / "bad.json", dia_id="!bad id"))
    assert "validation error for" not in str(caught.value)
    assert "Value error" not in str(caught.value)
    assert "sample 0" in str(caught.value) and "'!bad id'" in str(caught.value)


def test_a_message_that_is_not_a_mapping_is_a_clear_error(store: Path) -> None:
    # a plain string crashed with AttributeError: 'str' object has no attribute 'get'
    mm = MemoryManager.init(store)
    with pytest.raises(ValidationError, match="message 1: expected a Message or a mapping"):
        mm.save_messages("s", [{"speaker": "Ana", "content": "hi"}, "hello"])  # type: ignore[list-item]
    assert mm.load_memory("s") is None


def test_an_empty_turn_is_refused(store: Path) -> None:
    mm = MemoryManager.init(store)
    head = mm.head()
    with pytest.raises(ValidationError, match="every message of this turn is empty"):
        mm.save_interaction("s", "", "")
    with pytest.raises(ValidationError, match="empty"):
        mm.save_messages("s", [{"speaker": "Ana", "content": "  \n"}])
    assert mm.head() == head
    out = run(store, "save", "s", "--user", "", "--assistant", "")
    assert out.returncode == 1 and "empty" in out.stderr and "Traceback" not in out.stderr
    assert mm.save_interaction("s", "a question", "") is not None  # one side may be empty


def test_an_explicit_empty_interaction_id_is_refused(store: Path) -> None:
    # --id '' was taken as "no id given" and a generated one used silently
    mm = MemoryManager.init(store)
    head = mm.head()
    with pytest.raises(ValidationError, match="interaction id '' must be 1-64 characters"):
        mm.save_interaction("s", "a question", "an answer", interaction_id="")
    out = run(store, "save", "s", "--user", "q", "--assistant", "a", "--id", "")
    assert out.returncode == 1 and "interaction id ''" in out.stderr
    assert mm.head() == head


def test_agent_names_make_sane_authors(store: Path) -> None:
    MemoryManager.init(store).close()
    with pytest.raises(ValidationError, match="agent name '' is empty"):
        MemoryManager(store, agent="")
    out = run(store, "--agent", "", "save", "s", "--user", "q", "--assistant", "a")
    assert out.returncode == 1 and "agent name" in out.stderr
    mm = MemoryManager(store, agent="bot <x@y.org>")
    mm.save_interaction("s", "first question", "answer")
    assert git(store, "log", "-1", "--format=%an|%ae").strip() == "bot|x@y.org"
    assert "Gitmem-Agent: bot\n" in git(store, "log", "-1", "--format=%B")
    mm = MemoryManager(store, agent="evil\nGitmem-Op: delete <")
    mm.save_interaction("s", "second question", "answer")
    assert git(store, "log", "-1", "--format=%an|%ae").strip() == (
        "evil Gitmem-Op: delete|evil-Gitmem-Op-delete@gitmem.local"
    )
    assert git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == "save"


def test_import_reports_progress_on_stderr_only_without_json(store: Path, tmp_path: Path) -> None:
    source = _locomo(tmp_path / "two.json", samples=2)
    MemoryManager.init(store).close()
    out = run(store, "import", "locomo", str(source))
    assert out.returncode == 0, out.stderr
    assert "conversation 1/2 (c0): 1 sessions, 1 turns so far" in out.stderr
    assert "conversation 2/2 (c1)" in out.stderr
    out = run(store, "--json", "import", "locomo", str(source))
    assert out.returncode == 0 and out.stderr == ""
    assert json.loads(out.stdout)["sessions"] == ["c0-session_1", "c1-session_1"]
