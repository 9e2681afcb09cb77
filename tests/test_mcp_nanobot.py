"""nanobot itself, end to end: its own code reads a config.json (or the plugin bundle), connects
``gitmem mcp``, builds its tool wrappers, and calls ``mcp_gitmem_save_interaction`` and
``mcp_gitmem_search`` through them; the store is then checked with the real git.

Slow (a virtual environment with ``nanobot-ai`` from the package index, ~1 minute), so
deselected by default:

    GITMEM_FULL=1 python -m pytest -q -m slow tests/test_mcp_nanobot.py

``GITMEM_NANOBOT_PYTHON=/path/to/venv/bin/python`` reuses an environment that has
``nanobot-ai`` and this gitmem installed (``pip install nanobot-ai -e .``). nanobot pins
``mcp<2``, so its side runs the SDK's 1.x client; the HTTP test's server runs in this suite's
interpreter (either major), so that test also crosses majors.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gitmem import MemoryManager
from tests.conftest import git
from tests.mcp_client import http_server
from tests.nanobot_env import ROOT, python_with

pytestmark = pytest.mark.slow


# Runs with nanobot's interpreter: nanobot's own loader, MCP provider and tool registry.
DRIVER = r"""
import asyncio, json, sys
from pathlib import Path

from nanobot.agent.tools.mcp import MCPProvider
from nanobot.agent.tools.registry import ToolRegistry
from nanobot.config.loader import load_config, set_config_path


def plugins(workspace):
    from nanobot.agent.plugins import discover_agent_plugins
    return [[p.name, p.enabled, list(p.mcp_servers)] for p in discover_agent_plugins(workspace)]


async def main(config_path, calls_path, enable_plugin):
    path = Path(config_path)
    set_config_path(path)
    config = load_config(path)
    out = {}
    if enable_plugin:  # what nanobot's WebUI does when its user enables the plugin
        from nanobot.agent.plugins import set_agent_plugin_enabled
        from nanobot.agent.skills import SkillsLoader
        set_agent_plugin_enabled(config.workspace_path, "gitmem", True)
        out["plugins"] = plugins(config.workspace_path)
        loader = SkillsLoader(config.workspace_path)
        out["skills"] = [s["name"] for s in loader.list_skills() if s["source"] == "plugin"]
        out["always"] = loader.get_always_skills()
        out["skill_text"] = loader.load_skills_for_context(["gitmem"])
    registry = ToolRegistry()
    provider = MCPProvider.from_config(config, registry)
    await provider.connect()
    try:
        out["status"] = provider.runtime_status()
        out["tools"] = sorted(registry.tool_names)
        out["results"] = []
        for name, params in json.loads(Path(calls_path).read_text()):
            result = await registry.execute(name, params)
            out["results"].append({"tool": name, "error": bool(getattr(result, "is_error", False)),
                                   "text": str(result)})
    finally:
        await provider.aclose()
    if enable_plugin:
        out["plugins_after"] = plugins(config.workspace_path)
    print("RESULT " + json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2], "--plugin" in sys.argv))
"""


@pytest.fixture(scope="module")
def nanobot_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter with nanobot-ai and this gitmem: GITMEM_NANOBOT_PYTHON, else a new venv."""
    return python_with(tmp_path_factory, "nanobot-venv", "nanobot-ai", "-e", str(ROOT))


@pytest.fixture
def env_for(tmp_path: Path, nanobot_python: Path) -> dict[str, str]:
    """The environment nanobot runs in: ``gitmem`` (of nanobot's venv) on PATH, as a user
    who installed both would have it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = nanobot_python.parent / "gitmem"
    command = [str(script)] if script.is_file() else [str(nanobot_python), "-m", "gitmem"]
    shim = bin_dir / "gitmem"
    shim.write_text(f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_nanobot(
    python: Path,
    env: dict[str, str],
    tmp_path: Path,
    config: dict[str, Any],
    calls: list[tuple[str, dict[str, Any]]],
    *,
    plugin: bool = False,
) -> Any:
    """Write config.json and the calls, run the driver with nanobot's interpreter."""
    config_path = tmp_path / "nanobot" / "config.json"
    config_path.parent.mkdir(exist_ok=True)
    config_path.write_text(json.dumps(config, indent=2))
    (tmp_path / "calls.json").write_text(json.dumps(calls))
    (tmp_path / "driver.py").write_text(DRIVER)
    args = [str(python), "driver.py", str(config_path), "calls.json", *(["--plugin"] * plugin)]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, f"the driver printed no result:\n{done.stderr[-4000:]}"
    return json.loads(line.removeprefix("RESULT "))


SAVE = (
    "mcp_gitmem_save_interaction",
    {
        "session": "telegram:8812345",
        "user": "My sister Ana lives in Porto",
        "assistant": "Noted: Ana, your sister, lives in Porto.",
    },
)
SEARCH = ("mcp_gitmem_search", {"query": "where does Ana live", "k": 3})


def saves(store: Path) -> list[str]:
    """The commits after the store's first (its init), newest first, as 'author | trailers'."""
    out = git(store, "log", "--format=%an | %(trailers:only,unfold,separator=%x3B )")
    return [line for line in out.splitlines() if line and "Gitmem-Op: init" not in line]


def check_clean(store: Path) -> None:
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--no-progress")


