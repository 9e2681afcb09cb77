"""The one git runner (``gitmem/store/git.py``): every git process goes through it, and it
says what failed (command, folder, exit status, git's last lines) without leaking a password."""

from __future__ import annotations

import ast
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem.errors import RepositoryError
from gitmem.store.discover import find_store
from gitmem.store.git import last_lines, run_git
from gitmem.store.repository import Repository
from tests.conftest import git

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"

# modules that may start processes, and why; nothing else imports subprocess
PROCESS_MODULES = {"store/git.py": "the git runner itself"}

# the third-party git libraries: object reads through GitPython's cat-file pipes only
GITPYTHON_MODULES = {"store/objects.py"}

SECRET = "s3cret-Pa55"


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        yield name, ast.parse(path.read_text(), filename=str(path))


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _problems(name: str, tree: ast.Module) -> list[str]:
    """Every way ``tree`` (module ``name``) runs a process or git outside the runner."""
    found = []
    imported = _imported(tree)
    if {"subprocess", "pty", "multiprocessing"} & imported and name not in PROCESS_MODULES:
        found.append(f"{name}: imports subprocess; run git through gitmem.store.git.run_git")
    if {"git", "gitdb"} & imported and name not in GITPYTHON_MODULES:
        found.append(f"{name}: imports GitPython/gitdb; only {sorted(GITPYTHON_MODULES)} may")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func, owner = node.func, node.func.value
        if (
            isinstance(owner, ast.Name)
            and owner.id == "os"
            and func.attr.startswith(("system", "popen", "spawn", "exec", "posix_spawn"))
        ):
            found.append(f"{name}:{node.lineno}: os.{func.attr}() starts a process")
        # GitPython's command wrapper: repo.git.<command>(...), repo.git.execute([...])
        if (
            isinstance(owner, ast.Attribute)
            and owner.attr == "git"
            and func.attr != "set_persistent_git_options"
        ):
            found.append(f"{name}:{node.lineno}: .git.{func.attr}() runs git outside the runner")
        # GitPython's porcelain that runs git commands: git.Repo.init(), Repo.clone_from()
        if (
            isinstance(owner, (ast.Attribute, ast.Name))
            and getattr(owner, "attr", getattr(owner, "id", "")) == "Repo"
        ):
            found.append(f"{name}:{node.lineno}: Repo.{func.attr}() runs git outside the runner")
    return found


def test_only_the_runner_starts_processes_and_only_the_store_imports_gitpython() -> None:
    assert [problem for name, tree in _modules() for problem in _problems(name, tree)] == []
    # the check sees each way the code ran git before the runner existed
    sample = ast.parse(
        "import subprocess\nimport git\nrepo._git.git.update_index('-q')\n"
        "repo.git.execute(['git', 'status'])\ngit.Repo.init(path)\nos.system('git gc')\n"
        "repo.git.set_persistent_git_options(c=[])\nrepo.git('status')\n"
    )
    assert len(_problems("sync/driver.py", sample)) == 6
    assert len(_problems("store/git.py", sample)) == 5  # may import subprocess only


@pytest.fixture
def repo_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    return folder


def test_a_failure_names_the_command_folder_exit_status_and_gits_last_lines(repo_dir: Path) -> None:
    with pytest.raises(RepositoryError) as caught:
        run_git(repo_dir, "checkout", "p1", "p2", "p3", "p4", "p5", "p6")
    message = str(caught.value)
    assert message.startswith(f"git checkout p1 p2 p3 p4 p5 p6 failed in {repo_dir} (exit 1): ")
    assert "pathspec 'p6' did not match" in message
    assert "'p1'" not in message.split(": ", 1)[1]  # only the last lines of git's message


def test_the_exit_statuses_a_caller_expects_are_not_errors(repo_dir: Path) -> None:
    done = run_git(repo_dir, "rev-parse", "--verify", "--quiet", "HEAD", ok=(0, 1))
    assert done.returncode == 1 and done.out == b""
    assert run_git(repo_dir, "rev-parse", "--verify", "nope", ok=None).returncode == 128


