"""Shared pieces of the reliability suite: sizes, worker processes, store checks, figures.

Every test runs at a CI size by default; its full-size variant is marked ``slow`` (deselected
by the project's pytest options) and runs with ``python -m pytest -m slow tests/reliability``
(or ``GITMEM_FULL=1``, which runs both sizes). ``GITMEM_RELIABILITY_REPORT=FILE`` appends
each test's figures to FILE as JSON lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitmem.format import parse as markdown
from gitmem.store.objects import object_id
from tests.conftest import git

ROOT = Path(__file__).resolve().parents[2]

# read at import: the isolating fixture clears GITMEM_* variables for each test
REPORT = os.environ.get("GITMEM_RELIABILITY_REPORT")
FULL = os.environ.get("GITMEM_FULL") == "1"


def pytest_configure(config: pytest.Config) -> None:
    # GITMEM_FULL=1 lifts the project's default "-m 'not slow'": both sizes run
    if FULL and config.option.markexpr == "not slow":
        config.option.markexpr = ""


SIZES = [pytest.param("ci", id="ci"), pytest.param("full", id="full", marks=pytest.mark.slow)]


def worker(*args: str, stdin: bool = False) -> subprocess.Popen[str]:
    """Start ``python -m tests.reliability.workers ARGS`` with this checkout's gitmem."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.workers", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Zygote:
    """A process with gitmem imported that forks crash writers: a writer starts in
    milliseconds instead of the half second a new interpreter takes."""

    def __init__(self) -> None:
        self.proc = worker("zygote", stdin=True)

    def spawn(self, out: Path, *args: str) -> int:
        """Start ``crash ARGS`` writing to ``out``; returns once it has opened the store."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if out.exists():
            out.unlink()
        self.proc.stdin.write(" ".join(["crash", *args[:3], str(out), *args[3:]]) + "\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline())
        deadline = time.monotonic() + 60
        while not (out.exists() and out.read_text().startswith("ready\n")):
            assert time.monotonic() < deadline, "the writer did not start"
            assert alive(pid), f"the writer died: {out.read_text() if out.exists() else ''}"
            time.sleep(0.002)
        return pid

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_and_wait(pid: int) -> None:
    """SIGKILL ``pid`` and wait until it is gone (it is not our child: poll)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} did not die"
        time.sleep(0.001)


def fsck_problems(store: Path) -> list[str]:
    """Lines of ``git fsck --strict`` that are problems (dangling objects are not)."""
    wait_for_git(store)
    done = subprocess.run(
        ["git", "fsck", "--strict", "--no-progress"], cwd=store, capture_output=True, text=True
    )
    lines = [
        ln
        for ln in (done.stdout + done.stderr).splitlines()
        if ln.strip() and not ln.startswith(("dangling ", "Checking"))
    ]
    if done.returncode != 0 and not lines:
        lines.append(f"git fsck exited {done.returncode}")
    return lines


def memory_files(store: Path) -> list[str]:
    """Store paths of every Markdown memory file in the working tree."""
    found = []
    for folder in ("sessions", "archive"):
        base = store / folder
        if base.is_dir():
            found += [
                p.relative_to(store).as_posix()
                for p in sorted(base.rglob("*"))
                if not p.is_dir() or p.parent != base
            ]  # sessions/<xx>/ are folders
    return found


def _tree_blobs(store: Path, rev: str) -> dict[str, str]:
    out = git(store, "ls-tree", "-r", "-z", rev, "--", "sessions", "archive", check=False)
    blobs = {}
    for item in out.split("\0"):
        if item:
            meta, _, path = item.partition("\t")
            blobs[path] = meta.split()[2]
    return blobs


def unfinished_save(store: Path) -> dict[str, list[str | None]]:
    """The journal a killed writer left (path -> [old blob, new blob]), empty if none."""
    raw = (store / ".git" / "gitmem" / "write.lock").read_bytes()
    journal = raw.partition(b"\n")[2].strip()
    files: dict[str, list[str | None]] = json.loads(journal)["files"] if journal else {}
    return files


def check_working_files(store: Path, verified: set[str] | None = None) -> list[str]:
    """Problems with the working files, read without gitmem (which would repair them): a
    file that does not parse, or that is neither the committed version nor the one before
    it nor the one a save cut short was writing (the next gitmem call puts that back).
    ``verified``: blob ids known to parse."""
    verified = set() if verified is None else verified
    allowed = _tree_blobs(store, "HEAD")
    before = _tree_blobs(store, "HEAD^")
    pending = unfinished_save(store)
    problems = []
    for path in memory_files(store):
        data = (store / path).read_bytes()
        blob = object_id("blob", data)
        if blob not in (allowed.get(path), before.get(path), *pending.get(path, ())):
            problems.append(f"{path}: matches neither HEAD nor HEAD^ nor the unfinished save")
        if blob in verified:
            continue
        try:
            markdown.parse_bytes(data, path)
        except Exception as exc:
            problems.append(f"{path}: {exc}")
            continue
        verified.add(blob)
    return problems


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A dict the test fills with its figures; printed and, if asked, appended to a file."""
    data: dict[str, Any] = {}
    yield data
    if not data:
        return
    record = {"test": request.node.nodeid, **data}
    print("\nfigures:", json.dumps(record, ensure_ascii=False))
    if REPORT:
        with open(REPORT, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


HOUSEKEEPING = {b"repack", b"gc", b"pack-objects", b"commit-graph", b"prune"}


def wait_for_git(store: Path, timeout: float = 120.0) -> None:
    """Wait until no git process runs in ``store`` (e.g. a repack left running by a writer
    that was killed: git fsck would race with it)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    deadline = time.monotonic() + timeout
    target = str(store.resolve())
    while time.monotonic() < deadline:
        busy = False
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cwd = os.readlink(entry / "cwd")
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cwd == target and argv[0].endswith(b"git") and HOUSEKEEPING & set(argv):
                busy = True
                break
        if not busy:
            return
        time.sleep(0.05)
