"""What the nanobot tests share: the fixture nanobot's own code wrote, and an interpreter
that has nanobot-ai installed (for the slow tests that run nanobot itself)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FIXTURE = ROOT / "tests" / "data" / "nanobot" / "nanobot-fixture.tar.gz"

# what pip says when the package index cannot be reached (the only reason to skip)
OFFLINE = (
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeoutError",
    "No matching distribution found for nanobot-ai",
    "Could not find a version that satisfies the requirement nanobot-ai",
)


def unpack(folder: Path) -> Path:
    """The fixture unpacked into ``folder`` (``v0.3.5/home/.nanobot``, ``v0.1.4/workspace``)."""
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(folder, filter="data")
    return folder


def copy_home(unpacked: Path, target: Path) -> Path:
    """A private copy of the fixture's 0.3.5 nanobot home at ``target`` (tests change it)."""
    shutil.copytree(unpacked / "v0.3.5" / "home" / ".nanobot", target, symlinks=True)
    return target


def python_with(tmp_path_factory: pytest.TempPathFactory, name: str, *requirements: str) -> Path:
    """An interpreter with ``requirements`` installed: ``GITMEM_NANOBOT_PYTHON`` when set
    (an environment that has them), else a new venv; skips when the package index is
    unreachable."""
    given = os.environ.get("GITMEM_NANOBOT_PYTHON")
    if given:
        return Path(given)
    folder = tmp_path_factory.mktemp(name)
    venv.create(folder, with_pip=True)
    python = folder / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        output = done.stdout + done.stderr
        if any(sign in output for sign in OFFLINE):
            pytest.skip(f"the package index is unreachable: {output.strip().splitlines()[-1]}")
        raise AssertionError(f"pip install {' '.join(requirements)} failed:\n{output[-3000:]}")
    return python
