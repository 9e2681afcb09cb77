"""Secrets never reach a commit, and those already in history are found and reported masked."""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from gitmem.cli import cli
from gitmem.guard.secrets import (
    DEFAULT_PATTERNS,
    SecretConfig,
    SecretPattern,
    find_secrets,
    mask,
    redact,
)
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, StructuredSummary, Summary, now
from gitmem.summary.engines import SummaryResult
from tests.conftest import git
from tests.reliability.conftest import SIZES

# the isolating fixture clears GITMEM_* variables: read the example count at import
EXAMPLES = int(os.environ.get("GITMEM_HYPOTHESIS_EXAMPLES", "2000"))
FULL_EXAMPLES = int(os.environ.get("GITMEM_FULL_EXAMPLES", "20000"))


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"


def make_secret(kind: str, rng: random.Random) -> str:
    """A realistic (random, never real) secret of ``kind``, as it would be pasted."""
    digit = rng.choice(string.digits)
    makers = {
        "openai-key": lambda: "sk-" + _rand(rng, ALNUM, 47) + digit,
        "openai-project-key": lambda: "sk-proj-" + _rand(rng, ALNUM + "_-", 120) + digit,
        "anthropic-key": lambda: "sk-ant-api03-" + _rand(rng, ALNUM + "_-", 93),
        "aws-access-key": lambda: (
            rng.choice(["AKIA", "ASIA"]) + _rand(rng, string.ascii_uppercase + string.digits, 16)
        ),
        "aws-secret-key": lambda: "aws_secret_access_key = " + _rand(rng, B64, 40),
        "github-token": lambda: rng.choice(["ghp_", "gho_", "ghs_"]) + _rand(rng, ALNUM, 36),
        "github-pat": lambda: "github_pat_" + _rand(rng, ALNUM, 22) + "_" + _rand(rng, ALNUM, 59),
        "slack-token": lambda: (
            rng.choice("baprs").join(["xox", "-"])
            + "-".join(_rand(rng, string.digits, 12) for _ in range(2))
            + "-"
            + _rand(rng, ALNUM, 24)
        ),
        "private-key": lambda: (
            "-----BEGIN RSA PRIVATE KEY-----\n"
            + "\n".join(_rand(rng, B64, 64) for _ in range(5))
            + "\n-----END RSA PRIVATE KEY-----"
        ),
        "openssh-key": lambda: (
            "-----BEGIN OPENSSH PRIVATE KEY-----\n"
            + _rand(rng, B64, 70)
            + "\n-----END OPENSSH PRIVATE KEY-----"
        ),
        "google-api-key": lambda: "AIza" + _rand(rng, ALNUM + "_-", 35),
        "stripe-key": lambda: "sk_live_" + _rand(rng, ALNUM, 24),
        "bearer-token": lambda: "Authorization: Bearer " + _rand(rng, ALNUM, 31) + digit,
        "url-password": lambda: f"https://bob:{_rand(rng, ALNUM, 12)}@git.example.com/r.git",
        "url-token": lambda: (
            "https://api.example.com/v1/items?page=2&access_token=" + _rand(rng, ALNUM, 24)
        ),
        "assigned-secret": lambda: "DB_PASSWORD=" + _rand(rng, string.ascii_letters, 14) + digit,
        "jwt": lambda: (
            "eyJ"
            + _rand(rng, ALNUM, 20)
            + ".eyJ"
            + _rand(rng, ALNUM, 30)
            + "."
            + _rand(rng, ALNUM + "_-", 43)
        ),
    }
    return makers[kind]()


