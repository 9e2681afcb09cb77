"""docs/mcp.md is the tool contract: every tool, argument and resource the server registers is
documented there, and every documented one exists (in-process: no client needed)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from gitmem.manager import MemoryManager
from gitmem.mcp.server import ServerOptions, build_server

DOC = Path(__file__).resolve().parent.parent / "docs" / "mcp.md"


def _documented() -> dict[str, tuple[set[str], set[str]]]:
    """tool -> (arguments, required arguments), from the table in docs/mcp.md."""
    found = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`[a-z_]+`", cells[0]):
            continue
        args = re.findall(r"`([a-z_]+)`(\*?)", cells[1])
        found[cells[0].strip("`")] = ({a for a, _ in args}, {a for a, star in args if star})
    return found


def _schema(tool: Any) -> dict[str, Any]:
    schema: dict[str, Any] = getattr(tool, "inputSchema", None) or tool.input_schema
    return schema


def _tools(tmp_path: Path, **options: bool) -> dict[str, Any]:
    MemoryManager.init(tmp_path / "store").close()
    with MemoryManager(tmp_path / "store", agent="docs", via="mcp") as mm:
        server = build_server(mm, ServerOptions(**options))
        return {t.name: t for t in asyncio.run(server.list_tools())}


def test_every_tool_and_argument_is_documented_and_no_more(tmp_path: Path) -> None:
    tools = _tools(tmp_path, allow_undo=True)
    documented = _documented()
    assert set(tools) == set(documented)
    for name, tool in tools.items():
        schema = _schema(tool)
        args, required = documented[name]
        assert set(schema["properties"]) == args, name
        assert set(schema.get("required", [])) == required, name


def test_every_tool_and_argument_tells_a_model_what_it_is(tmp_path: Path) -> None:
    for name, tool in _tools(tmp_path, allow_undo=True).items():
        assert tool.description and len(tool.description) > 40, name
        for arg, spec in _schema(tool)["properties"].items():
            assert spec.get("description"), f"{name}.{arg} has no description"


def test_read_only_lists_exactly_the_reads_the_page_names(tmp_path: Path) -> None:
    text = DOC.read_text()
    named = re.search(r"`--read-only` registers only (.+?)\.", text, re.S)
    assert named is not None
    reads = set(re.findall(r"`([a-z_]+)`", named.group(1)))
    assert set(_tools(tmp_path, read_only=True)) == reads
