"""The merge driver git runs once per merged session file: what it loads, and how stores
registered before keep working (the start-up time itself is in benchmarks/bench_driver.py)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gitmem import MemoryManager
from gitmem.format import parse as markdown
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.sync.hooks import driver_command
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2024, 4, 15, 15, 30, tzinfo=timezone(timedelta(hours=8)))

# what a merge of one session file has no use for: each costs start-up time on every file of
# every `git pull` (the CLI, the manager, GitPython, the search index, the LLM client), and
# the secret patterns and the git runner are needed only for notes and the line-merge fallback
NOT_ON_A_CLEAN_MERGE = (
    "click",
    "git",
    "gitdb",
    "sqlite3",
    "openai",
    "rapidfuzz",
    "subprocess",
    "gitmem.cli",
    "gitmem.manager",
    "gitmem.core",
    "gitmem.store.repository",
    "gitmem.store.git",
    "gitmem.guard.secrets",
    "gitmem.search",
    "gitmem.summary",
    "gitmem.format.facts",
    "gitmem.format.factmerge",
    "gitmem.format.paths",  # nor facts
    "gitmem.format.factlines",
)


def _turn(tid: str, minute: int) -> Interaction:
    return Interaction(
        id=tid,
        timestamp=T0 + timedelta(minutes=minute),
        messages=[Message(speaker="User", content=f"turn {tid}")],
    )


def _versions(folder: Path, *, rewrite_summary: bool) -> dict[str, Path]:
    """Base, ours and theirs of one session; each side appended a turn (and, if asked,
    rewrote the summary, which the driver reports on stderr)."""
    # a custom metadata key: the full parse and merge, not the turn-block merge of the
    # common case (tests/test_session_lines.py), is what these tests watch
    base = Session(
        id="s",
        created=T0,
        last_active=T0,
        extra={"Mood": "calm"},
        interactions=[_turn("t0", 0)],
    )
    ours = base.model_copy(update={"interactions": [_turn("t0", 0), _turn("a", 1)]})
    theirs = base.model_copy(update={"interactions": [_turn("t0", 0), _turn("b", 2)]})
    if rewrite_summary:
        ours = ours.model_copy(update={"summary": Summary(text="ours", generated=T0)})
        theirs = theirs.model_copy(
            update={"summary": Summary(text="theirs", generated=T0 + timedelta(hours=1))}
        )
    folder.mkdir()
    paths = {}
    for key, session in (("%O", base), ("%A", ours), ("%B", theirs)):
        paths[key] = folder / key[1]
        paths[key].write_text(markdown.render(session))
    return paths


def _run_driver(
    store: Path, command: str, paths: dict[str, Path], **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` as git does: placeholders filled in, through ``sh -c``, in the store."""
    for key, value in paths.items():
        command = command.replace(key, shlex.quote(str(value)))
    command = command.replace("%P", "sessions/s.md")
    return subprocess.run(
        ["sh", "-c", command],
        cwd=store,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def _imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines (``import time: self | total | name``)."""
    names = set()
    for line in stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if len(fields) == 3 and fields[0].strip().isdigit():
            names.add(fields[2].strip())
    return names


def test_the_registered_driver_merges_without_loading_what_it_does_not_need(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    MemoryManager.init(store).close()
    command = git(store, "config", "merge.gitmem.driver").strip()
    assert command == driver_command()
    paths = _versions(tmp_path / "files", rewrite_summary=False)
    ours = paths["%A"].read_text()
    done = _run_driver(store, command, paths, PYTHONPROFILEIMPORTTIME="1")
    assert done.returncode == 0, done.stderr
    merged = markdown.parse(paths["%A"].read_text())
    assert [t.id for t in merged.interactions] == ["t0", "a", "b"]
    loaded = _imported(done.stderr)
    assert {"gitmem.sync.merge", "gitmem.format.parse"} <= loaded  # the probe saw the imports
    unwanted = {
        name.partition(".")[0] if name.startswith(("git.", "gitdb.")) else name for name in loaded
    }
    assert sorted(unwanted & set(NOT_ON_A_CLEAN_MERGE)) == []
    assert not [name for name in loaded if name.startswith(("gitmem.search.", "gitmem.summary."))]
    # a side that does not parse: the git runner loads now, for git's line merge, exit 1
    paths["%A"].write_text(ours.replace("### 2024", "### someday", 1))
    done = _run_driver(store, command, paths)
    assert done.returncode == 1
    assert "cannot merge sessions/s.md by meaning" in done.stderr
    assert "<<<<<<< ours" in paths["%A"].read_text()


def test_a_store_registered_before_still_merges_and_is_upgraded_on_open(tmp_path: Path) -> None:
    store = tmp_path / "memory"
    MemoryManager.init(store).close()
    old = f"{shlex.quote(sys.executable)} -P -m gitmem merge-file %O %A %B %P"
    git(store, "config", "merge.gitmem.driver", old)
    paths = _versions(tmp_path / "files", rewrite_summary=True)
    done = _run_driver(store, git(store, "config", "merge.gitmem.driver").strip(), paths)
    assert done.returncode == 0, done.stderr
    # the note is printed before the driver ends the process without the usual teardown
    assert "both sides rewrote the summary" in done.stderr
    merged = markdown.parse(paths["%A"].read_text())
    assert [t.id for t in merged.interactions] == ["t0", "a", "b"]
    assert merged.summary is not None and merged.summary.text == "theirs"
    MemoryManager(store).close()
    upgraded = git(store, "config", "merge.gitmem.driver").strip()
    assert upgraded == driver_command() != old
    assert upgraded.endswith(" -P -m gitmem.sync.driver %O %A %B %P")