KINDS = sorted(
    [
        "openai-key",
        "openai-project-key",
        "anthropic-key",
        "aws-access-key",
        "aws-secret-key",
        "github-token",
        "github-pat",
        "slack-token",
        "private-key",
        "openssh-key",
        "google-api-key",
        "stripe-key",
        "bearer-token",
        "url-password",
        "url-token",
        "assigned-secret",
        "jwt",
    ]
)
# Ordinary text that looks a little like secrets: none of it may be redacted.
BENIGN = [
    "Use scikit-learn: pip install scikit-learn, see sk-learn-tutorial-for-beginners-2024.",
    "The token 2024-04-15T15:30:22 was logged at /usr/local/lib/python3.11/site-packages.",
    "Bearer of good news! The key=value store keeps a password reset link for you.",
    "Email bob@example.com or open https://example.com/docs?page=2&lang=en#intro.",
    "Run `git log --all`, then `ssh git@github.com` and cat ~/.ssh/id_ed25519.pub.",
    "The secret to good bread is time; my access key card opens door 42.",
    "AKIA is not a key by itself, and neither is ghp_ or xoxb- on its own.",
    "-----BEGIN PUBLIC KEY----- is fine to share, so is a certificate.",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "commit 3ca227e687a5d2c9f1b1e0a7f2c6d1e9b8a7c6d5 fixed password: validation.",
    "会话里的密钥应当被替换, but 装饰器 and 中文 text stay as they are.",
    "f(x) = x**2; key: 'name'; token = tokens[0]; password_hint = 'first pet'",
]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_found_masked_and_redacted(kind: str) -> None:
    rng = random.Random(kind)
    secret = make_secret(kind, rng)
    text = f"here it is:\n{secret}\nthanks"
    found = list(find_secrets(text))
    assert len(found) == 1, found
    clean, counts = redact(text)
    hidden = secret.split("=", 1)[-1].split(":", 1)[-1] if "://" not in secret else secret
    assert hidden.strip() not in clean
    assert "[REDACTED:" in clean and sum(counts.values()) == 1
    assert clean.startswith("here it is:\n") and clean.endswith("\nthanks")
    assert found[0].line == 2
    # what is shown never holds more than a prefix that names the kind
    assert len(found[0].masked.split("…")[0]) <= 4
    assert secret[4:12] not in found[0].masked


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert list(find_secrets(text)) == []
    assert redact(text) == (text, Counter())


def test_a_url_keeps_everything_but_its_password() -> None:
    clean, counts = redact("clone https://alice:s3cr3t-Pa55@git.example.com/x.git now")
    assert clean == "clone https://alice:[REDACTED:url-password]@git.example.com/x.git now"
    assert counts == {"url-password": 1}


def test_a_known_key_in_an_assignment_is_named_by_its_kind() -> None:
    key = make_secret("openai-key", random.Random(1))
    clean, counts = redact(f"OPENAI_API_KEY={key}")
    assert clean == "OPENAI_API_KEY=[REDACTED:openai-key]"
    assert counts == {"openai-key": 1}


def test_redaction_is_idempotent_and_markers_are_not_secrets() -> None:
    text = "\n".join(make_secret(k, random.Random(k)) for k in KINDS)
    once, counts = redact(text)
    assert sum(counts.values()) == len(KINDS)
    assert redact(once) == (once, Counter())


