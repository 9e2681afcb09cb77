"""Chat transcripts (OpenAI messages, ChatGPT's conversations.json) in and out, through the
CLI on real stores with the real git; every input file is built here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gitmem import MemoryManager, Message
from gitmem.cli import cli, imports
from gitmem.importers import chat, jsonstream
from gitmem.importers.engine import ImportFormatError
from tests.conftest import git

KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


def run(store: Path, *args: str, code: int = 0) -> Result:
    out = CliRunner().invoke(cli, ["--repo", str(store), *args])
    assert out.exit_code == code, out.output
    return out


@pytest.fixture
def repo(store: Path) -> Path:
    run(store, "init")
    return store


def write(path: Path, data: Any, *, indent: int | None = 1) -> Path:
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=False), encoding="utf-8")
    return path


def turns(mm: MemoryManager, session_id: str) -> list[list[tuple[str, str]]]:
    session = mm.load_memory(session_id)
    assert session is not None, session_id
    return [[(m.speaker, m.content) for m in t.messages] for t in session.interactions]


MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "18C, sunny"},
    {"role": "assistant", "content": [{"type": "text", "text": "Sunny, 18C."}]},
    {
        "role": "user",
        "name": "Caroline",
        "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}},
            {"type": "input_audio", "input_audio": {"data": "...", "format": "wav"}},
        ],
    },
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "content": "ok"},
]

EXPECTED = [
    [("System", "You are terse.")],
    [
        ("User", "Weather in Paris?"),
        ("Assistant", '[tool: weather {"city":"Paris"}]'),
        ("Tool", "18C, sunny"),
        ("Assistant", "Sunny, 18C."),
    ],
    [
        ("Caroline", "Look:\n[image: https://example.invalid/cat.png]\n[input_audio]"),
        ("Assistant", "ok"),
    ],
    [("User", "ok"), ("Assistant", "ok")],
    [("User", "ok"), ("Assistant", "ok")],
]


def test_a_messages_array_becomes_one_session_of_turns(repo: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "talk.json", MESSAGES)
    out = run(repo, "import", "chat", str(source))
    assert "imported 1 session(s), 5 new turn(s)" in out.output
    mm = MemoryManager(repo)
    assert mm.session_ids() == ["chat:talk-58fbbf62"]
    assert turns(mm, "chat:talk-58fbbf62") == EXPECTED
    session = mm.load_memory("chat:talk-58fbbf62")
    assert session is not None and session.tags == ["chat"]
    ids = [t.id for t in session.interactions]
    assert len(set(ids)) == 5  # the two identical "ok" turns get distinct ids
    stamps = [t.timestamp for t in session.interactions]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5  # order kept, one second apart
    trailers = git(repo, "log", "-1", "--format=%(trailers)")
    assert "Gitmem-Op: import" in trailers and "Gitmem-Source: chat" in trailers
    assert git(repo, "status", "--porcelain") == ""


def test_every_input_shape(repo: Path, tmp_path: Path) -> None:
    one = {
        "id": "c-1",
        "created": 1700000000,
        "title": " Trip\nplans ",
        "messages": [
            {"role": "user", "content": "Book a train"},
            {"role": "assistant", "content": "Done"},
        ],
    }
    two = {
        "id": "c-2",
        "created": "2024-04-15T15:30:00",
        "messages": [{"role": "user", "content": "Hello"}],
    }
    files = {
        "object.json": json.dumps(one, indent=2),
        "objects.json": json.dumps([one, two], indent=2),
        "compact.json": json.dumps([one, two]),  # a whole array on one line
        "lines.jsonl": json.dumps(one) + "\n\n" + json.dumps(two["messages"]) + "\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    mm = MemoryManager(repo)
    run(repo, "import", "chat", str(tmp_path / "object.json"))
    assert mm.session_ids() == ["chat:c-1"]
    session = mm.load_memory("chat:c-1")
    assert session is not None
    assert session.extra == {"title": "Trip plans"}
    assert session.created.isoformat() == "2023-11-14T22:13:20+00:00"
    assert turns(mm, "chat:c-1") == [[("User", "Book a train"), ("Assistant", "Done")]]
    # the same conversation in another shape is the same turn: nothing new
    out = run(
        repo, "--json", "import", "chat", str(tmp_path / "objects.json"), "--tz", "Asia/Shanghai"
    )
    doc = json.loads(out.output)
    assert doc["sessions"] == ["chat:c-1", "chat:c-2"] and doc["turns_added"] == 1
    assert doc["skipped"] == 1
    hello = mm.load_memory("chat:c-2")
    assert hello is not None
    assert hello.interactions[0].timestamp.isoformat() == "2024-04-15T15:30:00+08:00"
    head = git(repo, "rev-parse", "HEAD")
    out = run(repo, "import", "chat", str(tmp_path / "compact.json"), "--tz", "Asia/Shanghai")
    assert "nothing changed" in out.output and git(repo, "rev-parse", "HEAD") == head
    run(repo, "import", "chat", str(tmp_path / "lines.jsonl"))
    unnamed = [sid for sid in mm.session_ids() if sid.startswith("chat:lines-")]
    assert len(unnamed) == 1  # no id: file stem and the hash of its opening
    assert turns(mm, unnamed[0]) == [[("User", "Hello")]]


def test_conversations_without_ids_keep_their_keys_when_a_line_comes_first(
    repo: Path, tmp_path: Path
) -> None:
    first = [{"role": "user", "content": "Plan a trip"}, {"role": "assistant", "content": "Where?"}]
    second = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}]
    source = tmp_path / "talks.jsonl"
    source.write_text("".join(json.dumps(c) + "\n" for c in (first, second, second)))
    run(repo, "import", "chat", str(source))
    mm = MemoryManager(repo)
    before = mm.session_ids()
    assert len(before) == 3  # the same opening twice: a second key, not one merged session
    newest = [{"role": "user", "content": "A new first line"}]
    source.write_text(json.dumps(newest) + "\n" + source.read_text())
    doc = json.loads(run(repo, "--json", "import", "chat", str(source)).output)
    assert doc["turns_added"] == 1  # only the new conversation
    assert len(mm.session_ids()) == 4 and set(before) < set(mm.session_ids())


def chatgpt_conversation() -> dict[str, Any]:
    """A ChatGPT export conversation whose second prompt was edited: two branches."""

    def node(
        nid: str,
        parent: str | None,
        children: list[str],
        role: str | None,
        parts: list[Any] | None = None,
        at: float = 0,
        **extra: Any,
    ) -> dict[str, Any]:
        message = (
            None
            if role is None
            else {
                "id": nid,
                "author": {"role": role, "name": None, "metadata": {}},
                "create_time": at or None,
                "content": {"content_type": "text", "parts": parts},
                "status": "finished_successfully",
                "recipient": "all",
                "metadata": {},
                "weight": 1.0,
                **extra,
            }
        )
        return {"id": nid, "message": message, "parent": parent, "children": children}

    nodes = [
        node("root", None, ["sys"], None),
        node(
            "sys",
            "root",
            ["u1"],
            "system",
            [""],
            metadata={"is_visually_hidden_from_conversation": True},
        ),
        node("u1", "sys", ["ctx"], "user", ["Plan a trip to Lisbon"], 1706745600.5),
        node("a1", "ctx", ["u2old", "u2new"], "assistant", ["Sure: 3 days."], 1706745610),
        node(
            "ctx", "u1", ["a1"], "assistant", ["remembered: likes trains"], 1706745605, weight=0.0
        ),
        node("u2old", "a1", ["a2old"], "user", ["Add Porto"], 1706745700),
        node("a2old", "u2old", [], "assistant", ["Porto added."], 1706745710),
        node(
            "u2new",
            "a1",
            ["a2new"],
            "user",
            [
                "Add Sintra, see map",
                {
                    "content_type": "image_asset_pointer",
                    "asset_pointer": "file-service://file-abc",
                    "width": 5,
                },
            ],
            1706745800,
        ),
        node("code", "u2new", ["out"], "assistant", None, 1706745805, recipient="python"),
        node("out", "code", ["a2new"], "tool", None, 1706745806),
        node("a2new", "out", [], "assistant", ["Sintra added."], 1706745810),
    ]
    nodes[-3]["message"]["content"] = {
        "content_type": "code",
        "language": "python",
        "text": "km = 25",
    }
    nodes[-2]["message"]["content"] = {"content_type": "execution_output", "text": "25"}
    return {
        "title": "Lisbon trip",
        "create_time": 1706745600.1,
        "update_time": 1706745810,
        "mapping": {n["id"]: n for n in nodes},
        "current_node": "a2new",
        "conversation_id": "6f1d-lisbon",
        "id": "6f1d-lisbon",
    }


def test_chatgpt_export_follows_the_branch_shown_last(repo: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "conversations.json", [chatgpt_conversation()], indent=None)
    run(repo, "import", "chat", str(source))
    mm = MemoryManager(repo)
    assert mm.session_ids() == ["chatgpt:6f1d-lisbon"]
    assert turns(mm, "chatgpt:6f1d-lisbon") == [
        [("User", "Plan a trip to Lisbon"), ("Assistant", "Sure: 3 days.")],
        [
            ("User", "Add Sintra, see map\n[image: file-service://file-abc]"),
            ("Assistant", "[tool: python km = 25]"),
            ("Tool", "25"),
            ("Assistant", "Sintra added."),
        ],
    ]  # the hidden nodes and the edited-away branch are not there
    session = mm.load_memory("chatgpt:6f1d-lisbon")
    assert session is not None
    assert session.tags == ["chatgpt"] and session.extra == {"title": "Lisbon trip"}
    assert [t.timestamp.isoformat() for t in session.interactions] == [
        "2024-02-01T00:00:00+00:00",
        "2024-02-01T00:03:20+00:00",
    ]
    assert "Porto" not in git(repo, "show", "HEAD")
    # without current_node the newest branch (the last child at each step) is taken
    bare = chatgpt_conversation()
    del bare["current_node"]
    bare["conversation_id"] = bare["id"] = "no-current"
    run(repo, "import", "chat", str(write(tmp_path / "bare.json", [bare])))
    assert turns(mm, "chatgpt:no-current") == turns(mm, "chatgpt:6f1d-lisbon")


def test_round_trip_and_deterministic_export(repo: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "talk.json", MESSAGES)
    run(repo, "import", "chat", str(source))
    first = run(repo, "export", "chat", "chat:talk-58fbbf62").output
    assert first == run(repo, "export", "chat", "chat:talk-58fbbf62").output  # byte for byte
    exported = json.loads(first)["messages"]
    assert exported[5] == {
        "role": "user",
        "name": "Caroline",
        "content": "Look:\n[image: https://example.invalid/cat.png]\n[input_audio]",
    }
    assert {m["role"] for m in exported} == {"system", "user", "assistant", "tool"}
    back = tmp_path / "back.json"
    run(repo, "export", "chat", "chat:talk-58fbbf62", "--output", str(back))
    assert back.read_text() == first
    fresh = tmp_path / "fresh"
    run(fresh, "init")
    run(fresh, "import", "chat", str(back), "--session", "again")
    assert turns(MemoryManager(fresh), "again") == EXPECTED
    line = run(repo, "export", "chat", "chat:talk-58fbbf62", "--jsonl").output
    assert line.count("\n") == 1 and json.loads(line)["messages"] == exported
    # as of an earlier commit, and a session that is not there
    run(repo, "save", "chat:talk-58fbbf62", "--user", "later", "--assistant", "yes")
    later = json.loads(run(repo, "export", "chat", "chat:talk-58fbbf62").output)
    assert len(later["messages"]) == len(later["timestamps"]) == 13
    assert run(repo, "export", "chat", "chat:talk-58fbbf62", "--at", "HEAD~1").output == first
    assert "no session" in run(repo, "export", "chat", "nope", code=1).output


def test_reimport_is_additive_and_reports_changed_turns(repo: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "talk.json", MESSAGES)
    run(repo, "import", "chat", str(source))
    head = git(repo, "rev-parse", "HEAD")
    assert "nothing changed, no commit" in run(repo, "import", "chat", str(source)).output
    assert git(repo, "rev-parse", "HEAD") == head
    run(
        repo,
        "save",
        "chat:talk-58fbbf62",
        "--user",
        "a turn saved by hand",
        "--assistant",
        "noted",
        "--id",
        "hand-1",
    )
    # the file grows by a turn and its first answer was regenerated since
    changed = [*MESSAGES, {"role": "user", "content": "New question"}]
    changed[4] = {"role": "assistant", "content": "Sunny and 18 degrees."}
    write(source, changed)
    out = run(repo, "--json", "import", "chat", str(source))
    doc = json.loads(out.output)
    assert doc["turns_added"] == 1 and doc["skipped"] == 5 and doc["commit"]
    mm = MemoryManager(repo)
    session = mm.load_memory("chat:talk-58fbbf62")
    assert session is not None
    assert doc["conflicts"] == [
        {"session_id": "chat:talk-58fbbf62", "interaction_id": session.interactions[1].id}
    ]
    kept = turns(mm, "chat:talk-58fbbf62")
    assert kept[1] == EXPECTED[1]  # the stored answer is not overwritten
    assert kept[5] == [("User", "a turn saved by hand"), ("Assistant", "noted")]
    assert kept[6] == [("User", "New question")]
    text = run(repo, "import", "chat", str(source)).output
    assert "1 stored turn(s) kept that differ" in text
    assert git(repo, "status", "--porcelain") == ""


def test_touching_a_file_without_times_is_no_change(repo: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "talk.json", MESSAGES)
    run(repo, "import", "chat", str(source))
    head = git(repo, "rev-parse", "HEAD")
    os.utime(source, (1_000_000_000, 1_000_000_000))  # turn times came from the mtime
    out = run(repo, "--json", "import", "chat", str(source))
    assert json.loads(out.output)["conflicts"] == []
    assert git(repo, "rev-parse", "HEAD") == head


def test_malformed_input_names_file_and_line(repo: Path, tmp_path: Path) -> None:
    run(repo, "import", "chat", str(write(tmp_path / "ok.json", MESSAGES)))
    head = git(repo, "rev-parse", "HEAD")
    lines = tmp_path / "bad.jsonl"
    lines.write_text(
        json.dumps({"id": "x", "messages": MESSAGES})
        + "\n"
        + json.dumps({"id": "y", "messages": MESSAGES})
        + "\n"
        + '{"id": "z", "messages": [\n'
    )
    out = run(repo, "import", "chat", str(lines), code=1)
    assert f"{lines}:3: not a JSON value" in out.output
    array = tmp_path / "bad.json"
    good = json.dumps({"id": "ok", "messages": MESSAGES}, indent=1)
    array.write_text("[\n" + good + ",\n" + '{"id": "broken", "messages": [}' + "\n]\n")
    out = run(repo, "import", "chat", str(array), code=1)
    assert f"{array}:{good.count(chr(10)) + 3}:" in out.output
    wrong = write(tmp_path / "wrong.json", [{"id": "w", "messages": [{"content": "no role"}]}])
    assert f'{wrong}:2: message 1: "role"' in run(repo, "import", "chat", str(wrong), code=1).output
    csv = tmp_path / "notes.csv"
    csv.write_text("\n\nname,text\n")
    out = run(repo, "import", "chat", str(csv), code=1)
    assert f"{csv}:3: expected OpenAI chat messages" in out.output
    assert git(repo, "rev-parse", "HEAD") == head  # nothing written, not even conversation x
    assert git(repo, "status", "--porcelain") == ""
    assert MemoryManager(repo).session_ids() == ["chat:ok-58fbbf62"]


def test_session_option(repo: Path, tmp_path: Path) -> None:
    many = write(tmp_path / "many.json", [{"messages": MESSAGES}, {"messages": MESSAGES}])
    out = run(repo, "import", "chat", str(many), "--session", "mine", code=1)
    assert "more than one conversation" in out.output
    assert MemoryManager(repo).session_ids() == []
    run(repo, "import", "chat", str(write(tmp_path / "one.json", MESSAGES)), "--session", "mine")
    assert MemoryManager(repo).session_ids() == ["mine"]
    out = run(repo, "import", "chat", str(many), "--tz", "Mars/Olympus", code=1)
    assert "--tz 'Mars/Olympus'" in out.output


def test_dry_run_writes_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(imports, "LOG_EVERY_S", 0.0)  # draw the progress line at once
    head = git(repo, "rev-parse", "HEAD")
    out = run(
        repo, "--json", "import", "chat", str(write(tmp_path / "t.json", MESSAGES)), "--dry-run"
    )
    doc = json.loads(out.output)
    assert doc["dry_run"] is True and doc["turns_added"] == 5 and doc["commit"] is None
    out = run(repo, "import", "chat", str(tmp_path / "t.json"), "--dry-run")
    assert out.stdout.startswith("would import 1 session(s), 5 new turn(s)")
    assert "chat: [" in out.stderr and "100% 1 sessions, 5 new turns" in out.stderr  # progress
    assert git(repo, "rev-parse", "HEAD") == head
    assert MemoryManager(repo).session_ids() == []


def test_secrets_are_redacted_and_reimport_stays_quiet(repo: Path, tmp_path: Path) -> None:
    source = write(
        tmp_path / "keys.json",
        [
            {"role": "user", "content": f"my key is {KEY}, keep it"},
            {"role": "assistant", "content": "I will not repeat it."},
        ],
    )
    run(repo, "import", "chat", str(source))
    stored = git(repo, "grep", "-c", "keep it", "HEAD", "--", "sessions")
    assert stored.strip().endswith(":1")
    assert KEY not in git(repo, "log", "-p", "--all")
    head = git(repo, "rev-parse", "HEAD")
    out = json.loads(run(repo, "--json", "import", "chat", str(source)).output)
    assert out["conflicts"] == [] and git(repo, "rev-parse", "HEAD") == head


def test_hostile_ids_stay_inside_sessions(repo: Path, tmp_path: Path) -> None:
    hostile = ["../x", "../../etc/passwd", "a\x00b", "y" * 500, "/abs"]
    source = write(tmp_path / "h.json", [{"id": key, "messages": MESSAGES[1:3]} for key in hostile])
    run(repo, "import", "chat", str(source))
    ids = MemoryManager(repo).session_ids()
    assert len(ids) == len(hostile)
    assert all("\x00" not in i and len(i) < 200 for i in ids)
    files = git(repo, "ls-files", "-z").split("\0")
    assert len([f for f in files if f.startswith("sessions/")]) == len(hostile)
    assert all(f.startswith("sessions/") or "/" not in f for f in files)
    assert not (repo.parent / "x.md").exists() and not (repo.parent / "x").exists()


# --- reading big files ---------------------------------------------------------------------


def test_the_stream_reader_cuts_anywhere(tmp_path: Path) -> None:
    values = [
        {"t": 'naïve ☕ \\" \u2028 end', "n": [12345, -0.5e-3, True, None]},
        [],
        {},
        "plain",
        987654321,
        [[1], {"deep": ["x" * 50]}],
    ]
    text = json.dumps(values, ensure_ascii=False, indent=1)
    for chunk in (1, 2, 3, 7, 64):
        stream = jsonstream.JsonStream("f.json", io.BytesIO(text.encode()), chunk=chunk)
        got = [e.value for e in jsonstream.top_level(stream) if e.kind == "item"]
        assert got == values, chunk
    lines = [
        e.line
        for e in jsonstream.top_level(
            jsonstream.JsonStream("f.json", io.BytesIO(text.encode()), chunk=5)
        )
    ]
    assert lines[0] == 1 and lines[2] == text.split("\n").index(" [],") + 1
    broken = text.encode().replace(b"987654321", b"98765x4321")
    with pytest.raises(ImportFormatError, match=r"f\.json:\d+: expected ',' or ']'"):
        list(jsonstream.top_level(jsonstream.JsonStream("f.json", io.BytesIO(broken), chunk=4)))


def _generate(path: Path, count: int, *, jsonl: bool) -> None:
    def conversation(n: int) -> dict[str, Any]:
        return {
            "id": f"conv-{n}",
            "created": 1700000000 + n,
            "messages": [
                {"role": "user", "content": f"question {n} " + "words " * 20},
                {"role": "assistant", "content": f"answer {n} " + "more words " * 30},
            ],
        }

    with path.open("w") as out:
        if not jsonl:
            out.write("[")
        for n in range(count):
            if jsonl:
                out.write(json.dumps(conversation(n)) + "\n")
            else:
                out.write(("," if n else "") + json.dumps(conversation(n)))
        if not jsonl:
            out.write("]")


def _peak(path: Path) -> int:
    tracemalloc.start()
    try:
        count = sum(1 for _ in chat.read_chat(path))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert count


@pytest.mark.parametrize("jsonl", [True, False], ids=["jsonl", "json-array"])
def test_reading_keeps_memory_flat(
    tmp_path: Path, jsonl: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", 16384)
    small, big = tmp_path / "small", tmp_path / "big"
    _generate(small, 300, jsonl=jsonl)
    _generate(big, 1200, jsonl=jsonl)
    assert big.stat().st_size > 4 * 16384 * 4
    _peak(small)  # first use builds validators and caches: not what is measured
    ratio = _peak(big) / _peak(small)
    assert ratio < 1.6, ratio  # four times the file, about the same peak


def test_a_huge_file_is_checked_first_then_committed_in_parts(store: Path, tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"c{n}", "messages": MESSAGES}) for n in range(6)]
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join([*lines, "{broken"]) + "\n")
    mm = MemoryManager(store, init=True)
    head = git(store, "rev-parse", "HEAD")
    with pytest.raises(ImportFormatError, match=f"{path}:7"):
        chat.import_chat(mm, path, part_size=100)
    assert git(store, "rev-parse", "HEAD") == head  # the check pass found it: nothing written
    path.write_text("\n".join(lines) + "\n")
    result = chat.import_chat(mm, path, part_size=100)
    assert len(result.commits) > 1
    assert "Gitmem-Import-Part: 2" in git(store, "log", "--format=%(trailers)")
    assert sorted(mm.session_ids()) == sorted(f"chat:c{n}" for n in range(6))
    assert chat.import_chat(mm, path, part_size=100).commits == []


def _import_within(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gitmem import chat`` in its own process, so a walk that never ends fails the test
    at the timeout instead of hanging the suite."""
    return subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(store), "import", "chat", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("extra", [(), ("--dry-run",)], ids=["import", "dry-run"])
