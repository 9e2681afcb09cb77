"""gitmem writes only into gitmem stores: a code repository or a clone checked out on a
branch with no commits is refused (and adopted only on purpose); a plain `git clone` of a
remote gitmem pushed to lands on the memory branch; the CLI finds the store from a
subfolder as git does."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import NotAStore, RepositoryError
from tests.conftest import git
from tests.test_sync_remotes import daemon, this_gitmem

__all__ = ["daemon", "this_gitmem"]  # fixtures, imported for pytest


@pytest.fixture
def code(tmp_path: Path) -> Path:
    """A person's code repository with a committed .gitattributes of its own."""
    repo = tmp_path / "project"
    git(tmp_path, "init", "-q", "-b", "main", "project")
    (repo / "main.py").write_text("print('hi')\n")
    (repo / ".gitattributes").write_text("*.py text eol=lf")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "code")
    return repo


def _state(repo: Path) -> tuple[str, str, str]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain"),
        (repo / ".git" / "config").read_text(),
    )


def test_a_code_repository_is_refused_untouched(code: Path) -> None:
    before = _state(code)
    with pytest.raises(NotAStore, match=r"is not a gitmem store.*init --here"):
        MemoryManager(code)
    with pytest.raises(NotAStore, match="adopt=True"):
        MemoryManager.init(code)
    result = CliRunner().invoke(
        cli, ["--repo", str(code), "save", "s", "--user", "hi", "--assistant", "yo"]
    )
    assert result.exit_code == 1 and "not a gitmem store" in result.output
    assert _state(code) == before  # no commit, no file, no merge config
    assert not (code / "sessions").exists()


