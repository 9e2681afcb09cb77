"""Secrets that reached a commit by the newer paths: a fact's section and sources, an LLM
URL carrying ``user:pass@`` (and a server echoing the Basic header), and the loss guard's
refusal quoting the model's facts. After each, ``scan_history`` finds nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from gitmem.errors import ConfigError, SummaryRefused
from gitmem.llm.config import LLMConfig
from gitmem.llm.embeddings import EmbedConfig
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, StructuredSummary, Summary
from gitmem.summary.engines import LLMSummarizer, SummaryResult
from tests.conftest import git
from tests.fake_openai import FakeServer, error, llm_server

__all__ = ["llm_server"]

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
BASIC = "YWxpY2U6czNjcmV0LXBhc3N3b3Jk"  # base64 of alice:s3cret-password
TURNS = [
    ("I moved to Lisbon in March 2023.", "Congratulations!"),
    ("My daughter Ana starts school in September.", "Exciting."),
]


@pytest.fixture
def mm(store: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryManager:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    manager = MemoryManager.init(store, agent="tester")
    for user, assistant in TURNS:
        manager.save_interaction("lisbon", user, assistant)
    return manager


def _whole_history(store: Path) -> str:
    return git(store, "log", "-p", "--all", "--format=%H%n%B")


def test_fact_sections_and_sources_never_commit_a_token(mm: MemoryManager, store: Path) -> None:
    first = mm.remember("Benign.", section=f"Keys {TOKEN}", source=(TOKEN, "i1"))
    mm.update_fact(first.id, section=f"More {TOKEN}")
    mm.supersede(first.id, "Still benign.", source=f"lisbon#{TOKEN}")
    out = CliRunner().invoke(
        cli,
        [
            "--repo",
            str(store),
            "facts",
            "add",
            "Benign too.",
            "--section",
            f"Keys {TOKEN}",
            "--source",
            f"{TOKEN}#i1",
        ],
    )
    assert out.exit_code == 0, out.output
    assert TOKEN not in _whole_history(store)
    assert mm.scan_history() == []


def test_a_hand_edited_heading_or_source_is_redacted(mm: MemoryManager, store: Path) -> None:
    mm.remember("Benign.", source=("lisbon", "i1"))
    path = store / "memory" / "MEMORY.md"
    text = path.read_text()
    edited = text.replace("## ", f"## Secret {TOKEN}\n\n## ", 1) if "## " in text else text
    edited = edited.replace("lisbon#i1", f"{TOKEN}#i1")
    assert TOKEN in edited
    path.write_text(edited)
    mm.remember("Another.", source=("lisbon", "i1"))  # records the hand edit first
    assert TOKEN not in _whole_history(store)
    assert mm.scan_history() == []


@pytest.mark.parametrize("config", [LLMConfig, EmbedConfig])
def test_a_server_url_with_credentials_is_refused(config: type[LLMConfig | EmbedConfig]) -> None:
    with pytest.raises(ConfigError, match="carries a user name or password") as caught:
        config(model="m", base_url="http://alice:s3cret-password@127.0.0.1:9/v1")
    assert "s3cret-password" not in str(caught.value)


def test_summarize_with_credentials_in_the_url_sends_nothing(
    mm: MemoryManager, store: Path, llm_server: FakeServer
) -> None:
    head = git(store, "rev-parse", "HEAD")
    url = llm_server.base_url.replace("://", "://alice:s3cret-password@")
    done = subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(store), "summarize", "lisbon"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GITMEM_LLM_BASE_URL": url, "GITMEM_LLM_MODEL": "m"},
    )
    assert done.returncode == 1, done.stderr
    assert "carries a user name or password" in done.stderr
    assert "s3cret-password" not in done.stderr + done.stdout
    assert llm_server.requests == []
    assert git(store, "rev-parse", "HEAD") == head


def test_a_basic_header_echoed_by_the_server_is_redacted(
    mm: MemoryManager, store: Path, llm_server: FakeServer
) -> None:
    llm_server.default = lambda request: error(401, f"invalid credentials: Basic {BASIC}")
    config = LLMConfig(model="m", base_url=llm_server.base_url, max_retries=0)
    outcome = mm.summarize_outcome("lisbon", summarizer=LLMSummarizer(config))
    assert outcome.commit is not None and outcome.fallback is not None
    assert llm_server.requests  # the server was asked and answered with the echo
    assert BASIC not in _whole_history(store)
    assert BASIC not in (outcome.fallback or "")
    assert mm.scan_history() == []


def test_scan_finds_a_basic_credential_without_an_authorization_prefix(
    mm: MemoryManager, store: Path
) -> None:
    (store / "notes.txt").write_text(f"the proxy said: Basic {BASIC} was refused\n")
    git(store, "add", "notes.txt")
    git(store, "commit", "-qm", "notes", "--no-verify")
    kinds = {finding.kind for finding in mm.scan_history()}
    assert "basic-auth" in kinds


class _Leaky:
    """A model whose summary drops every fact and proposes a secret as a new one."""

    name = "leaky-model"

    def summarize(
        self, turns: Sequence[Interaction], *, previous: Summary | None = None
    ) -> SummaryResult:
        content = StructuredSummary(
            summary=f"- the key is {TOKEN}", key_facts=[f"The deploy key is {TOKEN}"]
        )
        return SummaryResult(content, self.name, tuple(t.id for t in turns), "json_schema")


def test_the_loss_guard_refusal_never_shows_a_secret(mm: MemoryManager, store: Path) -> None:
    good = StructuredSummary(
        summary="- moved to Lisbon",
        key_facts=["They moved to Lisbon in March 2023", "Ana starts school in September"],
    )

    class _Good:
        name = "good-model"

        def summarize(
            self, turns: Sequence[Interaction], *, previous: Summary | None = None
        ) -> SummaryResult:
            return SummaryResult(good, self.name, tuple(t.id for t in turns), "json_schema")

    mm.summarize("lisbon", summarizer=_Good())
    mm.save_interaction("lisbon", "We also got a cat.", "Nice.")
    with pytest.raises(SummaryRefused) as caught:
        mm.summarize("lisbon", summarizer=_Leaky())
    assert TOKEN not in str(caught.value)
    assert "REDACTED" in str(caught.value)
    assert TOKEN not in _whole_history(store)
