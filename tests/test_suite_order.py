"""The suite's own scheduling: under ``-n auto --dist loadfile`` the long files go out first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LONG_FILES

TESTS = Path(__file__).resolve().parent


def test_every_long_file_is_a_test_file() -> None:
    missing = [name for name in LONG_FILES if not (TESTS / name).is_file()]
    assert not missing, missing
    assert len(set(LONG_FILES)) == len(LONG_FILES)


def test_xdist_keeps_the_order_conftest_gives(pytestconfig: pytest.Config) -> None:
    """xdist reorders files by test count unless told not to: the long files, which often
    have few tests, would go out last."""
    if not pytestconfig.pluginmanager.hasplugin("xdist"):
        pytest.skip("no xdist here: nothing reorders the files")
    assert pytestconfig.option.loadscopereorder is False
