"""Live capture from coding agents' hooks: Claude Code, Codex CLI, Gemini CLI.

Each agent runs a command after a turn: Claude Code's ``Stop``/``SessionEnd`` hooks and Gemini
CLI's ``AfterAgent``/``SessionEnd`` hooks hand it JSON on stdin (``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name``); Codex's ``notify`` command gets JSON as its
last argument (``{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd",
"input-messages", "last-assistant-message"}``) and no file name, so the rollout file is found
by its thread id. :func:`capture` imports that one transcript incrementally: per transcript
it keeps, in the store's state folder (``.git/gitmem/capture/``), the file's size and
modification time (unchanged: nothing to do, no store opened) and where its last turn began
(the next capture reads on from there, so a long session costs what its new lines cost).

A capture must never fail or hold up the agent: the command catches every error, writes it to
``.git/gitmem/capture.log`` in the store (or ``~/.local/state/gitmem/capture.log`` when there
is no store) and exits 0.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gitmem.errors import ValidationError
from gitmem.importers import claude_code, codex, gemini_cli
from gitmem.importers.engine import ImportResult, run_import
from gitmem.importers.transcripts import Reader, Tools
from gitmem.manager import MemoryManager

READERS: dict[str, Reader] = {
    "claude-code": claude_code.read,
    "codex": codex.read,
    "gemini-cli": gemini_cli.read,
}
# tools whose files are only appended to: a capture can read on from the last turn
APPEND_ONLY = ("claude-code", "codex")
FALLBACK_LOG = "~/.local/state/gitmem/capture.log"


def state_dir(store: str | os.PathLike[str]) -> Path:
    """The store's state folder (``.git/gitmem``), without opening the store."""
    git = Path(store) / ".git"
    if git.is_file():  # a linked worktree: "gitdir: <path>"
        text = git.read_text(encoding="utf-8").strip()
        git = (Path(store) / text.removeprefix("gitdir:").strip()).resolve()
    return (git if git.is_dir() else Path(store)) / "gitmem"


def log_failure(folder: Path | None, what: str) -> Path:
    """Append ``what`` (and the traceback being handled, if any) to the capture log."""
    path = folder / "capture.log" if folder is not None else Path(FALLBACK_LOG).expanduser()
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    trace = traceback.format_exc()
    text = f"{stamp} {what}\n" + ("" if trace.startswith("NoneType") else trace)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        pass  # nowhere to write: the agent still goes on
    return path


def hook_transcript(payload: str) -> Path:
    """The transcript a Claude Code / Gemini CLI hook's JSON names."""
    data = json.loads(payload)
    if not isinstance(data, dict) or not isinstance(data.get("transcript_path"), str):
        raise ValidationError("hook input has no 'transcript_path'")
    path = Path(data["transcript_path"]).expanduser()
    if not path.is_file():
        raise ValidationError(f"{path}: no such transcript")
    return path


def notify_transcript(payload: str, root: Path | None = None) -> Path:
    """The rollout file a Codex ``notify`` JSON is about (found by its thread id)."""
    data = json.loads(payload)
    if not isinstance(data, dict):
        raise ValidationError("notify payload is not a JSON object")
    if data.get("type") != "agent-turn-complete":
        raise ValidationError(f"notify type {data.get('type')!r}: nothing to capture")
    thread = data.get("thread-id") or data.get("thread_id")
    found = codex.rollout_for(str(thread or ""), root)
    if found is None:
        raise ValidationError(f"no rollout file for thread {thread!r}")
    return found


def _state_file(folder: Path, transcript: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(transcript.resolve())).hexdigest()[:24]
    return folder / "capture" / f"{digest}.json"


def unchanged(store: str | os.PathLike[str], transcript: Path) -> bool:
    """True when ``transcript`` is as the last capture left it (size and mtime)."""
    try:
        state = json.loads(_state_file(state_dir(store), transcript).read_text())
        seen = transcript.stat()
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and state.get("stat") == [seen.st_size, seen.st_mtime_ns]


def capture(
    mm: MemoryManager, tool: str, transcript: Path, *, tools: Tools = "summary"
) -> ImportResult | None:
    """Import what ``transcript`` gained since the last capture (one commit, or none when
    nothing is new); None when the file is unchanged."""
    folder = state_dir(mm.path)
    state_path = _state_file(folder, transcript)
    try:
        state: dict[str, Any] = json.loads(state_path.read_text())
    except (OSError, ValueError):
        state = {}
    seen = transcript.stat()
    if state.get("stat") == [seen.st_size, seen.st_mtime_ns]:
        return None
    start = int(state.get("resume") or 0)
    if tool not in APPEND_ONLY or start > seen.st_size:
        start = 0  # rewritten or shortened: read it all again (the merge is additive)
    built = READERS[tool](transcript, tools, start)
    found = built.session() if built is not None else None
    result = run_import(
        mm,
        [found] if found is not None else [],
        source=f"{tool} hook",
        subject=f"Capture {tool} session {transcript.stem}",
    )
    state_path.parent.mkdir(parents=True, exist_ok=True)
    resume = built.resume if built is not None and built.turns else start
    state = {"path": os.fspath(transcript), "stat": [seen.st_size, seen.st_mtime_ns]}
    partial = state_path.with_suffix(f".{os.getpid()}.tmp")  # two hooks may end at once
    partial.write_text(json.dumps({**state, "resume": resume}))
    os.replace(partial, state_path)
    return result


SETTINGS_FILES = {
    "claude-code": "~/.claude/settings.json (or .claude/settings.json in a project)",
    "codex": "~/.codex/config.toml",
    "gemini-cli": "~/.gemini/settings.json (or .gemini/settings.json in a project)",
}


def hook_snippet(tool: str, store: str | os.PathLike[str], command: str = "gitmem") -> str:
    """The settings text that makes ``tool`` run ``gitmem capture`` into ``store`` after each
    turn (to merge into the file :data:`SETTINGS_FILES` names): JSON, or TOML for Codex. The
    store is named: a hook runs in the agent's working folder, another repository."""
    argv = [*shlex.split(command), "--repo", os.path.abspath(os.path.expanduser(store))]
    if tool == "codex":  # the payload comes as one more argument
        return f"notify = {json.dumps([*argv, 'capture', 'codex'])}\n"
    run = shlex.join([*argv, "capture", tool])
    entry: list[dict[str, Any]]
    if tool == "claude-code":
        entry = [{"hooks": [{"type": "command", "command": run, "timeout": 30}]}]
        events = {"Stop": entry, "SessionEnd": entry}
    elif tool == "gemini-cli":  # its timeouts are in milliseconds
        entry = [{"matcher": "*", "hooks": [{"type": "command", "command": run, "timeout": 30000}]}]
        events = {"AfterAgent": entry, "SessionEnd": entry}
    else:
        raise ValidationError(f"{tool!r}: use claude-code, codex or gemini-cli")
    return json.dumps({"hooks": events}, indent=2) + "\n"
