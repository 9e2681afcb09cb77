"""LoCoMo import, end to end through the CLI, on a tiny synthetic file."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmarks import locomo_eval
from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ValidationError
from gitmem.importers import locomo
from tests.conftest import git


def _sample(sample_id: str, a: str, b: str, topics: list[tuple[str, str]]) -> dict[str, object]:
    """A conversation with one session per (question topic, answer) and QA about them."""
    conversation: dict[str, object] = {"speaker_a": a, "speaker_b": b}
    qa: list[dict[str, object]] = []
    for n, (topic, answer) in enumerate(topics, 1):
        conversation[f"session_{n}_date_time"] = f"{n}:15 pm on {n + 2} May, 2023"
        conversation[f"session_{n}"] = [
            {
                "speaker": a,
                "dia_id": f"D{n}:1",
                "text": f"Hi {b}! Guess what happened with {topic}?",
            },
            {"speaker": b, "dia_id": f"D{n}:2", "text": "Tell me everything!"},
            {
                "speaker": a,
                "dia_id": f"D{n}:3",
                "text": f"{answer}",
                "img_url": ["https://example.invalid/x.jpg"],
                "blip_caption": f"a photo of {topic}",
                "query": "ignored",
            },
        ]
        qa.append(
            {
                "question": f"What happened with {a}'s {topic}?",
                "answer": answer,
                "evidence": [f"D{n}:3"],
                "category": 4,
            }
        )
    qa.append(
        {
            "question": "Which two things did they talk about?",
            "answer": "x",
            "evidence": ["D1:3; D2:3"],
            "category": 1,
        }
    )
    qa.append(
        {
            "question": "Unanswerable?",
            "adversarial_answer": "x",
            "evidence": ["D1:1"],
            "category": 5,
        }
    )
    qa.append({"question": "Points nowhere", "answer": "x", "evidence": ["D99:1"], "category": 2})
    return {
        "sample_id": sample_id,
        "conversation": conversation,
        "qa": qa,
        "observation": {},
        "session_summary": {},
        "event_summary": {},
    }


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    data = [
        _sample(
            "conv-a",
            "Ana",
            "Ben",
            [
                ("pottery class", "My pottery class made a blue vase with a dragon glaze."),
                ("marathon", "I finished the marathon in four hours despite the rain."),
            ],
        ),
        _sample(
            "conv-b",
            "Cleo",
            "Dev",
            [
                ("violin recital", "The violin recital went great, I played Bach partitas."),
                ("garden", "The garden finally has ripe tomatoes and sunflowers."),
            ],
        ),
    ]
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
    assert session.interactions[2].messages[0].content.endswith("[image: a photo of pottery class]")
    evidence = {q.text: q.evidence for q in first.questions}
    assert evidence["Which two things did they talk about?"] == ("D1:3", "D2:3")
    assert "Points nowhere" not in evidence  # no evidence that names a turn
    assert {q.category for q in first.questions} == {1, 4, 5}


def test_malformed_evidence_ids_are_normalised(tmp_path: Path) -> None:
    # upstream writes a few ids as "D:11:26" or "D30:05"; they name turns D11:26 and D30:5
    sample = _sample(
        "conv-m", "Ana", "Ben", [("kiln", "The kiln cracked."), ("race", "I won the race.")]
    )
    sample["qa"] = [
        {"question": "Extra colon?", "answer": "x", "evidence": ["D:1:3"], "category": 4},
        {"question": "Leading zero?", "answer": "x", "evidence": ["D2:03"], "category": 4},
        {
            "question": "Both kinds?",
            "answer": "x",
            "evidence": ["D:01:3; D2:003, d1:1"],
            "category": 1,
        },
        {"question": "No such turn?", "answer": "x", "evidence": ["D:9:1", "D1:09"], "category": 2},
        {"question": "Not an id?", "answer": "x", "evidence": ["D1-3", "1:3"], "category": 2},
    ]
    path = tmp_path / "malformed.json"
    path.write_text(json.dumps([sample]))
    (conv,) = locomo.load(path)
    assert {q.text: q.evidence for q in conv.questions} == {
        "Extra colon?": ("D1:3",),
        "Leading zero?": ("D2:3",),
        "Both kinds?": ("D1:3", "D2:3", "D1:1"),
    }
    assert locomo.evidence_id("D:11:26") == "D11:26"
    assert locomo.evidence_id("D30:05") == "D30:5"
    assert locomo.evidence_id("X1:2") == "X1:2"
    result = locomo_eval.bench_store(path, workdir=tmp_path / "stores")
    assert result["rows"][-1]["n"] == 3


def test_bad_files_give_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValidationError, match="cannot read a LoCoMo JSON file"):
        locomo.load(bad)
    bad.write_text(
        json.dumps(
            [
                {
                    "sample_id": "x",
                    "conversation": {
                        "session_1": [{"speaker": "A", "text": "no id"}],
                        "session_1_date_time": "1:00 pm on 1 May, 2023",
                    },
                }
            ]
        )
    )
    with pytest.raises(ValidationError, match="sample 0"):
        locomo.load(bad)
    with pytest.raises(ValidationError, match="--convs"):
        locomo.parse_range("5", 2)


def test_import_through_the_cli(locomo_file: Path, store: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["--repo", str(store), "init"]).exit_code == 0
    out = runner.invoke(
        cli, ["--repo", str(store), "import", "locomo", str(locomo_file), "--convs", "0"]
    )
    assert out.exit_code == 0, out.output
    assert "imported 2 session(s)" in out.output
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
    out = runner.invoke(
        cli, ["--repo", str(store), "search", "dragon glaze", "--project", "conv-a", "--json"]
    )
    assert json.loads(out.output)["hits"][0]["interaction_id"] == "D1:3"


def test_reimport_keeps_hand_saved_turns_and_reports_changed_ones(
    locomo_file: Path, store: Path
) -> None:
    runner = CliRunner()

    def gitmem(*args: str) -> str:
        out = runner.invoke(cli, ["--repo", str(store), *args])
        assert out.exit_code == 0, out.output
        return out.output

    gitmem("init")
    gitmem("import", "locomo", str(locomo_file), "--convs", "0")
    gitmem(
        "save",
        "conv-a-session_1",
        "--user",
        "a turn saved by hand",
        "--assistant",
        "ok",
        "--id",
        "hand-1",
    )
    head = git(store, "rev-parse", "HEAD")
    # an unchanged file again: no commit, and the hand-saved turn is still there
    assert "nothing changed, no commit" in gitmem(
        "import", "locomo", str(locomo_file), "--convs", "0"
    )
    assert git(store, "rev-parse", "HEAD") == head
    mm = MemoryManager(store)
    session = mm.load_memory("conv-a-session_1")
    assert session is not None
    assert [i.id for i in session.interactions] == ["D1:1", "D1:2", "D1:3", "hand-1"]
    # the file grows a turn and changes one: the new turn is added, the changed one reported
    data = json.loads(locomo_file.read_text())
    turns = data[0]["conversation"]["session_1"]
    turns[1]["text"] = "Tell me NOTHING!"
    turns.append({"speaker": "Ben", "dia_id": "D1:4", "text": "A late addition."})
    locomo_file.write_text(json.dumps(data))
    out = runner.invoke(
        cli, ["--repo", str(store), "--json", "import", "locomo", str(locomo_file), "--convs", "0"]
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["conflicts"] == [{"session_id": "conv-a-session_1", "interaction_id": "D1:2"}]
    assert report["turns_added"] == 1
    assert report["commit"] == git(store, "rev-parse", "HEAD").strip()
    session = mm.load_memory("conv-a-session_1")
    assert session is not None
    assert [i.id for i in session.interactions] == ["D1:1", "D1:2", "D1:3", "hand-1", "D1:4"]
    assert session.interactions[1].messages[0].content == "Tell me everything!"
    assert session.interactions[3].messages[0].content == "a turn saved by hand"
    text = runner.invoke(
        cli, ["--repo", str(store), "import", "locomo", str(locomo_file), "--convs", "0"]
    )
    assert "conv-a-session_1 D1:2" in text.output and text.exit_code == 0
    assert git(store, "status", "--porcelain") == ""
    mm.close()


def test_reimport_after_an_archiving_summary_adds_no_duplicates(
    locomo_file: Path, store: Path
) -> None:
    mm = MemoryManager.init(store)
    locomo.import_locomo(mm, locomo_file, convs="0")
    git(store, "config", "gitmem.summary.archive", "archive")
    mm = MemoryManager(store)
    mm.summarize("conv-a-session_1", offline=True)
    head = git(store, "rev-parse", "HEAD")
    again = locomo.import_locomo(mm, locomo_file, convs="0")
    assert again.commit is None and again.added == [] and again.differing == []
    assert git(store, "rev-parse", "HEAD") == head
    mm.close()


def test_reimport_of_a_redacted_turn_is_not_reported_as_changed(
    tmp_path: Path, store: Path
) -> None:
    key = "sk-proj-" + "A1b2C3d4" * 6
    data = [
        {
            "sample_id": "s",
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_1_date_time": "1:00 pm on 1 May, 2023",
                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": f"my key is {key}"}],
            },
        }
    ]
    path = tmp_path / "leaky.json"
    path.write_text(json.dumps(data))
    mm = MemoryManager.init(store)
    locomo.import_locomo(mm, path)
    again = locomo.import_locomo(mm, path)
    assert again.commit is None and again.differing == []
    mm.close()
