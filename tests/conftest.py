"""Every test gets its own HOME, no inherited GIT_* variables and a fixed git identity,
so nothing depends on the developer's git config or network."""

from __future__ import annotations

import compileall
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Person",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test Person",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}

# The files whose tests take longest together, longest first (measured with --durations):
# under `-n auto --dist loadfile` xdist hands out whole files in collection order
# (pytest_configure turns off its reordering), so these go out first and none of them is left
# to run alone on one worker at the end; the other files follow by test count, most first.
LONG_FILES = (
    "test_mcp_v1.py",
    "test_mcp_http.py",
    "test_format_roundtrip.py",
    "test_web_browser.py",
    "reliability/test_crash_consistency.py",
    "test_format_turns.py",
    "test_mcp_tools.py",
    "reliability/test_fuzz.py",
    "test_facts_format.py",
    "test_import_coders.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """xdist would reorder the files by test count: keep the order given below. Set here, not
    in addopts, so a pytest without xdist (the mcp 1.x venv's) still starts."""
    if config.pluginmanager.hasplugin("xdist"):
        config.option.loadscopereorder = False


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile gitmem's modules once, before any worker starts: each of the few hundred
    ``python -m gitmem`` processes the tests start then reads bytecode, also where
    PYTHONDONTWRITEBYTECODE keeps Python from writing it (a quarter second a process)."""
    if not hasattr(session.config, "workerinput"):
        compileall.compile_dir(Path(__file__).resolve().parent.parent / "gitmem", quiet=1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, order the files as LONG_FILES says; a file's own tests keep
    their order."""
    if not hasattr(config, "workerinput"):
        return
    tests = Path(__file__).resolve().parent
    count: dict[Path, int] = {}
    first: dict[Path, int] = {}
    for at, item in enumerate(items):
        count[item.path] = count.get(item.path, 0) + 1
        first.setdefault(item.path, at)

    def rank(path: Path) -> tuple[int, int, int]:
        name = path.relative_to(tests).as_posix()
        long = LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)
        return (long, -count[path], first[path])

    items.sort(key=lambda item: rank(item.path))


@pytest.fixture(autouse=True)
def isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(("GIT_", "GITMEM_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test Person\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    yield home


def git(store: Path, *args: str, check: bool = True) -> str:
    """Run the real git binary in ``store`` and return stdout."""
    done = subprocess.run(["git", *args], cwd=store, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture(scope="session")
def web_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tests/web_helpers.py builds the web tests' store once per test process."""
    return tmp_path_factory.mktemp("web-template") / "memory"
