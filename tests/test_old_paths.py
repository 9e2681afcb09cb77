"""gitmem 0.1's import paths keep working for one release, with a warning naming the new home."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import gitmem  # noqa: F401  (installs the finder)

ROOT = Path(__file__).resolve().parent.parent
NAMES_01: dict[str, list[str]] = json.loads(
    (ROOT / "tests" / "fixtures" / "names-0.1.json").read_text()
)


@pytest.mark.parametrize("old", sorted(NAMES_01))
def test_every_public_name_of_a_flat_module_still_imports(old: str) -> None:
    module = importlib.import_module(f"gitmem.{old}")
    missing, silent = [], []
    for name in NAMES_01[old]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if not hasattr(module, name):
                missing.append(name)
            elif not any(f"gitmem.{old}.{name} moved to gitmem." in str(w.message) for w in caught):
                silent.append(name)
    assert not missing, f"gitmem.{old} lost {missing}"
    assert not silent, f"gitmem.{old} gives {silent} without saying where they moved"


def test_the_old_path_gives_the_same_object_as_the_new_one() -> None:
    from gitmem.summary.engines import LLMConfig

    with pytest.warns(DeprecationWarning, match=r"gitmem\.summary\.engines\.LLMConfig"):
        from gitmem.summarize import LLMConfig as old

    assert old is LLMConfig


def test_an_unknown_name_on_an_old_path_says_where_to_look() -> None:
    module = importlib.import_module("gitmem.summarize")
    with pytest.raises(AttributeError, match=r"docs/upgrading\.md"):
        module.NoSuchThing  # noqa: B018


def test_a_name_that_was_never_a_module_is_still_missing() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gitmem.no_such_module")


def test_the_merge_driver_start_does_not_load_the_old_path_table_targets() -> None:
    code = (
        "import sys, gitmem.sync.driver; "
        "print(sorted(m for m in sys.modules if m.startswith('gitmem.summary')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"