def test_nanobot_config_stdio(
    nanobot_python: Path, env_for: dict[str, str], store: Path, tmp_path: Path
) -> None:
    MemoryManager.init(store).close()
    # exactly the config.json entry of docs/mcp.md (with this test's store)
    config = {
        "agents": {"defaults": {"workspace": str(tmp_path / "workspace")}},
        "tools": {
            "mcpServers": {
                "gitmem": {
                    "command": "gitmem",
                    "args": ["--repo", str(store), "--agent", "nanobot", "mcp"],
                    "enabledTools": ["save_interaction", "search", "mcp_gitmem_get_context"],
                }
            }
        },
    }
    bad = ("mcp_gitmem_save_interaction", {"user": "no session given"})
    context = ("mcp_gitmem_get_context", {"session": "telegram:8812345", "query": "Ana"})
    out = run_nanobot(nanobot_python, env_for, tmp_path, config, [SAVE, SEARCH, bad, context])
    assert out["status"] == {"gitmem": "connected"}
    assert out["tools"] == [
        "mcp_gitmem_get_context",
        "mcp_gitmem_save_interaction",
        "mcp_gitmem_search",
    ]
    saved, found, refused, recalled = out["results"]
    assert not saved["error"] and "saved turn" in saved["text"], saved
    assert not found["error"] and "telegram:8812345" in found["text"] and "Porto" in found["text"]
    assert refused["error"] and "session" in refused["text"]
    assert not recalled["error"] and "Porto" in recalled["text"]
    [commit] = saves(store)
    assert commit.startswith("nanobot | ")
    for trailer in (
        "Gitmem-Op: save",
        "Gitmem-Session: telegram:8812345",
        "Gitmem-Agent: nanobot",
        "Gitmem-Via: mcp",
    ):
        assert trailer in commit
    check_clean(store)


def test_nanobot_loads_the_plugin_bundle(
    nanobot_python: Path, env_for: dict[str, str], store: Path, tmp_path: Path
) -> None:
    MemoryManager.init(store).close()
    workspace = tmp_path / "workspace"
    folder = workspace / "plugins" / "gitmem"
    # written by the gitmem of nanobot's environment, as a user of that environment would
    done = subprocess.run(
        [
            "gitmem",
            "--repo",
            str(store),
            "--agent",
            "nanobot",
            "mcp",
            "--nanobot-plugin",
            str(folder),
        ],
        env=env_for,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    config = {"agents": {"defaults": {"workspace": str(workspace)}}}
    # a PATH without gitmem: the bundle's launcher must not need it
    env = {**env_for, "PATH": os.defpath}
    out = run_nanobot(nanobot_python, env, tmp_path, config, [SAVE, SEARCH], plugin=True)
    assert out["plugins"] == [["gitmem", True, ["gitmem"]]]
    assert out["skills"] == ["gitmem"] and "gitmem" in out["always"]
    assert "mcp_gitmem_save_interaction" in out["skill_text"]
    assert out["status"] == {"gitmem": "connected"}
    tools = set(out["tools"])
    assert {
        f"mcp_gitmem_{name}"
        for name in (
            "save_interaction",
            "search",
            "get_context",
            "load_session",
            "list_sessions",
            "history",
            "diff",
            "blame",
            "summarize",
        )
    } <= tools
    assert "mcp_gitmem_prompt_recall" in tools and "mcp_gitmem_revert" not in tools
    saved, found = out["results"]
    assert not saved["error"] and not found["error"] and "Porto" in found["text"]
    [commit] = saves(store)
    assert commit.startswith("nanobot | ") and "Gitmem-Via: mcp" in commit
    # running the server wrote nothing into the plugin: nanobot keeps it enabled
    assert out["plugins_after"] == [["gitmem", True, ["gitmem"]]]
    check_clean(store)


def test_nanobot_over_streamable_http(
    nanobot_python: Path, env_for: dict[str, str], store: Path, tmp_path: Path
) -> None:
    MemoryManager.init(store).close()
    token = secrets.token_urlsafe(24)
    with http_server(store, agent="nanobot", env={"GITMEM_MCP_TOKEN": token}) as url:
        server = {
            "url": url,
            "headers": {"Authorization": f"Bearer {token}"},
            "enabledTools": ["save_interaction", "search"],
        }
        config: dict[str, Any] = {
            "agents": {"defaults": {"workspace": str(tmp_path / "workspace")}},
            "tools": {"mcpServers": {"gitmem": server}},
        }
        # nanobot's SSRF guard refuses the loopback address until it is whitelisted
        out = run_nanobot(nanobot_python, env_for, tmp_path, config, [SAVE])
        assert out["status"] == {"gitmem": "failed"} and out["tools"] == []
        assert saves(store) == []
        config["tools"]["ssrfWhitelist"] = ["127.0.0.1/32"]
        out = run_nanobot(nanobot_python, env_for, tmp_path, config, [SAVE, SEARCH])
        assert out["status"] == {"gitmem": "connected"}
        saved, found = out["results"]
        assert not saved["error"] and not found["error"] and "Porto" in found["text"]
        # a wrong token: nanobot cannot connect, nothing is written
        server["headers"] = {"Authorization": "Bearer " + "x" * 32}
        out = run_nanobot(nanobot_python, env_for, tmp_path, config, [SAVE])
        assert out["status"] == {"gitmem": "failed"}
    [commit] = saves(store)
    assert commit.startswith("nanobot | ") and "Gitmem-Via: mcp" in commit
    check_clean(store)
