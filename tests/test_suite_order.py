"""The suite's own scheduling: under ``-n auto --dist loadfile`` the long files go out first."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.conftest import LONG_FILES

TESTS = Path(__file__).resolve().parent


def test_every_long_file_is_a_test_file() -> None:
    missing = [name for name in LONG_FILES if not (TESTS / name).is_file()]
    assert not missing, missing
    assert len(set(LONG_FILES)) == len(LONG_FILES)


def test_xdist_keeps_the_order_conftest_gives() -> None:
    """xdist reorders files by test count unless told not to: the long files, which often
    have few tests, would go out last."""
    config = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())
    assert "--no-loadscope-reorder" in config["tool"]["pytest"]["ini_options"]["addopts"]
