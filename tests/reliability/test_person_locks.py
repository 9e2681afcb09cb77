"""A person's ``git commit -a`` waits in their editor, holding ``.git/index.lock``, while gitmem
saves. git holds that lock for as long as the editor is open (minutes, if the person is
thinking): its age says nothing about whether it is stale. gitmem must never remove it; the
save waits for it, or gives up with nothing written, and the person's commit goes through.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitmem.errors import LockTimeout
from gitmem.format.paths import session_path
from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.reliability.conftest import fsck_problems
from tests.reliability.test_person_commits import MARK, SESSION, WIDTH, _counter, _hand_edit

EDITOR = """#!/bin/sh
: > "{flags}/open"
while [ ! -e "{flags}/release" ]; do sleep 0.01; done
printf 'hand 7\\n' > "$1"
"""


class PersonInEditor:
    """``git commit -a`` (no ``-m``) whose editor stays open until :meth:`release`."""

    def __init__(self, store: Path, flags: Path) -> None:
        flags.mkdir()
        self.flags = flags
        editor = flags / "editor.sh"
        editor.write_text(EDITOR.format(flags=flags))
        editor.chmod(0o755)
        self.lock = store / ".git" / "index.lock"
        self.proc = subprocess.Popen(
            ["git", "commit", "-a", "-q"],
            cwd=store,
            env=dict(os.environ, GIT_EDITOR=str(editor)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not (flags / "open").exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the editor never opened"
            time.sleep(0.01)
        # the editor has been open for a minute: an age-based "stale lock" rule fires
        assert self.lock.exists() and not self.lock.read_bytes().startswith(b"gitmem")
        old = time.time() - 60
        os.utime(self.lock, (old, old))

    def release(self) -> None:
        (self.flags / "release").touch()

    def finish(self) -> tuple[int, str]:
        self.release()
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out + err


@pytest.fixture
def started(store: Path, tmp_path: Path) -> Iterator[tuple[MemoryManager, PersonInEditor]]:
    mm = MemoryManager.init(store)
    mm.save_interaction(
        SESSION, "start", "ok", interaction_id="s0", metadata={"hand-counter": "0" * WIDTH}
    )
    _hand_edit(store / session_path(SESSION), 7)
    person = PersonInEditor(store, tmp_path / "flags")
    try:
        yield mm, person
    finally:
        person.release()
        person.proc.wait(timeout=60)
        mm.close()


def _head_counter(store: Path) -> int:
    return _counter(git(store, "show", f"HEAD:{session_path(SESSION)}").encode())


def test_a_save_waits_for_a_commit_open_in_the_editor(
    store: Path, started: tuple[MemoryManager, PersonInEditor]
) -> None:
    mm, person = started
    repo = mm.repository
    real = repo.lock._create_lock
    blocked: list[Path] = []

    def create(lock: Path, owner: bytes) -> Any:
        try:
            return real(lock, owner)
        except FileExistsError:
            if not blocked:  # the save is waiting for the person: they finish their message
                blocked.append(lock)
                person.release()
            raise

    repo.lock._create_lock = create  # type: ignore[method-assign]
    sha = mm.save_interaction(SESSION, "q1", "a1", interaction_id="s1")
    code, output = person.finish()
    assert blocked == [person.lock]
    assert code == 0, output  # the person's commit went through untouched
    assert sha == git(store, "rev-parse", "HEAD").strip()
    subjects = git(store, "log", "--format=%s").splitlines()
    assert "hand 7" in subjects
    assert _head_counter(store) == 7  # the person's change
    session = mm.load_memory(SESSION)
    assert session is not None and [t.id for t in session.interactions] == ["s0", "s1"]
    assert git(store, "status", "--porcelain") == ""
    assert fsck_problems(store) == []


def test_a_save_gives_up_cleanly_on_a_commit_open_in_the_editor(
    store: Path, started: tuple[MemoryManager, PersonInEditor]
) -> None:
    mm, person = started
    mm.repository.lock_timeout = 0.3
    head = git(store, "rev-parse", "HEAD").strip()
    index = (store / ".git" / "index").read_bytes()
    with pytest.raises(LockTimeout) as caught:
        mm.save_interaction(SESSION, "q1", "a1", interaction_id="s1")
    message = str(caught.value)
    assert f"{person.lock} exists" in message
    assert "another git command" in message and "Nothing was saved" in message
    assert f"if no git command is running, remove {person.lock}" in message
    # nothing written: branch, index, the person's edit in the working file, their lock
    assert git(store, "rev-parse", "HEAD").strip() == head
    assert (store / ".git" / "index").read_bytes() == index
    assert person.lock.exists()
    assert MARK + b"000007" in (store / session_path(SESSION)).read_bytes()
    assert b'"files"' not in (store / ".git" / "gitmem" / "write.lock").read_bytes()
    code, output = person.finish()
    assert code == 0, output
    assert git(store, "log", "--format=%s", "-1").strip() == "hand 7"
    assert _head_counter(store) == 7
    assert git(store, "status", "--porcelain") == ""
    # once the person is done, the save goes through on top of their commit
    assert mm.save_interaction(SESSION, "q1", "a1", interaction_id="s1")
    assert _head_counter(store) == 7
    session = mm.load_memory(SESSION)
    assert session is not None and [t.id for t in session.interactions] == ["s0", "s1"]
    assert git(store, "status", "--porcelain") == ""
    assert fsck_problems(store) == []
