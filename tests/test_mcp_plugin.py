"""The nanobot plugin bundle (``gitmem mcp --nanobot-plugin DIR``) and docs/mcp.md's MCP client
snippet, against a real ``gitmem mcp`` started the way the bundle (or the snippet) starts it.

The checks of the bundle's form follow nanobot's loader (``nanobot/agent/plugins.py``): closed
key sets, ``$schema`` values, a stdio ``command`` given as ``./`` inside the plugin, a skill
whose front matter names its folder. ``tests/test_mcp_nanobot.py`` (slow) runs nanobot's own
code on the bundle.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ConflictError, NotAStore, RepositoryError
from gitmem.mcp import plugin
from gitmem.mcp.plugin import PluginError, server_command, write_plugin
from tests.conftest import git
from tests.mcp_client import ClientSession, StdioServerParameters, is_error, stdio_client, text_of

ROOT = Path(__file__).resolve().parent.parent
FILES = ["plugin.json", "mcp.json", "bin/gitmem", "skills/gitmem/SKILL.md"]
# what nanobot's loader accepts (anything else makes it ignore the plugin or the server)
PLUGIN_KEYS = {
    "$schema",
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "extensions",
}
SERVER_KEYS = {"type", "command", "args", "env", "cwd"}
PLUGIN_NAME = re.compile(r"^(?!.*(?:--|\.\.))[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$")


@pytest.fixture
def made(store: Path) -> Path:
    MemoryManager.init(store).close()
    return store


def front_matter(text: str) -> dict[str, Any]:
    """The SKILL.md front matter: ``key: value`` lines, a ``{...}`` value read as JSON."""
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert match, "SKILL.md starts with a --- front matter block"
    found: dict[str, Any] = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[a-z]+", key), f"not a key: value line: {line!r}"
        found[key] = json.loads(value) if value.startswith("{") else value
    return found


def test_bundle_has_the_form_nanobot_loads(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ws" / "plugins" / "gitmem"
    written = write_plugin(folder, store=made, agent="nanobot")
    assert written == [folder / name for name in FILES]
    manifest = json.loads((folder / "plugin.json").read_text())
    assert manifest["$schema"] == plugin.PLUGIN_SCHEMA
    assert set(manifest) <= PLUGIN_KEYS
    assert PLUGIN_NAME.fullmatch(manifest["name"]) and manifest["name"] == "gitmem"
    assert str(made) in manifest["description"]
    servers = json.loads((folder / "mcp.json").read_text())
    assert set(servers) == {"$schema", "mcpServers"}
    assert servers["$schema"] == plugin.MCP_SCHEMA
    entry = servers["mcpServers"]["gitmem"]
    assert set(entry) <= SERVER_KEYS and entry["type"] == "stdio"
    assert entry["command"] == "./bin/gitmem"
    assert entry["args"] == ["--repo", str(made.resolve()), "--agent", "nanobot", "mcp"]
    launcher = folder / "bin" / "gitmem"
    assert os.access(launcher, os.X_OK)
    assert launcher.read_text().splitlines()[-1] == f'exec {shlex.join(server_command())} "$@"'
    meta = front_matter((folder / "skills" / "gitmem" / "SKILL.md").read_text())
    assert meta["name"] == "gitmem" and 1 <= len(meta["description"].strip()) <= 1024
    assert meta["metadata"] == {"nanobot": {"emoji": "🧠", "always": True}}


def test_server_command_prefers_the_script_next_to_python(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    assert server_command(python) == [str(python), "-m", "gitmem"]
    script = python.parent / "gitmem"
    script.write_text("#!/bin/sh\n")
    assert server_command(python) == [str(python), "-m", "gitmem"]  # not executable
    script.chmod(0o755)
    assert server_command(python) == [str(script)]


async def _run_bundle(folder: Path) -> tuple[list[str], Any, Any]:
    """Start the server as mcp.json says (command relative to the plugin, which is also the
    working folder, as nanobot does), list its tools, save a turn and search it."""
    entry = json.loads((folder / "mcp.json").read_text())["mcpServers"]["gitmem"]
    command = str((folder / entry["command"]).resolve())
    params = StdioServerParameters(
        command=command, args=entry["args"], cwd=str(folder), env={"PYTHONPATH": str(ROOT)}
    )
    async with stdio_client(params) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        tools = [tool.name for tool in (await session.list_tools()).tools]
        saved = await session.call_tool(
            "save_interaction",
            {
                "session": "telegram:4711",
                "user": "I moved to Lisbon in March",
                "assistant": "Noted: Lisbon since March.",
            },
        )
        found = await session.call_tool("search", {"query": "Lisbon"})
    return tools, saved, found


def test_mcp_json_starts_a_working_server(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    write_plugin(folder, store=made, agent="nanobot")
    tools, saved, found = asyncio.run(_run_bundle(folder))
    assert {"save_interaction", "search", "get_context", "load_session"} <= set(tools)
    assert "revert" not in tools  # undo stays off in the bundle
    assert not is_error(saved), text_of(saved)
    assert not is_error(found) and "telegram:4711" in text_of(found)
    trailers = git(made, "log", "-1", "--format=%an%n%(trailers:only)")
    assert trailers.splitlines()[0] == "nanobot"  # the SDK's default client name is no agent
    assert "Gitmem-Via: mcp" in trailers and "Gitmem-Session: telegram:4711" in trailers
    assert git(made, "status", "--porcelain") == ""
    # the skill names only tools the server has, as nanobot shows them
    skill = (folder / "skills" / "gitmem" / "SKILL.md").read_text()
    named = set(re.findall(r"mcp_gitmem_(\w+)", skill))
    assert {"save_interaction", "search", "get_context"} <= named <= set(tools)


def test_writing_the_same_bundle_again_changes_nothing(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    write_plugin(folder, store=made, agent="nanobot")
    before = {name: (folder / name).stat() for name in FILES}
    assert write_plugin(folder, store=made, agent="nanobot") == [folder / n for n in FILES]
    after = {name: (folder / name).stat() for name in FILES}
    assert {n: (s.st_ino, s.st_mtime_ns) for n, s in before.items()} == {
        n: (s.st_ino, s.st_mtime_ns) for n, s in after.items()
    }
    # a launcher that lost its executable bit gets it back; its text is the same
    (folder / "bin" / "gitmem").chmod(0o644)
    write_plugin(folder, store=made, agent="nanobot")
    assert os.access(folder / "bin" / "gitmem", os.X_OK)


def test_a_different_file_is_refused_and_nothing_is_written(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    write_plugin(folder, store=made, agent="nanobot")
    (folder / "mcp.json").write_text("{}\n")
    (folder / "skills" / "gitmem" / "SKILL.md").unlink()
    with pytest.raises(ConflictError, match=r"plugin/mcp\.json: exists with other content"):
        write_plugin(folder, store=made, agent="nanobot")
    assert (folder / "mcp.json").read_text() == "{}\n"
    assert not (folder / "skills" / "gitmem" / "SKILL.md").exists()
    # another agent or store is another bundle: refused the same way
    (folder / "mcp.json").unlink()
    write_plugin(folder, store=made, agent="nanobot")
    with pytest.raises(ConflictError, match=r"mcp\.json"):
        write_plugin(folder, store=made, agent="other-bot")


def test_things_in_the_way_are_refused(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "skills").write_text("a file where a folder goes\n")
    with pytest.raises(ConflictError, match=r"plugin/skills: exists and is not a folder"):
        write_plugin(folder, store=made, agent="nanobot")
    assert sorted(p.name for p in folder.iterdir()) == ["skills"]
    (folder / "skills").unlink()
    (folder / "mcp.json").mkdir()
    with pytest.raises(ConflictError, match=r"mcp\.json: exists and is not a regular file"):
        write_plugin(folder, store=made, agent="nanobot")
    (folder / "mcp.json").rmdir()
    (folder / "plugin.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ConflictError, match=r"plugin\.json: is a symbolic link"):
        write_plugin(folder, store=made, agent="nanobot")
    assert not (tmp_path / "elsewhere.json").exists()


def test_a_folder_that_is_no_store_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    (tmp_path / "code").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path / "code")], check=True)
    for path in (tmp_path / "code", tmp_path / "nothing"):
        with pytest.raises((NotAStore, RepositoryError)):
            write_plugin(folder, store=path, agent="nanobot")
    assert not folder.exists()


def test_a_failed_write_leaves_the_folder_as_it_was(
    made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a full disk cannot be had here: the third file's fsync fails as it would (ENOSPC)
    real_fsync = os.fsync
    folder = tmp_path / "ws" / "plugins" / "gitmem"
    calls = []

    def failing_fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            calls.append(fd)
            if len(calls) == 3:
                raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(plugin.os, "fsync", failing_fsync)
    folder.parent.mkdir(parents=True)
    with pytest.raises(PluginError, match=r"No space left on device\); nothing was written"):
        write_plugin(folder, store=made, agent="nanobot")
    assert list(folder.parent.iterdir()) == []


def test_cli_writes_the_bundle_and_refuses_a_conflict(made: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    args = ["--repo", str(made), "--agent", "nanobot", "mcp", "--nanobot-plugin", str(folder)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [f"wrote {folder / name}" for name in FILES]
    (folder / "plugin.json").write_text("{}")
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 1
    assert f"{folder / 'plugin.json'}: exists with other content" in done.output


# -- docs/mcp.md's generic client snippet, run as written ---------------------------------------


def docs_python_client() -> str:
    """The first ``python`` block under docs/mcp.md's heading for a generic MCP client."""
    text = (ROOT / "docs" / "mcp.md").read_text()
    heading = text.index("### Any MCP client (Python)")
    match = re.compile(r"^```python\n(.*?)^```$", re.M | re.S).search(text, heading)
    assert match, "a python block follows the heading"
    return match.group(1)


def test_docs_python_client_runs_against_a_real_server(tmp_path: Path) -> None:
    code = docs_python_client()
    assert 'command="gitmem"' in code  # as a reader would run it: gitmem on PATH
    MemoryManager.init(tmp_path / "memory").close()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "gitmem"  # this test's gitmem, found on PATH as the snippet expects
    shim.write_text(
        f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT))} exec {shlex.join(server_command())} "$@"\n'
    )
    shim.chmod(0o755)
    (tmp_path / "client.py").write_text(code)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, "client.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "save_interaction" in done.stdout and "saved turn" in done.stdout
    assert "cli:alice" in done.stdout  # the search found the saved turn
    log = git(tmp_path / "memory", "log", "-1", "--format=%an%n%(trailers:only)")
    assert log.splitlines()[0] == "my-bot" and "Gitmem-Via: mcp" in log
