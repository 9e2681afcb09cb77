"""The time-machine commands of the gitmem CLI, end to end, checked with the real git."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.cli.base import git_date
from gitmem.models import Summary
from tests.conftest import git


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.output if code == 0 else result.stderr


@pytest.fixture
def repo(store: Path) -> tuple[str, str]:
    run("init", str(store))
    return ("--repo", str(store))


def save(repo: tuple[str, str], session: str, n: int, agent: str = "bot") -> str:
    return run(
        *repo,
        "--agent",
        agent,
        "save",
        session,
        "--user",
        f"question {n}",
        "--assistant",
        f"answer {n}",
        "--id",
        f"t{n}",
        "--timestamp",
        f"2024-04-15T15:{n:02d}:00+00:00",
    ).strip()


def head(store: Path) -> str:
    return git(store, "rev-parse", "HEAD").strip()


def clean(store: Path) -> None:
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")


def bad_summary(store: Path) -> str:
    llm = MemoryManager(store, agent="llm", model="bad-model")
    session = llm.load_memory("s")
    assert session is not None
    summary = Summary(text="nonsense summary", generated=session.last_active, model="bad-model")
    sha = llm.put_session(session.model_copy(update={"summary": summary}), op="summarize")
    llm.close()
    assert sha
    return sha


def test_log_diff_blame_revert_the_bad_summary(repo: tuple[str, str], store: Path) -> None:
    for n in range(3):
        save(repo, "s", n)
    bad = bad_summary(store)
    later = [save(repo, "s", n) for n in range(3, 8)]

    text = run(*repo, "log", "s")
    lines = text.splitlines()
    assert len(lines) == 9
    assert lines[0].startswith(later[-1][:12]) and "save" in lines[0]
    assert lines[5].startswith(bad[:12]) and "llm (bad-model)" in lines[5]
    assert "summarize" in lines[5]
    rows = json.loads(run(*repo, "log", "s", "--model", "bad-model", "--json"))
    assert [r["sha"] for r in rows] == [bad]
    assert rows[0]["trailers"]["Gitmem-Agent"] == ["llm"]
    assert json.loads(run(*repo, "--json", "log", "--op", "init"))[0]["op"] == "init"
    assert len(json.loads(run(*repo, "log", "--limit", "2", "--json"))) == 2
    assert "changed summary" not in run(*repo, "log", "s", "--limit", "1", "--changes")
    assert "s: added summary" in run(*repo, "log", "s", "--agent", "llm", "--changes")

    patch = run(*repo, "diff", "s", f"{bad}~1", bad)
    assert "-> nonsense summary" not in patch and "+> nonsense summary" in patch
    structured = run(*repo, "diff", "s", f"{bad}~1", bad, "--structured")
    assert "~ summary" in structured and "new: 'nonsense summary'" in structured
    data = json.loads(run(*repo, "diff", "s", "HEAD~5", "--json"))
    assert data["sessions"][0]["interactions_added"] == ["t3", "t4", "t5", "t6", "t7"]
    assert data["unified"].startswith("diff --git a/sessions/a0/s.md b/sessions/a0/s.md")

    blame = run(*repo, "blame", "s")
    assert blame.splitlines()[-1].startswith(f"summary\t{bad[:12]}")
    assert "llm (bad-model)" in blame.splitlines()[-1]
    entries = json.loads(run(*repo, "blame", "s", "--json"))
    assert [e["interaction_id"] for e in entries[:-1]] == [f"t{n}" for n in range(8)]

    out = run(*repo, "revert", bad)
    sha = out.strip().split()[-1]
    assert sha == head(store)
    trailers = git(store, "log", "-1", "--format=%(trailers)")
    assert "Gitmem-Op: revert" in trailers and f"Gitmem-Reverts: {bad}" in trailers
    shown = json.loads(run(*repo, "show", "s", "--json"))
    assert shown["summary"] is None
    assert [i["id"] for i in shown["interactions"]] == [f"t{n}" for n in range(8)]
    assert "already undone" in run(*repo, "revert", bad)
    clean(store)


def test_rollback_show_at_and_list_at(repo: tuple[str, str], store: Path) -> None:
    first = save(repo, "s", 0)
    save(repo, "s", 1)
    save(repo, "other", 2)
    assert "question 1" not in run(*repo, "show", "s", "--at", first)
    assert "question 1" in run(*repo, "show", "s", "--at", "HEAD")
    listed = json.loads(run(*repo, "list", "--at", first, "--json"))
    assert [r["id"] for r in listed] == ["s"]
    out = run(*repo, "rollback", "s", "--to", first)
    assert out.startswith("rolled back: ")
    path = "sessions/a0/s.md"
    assert git(store, "show", f"HEAD:{path}") == git(store, "show", f"{first}:{path}")
    assert f"Gitmem-Rollback-To: {first}" in git(store, "log", "-1", "--format=%(trailers)")
    assert "nothing written" in run(*repo, "rollback", "s", "--to", first)
    clean(store)


def test_undo_an_agent_dry_run_first(repo: tuple[str, str], store: Path) -> None:
    save(repo, "s", 0)
    save(repo, "s", 1, agent="rogue")
    save(repo, "junk", 2, agent="rogue")
    save(repo, "s", 3)
    before = head(store)
    plan = run(*repo, "undo", "--agent", "rogue", "--since", "2000-01-01", "--dry-run")
    assert plan.startswith("would undo 2 commit(s):")
    assert "junk (removed)" in plan and "- interaction t1" in plan
    assert head(store) == before
    data = json.loads(run(*repo, "undo", "--agent", "rogue", "--since", "2000-01-01", "--json"))
    assert data["dry_run"] is False and data["commit"] == head(store)
    assert len(data["reverted"]) == 2
    shown = json.loads(run(*repo, "show", "s", "--json"))
    assert [i["id"] for i in shown["interactions"]] == ["t0", "t3"]
    run(*repo, "show", "junk", code=1)
    assert "no commits match" in run(*repo, "undo", "--agent", "nobody", "--since", "2000-01-01")
    clean(store)


def test_restore_a_deleted_session(repo: tuple[str, str], store: Path) -> None:
    save(repo, "s", 0)
    MemoryManager(store).delete_session("s")
    run(*repo, "show", "s", code=1)
    out = run(*repo, "restore", "s")
    assert out.startswith("restored: ")
    assert "Gitmem-Op: restore" in git(store, "log", "-1", "--format=%(trailers)")
    assert "question 0" in run(*repo, "show", "s")
    err = run(*repo, "restore", "s", code=1)
    assert "exists" in err
    clean(store)


def test_bad_input_is_a_clear_error_and_writes_nothing(
    repo: tuple[str, str], store: Path, tmp_path: Path
) -> None:
    save(repo, "s", 0)
    save(repo, "s", 1)
    other = tmp_path / "other"
    run("init", str(other))
    run("--repo", str(other), "save", "elsewhere", "--user", "q")
    foreign = git(other, "rev-parse", "HEAD").strip()
    before = head(store)
    cases = [
        (("revert", "no-such-rev"), "unknown revision 'no-such-rev'"),
        (("revert", foreign), "another repository"),
        (("rollback", "s", "--to", "1999-01-01"), "no commit at or before '1999-01-01'"),
        (("rollback", "s", "--to", foreign), "unknown revision"),
        (("show", "s", "--at", "1999-01-01"), "give a later date"),
        (("diff", "s", "no-such-rev"), "unknown revision"),
        (("log", "never-existed"), "no session 'never-existed'"),
        (("blame", "never-existed"), "no session 'never-existed'"),
        (("rollback", "never-existed", "--to", "HEAD"), "no session 'never-existed'"),
        (("restore", "never-existed"), "no session 'never-existed'"),
        (("diff", "never-existed", "HEAD~1"), "no session 'never-existed'"),
    ]
    for args, message in cases:
        err = run(*repo, *args, code=1)
        assert message in err, (args, err)
        assert err.startswith("error: ")
    # usage errors exit 2
    run(*repo, "diff", "s", code=2)
    run(*repo, "diff", "s", "a", "b", "c", code=2)
    run(*repo, "undo", "--since", "2000-01-01", code=2)
    run(*repo, "undo", "--agent", "x", code=2)
    run(*repo, "log", "--since", "a fortnight back", code=2)
    run(*repo, "rollback", "s", code=2)
    assert head(store) == before
    assert git(store, "rev-list", "--count", "HEAD").strip() == "3"
    clean(store)


def test_store_wide_diff(repo: tuple[str, str], store: Path) -> None:
    start = head(store)
    save(repo, "a", 0)
    save(repo, "b", 1)
    out = run(*repo, "diff", "--all", start, "--structured")
    assert out.splitlines()[0] == "a (added)" and "b (added)" in out
    patch = run(*repo, "diff", "--all", start, "HEAD")
    assert "+++ b/sessions/86/a.md" in patch and "+++ b/sessions/e9/b.md" in patch


def test_log_takes_git_spellings(repo: tuple[str, str], store: Path) -> None:
    for n in range(3):
        save(repo, "s", n)
    commits = git(store, "log", "--format=%H %s").splitlines()
    assert len(run(*repo, "log", "-n", "2").splitlines()) == 2
    assert len(run(*repo, "log", "--max-count", "1").splitlines()) == 1
    shown = run(*repo, "log", "--oneline", "-n", "3").splitlines()
    assert shown == [f"{line[:7]} {line[41:]}" for line in commits[:3]]
    assert run(*repo, "log", "--oneline", "s", "--since", "2 weeks ago").count("\n") == 3
    assert run(*repo, "log", "--after", "1.hour.ago", "s", "--oneline").count("\n") == 3
    assert "no commits match" in run(*repo, "log", "--until", "yesterday")
    assert "no commits match" in run(*repo, "log", "--before", "last week")


def test_git_dates_count_months_on_the_calendar() -> None:
    now = datetime(2024, 3, 31, 12, 0, tzinfo=UTC)
    assert git_date("1 month ago", now) == datetime(2024, 2, 29, 12, 0, tzinfo=UTC)
    assert git_date("2 years ago", now) == datetime(2022, 3, 31, 12, 0, tzinfo=UTC)
    assert git_date("3 days ago", now) == datetime(2024, 3, 28, 12, 0, tzinfo=UTC)
    assert git_date("yesterday", now) == datetime(2024, 3, 30, tzinfo=UTC)
    assert git_date("@0", now) == datetime(1970, 1, 1, tzinfo=UTC)
    assert git_date("a fortnight back", now) is None
