"""Secrets on every path into a commit: ids, labels, authors, trailers, fallback reasons,
review-branch reports, undo and sync, and the history scan's blind spots."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli, views
from gitmem.errors import ConfigError, SecretRefused, SummaryHeldForReview
from gitmem.guard.secrets import SecretConfig
from gitmem.llm.config import LLMConfig
from gitmem.manager import MemoryManager
from gitmem.summary.engines import LLMSummarizer
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git
from tests.fake_openai import FakeServer, error, llm_server
from tests.reliability.test_secrets import _all_objects, make_secret
from tests.test_summary_commits import FACTS, Fixed, trailers

__all__ = ["llm_server"]


def _run(store: Path, *args: str) -> tuple[int, str]:
    out = CliRunner().invoke(cli, ["--repo", str(store), *args])
    return out.exit_code, out.output


def _no_secret_anywhere(store: Path, *secrets: str) -> None:
    """Not in any object, ref, reflog-free place a push would publish, nor in the files."""
    objects = _all_objects(store)
    files = "\n".join(
        p.read_text(errors="replace") for p in store.rglob("*.md") if ".git" not in p.parts
    )
    for secret in secrets:
        assert secret not in objects, f"{secret[:6]}… reached a git object"
        assert secret not in files


# --- names are refused, labels and authors redacted ----------------------------------


def test_a_secret_in_an_id_or_a_metadata_key_is_refused_by_name(store: Path) -> None:
    key = make_secret("github-token", random.Random(1))
    assert _run(store, "init")[0] == 0
    head = git(store, "rev-parse", "HEAD")
    cases = {
        "the session id": ["save", f"s-{key}", "--user", "hi", "--assistant", "ok"],
        "the interaction id (--id)": [
            "save",
            "s",
            "--user",
            "hi",
            "--assistant",
            "ok",
            "--id",
            key,
        ],
        "a metadata key": ["save", "s", "--user", "hi", "--assistant", "ok", "--meta", f"{key}=x"],
    }
    for field, args in cases.items():
        code, output = _run(store, *args)
        assert code == 1, output
        assert field in output and "holds a secret (github-token" in output
        assert key not in output and key[4:20] not in output  # the error never shows it
    assert git(store, "rev-parse", "HEAD") == head  # nothing was written
    _no_secret_anywhere(store, key)
    mm = MemoryManager(store)
    with pytest.raises(SecretRefused, match="interaction id"):
        mm.save_messages("s", [{"role": "user", "content": "x"}], interaction_id=key)
    mm.close()
    spaced = MemoryManager(store, namespace=f"team-{key}")
    with pytest.raises(SecretRefused, match="the namespace"):
        spaced.save_interaction("s", "hi", "ok")
    spaced.close()
    assert git(store, "rev-parse", "HEAD") == head


def test_agent_model_tags_speakers_and_batch_messages_are_redacted(store: Path) -> None:
    rng = random.Random(2)
    agent_key, model_key, tag_key, speaker_key, batch_key = (
        make_secret("github-token", rng),
        make_secret("openai-key", rng),
        make_secret("slack-token", rng),
        make_secret("aws-access-key", rng),
        make_secret("stripe-key", rng),
    )
    assert _run(store, "init")[0] == 0
    code, output = _run(
        store,
        "--agent",
        f"bot {agent_key}",
        "--model",
        f"m-{model_key}",
        "save",
        "s",
        "-m",
        f"{speaker_key}: hello",
        "--tag",
        tag_key,
    )
    assert code == 0, output
    author = git(store, "log", "-1", "--format=%an <%ae>")
    assert author.startswith("bot REDACTED:github-token <")
    found = trailers(store)
    assert found["Gitmem-Agent"] == "bot [REDACTED:github-token]"
    assert found["Gitmem-Model"] == "m-[REDACTED:openai-key]"
    assert found["Gitmem-Redacted"] == (
        "aws-access-key=2, github-token=3, openai-key=1, slack-token=1"
    )
    mm = MemoryManager(store)
    session = mm.load_memory("s")
    assert session is not None
    assert session.tags == ["REDACTED:slack-token"]
    assert session.participants == ["REDACTED:aws-access-key"]
    assert session.interactions[0].messages[0].speaker == "REDACTED:aws-access-key"
    with mm.batch(f"Import from {batch_key}"):
        mm.save_interaction("t", "q", "a")
    assert git(store, "log", "-1", "--format=%s") == "Import from [REDACTED:stripe-key]\n"
    assert "stripe-key=1" in trailers(store)["Gitmem-Redacted"]
    _no_secret_anywhere(store, agent_key, model_key, tag_key, speaker_key, batch_key)
    assert git(store, "status", "--porcelain") == ""
    mm.close()
    clean = MemoryManager(store, agent="bob", model="gpt-x")  # nothing to redact: no trailer
    sha = clean.save_interaction("s", "plain", "text", tags=["python"], metadata={"k": "v"})
    assert "Gitmem-Redacted" not in git(store, "log", "-1", "--format=%B", str(sha))
    clean.close()


# --- the LLM's fallback reason and the loss report -----------------------------------


def test_the_fallback_trailer_never_carries_the_llm_credentials(
    store: Path, llm_server: FakeServer
) -> None:
    api_key = "plain-local-token-without-pattern"
    password = "hunter-two-pass"
    # the server's error text echoes the Authorization header it received
    llm_server.default = lambda request: error(
        401, f"Incorrect credentials: Authorization: {llm_server.headers[-1]['authorization']}"
    )
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "We moved the meeting to Friday.", "Noted.")
    config = LLMConfig(model="m", base_url=llm_server.base_url, api_key=api_key, max_retries=0)
    outcome = mm.summarize_outcome("s", summarizer=LLMSummarizer(config))
    sha = outcome.commit
    assert sha is not None
    message = git(store, "log", "-1", "--format=%B", sha)
    fallback = trailers(store, sha)["Gitmem-Fallback"]
    assert fallback.startswith("LLM m: HTTP 401 from http://127.0.0.1:"), fallback
    assert "Fell back to the offline summarizer" in message
    assert api_key not in message
    assert outcome.fallback is not None and api_key not in outcome.fallback
    assert llm_server.headers[0]["authorization"] == f"Bearer {api_key}"  # echoed for real
    assert "[REDACTED:api-key]" in git(store, "log", "--format=%B")
    # user:pass@ in the URL would go out as a Basic header: refused before any request
    with_userinfo = llm_server.base_url.replace("http://", f"http://bob:{password}@")
    with pytest.raises(ConfigError) as caught:
        LLMConfig(model="m", base_url=with_userinfo, api_key=api_key, max_retries=0)
    assert password not in str(caught.value)
    assert len(llm_server.headers) == 1
    _no_secret_anywhere(store, api_key, password)
    mm.close()


def test_the_loss_report_on_a_review_branch_is_redacted(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.summary_config = SummaryConfig(on_loss="review")
    mm.save_interaction(
        "caro",
        "I adopted Rex in May 2023. I work as a counselor in Boston.",
        "Nice.",
        interaction_id="t00",
    )
    mm.save_interaction(
        "caro",
        "My sister Amy lives in Denver; I go to Sweden in June.",
        "Fun.",
        interaction_id="t01",
    )
    mm.summarize("caro", summarizer=Fixed("- " + "\n- ".join(FACTS), FACTS))
    mm.save_interaction("caro", "I paint.", "Lovely.", interaction_id="t02")
    key = make_secret("openai-project-key", random.Random(3))
    bad = Fixed("- Caroline paints", [f"Caroline's key is {key}"])
    with pytest.raises(SummaryHeldForReview) as held:
        mm.summarize("caro", summarizer=bad)
    message = git(store, "log", "-1", "--format=%B", held.value.commit)
    assert "New facts not found in the turns" in message
    assert "Caroline's key is [REDACTED:openai-key]" in message
    assert "Gitmem-Redacted: openai-key=" in message
    _no_secret_anywhere(store, key)
    mm.close()


# --- undo brings old content back -------------------------------------------------------


def test_rollback_restore_and_revert_redact_what_they_bring_back(store: Path) -> None:
    key = make_secret("github-token", random.Random(4))
    leaky = MemoryManager.init(store)
    leaky.secret_config = SecretConfig(redact=False)  # as a store made before redaction
    first = leaky.save_interaction("s", f"token {key}", "ok")
    leaky.save_interaction("s", "later", "turn")
    leaky.close()
    mm = MemoryManager(store)

    def head_file() -> str:
        return git(store, "show", "HEAD:sessions/a0/s.md")

    sha = mm.rollback("s", to=str(first))
    assert sha is not None and key not in head_file()
    assert "token [REDACTED:github-token]" in head_file()
    assert trailers(store)["Gitmem-Redacted"] == "github-token=1"
    deleted = mm.delete_session("s")
    mm.restore_session("s", rev=str(first))
    assert key not in head_file() and "Gitmem-Redacted" in trailers(store)
    mm.delete_session("s")
    mm.revert(deleted)  # brings back the version the deletion removed
    assert key not in head_file() and "[REDACTED:github-token]" in head_file()
    assert key not in (store / "sessions" / "a0" / "s.md").read_text()
    assert git(store, "status", "--porcelain") == ""
    mm.close()


def test_old_content_with_a_secret_in_an_id_is_refused(store: Path) -> None:
    key = make_secret("aws-access-key", random.Random(5))
    leaky = MemoryManager.init(store)
    leaky.secret_config = SecretConfig(redact=False)
    first = leaky.save_interaction("s", "q", "a", interaction_id=key)
    leaky.delete_session("s")
    leaky.close()
    mm = MemoryManager(store)
    head = git(store, "rev-parse", "HEAD")
    with pytest.raises(SecretRefused, match=r"sessions/a0/s\.md: the interaction id"):
        mm.restore_session("s", rev=str(first))
    code, output = _run(store, "rollback", "s", "--to", str(first))
    assert code == 1 and "holds a secret (aws-access-key" in output and key not in output
    assert git(store, "rev-parse", "HEAD") == head
    mm.close()


# --- sync: a merge redacts, a fast-forward reports --------------------------------------


def test_sync_redacts_a_merge_and_reports_a_fast_forward(tmp_path: Path) -> None:
    remote = tmp_path / "memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = MemoryManager.clone(remote.as_uri(), tmp_path / "a", agent="alice")
    a.save_interaction("shared", "hello", "hi")
    a.sync()
    b = MemoryManager.clone(remote.as_uri(), tmp_path / "b", agent="bob")
    b.secret_config = SecretConfig(redact=False)
    keys = [make_secret("github-token", random.Random(n)) for n in (6, 7)]
    b.save_interaction("leak", f"use {keys[0]}", "ok")
    b.sync()
    fast = a.sync()  # a fast-forward writes no commit: it can only report
    assert fast.action == "fast-forward"
    assert [s.split(": ", 1)[1] for s in fast.secrets] == [
        "github-token " + keys[0][:4] + "…(40 chars)"
    ]
    assert keys[0] not in "\n".join(fast.secrets)
    b.save_interaction("leak", f"and {keys[1]}", "ok")
    b.sync()
    a.save_interaction("shared", "meanwhile", "here")
    merged = a.sync()
    assert merged.action == "merge"
    head = git(tmp_path / "a", "show", "HEAD:sessions/06/leak.md")
    assert keys[0] not in head and keys[1] not in head
    assert "github-token=2" in trailers(tmp_path / "a")["Gitmem-Redacted"]
    assert git(tmp_path / "a", "status", "--porcelain") == ""
    a.close()
    b.close()


def test_the_merge_notes_sync_reports_are_redacted(tmp_path: Path) -> None:
    remote = tmp_path / "memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = MemoryManager.clone(remote.as_uri(), tmp_path / "a", agent="alice")
    a.save_interaction("shared", "hello", "hi", interaction_id="t1")
    a.sync()
    b = MemoryManager.clone(remote.as_uri(), tmp_path / "b", agent="bob")
    key = make_secret("github-token", random.Random(8))
    for store, text in ((tmp_path / "b", f"hello from b {key}"), (tmp_path / "a", "hello from a")):
        path = store / "sessions" / "d1" / "shared.md"  # both sides edit the turn: a merge note
        path.write_text(path.read_text().replace("> hello\n", f"> {text}\n"))
        git(store, "commit", "-qam", "hand edit")
    git(tmp_path / "b", "push", "-q", "origin", "main")
    merged = a.sync()
    assert merged.action == "merge" and merged.notes
    assert key not in repr(merged.as_dict()) and key not in views.sync_text(merged, "sync")
    assert "[REDACTED:github-token]" in merged.notes[0].kept + merged.notes[0].dropped
    a.close()
    b.close()


# --- the scan sees tags, authors, names, binary files; HEAD's message is at HEAD ---------


def test_scan_finds_secrets_outside_file_lines(store: Path) -> None:
    rng = random.Random(8)
    in_tag, in_author, in_name, in_binary, in_head = (
        make_secret("github-token", rng),
        make_secret("slack-token", rng),
        make_secret("aws-access-key", rng),
        make_secret("stripe-key", rng),
        make_secret("openai-key", rng),
    )
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "hello", "hi")
    (store / "blob.bin").write_bytes(b"\x00\x01binary\x00" + in_binary.encode() + b"\x00\n")
    (store / f"notes-{in_name}.txt").write_text("nothing\n")
    git(store, "add", "-A")
    env = dict(os.environ, GIT_AUTHOR_NAME=f"dev {in_author}")
    subprocess.run(["git", "commit", "-qm", "add files"], cwd=store, env=env, check=True)
    git(store, "tag", "-a", "v1", "-m", f"release with {in_tag}")
    git(store, "commit", "-q", "--allow-empty", "-m", f"rotate {in_head}")
    by_kind = {f.kind: f for f in mm.scan_history()}
    assert set(by_kind) == {
        "github-token",
        "slack-token",
        "aws-access-key",
        "stripe-key",
        "openai-key",
    }
    assert by_kind["github-token"].path == "(tag message)"
    assert by_kind["slack-token"].path == "(author or committer)"
    name = by_kind["aws-access-key"]
    assert (name.line, name.at_head) == (0, True) and in_name not in name.path
    assert name.path.startswith("notes-AKIA…") or name.path.startswith("notes-ASIA…")
    assert (by_kind["stripe-key"].path, by_kind["stripe-key"].at_head) == ("blob.bin", True)
    assert by_kind["openai-key"].path == "(commit message)"
    assert by_kind["openai-key"].at_head is True  # HEAD's own message shows it
    code, output = _run(store, "scan")
    assert code == 1 and "5 secret(s) in history, 4 still at HEAD" in output  # not the author
    for secret in (in_tag, in_author, in_name, in_binary, in_head):
        assert secret not in output
    mm.close()
