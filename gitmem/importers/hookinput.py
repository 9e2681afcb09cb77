"""What a coding agent's hook hands ``gitmem capture``, and whether there is anything to do.

The part of a capture that runs on every turn of an agent, so it imports nothing heavy: the
transcript a hook's JSON (or Codex's ``notify`` argument) names, the store's state folder,
whether the transcript is as the last capture left it (size and mtime: then no store is
opened), the capture log, and the hook settings ``gitmem hooks print`` shows. The import itself
is :mod:`gitmem.importers.agent_hooks`.
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

AGENTS = ("claude-code", "codex", "gemini-cli")
FALLBACK_LOG = "~/.local/state/gitmem/capture.log"


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or "~/.codex").expanduser()


def rollout_for(thread: str, root: Path | None = None) -> Path | None:
    """The Codex rollout file of thread ``thread`` (its name ends in the id), newest first."""
    if not thread or "/" in thread or "*" in thread:
        return None
    found = sorted((root or codex_home() / "sessions").glob(f"**/rollout-*{thread}.jsonl"))
    return found[-1] if found else None


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
    found = rollout_for(str(thread or ""), root)
    if found is None:
        raise ValidationError(f"no rollout file for thread {thread!r}")
    return found


def state_file(folder: Path, transcript: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(transcript.resolve())).hexdigest()[:24]
    return folder / "capture" / f"{digest}.json"


def unchanged(store: str | os.PathLike[str], transcript: Path) -> bool:
    """True when ``transcript`` is as the last capture left it (size and mtime)."""
    try:
        state = json.loads(state_file(state_dir(store), transcript).read_text())
        seen = transcript.stat()
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and state.get("stat") == [seen.st_size, seen.st_mtime_ns]


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
