"""LoCoMo import and benchmark, end to end through the CLI, on a tiny synthetic file."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager, locomo
from gitmem.cli import cli
from gitmem.errors import ValidationError
from tests.conftest import git


def _sample(sample_id: str, a: str, b: str, topics: list[tuple[str, str]]) -> dict[str, object]:
    """A conversation with one session per (question topic, answer) and QA about them."""
    conversation: dict[str, object] = {"speaker_a": a, "speaker_b": b}
    qa: list[dict[str, object]] = []
    for n, (topic, answer) in enumerate(topics, 1):
        conversation[f"session_{n}_date_time"] = f"{n}:15 pm on {n + 2} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": a, "dia_id": f"D{n}:1",
             "text": f"Hi {b}! Guess what happened with {topic}?"},
            {"speaker": b, "dia_id": f"D{n}:2", "text": "Tell me everything!"},
            {"speaker": a, "dia_id": f"D{n}:3", "text": f"{answer}",
             "img_url": ["https://example.invalid/x.jpg"], "blip_caption": f"a photo of {topic}",
             "query": "ignored"},
        ]  # fmt: skip
        qa.append({"question": f"What happened with {a}'s {topic}?", "answer": answer,
                   "evidence": [f"D{n}:3"], "category": 4})  # fmt: skip
    qa.append({"question": "Which two things did they talk about?", "answer": "x",
               "evidence": ["D1:3; D2:3"], "category": 1})
    qa.append({"question": "Unanswerable?", "adversarial_answer": "x",
               "evidence": ["D1:1"], "category": 5})
    qa.append({"question": "Points nowhere", "answer": "x", "evidence": ["D99:1"],
               "category": 2})
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa,
            "observation": {}, "session_summary": {}, "event_summary": {}}


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    data = [
        _sample("conv-a", "Ana", "Ben", [
            ("pottery class", "My pottery class made a blue vase with a dragon glaze."),
            ("marathon", "I finished the marathon in four hours despite the rain."),
        ]),
        _sample("conv-b", "Cleo", "Dev", [
            ("violin recital", "The violin recital went great, I played Bach partitas."),
            ("garden", "The garden finally has ripe tomatoes and sunflowers."),
        ]),
    ]  # fmt: skip
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(data))
    return path


def test_load_reads_sessions_turns_and_cleans_evidence(locomo_file: Path) -> None:
    convs = locomo.load(locomo_file)
    assert [c.sample_id for c in convs] == ["conv-a", "conv-b"]
    first = convs[0]
    assert [s.id for s in first.sessions] == ["conv-a-session_1", "conv-a-session_2"]
    session = first.sessions[0]
    assert session.created == datetime(2023, 5, 3, 13, 15, tzinfo=UTC)
    assert [i.id for i in session.interactions] == ["D1:1", "D1:2", "D1:3"]
    assert session.interactions[2].messages[0].speaker == "Ana"
    assert session.interactions[2].messages[0].content.endswith(
        "[image: a photo of pottery class]")
    evidence = {q.text: q.evidence for q in first.questions}
    assert evidence["Which two things did they talk about?"] == ("D1:3", "D2:3")
    assert "Points nowhere" not in evidence  # no evidence that names a turn
    assert {q.category for q in first.questions} == {1, 4, 5}


def test_bad_files_give_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValidationError, match="cannot read a LoCoMo JSON file"):
        locomo.load(bad)
    bad.write_text(json.dumps([{"sample_id": "x", "conversation": {
        "session_1": [{"speaker": "A", "text": "no id"}],
        "session_1_date_time": "1:00 pm on 1 May, 2023"}}]))  # fmt: skip
    with pytest.raises(ValidationError, match="sample 0"):
        locomo.load(bad)
    with pytest.raises(ValidationError, match="--convs"):
        locomo.parse_range("5", 2)


def test_import_through_the_cli(locomo_file: Path, store: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["--repo", str(store), "init"]).exit_code == 0
    out = runner.invoke(cli, ["--repo", str(store), "import", "locomo", str(locomo_file),
                              "--convs", "0"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "imported 2 sessions" in out.output
    assert git(store, "status", "--porcelain") == ""
    assert "Gitmem-Op: import" in git(store, "log", "-1", "--format=%(trailers)")
    mm = MemoryManager(store)
    assert mm.session_ids() == ["conv-a-session_1", "conv-a-session_2"]
    session = mm.load_memory("conv-a-session_2")
    assert session is not None and session.project == "conv-a"
    assert session.participants == ["Ana", "Ben"]
    hits = mm.search("marathon rain")
    assert (hits[0].session_id, hits[0].interaction_id) == ("conv-a-session_2", "D2:3")
    assert hits[0].speaker == "Ana"
    out = runner.invoke(cli, ["--repo", str(store), "search", "dragon glaze", "--project",
                              "conv-a", "--json"])  # fmt: skip
    assert json.loads(out.output)["hits"][0]["interaction_id"] == "D1:3"


def test_bench_through_the_cli(locomo_file: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["--json", "bench", "locomo", str(locomo_file), "--convs", "0-1"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["conversations"] == ["conv-a", "conv-b"]
    rows = {row["category"]: row for row in result["rows"]}
    overall = rows["overall"]
    assert overall["n"] == 6  # 2 x (2 single-hop + 1 multi-hop); category 5 and no-evidence out
    assert rows["4 single-hop"]["R@5"] == 100.0
    assert rows["4 single-hop"]["S@1"] == 100.0
    assert 0 <= overall["R@5"] <= overall["R@10"] <= overall["R@25"] <= 100
    assert overall["ms/query"] > 0
    text = runner.invoke(cli, ["bench", "locomo", str(locomo_file), "--convs", "1"])
    assert text.exit_code == 0
    assert "| overall | 3 |" in text.output
    usage = runner.invoke(cli, ["bench", "locomo", str(locomo_file), "--convs", "7"])
    assert usage.exit_code == 1 and "--convs" in usage.output
