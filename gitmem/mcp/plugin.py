"""The nanobot Agent Plugin bundle that ``gitmem mcp --nanobot-plugin DIR`` writes.

nanobot loads Agent Plugins (format 1.0) from ``<workspace>/plugins/<folder>/`` and runs one
only after its user enabled it (its WebUI's MCP page); any later change to the folder's files
disables it again. The bundle holds:

- ``plugin.json``: the manifest (``$schema``, ``name`` ``gitmem``, ``extensions.dev.nanobot``);
- ``mcp.json``: one stdio server, ``gitmem``, running ``gitmem --repo STORE --agent AGENT mcp``;
  a plugin whose single server it is lends it its name, so the tools reach the model as
  ``mcp_gitmem_<tool>``;
- ``bin/gitmem``: a launcher for the gitmem that wrote the bundle. nanobot's loader accepts a
  server ``command`` only as a bare name looked up on ``PATH`` or as a ``./`` path inside the
  plugin (an absolute path is refused), and nanobot's ``PATH`` rarely holds gitmem's virtual
  environment; the launcher pins it (the ``gitmem`` script next to ``sys.executable``, else
  ``sys.executable -m gitmem``);
- ``skills/gitmem/SKILL.md``: an always-on skill telling the model when to save and when to
  search (shipped as package data, ``gitmem/mcp/bundle/SKILL.md``).

Writing is all or nothing: every file is checked first; an existing file with other content is
refused (``ConflictError`` naming it), an identical one is left as it is, so writing the same
bundle again changes nothing and keeps nanobot's activation. This module does not import the
``mcp`` SDK: it only checks that the server the bundle starts will find it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shlex
import stat
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from gitmem.errors import ConflictError, GitmemError
from gitmem.manager import MemoryManager
from gitmem.version import __version__

PLUGIN_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
# the plugin's name, its server's name, and so the middle of every tool name nanobot shows
NAME = "gitmem"
LAUNCHER = "bin/gitmem"
SKILL = "skills/gitmem/SKILL.md"


class PluginError(GitmemError):
    """The plugin bundle cannot be written (the folder, or the mcp extra, is missing)."""


def server_command(executable: str | os.PathLike[str] | None = None) -> list[str]:
    """The command line that starts this gitmem: the ``gitmem`` console script next to the
    Python interpreter (``executable``, default ``sys.executable``), else ``python -m gitmem``."""
    python = Path(executable or sys.executable).absolute()
    script = python.parent / "gitmem"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(python), "-m", "gitmem"]


def bundle_files(
    *, store: str | os.PathLike[str], agent: str, command: list[str] | None = None
) -> dict[str, tuple[bytes, int]]:
    """Each file of the bundle (path inside it -> content, mode), for the store at the
    absolute path ``store`` and commits authored by ``agent``."""
    manifest = {
        "$schema": PLUGIN_SCHEMA,
        "name": NAME,
        "version": __version__,
        "description": f"Long-term conversation memory: every exchange worth keeping is a "
        f"commit in the gitmem store at {store}.",
        "license": "MIT",
        "keywords": ["memory", "git", "mcp"],
        "extensions": {
            "dev.nanobot": {
                "displayName": "gitmem memory",
                "category": "productivity",
                "permissions": [
                    f"reads and writes the git repository {store}",
                    "runs gitmem mcp as a local process",
                ],
            }
        },
    }
    servers = {
        "$schema": MCP_SCHEMA,
        "mcpServers": {
            NAME: {
                "type": "stdio",
                "command": f"./{LAUNCHER}",
                "args": ["--repo", str(store), "--agent", agent, "mcp"],
            }
        },
    }
    launcher = (
        "#!/bin/sh\n"
        "# Written by `gitmem mcp --nanobot-plugin`: starts the gitmem that wrote this bundle.\n"
        f'exec {shlex.join(command or server_command())} "$@"\n'
    )
    skill = resources.files("gitmem").joinpath("mcp/bundle/SKILL.md").read_bytes()
    return {
        "plugin.json": (_json(manifest), 0o644),
        "mcp.json": (_json(servers), 0o644),
        LAUNCHER: (launcher.encode(), 0o755),
        SKILL: (skill, 0o644),
    }


def write_plugin(folder: str | Path, *, store: str | Path, agent: str) -> list[Path]:
    """Write the nanobot plugin bundle for the store at ``store`` into ``folder``.

    Returns the bundle's files. Raises ``NotAStore``/``RepositoryError`` when ``store`` is not
    a gitmem store, ``ValidationError`` for an agent name no commit can carry,
    ``ConflictError`` when a file of the bundle exists with other content (nothing is
    written), and ``PluginError`` when the folder cannot be written or ``mcp`` is missing.
    """
    if importlib.util.find_spec("mcp") is None:
        raise PluginError(
            "the bundle runs `gitmem mcp`, which needs the mcp package: "
            "pip install '.[mcp]' in gitmem's checkout"
        )
    manager = MemoryManager(store, agent=agent)  # refuses a folder that is not a store
    try:
        top = manager.path
    finally:
        manager.close()
    root = Path(folder).expanduser().absolute()
    files = bundle_files(store=Path(top).absolute(), agent=agent)
    todo: list[tuple[Path, bytes, int]] = []
    for name, (data, mode) in files.items():
        target = root / name
        current = _existing(root, target)
        if current is None:
            todo.append((target, data, mode))
        elif current != data:
            raise ConflictError(
                f"{target}: exists with other content; nothing was written. Remove it, or "
                "write the bundle to another folder (nanobot asks to enable a changed plugin "
                "again anyway)"
            )
        elif mode & 0o111 and not target.stat().st_mode & 0o111:
            todo.append((target, data, mode))  # same text, lost its executable bit
    _write_all(todo)
    return [root / name for name in files]


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode()


def _existing(root: Path, target: Path) -> bytes | None:
    """The content of ``target`` if it is a regular file, None if it does not exist; any
    other thing in its place (a folder, a link, a file where a folder goes) is refused."""
    for place in [*reversed(target.relative_to(root).parents), target.relative_to(root)]:
        path = root / place
        try:
            found = path.lstat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PluginError(f"{path}: cannot be read ({exc.strerror})") from None
        is_last = path == target
        if stat.S_ISLNK(found.st_mode) and place != Path("."):
            raise ConflictError(
                f"{path}: is a symbolic link; the bundle is written only as "
                "regular files (nanobot refuses links out of a plugin)"
            )
        if not is_last and not stat.S_ISDIR(os.stat(path).st_mode):
            raise ConflictError(f"{path}: exists and is not a folder; nothing was written")
        if is_last and not stat.S_ISREG(found.st_mode):
            raise ConflictError(f"{path}: exists and is not a regular file; nothing was written")
    try:
        return target.read_bytes()
    except OSError as exc:
        raise PluginError(f"{target}: cannot be read ({exc.strerror})") from None


def _write_all(todo: list[tuple[Path, bytes, int]]) -> None:
    """Write every file through a temporary file and a rename; on any failure remove what
    this call made, so the folder is as it was."""
    made_dirs: list[Path] = []
    temps: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    current: Path | None = None
    try:
        for target, data, mode in todo:
            current = target
            missing = [p for p in [*reversed(target.parents)] if not p.exists()]
            for folder in missing:
                folder.mkdir()
                made_dirs.append(folder)
            temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            with open(temp, "wb") as out:
                temps.append((temp, target))
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, mode)
        for temp, target in temps:
            current = target
            existed = target.exists()
            os.replace(temp, target)
            if not existed:
                placed.append(target)
    except OSError as exc:
        for temp, _ in temps:
            temp.unlink(missing_ok=True)
        for target in placed:
            target.unlink(missing_ok=True)
        for folder in reversed(made_dirs):
            with contextlib.suppress(OSError):  # not empty: someone else's now
                folder.rmdir()
        where = exc.filename or current
        raise PluginError(
            f"{where}: cannot be written ({exc.strerror or exc}); nothing was written"
        ) from None
