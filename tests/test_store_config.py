"""Every gitmem.* setting is read as git reads it, range-checked, and a bad value is an
error naming the key and what it accepts — never a feature silently switched off."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import ConfigError, GitmemError
from gitmem.llm.config import LLMConfig
from gitmem.store.config import parse_bool
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git


@pytest.mark.parametrize("value", ["true", "YES", "on", "1", "2", "-1", "1k"])
def test_booleans_that_git_reads_as_true(store: Path, value: str) -> None:
    MemoryManager.init(store)
    git(store, "config", "gitmem.summary.auto", value)
    assert git(store, "config", "--type=bool", "gitmem.summary.auto").strip() == "true"
    assert MemoryManager(store).summary_config.auto is True


@pytest.mark.parametrize(
    ("value", "number"), [("010", 8), ("0x10", 16), ("0X1f", 31), ("1k", 1024), ("+3", 3)]
)
def test_integers_read_as_git_reads_them(store: Path, value: str, number: int) -> None:
    # git reads integers with C's base detection: 010 is octal, 0x10 hexadecimal
    MemoryManager.init(store)
    git(store, "config", "gitmem.summary.everyTurns", value)
    assert git(store, "config", "--type=int", "gitmem.summary.everyTurns").strip() == str(number)
    assert MemoryManager(store).summary_config.triggers.every_turns == number


@pytest.mark.parametrize("value", ["08", "0x", "\u0663", "1_0"])
def test_integers_git_refuses_are_refused(store: Path, value: str) -> None:
    MemoryManager.init(store)
    git(store, "config", "gitmem.summary.everyTurns", value)
    assert git(store, "config", "--type=int", "gitmem.summary.everyTurns", check=False) == ""
    with pytest.raises(ConfigError, match=r"gitmem\.summary\.everyTurns"):
        _ = MemoryManager(store).summary_config
    git(store, "config", "--unset", "gitmem.summary.everyTurns")
    git(store, "config", "gitmem.summary.auto", value)
    with pytest.raises(ConfigError, match=r"gitmem\.summary\.auto"):
        _ = MemoryManager(store).summary_config


@pytest.mark.parametrize("value", ["false", "No", "off", "0", ""])
def test_booleans_that_git_reads_as_false(value: str) -> None:
    assert parse_bool("gitmem.summary.auto", value) is False
    assert SummaryConfig.from_git({"gitmem.summary.autotag": value}).auto_tag is False


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("auto", "banana", "a boolean"),
        ("lossThreshold", "nan", "a number from 0 to 1"),
        ("lossThreshold", "2", "a number from 0 to 1"),
        ("lossThreshold", "-0.1", "a number from 0 to 1"),
        ("everyTurns", "-3", "a whole number from 1 to 100000"),
        ("everyTurns", "0", "a whole number from 1 to 100000"),
        ("everyTurns", "99999999999", "a whole number from 1 to 100000"),
        ("everyTurns", "2.5", "a whole number"),
        ("topicShift", "nan", "a number from 0 to 1"),
        ("topicShift", "inf", "a number from 0 to 1"),
        ("idle", "0s", "a duration"),
        ("archive", "bin", "one of keep, archive"),
        ("onLoss", "ignore", "one of refuse, review"),
        ("offline", "maybe", "a boolean"),
    ],
)
def test_a_bad_summary_value_names_key_and_accepted_values(
    key: str, value: str, accepted: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        SummaryConfig.from_git({f"gitmem.summary.{key.lower()}": value})
    message = str(caught.value)
    assert f"gitmem.summary.{key} = {value!r}" in message
    assert accepted in message
    assert isinstance(caught.value, GitmemError)


def test_an_unknown_summary_key_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"gitmem.summary.evryturns.*gitmem.summary.everyTurns"):
        SummaryConfig.from_git({"gitmem.summary.evryturns": "5"})


def test_off_switches_optional_triggers_off() -> None:
    config = SummaryConfig.from_git(
        {
            "gitmem.summary.everyturns": "off",
            "gitmem.summary.topicshift": "none",
            "gitmem.summary.idle": "off",
        }
    )
    assert (config.triggers.every_turns, config.triggers.topic_shift, config.triggers.idle) == (
        None,
        None,
        None,
    )


def test_a_save_with_a_bad_setting_fails_before_committing(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "hello", "hi")
    head = git(store, "rev-parse", "HEAD")
    git(store, "config", "gitmem.summary.auto", "banana")
    with pytest.raises(ConfigError, match=r"gitmem.summary.auto = 'banana'"):
        MemoryManager(store).save_interaction("s", "second", "turn")
    assert git(store, "rev-parse", "HEAD") == head
    assert git(store, "status", "--porcelain") == ""


def test_a_nan_loss_threshold_does_not_turn_the_guard_off(store: Path) -> None:
    MemoryManager.init(store).save_interaction("s", "hello", "hi")
    git(store, "config", "gitmem.summary.lossThreshold", "nan")
    with pytest.raises(ConfigError):
        MemoryManager(store).summarize("s")


def test_secret_redact_reads_booleans_as_git_does(store: Path) -> None:
    MemoryManager.init(store)
    git(store, "config", "gitmem.secrets.redact", "nope")
    with pytest.raises(ConfigError, match=r"gitmem.secrets.redact = 'nope'"):
        MemoryManager(store).save_interaction("s", "hello", "hi")
    git(store, "config", "--unset", "gitmem.secrets.redact")
    git(store, "config", "gitmem.secrets.colour", "red")
    with pytest.raises(ConfigError, match=r"unknown setting gitmem.secrets.colour"):
        MemoryManager(store).save_interaction("s", "hello", "hi")
    git(store, "config", "--unset", "gitmem.secrets.colour")
    git(store, "config", "gitmem.secrets.redact", "2")
    assert MemoryManager(store).secret_config.redact is True


def test_llm_timeout_and_retries_from_git_config_and_env(store: Path) -> None:
    env = {"GITMEM_LLM_MODEL": "m"}
    found = LLMConfig.from_env(env, git={"gitmem.llm.timeout": "7.5", "gitmem.llm.retries": "0"})
    assert found is not None and (found.timeout, found.max_retries) == (7.5, 0)
    env |= {"GITMEM_LLM_TIMEOUT": "3", "GITMEM_LLM_RETRIES": "4"}
    found = LLMConfig.from_env(env, git={"gitmem.llm.timeout": "7.5"})
    assert found is not None and (found.timeout, found.max_retries) == (3.0, 4)
    with pytest.raises(ConfigError, match="GITMEM_LLM_TIMEOUT = 'soon'"):
        LLMConfig.from_env({"GITMEM_LLM_MODEL": "m", "GITMEM_LLM_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match=r"gitmem.llm.retries = '-1'"):
        LLMConfig.from_env(env, git={"gitmem.llm.retries": "-1"})
    MemoryManager.init(store)
    git(store, "config", "gitmem.llm.timeout", "nan")
    with pytest.raises(ConfigError, match=r"gitmem.llm.timeout = 'nan'"):
        MemoryManager(store).save_interaction("s", "hello", "hi")