def test_a_cycle_of_children_without_current_node_is_a_clear_error(
    repo: Path, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    conversation = chatgpt_conversation()
    del conversation["current_node"]
    mapping = conversation["mapping"]
    mapping["a2new"]["children"] = ["u2new"]  # u2new -> ... -> a2new -> u2new
    mapping["a1"]["children"] = ["u2new"]
    path = write(tmp_path / "conversations.json", [conversation])
    head = git(repo, "rev-parse", "HEAD")
    done = _import_within(repo, str(path), *extra)
    assert done.returncode == 1, done.stderr
    assert f"{path}" in done.stderr and "is its own descendant" in done.stderr
    assert "Traceback" not in done.stderr
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_mapping_node_that_is_a_string_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    conversation = chatgpt_conversation()
    conversation["mapping"]["u2new"] = "not a node"
    path = write(tmp_path / "conversations.json", [conversation])
    head = git(repo, "rev-parse", "HEAD")
    done = _import_within(repo, str(path))
    assert done.returncode == 1, done.stderr
    assert f"{path}:" in done.stderr and "Traceback" not in done.stderr
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_conversation_id_holding_a_secret_is_mapped_not_fatal(repo: Path, tmp_path: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    source = write(
        tmp_path / "s.json",
        [{"id": f"deploy-{token}", "messages": MESSAGES}, {"id": "plain", "messages": MESSAGES}],
    )
    out = run(repo, "import", "chat", str(source))
    assert "2 session(s)" in out.output
    ids = MemoryManager(repo).session_ids()
    assert len(ids) == 2 and any("REDACTED" in i and "~" in i for i in ids), ids
    assert token not in git(repo, "log", "-p", "--all", "--format=%B")


def test_export_import_export_is_byte_identical_with_tool_calls(repo: Path, tmp_path: Path) -> None:
    chatgpt = chatgpt_conversation()
    run(repo, "import", "chat", str(write(tmp_path / "c.json", [chatgpt])))
    source = write(tmp_path / "talk.json", MESSAGES)
    run(repo, "import", "chat", str(source))
    for session_id in ("chat:talk-58fbbf62", "chatgpt:6f1d-lisbon"):
        first = run(repo, "export", "chat", session_id).output
        doc = json.loads(first)
        back = tmp_path / f"{session_id.replace(':', '-')}.json"
        back.write_text(first, encoding="utf-8")
        fresh = tmp_path / f"fresh-{session_id.replace(':', '-')}"
        run(fresh, "init")
        run(fresh, "import", "chat", str(back), "--session", "again")
        assert run(fresh, "export", "chat", "again").output == first
        stored = MemoryManager(repo).load_memory(session_id)
        again = MemoryManager(fresh).load_memory("again")
        assert stored is not None and again is not None
        assert [t.timestamp for t in again.interactions] == [
            t.timestamp.replace(microsecond=0) for t in stored.interactions
        ]
        assert again.extra.get("title") == doc.get("title")
    messages = json.loads(run(repo, "export", "chat", "chat:talk-58fbbf62").output)["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    }
    assert messages[3] == {"role": "tool", "content": "18C, sunny", "tool_call_id": "call_1"}


def test_unanswered_calls_and_orphan_tool_messages_stay_valid(repo: Path) -> None:
    mm = MemoryManager(repo)
    mm.save_messages(
        "tools",
        [
            Message(speaker="User", content="Run it"),
            Message(speaker="Assistant", content='Trying.\n[tool: run {"x":1}]'),
            Message(speaker="User", content="Stop"),
            Message(speaker="Tool", content="late output"),
        ],
    )
    messages = chat.export_chat(mm, "tools")["messages"]
    assert messages[1] == {"role": "assistant", "content": 'Trying.\n[tool: run {"x":1}]'}
    assert messages[3] == {"role": "user", "name": "Tool", "content": "late output"}


def test_a_chatgpt_title_is_shown_and_searchable(repo: Path, tmp_path: Path) -> None:
    conversation = chatgpt_conversation()
    conversation["title"] = "Quokka itinerary"
    run(repo, "import", "chat", str(write(tmp_path / "c.json", [conversation])))
    listed = run(repo, "list").output
    assert "chatgpt:6f1d-lisbon" in listed and "\tQuokka itinerary" in listed
    assert json.loads(run(repo, "--json", "list").output)[0]["title"] == "Quokka itinerary"
    assert "title: Quokka itinerary" in run(repo, "show", "chatgpt:6f1d-lisbon").output
    hits = json.loads(run(repo, "--json", "search", "quokka").output)["hits"]
    assert {h["session_id"] for h in hits} == {"chatgpt:6f1d-lisbon"}
    first = MemoryManager(repo).load_memory("chatgpt:6f1d-lisbon")
    assert first is not None and hits[0]["interaction_id"] == first.interactions[0].id
    # a new title (the conversation renamed in ChatGPT) is found, the old one is not
    conversation["title"] = "Wombat plans"
    run(repo, "import", "chat", str(write(tmp_path / "c.json", [conversation])))
    assert json.loads(run(repo, "--json", "search", "wombat").output)["hits"]


def test_an_unchanged_file_is_not_read_again(repo: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "talk.json", MESSAGES)
    assert json.loads(run(repo, "--json", "import", "chat", str(source)).output)["commit"]
    again = json.loads(run(repo, "--json", "import", "chat", str(source)).output)
    assert again["unchanged_files"] == 1 and again["sessions"] == [] and not again["commit"]
    write(source, [*MESSAGES, {"role": "user", "content": "New question"}])
    changed = json.loads(run(repo, "--json", "import", "chat", str(source)).output)
    assert changed["unchanged_files"] == 0 and changed["turns_added"] == 1