def test_patterns_are_configurable() -> None:
    internal = SecretPattern("acme-token", r"acme_[0-9a-f]{32}", hints=("acme_",))
    config = SecretConfig().with_patterns(internal)
    token = "acme_" + "0123456789abcdef" * 2
    assert redact(f"use {token}", config)[0] == "use [REDACTED:acme-token]"
    assert redact(f"use {token}")[0] == f"use {token}"  # not a default kind
    example = "AKIAIOSFODNN7EXAMPLE"
    allowing = SecretConfig(allow=(r"AKIA[A-Z0-9]*EXAMPLE",))
    assert redact(example, allowing)[0] == example
    only_aws = SecretConfig(patterns=tuple(p for p in DEFAULT_PATTERNS if p.kind.startswith("aws")))
    assert redact(f"{example} {token}", only_aws)[0] == f"[REDACTED:aws-access-key] {token}"
    case = SecretConfig(patterns=(), extra=(SecretPattern("word", r"hunter2", ignore_case=True),))
    assert redact("HUNTER2 hunter2", case)[0] == "[REDACTED:word] [REDACTED:word]"


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (SecretPattern("Bad Kind", "x"), "kind"),
        (SecretPattern("k", "("), "secret pattern 'k'"),
        (SecretPattern("k", "(?P<other>x)"), "named group"),
        (SecretPattern("k", "x*"), "empty"),
    ],
)
def test_bad_patterns_are_refused(pattern: SecretPattern, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        SecretConfig(extra=(pattern,))


def test_settings_from_git_config() -> None:
    config = SecretConfig.from_git(
        [
            ("gitmem.secrets.pattern", r"acme-token=(?i)acme_[0-9a-f]{8}"),
            ("gitmem.secrets.allow", "AKIAIOSFODNN7EXAMPLE"),
            ("gitmem.secrets.redact", "true"),
        ]
    )
    assert config.redact and config.extra[0].kind == "acme-token" and config.extra[0].ignore_case
    assert redact("ACME_0123abcd AKIAIOSFODNN7EXAMPLE", config)[0] == (
        "[REDACTED:acme-token] AKIAIOSFODNN7EXAMPLE"
    )
    assert not SecretConfig.from_git([("gitmem.secrets.redact", "false")]).redact
    with pytest.raises(ValueError, match="unknown"):
        SecretConfig.from_git([("gitmem.secrets.colour", "red")])


def test_mask_never_shows_a_short_secret() -> None:
    assert mask("hunter2x") == "…(8 chars)"
    assert mask("sk-" + "a" * 40) == "sk-a…(43 chars)"


# --- planted at random: every one is caught --------------------------------------------

FILLER = st.lists(
    st.sampled_from([*BENIGN, "", "ok", "see below", "> quoted", "### 2024"]), max_size=4
).map("\n".join)
TOTALS: Counter[str] = Counter()


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, list[str]]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=4))
    parts, secrets_ = [], []
    for kind in kinds:
        secret = make_secret(kind, rng)
        secrets_.append(secret)
        parts += [draw(FILLER), secret]
    parts.append(draw(FILLER))
    sep = draw(st.sampled_from([" ", "\n", "\n\n", " and "]))
    return sep.join(parts), secrets_


def _check_planted(case: tuple[str, list[str]]) -> None:
    text, secrets_ = case
    clean, counts = redact(text)
    TOTALS["planted"] += len(secrets_)
    assert sum(counts.values()) == len(secrets_), (counts, secrets_)
    for secret in secrets_:
        core = secret.rsplit("=", 1)[-1] if "=" in secret and "://" not in secret else secret
        core = core.split(":", 2)[-1].split("@")[0] if "://" in core else core
        assert core.strip() not in clean
    TOTALS["caught"] += sum(counts.values())


@pytest.mark.parametrize("size", SIZES)
def test_every_planted_secret_is_caught(size: str, figures: dict[str, Any]) -> None:
    examples = EXAMPLES if size == "ci" else FULL_EXAMPLES
    TOTALS.clear()
    run = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )(given(planted())(_check_planted))
    run()
    assert TOTALS["caught"] == TOTALS["planted"] > 0
    figures.update(
        examples=examples, secrets_planted=TOTALS["planted"], secrets_caught=TOTALS["caught"]
    )


# --- through the manager: nothing reaches a git object ---------------------------------


def _all_objects(store: Path) -> str:
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=store,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode("utf-8", "replace")


