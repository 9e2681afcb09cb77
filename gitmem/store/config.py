"""Reading setting values the way git does, with ranges checked.

Every ``gitmem.*`` git config key and ``GITMEM_*`` variable is parsed here, so that a typo
(``auto = banana``, ``lossThreshold = nan``) is an error that names the key and the values
it accepts, instead of silently switching a feature off. Booleans follow ``git config
--type=bool``: true/yes/on/any non-zero integer, false/no/off/0/empty (case-insensitive).
"""

from __future__ import annotations

import math
import re

from gitmem.errors import ConfigError

_TRUE = frozenset({"true", "yes", "on"})

_FALSE = frozenset({"false", "no", "off", ""})

# git's integers (C's strtoimax, base detected): optional sign; 0x hexadecimal, a leading 0
# octal, else decimal, in ASCII digits; optional k/m/g multiplier
_INT = re.compile(r"([-+]?)(0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*)([kmg]?)", re.IGNORECASE)

_SCALE = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}

OFF_WORDS = frozenset({"off", "none", "false", "no"})


def _fail(key: str, value: str, accepted: str) -> ConfigError:
    return ConfigError(
        f"{key} = {value!r} is not valid: expected {accepted}; fix it with "
        f"`git config {key} <value>` (or `git config --unset {key}`)"
    )


def _git_int(text: str) -> int | None:
    found = _INT.fullmatch(text.strip())
    if found is None:
        return None
    sign, digits, unit = found.groups()
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") else 10
    number = int(digits, base) * _SCALE[unit.lower()]
    return -number if sign == "-" else number


def parse_bool(key: str, value: str) -> bool:
    """``value`` as git reads a boolean (``key`` names it in the error)."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    number = _git_int(lowered)
    if number is None:
        raise _fail(key, value, "a boolean (true/yes/on/1 or false/no/off/0)")
    return number != 0


def parse_int(key: str, value: str, low: int, high: int) -> int:
    """An integer from ``low`` to ``high`` (git's k/m/g suffixes allowed)."""
    number = _git_int(value)
    if number is None or not low <= number <= high:
        raise _fail(key, value, f"a whole number from {low} to {high}")
    return number


def parse_float(key: str, value: str, low: float, high: float) -> float:
    """A finite number from ``low`` to ``high`` (``nan`` and ``inf`` are refused)."""
    try:
        number = float(value.strip())
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or not low <= number <= high:
        raise _fail(key, value, f"a number from {low:g} to {high:g}")
    return number


def parse_choice(key: str, value: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (case-insensitive)."""
    lowered = value.strip().lower()
    if lowered not in choices:
        raise _fail(key, value, "one of " + ", ".join(choices))
    return lowered


def is_off(value: str) -> bool:
    """True for the words that switch an optional numeric setting off (``off``, ``none``,
    ``false``, ``no``, empty)."""
    return value.strip().lower() in OFF_WORDS or not value.strip()


def unknown_key(key: str, known: tuple[str, ...]) -> ConfigError:
    """The error for a key gitmem does not know in its section."""
    section = key.rsplit(".", 1)[0]
    return ConfigError(
        f"unknown setting {key}; {section}.* accepts "
        + ", ".join(f"{section}.{k}" for k in known)
        + f" (remove it with `git config --unset {key}`)"
    )
