"""The results the CLI prints with ``--json`` are pydantic models: their JSON form reads back
into an equal model, is exactly what ``--json`` prints, and bad values are refused."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from gitmem.format.paths import session_path
from gitmem.guard.scan import SecretFinding
from gitmem.manager import MemoryManager
from gitmem.models import ModelValidationError, Review, SummaryOutcome
from gitmem.search.catchup import SyncReport
from gitmem.summary.loss import LossReport
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git
from tests.reliability.test_secrets import make_secret
from tests.test_summary_commits import FACTS, Fixed, _with_previous


def _cli(store: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--repo", str(store), *args], catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.output


def test_secret_finding_json_round_trip(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("clean", "nothing here", "ok")
    key = make_secret("aws-access-key", random.Random(3))
    (store / "notes.md").write_text(f"key {key}\n")
    git(store, "add", "notes.md")
    git(store, "commit", "-qm", "notes")
    [finding] = mm.scan_history()
    data = finding.to_dict()
    assert data == {
        "commit": git(store, "rev-parse", "HEAD").strip(),
        "path": "notes.md",
        "line": 1,
        "kind": "aws-access-key",
        "masked": finding.masked,
        "at_head": True,
    }
    assert SecretFinding.model_validate(data) == finding
    assert json.loads(_cli(store, "scan", "--json", code=1)) == [data]
    # positional, as before, and hashable (scan drops duplicates through a dict)
    again = SecretFinding(*data.values())
    assert again == finding and len({again, finding}) == 1
    with pytest.raises(ModelValidationError, match="line"):
        SecretFinding.model_validate({**data, "line": "three"})
    mm.close()


def test_summary_outcome_and_loss_report_json(store: Path) -> None:
    mm = MemoryManager.init(store, agent="tester")
    mm.summary_config = SummaryConfig(on_loss="refuse")
    _with_previous(mm)
    [outcome] = mm.summarize_idle(
        "1m", now=datetime(2030, 1, 1, tzinfo=UTC), summarizer=Fixed("- paints", ["paints"])
    )
    assert outcome.status == "refused" and outcome.report is not None
    data = outcome.to_dict()
    assert list(data) == [
        "session_id",
        "status",
        "trigger",
        "reason",
        "commit",
        "model",
        "fallback",
        "error",
        "report",
    ]
    assert list(outcome.report) == [
        "share",
        "threshold",
        "fires",
        "previous_facts",
        "dropped",
        "dropped_entities",
        "recoverable",
        "unsupported",
    ]
    assert outcome.report["dropped"] == FACTS and outcome.report["share"] == 1.0
    assert SummaryOutcome.model_validate(json.loads(json.dumps(data))) == outcome
    with pytest.raises(ModelValidationError, match="status"):
        SummaryOutcome.model_validate({**data, "status": "maybe"})
    # the loss report itself: its fields read back; to_dict adds the derived share and fires
    report = LossReport(previous_facts=("a b", "c d"), dropped=("a b",), threshold=0.4)
    assert LossReport.model_validate(report.model_dump()) == report
    assert (report.to_dict()["share"], report.to_dict()["fires"]) == (0.5, True)
    with pytest.raises(ModelValidationError):
        LossReport(previous_facts=("a",), details={"x": "y"})  # type: ignore[call-arg]
    mm.close()


def test_review_json_is_what_the_cli_prints(store: Path) -> None:
    mm = MemoryManager.init(store, agent="tester")
    mm.summary_config = SummaryConfig(on_loss="review")
    _with_previous(mm)
    with pytest.raises(Exception, match="for review"):
        mm.summarize("caro", summarizer=Fixed("- paints", ["paints"]))
    shown = mm.review_show("caro")
    printed = json.loads(_cli(store, "review", "show", "caro", "--json"))
    assert printed == shown.to_dict()
    assert list(printed) == [
        "session_id",
        "branch",
        "commit",
        "parent",
        "subject",
        "message",
        "diff",
    ]
    assert Review.model_validate(printed) == shown
    [listed] = json.loads(_cli(store, "review", "list", "--json"))
    assert Review.model_validate(listed) == shown.model_copy(update={"message": "", "diff": ""})
    mm.close()


def test_sync_report_counts_into_its_own_list(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("a", "hello", "hi")
    broken = session_path("broken")
    (store / broken).parent.mkdir(exist_ok=True)
    (store / broken).write_text("# not a session\n")
    git(store, "add", "-A")
    git(store, "commit", "-qm", "hand edit")
    report = mm.reindex()
    assert (report.rebuilt, report.indexed, report.unreadable) == (True, 1, [broken])
    assert SyncReport.model_validate(report.to_dict()) == report
    assert SyncReport(commit=None).unreadable == []  # the default list is not shared
    mm.close()