def test_no_secret_reaches_any_git_object(store: Path) -> None:
    rng = random.Random(7)
    mm = MemoryManager.init(store)
    planted_ = {kind: make_secret(kind, rng) for kind in KINDS}
    for kind, secret in planted_.items():
        mm.save_interaction(
            "leaky",
            f"{secret} is my {kind}",
            "noted",
            metadata={"note": secret.replace("\n", " ")} if "\n" not in secret else None,
        )
    with mm.batch("Import"):
        mm.save_messages("batched", [Message(speaker="Ops", content=planted_["github-token"])])
        mm.update_metadata("batched", metadata={"project-url": planted_["url-password"]})
    mm.update_metadata("leaky", metadata={"project": "p-" + planted_["aws-access-key"]})
    objects = _all_objects(store)
    for kind, secret in planted_.items():
        for line in secret.splitlines():
            core = (
                line.rsplit("=", 1)[-1]
                if kind in ("assigned-secret", "aws-secret-key", "url-token")
                else line
            )
            core = core.split(":", 2)[-1].split("@")[0] if kind == "url-password" else core
            if "BEGIN" in core or "END" in core:
                continue
            assert core.split()[-1] not in objects, f"{kind} reached a git object"
    session = mm.load_memory("leaky")
    assert session is not None and session.project == "p-REDACTED:aws-access-key"
    trailers = git(store, "log", "--format=%(trailers:key=Gitmem-Redacted,valueonly)")
    assert "github-token=1" in trailers and "url-password=1" in trailers
    assert "aws-access-key=1" in trailers
    assert mm.scan_history() == []
    assert git(store, "status", "--porcelain") == ""
    mm.close()


def test_the_trailer_counts_kinds_never_the_secret(store: Path) -> None:
    rng = random.Random(3)
    mm = MemoryManager.init(store)
    keys = [make_secret("aws-access-key", rng) for _ in range(2)]
    openai = make_secret("openai-key", rng)
    sha = mm.save_interaction("s", f"{keys[0]} and {keys[1]}", f"and {openai}")
    assert sha is not None
    message = git(store, "log", "-1", "--format=%B", sha)
    assert "Gitmem-Redacted: aws-access-key=2, openai-key=1" in message
    assert not any(k in message for k in [*keys, openai])
    # the subject quotes the message, redacted
    assert message.startswith("Save turn in s: [REDACTED:aws-access-key] and [REDACTED:")
    plain = mm.save_interaction("s", "nothing secret", "right")
    assert plain is not None
    assert "Gitmem-Redacted" not in git(store, "log", "-1", "--format=%B", plain)
    mm.close()


def test_a_hand_edit_with_a_secret_is_redacted_before_it_is_recorded(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "hello", "hi")
    key = make_secret("github-token", random.Random(5))
    path = store / "sessions" / "a0" / "s.md"
    path.write_text(path.read_text().replace("> hello", f"> hello, use {key}"))
    mm.save_interaction("s", "next", "ok")
    edit = git(store, "log", "--format=%H", "--grep=Record hand edit").split()[0]
    assert "Gitmem-Redacted: github-token=1" in git(store, "log", "-1", "--format=%B", edit)
    assert key not in _all_objects(store)
    assert key not in path.read_text()
    assert git(store, "status", "--porcelain") == ""
    mm.close()


class _LeakySummarizer:
    """A summarizer (like an LLM) that repeats a secret it saw."""

    name = "leaky"

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def summarize(
        self, turns: Sequence[Interaction], *, previous: Summary | None = None
    ) -> SummaryResult:
        content = StructuredSummary(
            summary=f"They shared {self.secret}.", key_facts=[f"key is {self.secret}"]
        )
        return SummaryResult(
            content=content, model="leaky", mode="test", covers=tuple(t.id for t in turns)
        )


def test_a_summary_that_repeats_a_secret_is_redacted(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "deploy with the staging key please", "sure")
    secret = make_secret("stripe-key", random.Random(9))
    sha = mm.summarize("s", summarizer=_LeakySummarizer(secret))
    assert "Gitmem-Redacted: stripe-key=2" in git(store, "log", "-1", "--format=%B", sha)
    session = mm.load_memory("s")
    assert session is not None and session.summary is not None
    assert "[REDACTED:stripe-key]" in session.summary.text
    assert secret not in _all_objects(store)
    mm.close()