def test_a_password_in_a_url_never_shows_in_an_error(repo_dir: Path) -> None:
    url = f"https://alice:{SECRET}@example.com/memory.git"
    with pytest.raises(RepositoryError) as caught:
        run_git(repo_dir, "ls-files", "--error-unmatch", url)  # git echoes the URL back
    assert SECRET not in str(caught.value)
    assert str(caught.value).count("alice:***@example.com") == 2  # the command and git's words
    assert last_lines(f"fatal: unable to access '{url}/'") == (
        "fatal: unable to access 'https://alice:***@example.com/memory.git/'"
    )


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A real loopback server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_command_that_runs_out_of_time_is_stopped_with_an_error_naming_it(
    repo_dir: Path, silent_server: int
) -> None:
    url = f"http://bob:{SECRET}@127.0.0.1:{silent_server}/memory.git"
    with pytest.raises(RepositoryError) as caught:
        run_git(repo_dir, "ls-remote", url, timeout=1)
    message = str(caught.value)
    assert message.startswith(
        f"git ls-remote 'http://bob:***@127.0.0.1:{silent_server}/memory.git' in {repo_dir} "
        "did not finish within 1s and was stopped"
    )
    assert SECRET not in message


def _trap(repo: Path, markers: Path) -> None:
    """A pre-commit hook and an fsmonitor command that leave a marker when they run."""
    markers.mkdir()
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch '{markers / 'pre-commit'}'\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    monitor = repo / ".git" / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch '{markers / 'fsmonitor'}'\necho\n")
    monitor.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(monitor))


def test_no_hook_or_fsmonitor_of_the_store_runs_from_a_runner_call(
    store: Path, tmp_path: Path
) -> None:
    Repository.init(store).close()
    markers = tmp_path / "markers"
    _trap(store, markers)
    run_git(store, "commit", "--allow-empty", "-qm", "through the runner")
    run_git(store, "status", "--porcelain")
    repo = Repository(store)  # and its façades (history reads used to run git unguarded)
    repo.run_git("commit", "--allow-empty", "-qm", "through run_git")
    repo.run_git("status", "--porcelain")
    repo.git("status", "--porcelain")
    repo.close()
    assert list(markers.iterdir()) == []
    run_git(store, "commit", "--allow-empty", "-qm", "unsafe", safe=False)
    assert (markers / "pre-commit").exists()  # the trap is real


def test_the_git_facade_says_which_command_failed_and_how(store: Path) -> None:
    repo = Repository.init(store)
    with pytest.raises(RepositoryError, match=r"exit 128\): fatal: Needed a single revision"):
        repo.git("rev-parse", "--verify", "no-such-branch")
    with pytest.raises(
        RepositoryError,
        match=r"^git -c core.quotepath=false log no-such-branch "
        rf"failed in {store} \(exit 128\)",
    ):
        repo.run_git("log", "no-such-branch")
    assert repo.git("rev-parse", "HEAD") == repo.head()  # no final newline, as before
    repo.close()


def test_git_gets_english_messages_and_no_password_prompt(
    repo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")  # the user's locale must not reach git
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "1")
    shown = run_git(repo_dir, "-c", "alias.show-env=!env", "show-env").stdout.splitlines()
    assert "LC_ALL=C" in shown and "GIT_TERMINAL_PROMPT=0" in shown


def test_git_reads_only_what_it_is_given(repo_dir: Path) -> None:
    given = run_git(repo_dir, "hash-object", "--stdin", stdin=b"hello\n").stdout.strip()
    assert given == "ce013625030ba8dba906f756967f9e9ca394464a"
    nothing = run_git(repo_dir, "hash-object", "--stdin").stdout.strip()
    assert nothing == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # the empty blob


def test_the_identity_is_read_the_way_git_reads_it(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repository.init(store)
    assert repo.configured_identity() == ("Test Person", "test@example.com")  # ~/.gitconfig
    extra = tmp_path / "global.gitconfig"
    extra.write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(extra))
    assert repo.configured_identity() == ("Ada Lovelace", "ada@example.org")
    git(store, "config", "user.name", "Local Name")
    assert repo.configured_identity() == ("Local Name", "ada@example.org")
    repo.close()


def test_finding_the_store_from_a_missing_folder_leaves_the_error_to_opening(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "gone"
    assert find_store(missing) == str(missing)