def test_init_here_adopts_a_repository_on_purpose(
    code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(code)
    result = CliRunner().invoke(cli, ["init", "--here"])
    assert result.exit_code == 0, result.output
    attributes = (code / ".gitattributes").read_text()
    assert attributes.startswith("*.py text eol=lf\n") and "merge=gitmem" in attributes
    assert git(code, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == "init"
    assert (code / "main.py").exists()
    mm = MemoryManager(code)
    mm.save_interaction("s", "hello", "hi")
    assert git(code, "ls-files", "sessions").split() == ["sessions/a0/s.md"]  # fans out
    assert git(code, "rev-list", "--count", "HEAD").strip() == "3"
    assert git(code, "status", "--porcelain") == ""
    MemoryManager.init(code, adopt=True)  # adopting twice adds nothing
    assert git(code, "rev-list", "--count", "HEAD").strip() == "3"


def test_an_empty_repository_needs_init(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "empty")
    with pytest.raises(NotAStore, match="gitmem init"):
        MemoryManager(tmp_path / "empty")
    MemoryManager.init(tmp_path / "empty").save_interaction("s", "hello", "hi")
    assert MemoryManager(tmp_path / "empty").load_memory("s") is not None


def _remote_on_master(folder: Path) -> Path:
    """A bare repository whose HEAD names ``master``, a branch it never gets."""
    bare = folder / "memory.git"
    git(folder, "init", "-q", "--bare", "-b", "master", str(bare))
    return bare


def test_a_clone_checked_out_on_a_branch_without_commits_is_refused(tmp_path: Path) -> None:
    bare = _remote_on_master(tmp_path)
    mm = MemoryManager.init(tmp_path / "a")
    mm.save_interaction("s", "hello", "hi")
    git(mm.path, "push", "-q", str(bare), "main")  # plain git: the remote's HEAD stays unborn
    git(tmp_path, "clone", "-q", str(bare), "b")
    clone = tmp_path / "b"
    with pytest.raises(NotAStore, match=r"'master' has no commits.*origin/main.*git checkout"):
        MemoryManager(clone)
    with pytest.raises(NotAStore):
        MemoryManager.init(clone)
    assert git(clone, "rev-parse", "--verify", "--quiet", "HEAD", check=False) == ""
    git(clone, "checkout", "-q", "main")
    assert MemoryManager(clone).load_memory("s") is not None


def test_push_points_an_unborn_bare_remote_head_at_the_memory_branch(tmp_path: Path) -> None:
    bare = _remote_on_master(tmp_path)
    mm = MemoryManager.init(tmp_path / "a")
    mm.save_interaction("s", "hello", "hi")
    mm.remote_add("origin", bare.as_uri())
    assert mm.push()
    assert git(bare, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    git(tmp_path, "clone", "-q", str(bare), "b")  # a plain clone lands on the memory
    assert git(tmp_path / "b", "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert MemoryManager(tmp_path / "b").load_memory("s") is not None


def test_push_leaves_a_bare_remote_head_that_names_a_real_branch(tmp_path: Path) -> None:
    bare = tmp_path / "memory.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    mm = MemoryManager.init(tmp_path / "a")
    mm.save_interaction("s", "hello", "hi")
    mm.remote_add("origin", str(bare))
    mm.push()
    git(mm.path, "branch", "-q", "other")
    mm.push("origin", "other")
    assert git(bare, "symbolic-ref", "HEAD").strip() == "refs/heads/main"


def test_a_network_remote_without_a_default_branch_is_reported(
    tmp_path: Path, daemon: tuple[Path, str], caplog: pytest.LogCaptureFixture
) -> None:
    base, url = daemon
    _remote_on_master(base)
    mm = MemoryManager.init(tmp_path / "a")
    mm.save_interaction("s", "hello", "hi")
    mm.remote_add("origin", f"{url}/memory.git")
    with caplog.at_level(logging.WARNING, logger="gitmem.sync.remotes"):
        assert mm.push()
    assert "has no default branch" in caplog.text and "--branch main" in caplog.text
    caplog.clear()
    mm.save_interaction("s", "again", "yes")
    with caplog.at_level(logging.WARNING, logger="gitmem.sync.remotes"):
        mm.push()  # reported once, on the push that creates the branch
    assert caplog.text == ""
    # gitmem's own clone still lands on the memory branch
    cloned = MemoryManager.clone(f"{url}/memory.git", tmp_path / "b")
    assert len(cloned.load_memory("s").interactions) == 2  # type: ignore[union-attr]


def test_the_cli_finds_the_store_from_a_subfolder(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    MemoryManager.init(store).save_interaction("s", "hello", "hi")
    deep = store / "sessions" / "notes"
    deep.mkdir()
    monkeypatch.chdir(deep)
    result = CliRunner().invoke(cli, ["list"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("s\t")
    result = CliRunner().invoke(cli, ["save", "t", "--user", "from below", "--assistant", "ok"])
    assert result.exit_code == 0, result.output
    assert (store / "sessions" / "8e" / "t.md").exists() and not (deep / "sessions").exists()


def test_an_explicit_subfolder_names_the_store(store: Path) -> None:
    MemoryManager.init(store).save_interaction("s", "hello", "hi")
    with pytest.raises(RepositoryError, match=rf"inside the repository at {store}"):
        MemoryManager(store / "sessions")
    result = CliRunner().invoke(cli, ["--repo", str(store / "sessions"), "list"])
    assert result.exit_code == 1 and f"open {store} itself" in result.output


def test_the_adopt_hint_quotes_the_folder_for_the_shell(tmp_path: Path) -> None:
    code = tmp_path / "my project; touch x"
    git(tmp_path, "init", "-q", "-b", "main", str(code))
    (code / "main.py").write_text("print('hi')\n")
    git(code, "add", ".")
    git(code, "commit", "-qm", "code")
    with pytest.raises(NotAStore) as caught:
        MemoryManager(code)
    assert f"`gitmem --repo '{code}' init --here`" in str(caught.value)


@pytest.mark.parametrize(
    "attributes",
    [
        "# we might use merge=gitmem here one day\n*.py text eol=lf\n",
        "*.py text eol=lf\n# merge=gitmem\n",
        "*.md diff=markdown -merge=gitmem-like\n",
    ],
    ids=["comment", "trailing-comment", "other-attribute"],
)
def test_text_that_merely_mentions_the_driver_is_no_store(code: Path, attributes: str) -> None:
    (code / ".gitattributes").write_text(attributes)
    git(code, "commit", "-qam", "attributes")
    before = _state(code)
    with pytest.raises(NotAStore):
        MemoryManager(code)
    assert _state(code) == before and not (code / "sessions").exists()


def test_an_untracked_gitattributes_is_not_trusted(code: Path) -> None:
    (code / ".gitattributes").write_text("sessions/**/*.md merge=gitmem text eol=lf\n")
    before = _state(code)
    with pytest.raises(NotAStore):
        MemoryManager(code)
    result = CliRunner().invoke(cli, ["--repo", str(code), "save", "s", "--user", "hi"])
    assert result.exit_code == 1 and "not a gitmem store" in result.output
    assert _state(code) == before and not (code / "sessions").exists()


def test_a_store_whose_attributes_carry_comments_still_opens(store: Path) -> None:
    MemoryManager.init(store).save_interaction("s", "hi", "yo")
    attributes = store / ".gitattributes"
    attributes.write_text("# gitmem's merge driver\n" + attributes.read_text())
    git(store, "commit", "-qam", "comment the attributes")
    assert MemoryManager(store).load_memory("s") is not None
