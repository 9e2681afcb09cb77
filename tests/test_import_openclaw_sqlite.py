"""``gitmem import openclaw`` on OpenClaw's SQLite era (``openclaw-agent.sqlite``, built from
the schema of the openclaw package 2026.9.6, tests/fixtures/openclaw-sqlite), alone and
together with the JSONL era and the copies a migration leaves, and while a writer holds
the database open in WAL mode."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.importers.openclaw import import_openclaw
from tests.conftest import git

FIXTURE = Path(__file__).parent / "data" / "openclaw"
SCHEMA = Path(__file__).parent / "fixtures" / "openclaw-sqlite" / "schema.sql"
MAIN_ID = "3f6c2a9e-5b1d-4e7a-9c0f-1a2b3c4d5e6f"
GROUP_ID = "9a8b7c6d-0000-4000-8000-00000000beef-topic-42"
MAIN, GROUP = f"openclaw:main:{MAIN_ID}", f"openclaw:main:{GROUP_ID}"
NEW_LINE = (
    '{"type":"message","id":"zz1","parentId":null,"timestamp":"2026-12-02T09:00:00.000Z",'
    '"message":{"role":"user","content":"a question asked after the migration",'
    '"timestamp":1764666000000}}'
)


def _lines(session_id: str) -> list[str]:
    path = FIXTURE / "agents" / "main" / "sessions" / f"{session_id}.jsonl"
    return [line for line in path.read_text().splitlines() if line.strip()]


def _octets(value: object) -> int | None:
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    return len(value) if isinstance(value, bytes) else None


def _database(agent: Path, sessions: dict[str, list[str]]) -> sqlite3.Connection:
    """``agent/openclaw-agent.sqlite`` with ``sessions`` migrated in, its writer left open."""
    path = agent / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path, isolation_level=None)
    # the schema's CHECKs use octet_length (SQLite 3.43, newer than this machine's)
    db.create_function("octet_length", 1, _octets, deterministic=True)
    db.executescript(SCHEMA.read_text())
    db.execute("INSERT INTO schema_meta VALUES ('primary', 'agent', 23, 'main', '2026.9.6', 1, 1)")
    for session_id, lines in sessions.items():
        key = "agent:main:main" if session_id == MAIN_ID else f"agent:main:{session_id}"
        db.execute(
            "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at,"
            " label) VALUES (?, ?, '{}', 1, ?)",
            (key, session_id, "Trip planning" if session_id == GROUP_ID else None),
        )
        db.execute(
            "INSERT INTO session_windows (session_id, session_key, created_at, updated_at,"
            " channel, chat_type) VALUES (?, ?, 1, 1, 'telegram', 'direct')",
            (session_id, key),
        )
        db.executemany(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at)"
            " VALUES (?, ?, ?, 1)",
            [(session_id, seq, line) for seq, line in enumerate(lines, 1)],
        )
    return db


def _turns(mm: MemoryManager, session_id: str) -> list[tuple[str, list[str]]]:
    found = mm.load_memory(session_id)
    assert found is not None
    return [(t.id, [m.content for m in t.messages]) for t in found.interactions]


@pytest.fixture
def jsonl_era(tmp_path: Path) -> MemoryManager:
    """The JSONL fixture imported: what the SQLite era must give again."""
    mm = MemoryManager.init(tmp_path / "jsonl-store")
    import_openclaw(mm, agents_dir=FIXTURE / "agents", tz="UTC")
    return mm


def test_sqlite_era_alone_gives_the_jsonl_eras_sessions(
    jsonl_era: MemoryManager, tmp_path: Path, store: Path
) -> None:
    agents = tmp_path / "home" / "agents"
    _database(agents / "main", {MAIN_ID: _lines(MAIN_ID), GROUP_ID: _lines(GROUP_ID)}).close()
    mm = MemoryManager.init(store)
    result = import_openclaw(mm, agents_dir=agents, tz="UTC")
    assert result.sessions == [MAIN, GROUP]
    for sid in (MAIN, GROUP):
        assert _turns(mm, sid) == _turns(jsonl_era, sid)
    group = mm.load_memory(GROUP)
    assert group.extra["openclaw_key"] == f"agent:main:{GROUP_ID}"
    assert "telegram" in group.tags
    assert mm.load_memory(MAIN).summary is not None
    before = git(store, "rev-parse", "HEAD")
    again = import_openclaw(mm, agents_dir=agents, tz="UTC")
    assert again.commit is None and git(store, "rev-parse", "HEAD") == before


def test_both_eras_and_migrated_copies_make_each_turn_once(
    jsonl_era: MemoryManager, tmp_path: Path, store: Path
) -> None:
    agents = tmp_path / "home" / "agents"
    shutil.copytree(FIXTURE / "agents", agents)
    # the main session migrated (and a turn added since), its file moved aside by doctor;
    # the group session still waits as JSONL, and a leftover copy of main sits beside it
    _database(agents / "main", {MAIN_ID: [*_lines(MAIN_ID), NEW_LINE]}).close()
    archive = agents / "main" / "session-sqlite-import-archive"
    archive.mkdir()
    live = agents / "main" / "sessions" / f"{MAIN_ID}.jsonl"
    shutil.copy(live, archive / f"agent_main_main.{MAIN_ID}.jsonl.imported-1764600000000")
    shutil.copy(live, archive / "agent_main_main.sessions.json.imported-1764600000000")
    mm = MemoryManager.init(store)
    result = import_openclaw(mm, agents_dir=agents, tz="UTC")
    assert sorted(set(result.sessions)) == sorted([MAIN, GROUP])
    assert _turns(mm, GROUP) == _turns(jsonl_era, GROUP)
    main = _turns(mm, MAIN)
    assert main[:-1] == _turns(jsonl_era, MAIN)
    assert main[-1][1] == ["a question asked after the migration"]
    assert len({iid for iid, _ in main}) == len(main)
    live.unlink()  # doctor moves the last JSONL away: nothing changes
    assert import_openclaw(mm, agents_dir=agents, tz="UTC").commit is None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reads_while_openclaw_writes_in_wal_mode_and_never_checkpoints(
    jsonl_era: MemoryManager, tmp_path: Path, store: Path
) -> None:
    agents = tmp_path / "home" / "agents"
    writer = _database(agents / "main", {})
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # only a checkpoint would touch the main file
    path = agents / "main" / "agent" / "openclaw-agent.sqlite"
    main_file = _digest(path)
    writer.execute(
        "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at)"
        " VALUES ('agent:main:main', ?, '{}', 1)",
        (MAIN_ID,),
    )
    writer.execute(
        "INSERT INTO session_windows (session_id, session_key, created_at, updated_at)"
        " VALUES (?, 'agent:main:main', 1, 1)",
        (MAIN_ID,),
    )
    rows = [(MAIN_ID, seq, line) for seq, line in enumerate(_lines(MAIN_ID), 1)]
    writer.executemany(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at)"
        " VALUES (?, ?, ?, 1)",
        rows,
    )
    wal = path.with_name(path.name + "-wal")
    wal_size = wal.stat().st_size
    appended: list[int] = []

    def append(_so_far: object) -> None:
        if not appended:  # OpenClaw writes a new turn while the import reads
            writer.execute(
                "INSERT INTO transcript_events (session_id, seq, event_json, created_at)"
                " VALUES (?, ?, ?, 2)",
                (MAIN_ID, len(rows) + 1, NEW_LINE),
            )
            appended.append(1)

    mm = MemoryManager.init(store)
    import_openclaw(mm, agents_dir=agents, tz="UTC", progress=append)
    assert appended and _turns(mm, MAIN) == _turns(jsonl_era, MAIN)  # one snapshot
    assert _digest(path) == main_file, "the import wrote to or checkpointed the database"
    assert wal.stat().st_size > wal_size  # the writer's frames are still in the WAL
    import_openclaw(mm, agents_dir=agents, tz="UTC")
    assert _turns(mm, MAIN)[-1][1] == ["a question asked after the migration"]
    writer.close()


def test_a_compressed_event_is_left_out_with_a_warning(tmp_path: Path, store: Path) -> None:
    agents = tmp_path / "home" / "agents"
    db = _database(agents / "main", {MAIN_ID: _lines(MAIN_ID)})
    navigation = (
        '{"version":1,"report":{"kind":"leaf"},"navigation":{},"reset":{},"model":{},'
        '"modelBytes":0,"modelWithoutCheckpointBytes":0,"withoutCustomDataBytes":0}'
    )
    db.execute(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd,"
        " event_utf8_bytes, navigation_json) VALUES (?, 999, NULL, 1, x'28b52ffd', 4, ?)",
        (MAIN_ID, navigation),
    )
    db.close()
    result = import_openclaw(MemoryManager.init(store), agents_dir=agents, tz="UTC")
    assert result.sessions == [MAIN]
    assert any(f"{MAIN_ID}:999: compressed event left out" in w for w in result.warnings)
