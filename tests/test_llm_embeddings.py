"""Optional embeddings: the settings, the client call and its checks, vectors in
the index, fusion with the lexical ranking, and every way the server can fail.

The embedding server is tests/fake_openai.py, a real HTTP server on 127.0.0.1 that answers
``/v1/embeddings`` with deterministic vectors (a hashed bag of stemmed words, with planted
synonyms sharing a bucket), reached through the real ``openai`` client.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ConfigError, GitmemError
from gitmem.llm.embeddings import EmbedConfig, embed_texts
from gitmem.search import vectors
from gitmem.search.catchup import index_path
from gitmem.search.index import SearchIndex
from tests.conftest import git
from tests.fake_openai import (
    FakeServer,
    closed_port,
    embedder,
    embeddings,
    error,
    llm_server,
    vector_of,
)

__all__ = ["llm_server"]  # the fixture, imported for pytest

DIMS = 48
SYNONYMS = {"puppy": "dog", "automobile": "car"}


@pytest.fixture
def server(llm_server: FakeServer) -> FakeServer:
    llm_server.default = embedder(DIMS, SYNONYMS)
    return llm_server


def config(server: FakeServer, **extra: Any) -> EmbedConfig:
    return EmbedConfig(
        **{"model": "fake-embed", "base_url": server.base_url, "timeout": 5.0, **extra}
    )


@pytest.fixture
def mm(store: Path) -> Iterator[MemoryManager]:
    manager = MemoryManager.init(store)
    manager.save_interaction("pets", "We adopted a dog from the shelter", "What is its name?")
    manager.save_interaction("pets", "His name is Biscuit", "Lovely name")
    manager.save_interaction("cars", "My car broke down on the highway", "Call a mechanic")
    manager.update_metadata("cars", add_tags=["vehicles"])
    yield manager
    manager.close()


def inputs(server: FakeServer) -> list[list[str]]:
    return [r["input"] if isinstance(r["input"], list) else [r["input"]] for r in server.requests]


def vector_rows(store: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(index_path(MemoryManager(store).repository)) as db:
        return [(str(m), int(d)) for m, d in db.execute("SELECT model, dims FROM vectors")]


# --- settings and the client -----------------------------------------------------------


def test_the_client_sends_batches_and_returns_one_vector_per_text(server: FakeServer) -> None:
    texts = ["one dog", "two cats", "three birds", "four fish", "five"]
    found = embed_texts(config(server, batch_size=2, dimensions=DIMS), texts)
    assert [len(batch) for batch in inputs(server)] == [2, 2, 1]
    assert all(r["model"] == "fake-embed" and r["dimensions"] == DIMS for r in server.requests)
    assert server.paths == ["/v1/embeddings"] * 3
    assert found[1] == pytest.approx(vector_of("two cats", DIMS), abs=1e-6)


def _nan(request: dict[str, Any]) -> Any:
    return embeddings([[math.nan] * DIMS for _ in request["input"]], request)


def _short(request: dict[str, Any]) -> Any:
    return embeddings([[1.0] * (DIMS // 2) for _ in request["input"]], request)


def _zeros(request: dict[str, Any]) -> Any:
    return embeddings([[0.0] * DIMS for _ in request["input"]], request)


def _one_less(request: dict[str, Any]) -> Any:
    return embeddings([[1.0] * DIMS for _ in request["input"]][:-1], request)


BAD_ANSWERS = {
    "nan": (_nan, "not a finite number"),
    "wrong dimensions": (_short, f"has {DIMS // 2} dimensions, expected {DIMS}"),
    "all zeros": (_zeros, "all zeros"),
    "wrong count": (_one_less, "1 vectors for 2 texts"),
    "http 500": (lambda request: error(500, "the model crashed"), "HTTP 500"),
}


@pytest.mark.parametrize("name", sorted(BAD_ANSWERS))
def test_a_bad_answer_is_an_error_naming_model_url_and_problem(
    server: FakeServer, name: str
) -> None:
    server.default, problem = BAD_ANSWERS[name]
    with pytest.raises(GitmemError) as caught:
        embed_texts(config(server, dimensions=DIMS), ["a dog", "a cat"])
    message = str(caught.value)
    assert "fake-embed" in message and server.base_url in message and problem in message


def test_a_slow_or_absent_server_is_an_error_too(server: FakeServer) -> None:
    server.default = lambda request: (server.sleep(3), embedder(DIMS)(request))[1]
    with pytest.raises(GitmemError, match=r"no answer within 0\.3s"):
        embed_texts(config(server, timeout=0.3), ["a dog"])
    gone = EmbedConfig(model="fake-embed", base_url=f"http://127.0.0.1:{closed_port()}/v1")
    with pytest.raises(GitmemError, match="cannot reach the server"):
        embed_texts(gone, ["a dog"])


def test_settings_come_from_the_variables_over_git_config() -> None:
    assert EmbedConfig.from_env({}) is None  # no model: off
    assert EmbedConfig.from_env({"GITMEM_EMBED_BASE_URL": "http://x/v1"}) is None
    git_values = {
        "gitmem.embed.model": "nomic-embed-text",
        "gitmem.embed.url": "http://a/v1",
        "gitmem.embed.dimensions": "256",
        "gitmem.embed.batch": "16",
    }
    found = EmbedConfig.from_env(
        {
            "GITMEM_EMBED_URL": "http://b/v1",
            "OPENAI_API_KEY": "sk-x",
            "GITMEM_EMBED_TIMEOUT": "2.5",
        },
        git=git_values,
    )
    assert found == EmbedConfig(
        model="nomic-embed-text",
        base_url="http://b/v1",
        api_key=None,
        dimensions=256,
        batch_size=16,
        timeout=2.5,
    )
    openai_own = EmbedConfig.from_env(
        {"GITMEM_EMBED_MODEL": "text-embedding-3-small", "OPENAI_API_KEY": "sk-x"}
    )
    assert openai_own is not None and openai_own.api_key == "sk-x"  # only without a URL
    with pytest.raises(ConfigError, match="GITMEM_EMBED_BATCH"):
        EmbedConfig.from_env({"GITMEM_EMBED_MODEL": "m", "GITMEM_EMBED_BATCH": "0"})
    with pytest.raises(ConfigError, match=r"gitmem\.embed\.colour"):
        EmbedConfig.from_env({}, git={"gitmem.embed.colour": "blue"})


def test_the_store_reads_git_config_and_the_environment(
    store: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    MemoryManager.init(store).close()
    git(store, "config", "gitmem.embed.model", "from-git")
    git(store, "config", "gitmem.embed.url", server.base_url)
    with MemoryManager(store) as manager:
        found = manager.embedding_config()
        assert found is not None and (found.model, found.base_url) == ("from-git", server.base_url)
    monkeypatch.setenv("GITMEM_EMBED_MODEL", "from-env")
    with MemoryManager(store) as manager:
        found = manager.embedding_config()
        assert found is not None and found.model == "from-env"


# --- search ------------------------------------------------------------------------------


def test_a_synonym_is_found_only_with_embeddings(mm: MemoryManager, server: FakeServer) -> None:
    assert list(mm.search("puppy")) == []  # no shared word
    mm.embed_settings = config(server)
    hits = mm.search("puppy", explain=True)
    assert [(h.session_id, h.interaction_id) for h in hits][:1] == [
        ("pets", mm.load_memory("pets").interactions[0].id)
    ]  # type: ignore[union-attr]
    assert hits[0].components["dense"] > 0.3
    assert any("found by meaning only" in n for n in hits.notes)
    assert hits.explanation is not None
    assert hits.explanation["candidates"][0]["components"]["dense"] > 0.3
    # the texts really went through the client: the query and the stored turns
    assert ["puppy"] in inputs(server)
    assert sum(len(batch) for batch in inputs(server)) == 1 + 3


def test_fusion_keeps_a_keyword_match_and_adds_the_meaning(
    mm: MemoryManager, server: FakeServer
) -> None:
    mm.embed_settings = config(server)
    hits = mm.search("automobile highway")
    assert hits[0].session_id == "cars"
    assert hits[0].components["dense"] > 0.3 and hits[0].components["keyword"] > 0


def test_filters_hold_for_hits_found_by_meaning_only(mm: MemoryManager, server: FakeServer) -> None:
    mm.embed_settings = config(server)
    mm.rank_config = mm.rank_config.tuned(dense_min_similarity=0.15)
    assert {h.session_id for h in mm.search("puppy automobile")} == {"pets", "cars"}
    assert {h.session_id for h in mm.search("puppy automobile", tags=["vehicles"])} == {"cars"}
    assert {h.session_id for h in mm.search("puppy automobile", session="pets")} == {"pets"}
    assert list(mm.search("puppy automobile", since="2999-01-01")) == []
    assert list(mm.search("puppy automobile", project="elsewhere")) == []


def _hang(server: FakeServer) -> Any:
    return lambda request: (server.sleep(3), embedder(DIMS)(request))[1]


FAILURES = {
    "wrong dimensions": lambda server: _short,
    "nan": lambda server: _nan,
    "http 500": lambda server: lambda request: error(500, "model crashed"),
    "slow": _hang,
    "wrong count": lambda server: _one_less,
    "connection refused": None,
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_a_failing_server_leaves_the_lexical_hits_and_a_note(
    mm: MemoryManager, server: FakeServer, store: Path, name: str
) -> None:
    head = mm.head()
    make = FAILURES[name]
    if make is None:
        mm.embed_settings = EmbedConfig(
            model="fake-embed", base_url=f"http://127.0.0.1:{closed_port()}/v1"
        )
    else:
        server.default = make(server)
        mm.embed_settings = config(server, timeout=0.3, dimensions=DIMS)
    hits = mm.search("car highway", explain=True)
    assert [h.session_id for h in hits] == ["cars"]
    assert "dense" not in hits[0].components
    assert any("embeddings unused" in n and "fake-embed" in n for n in hits.notes), hits.notes
    assert list(mm.search("puppy")) == []
    assert mm.head() == head and git(store, "status", "--porcelain") == ""


def test_a_failure_while_embedding_memories_keeps_the_dense_query_and_notes_it(
    mm: MemoryManager, server: FakeServer
) -> None:
    mm.embed_settings = config(server)
    good = embedder(DIMS, SYNONYMS)
    server.script = [good, lambda request: error(500, "overloaded")]  # query ok, batch fails
    hits = mm.search("car highway")
    assert [h.session_id for h in hits] == ["cars"]
    assert any("embedding them failed" in n and "HTTP 500" in n for n in hits.notes)


def test_a_huge_query_is_cut_before_it_is_embedded(mm: MemoryManager, server: FakeServer) -> None:
    mm.embed_settings = config(server)
    hits = mm.search("car " * 25_000)  # 100 KB
    assert hits and hits[0].session_id == "cars"
    sent = [text for batch in inputs(server) for text in batch]
    assert max(len(t) for t in sent) <= mm.rank_config.query.max_query_chars


def test_vectors_survive_reopening_and_only_the_query_is_embedded_again(
    mm: MemoryManager, server: FakeServer, store: Path
) -> None:
    mm.embed_settings = config(server)
    mm.search("puppy")
    assert len(vector_rows(store)) == 3
    server.requests.clear()
    with MemoryManager(store) as again:
        again.embed_settings = config(server)
        assert again.search("puppy")[0].session_id == "pets"
        assert inputs(server) == [["puppy"]]


def test_another_model_recomputes_the_vectors(
    mm: MemoryManager, server: FakeServer, store: Path
) -> None:
    mm.embed_settings = config(server)
    mm.search("puppy")
    server.requests.clear()
    mm.embed_settings = EmbedConfig(model="other-embed", base_url=server.base_url)
    assert mm.search("puppy")[0].session_id == "pets"
    assert sum(len(b) for b in inputs(server)) == 1 + 3
    assert {model for model, _ in vector_rows(store)} == {f"other-embed/{DIMS}"}


def test_vectors_of_a_deleted_session_go_with_it(
    mm: MemoryManager, server: FakeServer, store: Path
) -> None:
    mm.embed_settings = config(server)
    mm.search("puppy")
    mm.delete_session("pets")
    mm.search("car")
    assert len(vector_rows(store)) == 1


def test_a_search_embeds_a_bounded_number_of_memories(
    mm: MemoryManager, server: FakeServer
) -> None:
    mm.embed_settings = config(server)
    mm.rank_config = mm.rank_config.tuned(dense_catchup=1)
    hits = mm.search("car highway")
    assert any("2 memories still have no vector" in n for n in hits.notes)
    assert mm.embed_pending() == 2
    server.requests.clear()
    assert not [n for n in mm.search("dog").notes if "no vector" in n]
    assert inputs(server) == [["dog"]]


def test_offline_makes_no_request_at_all(
    mm: MemoryManager, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a chat model is configured, embeddings are not
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    assert mm.embedding_config() is None
    hits = mm.search("car")
    assert hits and server.requests == []
    with pytest.raises(GitmemError, match="no embedding model is configured"):
        mm.embed_pending()


def test_saving_never_fails_when_the_server_is_down(store: Path) -> None:
    with MemoryManager.init(store) as manager:
        manager.embed_settings = EmbedConfig(
            model="fake-embed", base_url=f"http://127.0.0.1:{closed_port()}/v1"
        )
        manager.save_interaction("s", "a dog", "a cat")
        manager.search("dog")
        manager.save_interaction("s", "another dog", "another cat")
        assert len(manager.load_memory("s").interactions) == 2  # type: ignore[union-attr]
        with pytest.raises(GitmemError, match="cannot reach the server"):
            manager.embed_pending()
    assert git(store, "status", "--porcelain") == ""


def test_the_pure_python_scan_gives_the_same_hits(
    mm: MemoryManager, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm.embed_settings = config(server)
    mm.rank_config = mm.rank_config.tuned(dense_min_similarity=0.15)
    fast = [(h.session_id, h.interaction_id) for h in mm.search("puppy automobile")]
    monkeypatch.setattr(vectors, "HAVE_NUMPY", False)
    mm._search._dense.cache.forget()
    slow = mm.search("puppy automobile")
    assert [(h.session_id, h.interaction_id) for h in slow] == fast
    assert any("numpy is not installed" in n for n in slow.notes)


def test_the_embed_command_backfills(
    store: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryManager.init(store) as manager:
        manager.save_interaction("s", "a dog", "a cat")
    monkeypatch.setenv("GITMEM_EMBED_MODEL", "fake-embed")
    monkeypatch.setenv("GITMEM_EMBED_BASE_URL", server.base_url)
    result = CliRunner().invoke(cli, ["--repo", str(store), "--json", "embed"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["embedded"] == 1
    assert vector_rows(store) == [(f"fake-embed/{DIMS}", DIMS)]


# --- the scan ----------------------------------------------------------------------------


def _matrix(rows: list[list[float]], monkeypatch: pytest.MonkeyPatch) -> vectors.Matrix:
    monkeypatch.setattr(vectors, "EXACT_LIMIT", 0)  # every matrix gets the sign-bit pass
    index = SearchIndex(":memory:")
    with index.writing():
        index._db.executemany(
            "INSERT INTO docs(id, skey, kind, iid, pos, speaker, ts, text, terms, dl, norm, hash)"
            " VALUES(?, ?, 0, ?, ?, '', ?, '', x'', 0, 1.0, ?)",
            [(n + 1, n % 3, f"t{n}", n, float(n), n + 1) for n in range(len(rows))],
        )
        index.file.set_counts(len(rows), 0)
    vectors.store(index, "m/5", [(n + 1, row) for n, row in enumerate(rows)])
    return vectors.load(index, "m/5", 5)


def test_the_sign_bit_pass_keeps_the_exact_order_of_what_it_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [vector_of(f"word{n % 7} word{n % 11} word{n % 13}", 5) for n in range(60)]
    matrix = _matrix(rows, monkeypatch)
    assert matrix.bits is not None and len(matrix) == 60
    query = vector_of("word3 word5", 5)
    exact = vectors.nearest(matrix, query, 5, exact=True)
    monkeypatch.setattr(vectors, "MIN_SHORTLIST", 60)  # the shortlist holds every row
    assert vectors.nearest(matrix, query, 5) == exact
    monkeypatch.setattr(vectors, "MIN_SHORTLIST", 10)  # a real shortlist: fewer rows scored
    monkeypatch.setattr(vectors, "OVERSAMPLE", 2)
    found = vectors.nearest(matrix, query, 5)
    by_id = dict(vectors.nearest(matrix, query, 60, exact=True))
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    assert all(by_id[i] == pytest.approx(s) for i, s in found)
    # filters hold in the first pass too: only session 1, only turns from t=30 on
    kept = vectors.nearest(matrix, query, 5, allowed={1}, lo=30.0)
    assert kept and all((i - 1) % 3 == 1 and i - 1 >= 30 for i, _ in kept)


def test_search_with_the_sign_bit_pass_finds_the_synonym(
    mm: MemoryManager, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "EXACT_LIMIT", 0)
    monkeypatch.setattr(vectors, "MIN_SHORTLIST", 2)
    mm.embed_settings = config(server)
    assert mm.embed_pending() == 3
    hits = mm.search("puppy")
    assert (
        mm._search._dense.cache.main is not None and mm._search._dense.cache.main.bits is not None
    )
    assert hits[0].session_id == "pets"
    assert list(mm.search("puppy", tags=["vehicles"])) == []
    mm.rank_config = mm.rank_config.tuned(dense_exact=True)
    assert [h.interaction_id for h in mm.search("puppy")] == [h.interaction_id for h in hits]


def test_explain_and_context_use_the_meaning_too(
    mm: MemoryManager, server: FakeServer, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITMEM_EMBED_MODEL", "fake-embed")
    monkeypatch.setenv("GITMEM_EMBED_BASE_URL", server.base_url)
    result = CliRunner().invoke(cli, ["--repo", str(store), "search", "puppy", "--explain"])
    assert result.exit_code == 0, result.output
    assert "dense" in result.stdout and "reciprocal rank fusion" in result.stdout
    mm.embed_settings = config(server)
    context = mm.retrieve_context("cars", "puppy", 2000, recent_turns=0)
    assert any("adopted a dog" in message["content"] for message in context)


def test_a_new_turn_joins_the_loaded_vectors_without_a_reload(
    mm: MemoryManager, server: FakeServer
) -> None:
    mm.embed_settings = config(server)
    mm.search("puppy")
    loaded = mm._search._dense.cache.main
    mm.save_interaction("garage", "The automobile needs new tyres", "Book the garage")
    hits = mm.search("automobile")
    assert mm._search._dense.cache.main is loaded and mm._search._dense.cache.delta is not None
    assert "garage" in {h.session_id for h in hits}
    assert inputs(server)[-2:] == [
        ["automobile"],
        ["User: The automobile needs new tyres\nAssistant: Book the garage"],
    ]
    mm.delete_session("garage")  # its row stays in the loaded vectors, and is skipped
    assert "garage" not in {h.session_id for h in mm.search("automobile")}
    assert not [n for n in mm.search("car").notes if "no vector" in n]


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("plain English, café", 0),
        ("她读过哪些书", 1),
        ("カタカナ", 1),
        ("한국어", 1),
        ("mixed 中 text", 1),
        ("\u303f edge below kana", 0),
        ("\u3040 first kana", 1),
        ("\u9fff last ideograph", 1),
        ("\ud7af last hangul", 1),
        ("\ud7b0 past hangul", 0),
    ],
)
def test_script_of_matches_the_index_glob(text: str, script: int) -> None:
    """The script of a text in hand is the one the index's GLOB gives a stored text."""
    assert vectors.script_of(text) == script
    index = SearchIndex(":memory:")
    glob = vectors.CJK_GLOB.replace("d.text", "?")
    assert index.file.db.execute(f"SELECT {glob}", (text,)).fetchone()[0] == script
    index.close()
