"""The MCP tests again under the other major of the ``mcp`` SDK.

The suite's own venv has mcp 2.x (the newest); nanobot pins ``mcp>=1.26,<2``, so gitmem's
server must work with 1.x too. This test runs every ``tests/test_mcp_*.py`` module in a venv
with the newest 1.x: the one ``GITMEM_MCP1_PYTHON`` names, else ``.venv-mcp1`` at the top of
the checkout (``.ci/run`` makes it), else one made here (needs the package index).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from gitmem.mcp import sdk

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-mcp1"
SPEC = "mcp>=1.26,<2"

pytestmark = pytest.mark.skipif(sdk.MAJOR != 2, reason="this run already uses mcp 1.x")


def _mcp_version(python: str) -> str:
    if not Path(python).exists():
        return ""
    done = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def _python() -> str:
    given = os.environ.get("GITMEM_MCP1_PYTHON")
    if given:
        return given
    python = VENV / "bin" / "python"
    if not _mcp_version(str(python)).startswith("1."):
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        done = subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-e",
                f"{ROOT}[test]",
                SPEC,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"could not make a venv with {SPEC}:\n{done.stderr[-2000:]}")
    return str(python)


def test_the_mcp_tests_pass_with_mcp_1x() -> None:
    python = _python()
    version = _mcp_version(python)
    assert version.startswith("1."), f"{python} has mcp {version or 'missing'}, not 1.x"
    modules = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").glob("test_mcp_*.py")
        if p.name != Path(__file__).name
    )
    assert modules, "no MCP test modules found"
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, f"under mcp {version}:\n{tail}"
    assert " passed" in done.stdout, tail
