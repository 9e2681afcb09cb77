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
is no store) and exits 0. What runs on every turn before anything is imported (the payload,
the unchanged check, the log) is :mod:`gitmem.importers.hookinput`, which loads nothing heavy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gitmem.importers import claude_code, codex, gemini_cli
from gitmem.importers.engine import ImportResult, run_import
from gitmem.importers.hookinput import state_dir, state_file
from gitmem.importers.transcripts import Reader, Tools
from gitmem.manager import MemoryManager

READERS: dict[str, Reader] = {
    "claude-code": claude_code.read,
    "codex": codex.read,
    "gemini-cli": gemini_cli.read,
}
# tools whose files are only appended to: a capture can read on from the last turn
APPEND_ONLY = ("claude-code", "codex")


def capture(
    mm: MemoryManager, tool: str, transcript: Path, *, tools: Tools = "summary"
) -> ImportResult | None:
    """Import what ``transcript`` gained since the last capture (one commit, or none when
    nothing is new); None when the file is unchanged."""
    folder = state_dir(mm.path)
    state_path = state_file(folder, transcript)
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