def test_redaction_can_be_turned_off_but_sizes_still_hold(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.secret_config = SecretConfig(redact=False)
    key = make_secret("openai-key", random.Random(2))
    mm.save_interaction("s", key, "ok")
    assert key in (store / "sessions" / "a0" / "s.md").read_text()
    assert [f.kind for f in mm.scan_history()] == ["openai-key", "openai-key"]  # file, subject
    git(store, "config", "gitmem.secrets.redact", "true")
    assert MemoryManager(store).secret_config.redact
    mm.close()


def test_a_summary_model_is_guarded_like_content(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "q", "a")
    session = mm.load_memory("s")
    assert session is not None
    key = make_secret("slack-token", random.Random(4))
    summary = Summary(text=f"token {key}", generated=now(), facts=[key])
    mm.put_session(session.model_copy(update={"summary": summary}), op="edit")
    assert key not in _all_objects(store)
    mm.close()


# --- secrets already in history ---------------------------------------------------------


def _plain_commit(store: Path, path: str, text: str, message: str) -> str:
    target = store / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    git(store, "add", path)
    git(store, "commit", "-qm", message)
    return git(store, "rev-parse", "HEAD").strip()


def test_scan_reports_secrets_anywhere_in_history(store: Path) -> None:
    rng = random.Random(11)
    mm = MemoryManager.init(store)
    mm.save_interaction("clean", "nothing here", "ok")
    key = make_secret("aws-access-key", rng)
    token = make_secret("github-token", rng)
    pem = make_secret("private-key", rng)
    first = _plain_commit(store, "notes/setup.md", f"line one\nline two\nkey {key}\n", "setup")
    second = _plain_commit(
        store,
        "notes/setup.md",
        "line one\nline two\nrotated\n",
        f"remove the key; old token {token}",
    )
    git(store, "checkout", "-qb", "side")
    third = _plain_commit(store, "keys/deploy.pem", pem + "\n", "deploy key")
    git(store, "checkout", "-q", "main")
    findings = mm.scan_history()
    by_kind = {f.kind: f for f in findings}
    assert set(by_kind) == {"aws-access-key", "github-token", "private-key"}
    assert (
        by_kind["aws-access-key"].commit,
        by_kind["aws-access-key"].path,
        by_kind["aws-access-key"].line,
    ) == (first, "notes/setup.md", 3)
    assert by_kind["aws-access-key"].at_head is False  # removed since, still in history
    assert by_kind["github-token"].commit == second
    assert by_kind["github-token"].path == "(commit message)"
    assert (by_kind["private-key"].commit, by_kind["private-key"].line) == (third, 1)
    printed = "\n".join(str(f) for f in findings)
    assert key not in printed and token not in printed and pem.splitlines()[1] not in printed
    # the CLI: masked lines, JSON, exit 1
    runner = CliRunner()
    result = runner.invoke(cli, ["--repo", str(store), "scan"])
    assert result.exit_code == 1
    # HEAD is `second`: its own message still shows the token
    assert "3 secret(s) in history, 1 still at HEAD" in result.output
    assert key not in result.output
    result = runner.invoke(cli, ["--repo", str(store), "scan", "--json"])
    listed = json.loads(result.output)
    assert {item["kind"] for item in listed} == set(by_kind)
    assert all(
        set(item) == {"commit", "path", "line", "kind", "masked", "at_head"} for item in listed
    )
    mm.close()


def test_scan_of_a_clean_store_exits_0(store: Path) -> None:
    MemoryManager.init(store).save_interaction("s", "hello", "hi")
    result = CliRunner().invoke(cli, ["--repo", str(store), "scan"])
    assert result.exit_code == 0 and "no secrets found" in result.output


def test_async_scan(store: Path) -> None:
    import asyncio

    from gitmem.aio import AsyncMemoryManager

    MemoryManager.init(store).close()
    _plain_commit(store, "notes.txt", make_secret("jwt", random.Random(1)) + "\n", "notes")

    async def scan() -> list[str]:
        amm = AsyncMemoryManager(store)
        found = await amm.scan_history()
        await amm.close()
        return [f.kind for f in found]

    assert asyncio.run(scan()) == ["jwt"]
