"""Edges of the interface: datetime parameters given strings, date options' errors
(exit code, masked values), agent names (length, bidi controls), the merge driver's secret
patterns."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ValidationError
from gitmem.format import parse as markdown
from gitmem.models import Session, Summary
from tests.conftest import git


def test_datetime_parameters_take_iso_strings_and_refuse_other_types(store: Path) -> None:
    # a string gave AttributeError: 'str' object has no attribute 'utcoffset'
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "first question", "answer", timestamp="2024-04-15T10:00:00")
    session = mm.load_memory("s")
    assert session is not None
    assert session.interactions[0].timestamp == datetime(2024, 4, 15, 10, tzinfo=UTC)
    assert [s.id for s in mm.list_sessions(since="2024-04-01")] == ["s"]
    assert mm.list_sessions(until="2024-04-01") == []
    assert mm.search("question", since="2024-04-01")
    assert len(mm.history(since="2024-04-01")) >= 1
    for call, name in [
        (lambda: mm.list_sessions(since="x"), "since"),
        (lambda: mm.list_sessions(until="x"), "until"),
        (lambda: mm.save_interaction("s", "q", "a", timestamp="x"), "timestamp"),
        (lambda: mm.history(since="x"), "since"),
        (lambda: mm.search("question", until="x"), "until"),
    ]:
        with pytest.raises(ValidationError, match=rf"^{name}: 'x' is not an ISO date"):
            call()
    with pytest.raises(
        ValidationError,
        match=r"^since: expected a datetime or an ISO date "
        r"string, not int",
    ):
        mm.list_sessions(since=5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"^timestamp: .* not list"):
        mm.save_interaction("s", "q", "a", timestamp=[])  # type: ignore[arg-type]
    assert len(git(store, "log", "--format=%H").split()) == 2  # init + the one good save


def _cli(store: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--repo", str(store), *args])


@pytest.mark.parametrize(
    "args",
    [
        ["save", "s", "--user", "q", "--assistant", "a", "--timestamp", "2024-13-45"],
        ["list", "--since", "2024-13-45"],
        ["list", "--at", "2024-13-45"],
        ["show", "s", "--at", "2024-13-45"],
        ["log", "--until", "2024-13-45"],
        ["search", "question", "--since", "2024-13-45"],
        ["rollback", "s", "--to", "2024-13-45"],
        ["restore", "s", "--rev", "2024-13-45"],
        ["undo", "--agent", "bot", "--since", "2024-13-45"],
    ],
)
def test_a_bad_date_is_a_usage_error_naming_the_option_everywhere(
    store: Path, args: list[str]
) -> None:
    # show --at exited 1 with a RevisionNotFound while log --until exited 2
    MemoryManager.init(store).save_interaction("s", "a question", "an answer")
    out = _cli(store, *args)
    assert out.exit_code == 2, out.output
    option = next(a for a in args if a.startswith("--") and args[args.index(a) + 1] == "2024-13-45")
    assert f"Invalid value for {option}: not an ISO date/time: '2024-13-45'" in out.stderr


TOKEN = "ghp_" + "A1b2C3d4" * 4 + "E5f6"


@pytest.mark.parametrize(
    "args",
    [
        ["save", "s", "--user", "q", "--assistant", "a", "--timestamp", TOKEN],
        ["log", "--since", TOKEN],
        ["list", "--until", "x" * 41],
        ["show", "s", "--at", TOKEN],
        ["show", "s", "--at", "y" * 41],
        ["rollback", "s", "--to", TOKEN],
        ["save", "s", "--user", "q", "--assistant", "a", "--timestamp", "2024-01-01 acme-Zq93"],
    ],
)
def test_date_option_errors_do_not_repeat_a_token(store: Path, args: list[str]) -> None:
    mm = MemoryManager.init(store)
    git(store, "config", "gitmem.secrets.pattern", "acme=acme-[A-Za-z0-9]{4}")
    mm.save_interaction("s", "a question", "an answer")
    value = args[-1]
    out = _cli(store, *args)
    assert out.exit_code in (1, 2), out.output
    assert value not in out.output and value not in out.stderr
    assert f"a value of {len(value)} characters (not shown" in out.stderr


def test_agent_names_are_capped_and_lose_format_characters(store: Path) -> None:
    # a 20,000-character author was accepted, and U+202E (right-to-left override) was kept
    MemoryManager.init(store).close()
    with pytest.raises(
        ValidationError, match="agent name is 20000 characters long; give at most 200"
    ):
        MemoryManager(store, agent="a" * 20_000)
    out = _cli(store, "--agent", "b" * 201, "save", "s", "--user", "q", "--assistant", "a")
    assert out.exit_code == 1 and "agent name is 201 characters long" in out.stderr
    assert "b" * 201 not in out.stderr
    mm = MemoryManager(store, agent="evil\u202egnp.exe\u200b")
    mm.save_interaction("s", "a question", "an answer")
    assert git(store, "log", "-1", "--format=%an|%ae").strip() == (
        "evilgnp.exe|evilgnp.exe@gitmem.local"
    )
    assert "Gitmem-Agent: evilgnp.exe\n" in git(store, "log", "-1", "--format=%B")
    with pytest.raises(ValidationError, match=r"agent email 'x\\u202e@y\.org' is not an address"):
        MemoryManager(store, agent="bot <x\u202e@y.org>")
    with pytest.raises(ValidationError, match="agent email of 300 characters is not an address"):
        MemoryManager(store, agent="bot", email="e" * 290 + "@y.example")
    with pytest.raises(ValidationError, match=r"agent name '\\u202e' is empty"):
        MemoryManager(store, agent="\u202e")
    assert len(git(store, "log", "--format=%H").split()) == 2


def test_the_merge_driver_redacts_with_the_stores_own_patterns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the driver redacted its notes with the default patterns only: a token of a kind the
    # store configured (`git config gitmem.secrets.pattern`) was printed on every `git pull`
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    url = tmp_path / "memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(url)], check=True)
    t0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)
    a = MemoryManager.clone(url.as_uri(), tmp_path / "a", agent="alice")
    a.save_interaction("plans", "q0", "a0", timestamp=t0)
    a.push()
    wired = tmp_path / "wired"
    git(tmp_path, "clone", "-q", url.as_uri(), wired.name)
    MemoryManager(wired).close()  # wires the driver into the clone's config
    git(wired, "config", "gitmem.secrets.pattern", "acme=acme-[A-Za-z0-9]{12}")
    token = "acme-Zq93Xy71Pp0K"
    path = wired / "sessions" / "3a" / "plans.md"
    session = markdown.parse(path.read_text())
    summary = Summary(text=f"deploy with {token}", generated=t0 + timedelta(hours=1))
    path.write_text(markdown.render(session.model_copy(update={"summary": summary})))
    git(wired, "commit", "-qam", "a summary written by hand")
    current = a.load_memory("plans")
    assert current is not None
    newer = Summary(text="plans for the trip", generated=t0 + timedelta(hours=2))
    a.put_session(current.model_copy(update={"summary": newer}), op="summarize")
    a.push()
    pulled = subprocess.run(
        ["git", "pull", "--no-rebase", "--no-edit", "origin", "main"],
        cwd=wired,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode == 0, pulled.stderr
    assert "both sides rewrote the summary" in pulled.stderr
    assert token not in pulled.stderr and token not in pulled.stdout
    assert "[REDACTED:acme]" in pulled.stderr
    assert markdown.parse(path.read_text()).summary == newer


def test_revisions_and_now_take_iso_strings_and_refuse_other_types(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "a question", "an answer", timestamp="2024-04-15T10:00:00")
    assert mm.summarize_idle("2h", now="2024-04-14") == []  # before the turn: not idle
    assert mm.maybe_summarize("s", now="2024-04-15T10:05:00") is None
    with pytest.raises(ValidationError, match=r"^now: 'x' is not an ISO date"):
        mm.summarize_idle("2h", now="x")
    failed = mm.maybe_summarize("s", now="x")  # never raises: the failure is the outcome
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and failed.error.startswith("now: 'x' is not an ISO date")
    for call in (lambda: mm.resolve(7), lambda: mm.at(7), lambda: mm.rollback("s", to=7)):
        with pytest.raises(
            ValidationError,
            match=r"^revision: expected a commit id, an ISO "
            r"date string or a datetime, not int",
        ):
            call()  # type: ignore[arg-type]


def test_an_unusable_secret_setting_warns_but_the_driver_still_merges(store: Path) -> None:
    MemoryManager.init(store).close()
    git(store, "config", "gitmem.secrets.pattern", "no-equals-sign")
    t0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)
    base = Session(id="s", created=t0, last_active=t0)
    sides = {
        "O": base,
        "A": base.model_copy(update={"summary": Summary(text="ours", generated=t0)}),
        "B": base.model_copy(
            update={"summary": Summary(text="theirs", generated=t0 + timedelta(hours=1))}
        ),
    }
    for name, session in sides.items():
        (store / name).write_text(markdown.render(session))
    done = subprocess.run(
        [sys.executable, "-m", "gitmem", "merge-file", "O", "A", "B", "sessions/a0/s.md"],
        cwd=store,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert done.returncode == 0, done.stderr
    assert (
        "gitmem: git config gitmem.secrets: gitmem.secrets.pattern 'no-equals-sign' is "
        "not kind=regex; default patterns used"
    ) in done.stderr
    merged = markdown.parse((store / "A").read_text())
    assert merged.summary is not None and merged.summary.text == "theirs"
