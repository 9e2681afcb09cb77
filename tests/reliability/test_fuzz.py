"""Hostile input: files cut or spliced anywhere, pathological Markdown, arbitrary ids and
content through a real store, and a 10 MB message.

Extends ``tests/test_format_roundtrip.py`` (which fuzzes the parser on its own) with what
a store meets in practice. ``GITMEM_HYPOTHESIS_EXAMPLES`` (default 2000) scales the CI size:
a quarter of it for the file properties (a random session is costly to draw), a tenth for
those that write to a store; the ``full`` variants run ten times as many.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from gitmem.errors import InvalidSessionId, ParseError, ValidationError
from gitmem.format.parse import parse, parse_bytes
from gitmem.format.paths import session_path
from gitmem.format.render import render
from gitmem.guard.methods import MAX_MESSAGE_BYTES
from gitmem.manager import MemoryManager
from gitmem.models import Message, Session
from tests.conftest import git
from tests.reliability.conftest import ROOT, SIZES
from tests.test_format_roundtrip import CONTENT, NASTY, TEXT, sessions

EXAMPLES = int(os.environ.get("GITMEM_HYPOTHESIS_EXAMPLES", "2000"))
TRIED: Counter[str] = Counter()


def _run(size: str, examples: int, test: Callable[..., None], *strategies: Any) -> int:
    """Run a property with the example count of ``size``; returns how many were tried."""
    count = examples if size == "ci" else examples * 10
    name = test.__name__
    TRIED[name] = 0

    def counted(args: tuple[Any, ...]) -> None:
        TRIED[name] += 1
        test(*args)

    settings(
        max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )(given(st.tuples(*strategies))(counted))()
    return TRIED[name]


def _only_parse_error(data: bytes, path: str = "fuzz.md") -> Session | None:
    try:
        session = parse_bytes(data, path)
    except ParseError as exc:
        assert exc.diagnostics
        assert all(d.path == path and d.line >= 1 for d in exc.diagnostics)
        return None
    assert isinstance(session, Session)
    return session


# --- the parser on what a crash, a merge or a person leaves ----------------------------


def _cut(session: Session, at: float) -> None:
    data = render(session).encode("utf-8")
    _only_parse_error(data[: int(len(data) * at)])


def _splice(a: Session, b: Session, at_a: float, at_b: float) -> None:
    one, two = render(a).split("\n"), render(b).split("\n")
    _only_parse_error("\n".join(one[: int(len(one) * at_a)] + two[int(len(two) * at_b) :]).encode())


def _garble(session: Session, noise: bytes, at: float) -> None:
    data = render(session).encode("utf-8")
    where = int(len(data) * at)
    _only_parse_error(data[:where] + noise + data[where + len(noise) :])


FRACTION = st.floats(0, 1)


@pytest.mark.parametrize("size", SIZES)
def test_a_file_cut_spliced_or_garbled_anywhere_fails_only_with_parse_error(
    size: str, figures: dict[str, Any]
) -> None:
    tried = _run(size, EXAMPLES // 8, _cut, sessions(), FRACTION)
    tried += _run(size, EXAMPLES // 16, _splice, sessions(), sessions(), FRACTION, FRACTION)
    tried += _run(
        size, EXAMPLES // 16, _garble, sessions(), st.binary(min_size=1, max_size=8), FRACTION
    )
    figures.update(examples=tried)


@pytest.mark.parametrize(
    "text",
    [
        "> " * 5000 + "deep",
        "\n".join("> " * n + "x" for n in range(300)),
        "\n".join("  " * n + "- item" for n in range(400)),
        "*" * 20000 + "a" + "_" * 20000,
        "`" * 30000,
        "[" * 10000 + "]" * 10000,
        "<" * 10000 + "div>" * 2000,
        "# Session: x\n\n## Conversation\n\n" + "### 2024-01-01T00:00:00\n" * 3000,
        "# Session: x\n\n## Metadata\n" + "- **k**: v\n" * 5000,
        "\u0301" * 50000,
        "\ud800\udfff" * 1000,
        "\r" * 10000 + "\n" * 10000,
    ],
    ids=lambda t: f"{len(t)}-chars-{t[:8]!r}",
)
def test_pathological_markdown_fails_only_with_parse_error(text: str) -> None:
    try:
        parse(text, "patho.md")
    except ParseError as exc:
        assert all(d.line >= 1 for d in exc.diagnostics)


# --- through a real store ----------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_arbitrary_content_survives_a_save_byte_for_byte(
    store: Path, size: str, figures: dict[str, Any]
) -> None:
    mm = MemoryManager.init(store)
    mm.secret_config = mm.secret_config.__class__(redact=False)  # compare content exactly
    count = Counter[str]()

    def save(content: str, speaker: str) -> None:
        count["n"] += 1
        sid = f"s{count['n'] % 7}"
        try:
            message = Message(speaker=speaker, content=content)
        except Exception:
            return  # not a valid speaker name: refused by the model, nothing to store
        if not content.strip():  # an empty turn is refused, nothing to store
            with pytest.raises(ValidationError, match="empty"):
                mm.save_messages(sid, [message])
            return
        sha = mm.save_messages(sid, [message], interaction_id=f"t{count['n']}")
        assert sha is not None
        session = mm.load_memory(sid)
        assert session is not None
        assert session.interactions[-1].messages[0].content == content
        on_disk = parse_bytes((store / session_path(sid)).read_bytes(), "x.md")
        assert on_disk.interactions[-1].messages[0].content == content

    tried = _run(
        size,
        max(EXAMPLES // 10, 50),
        save,
        CONTENT,
        st.sampled_from(["User", "Assistant", "Caroline", "用户", "x: y"]),
    )
    assert git(store, "status", "--porcelain") == ""
    figures.update(examples=tried)
    mm.close()


@pytest.mark.parametrize("size", SIZES)
def test_a_hand_edit_of_any_text_is_adopted_or_refused_never_lost(
    store: Path, size: str, figures: dict[str, Any]
) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "first", "ok")
    path = store / "sessions" / "a0" / "s.md"

    def edit(text: str) -> None:
        if "\r" in text:  # the store's .gitattributes normalises line ends: not a loss
            text = text.replace("\r", "")
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        written = path.read_bytes()
        assert all(d.line >= 1 for d in mm.check())
        try:
            mm.save_interaction("s", "after the edit", "ok")
        except ParseError as exc:
            assert all(d.path == "sessions/a0/s.md" and d.line >= 1 for d in exc.diagnostics)
            assert path.read_bytes() == written  # a file that does not parse is never touched
        except (ValidationError, InvalidSessionId):
            assert path.read_bytes() == written
        # put a good file back for the next example
        mm.repository.git("checkout", "--", "sessions/a0/s.md")

    lines = st.lists(st.one_of(st.sampled_from(NASTY), TEXT), max_size=12).map("\n".join)
    prefix = render(mm.load_memory("s") or Session(id="s", created=_now(), last_active=_now()))
    tried = _run(
        size, max(EXAMPLES // 20, 30), edit, st.one_of(lines, lines.map(lambda tail: prefix + tail))
    )
    figures.update(examples=tried)
    mm.close()


def _now() -> Any:
    from gitmem.models import now

    return now()


@pytest.mark.parametrize("size", SIZES)
def test_any_session_id_lands_inside_sessions_or_is_refused(
    store: Path, size: str, figures: dict[str, Any]
) -> None:
    mm = MemoryManager.init(store)
    files: dict[Path, str] = {}
    sessions_dir = (store / "sessions").resolve()
    refused = Counter[str]()

    def save(session_id: str) -> None:
        try:
            mm.save_interaction(session_id, "q", "a")
        except (InvalidSessionId, ValidationError) as exc:
            refused[type(exc).__name__] += 1
            return
        target = (store / session_path(session_id)).resolve()
        assert target.parent.parent == sessions_dir  # inside sessions/<xx>/, no traversal
        assert files.setdefault(target, session_id) == session_id  # no two ids share a file
        loaded = mm.load_memory(session_id)
        assert loaded is not None and loaded.id == session_id

    ids = st.one_of(
        st.text(max_size=60),
        st.text(st.sampled_from("./\\%~$: \x00\n\t.-_aA"), min_size=1, max_size=12),
        st.sampled_from(
            [
                "..",
                ".",
                "../x",
                "/abs",
                "a/../..",
                "C:\\x",
                "\\\\server\\s",
                ".git",
                "con",
                "x" * 300,
                "é",
                "e\u0301",
                "Å",
                "Å",
                "a\u200bb",
            ]
        ),
    )
    tried = _run(size, max(EXAMPLES // 10, 50), save, ids)
    assert set(mm.session_ids()) == set(files.values())
    assert git(store, "status", "--porcelain") == ""
    assert not [
        p
        for p in store.iterdir()
        if p.name not in (".git", "sessions", "README.md", ".gitattributes", ".gitmem-layout")
    ]
    figures.update(examples=tried, ids_stored=len(files), ids_refused=sum(refused.values()))
    mm.close()


@pytest.mark.parametrize("namespace", ["team", "../up", "/abs", "a/b", "..", ".hidden", "团队"])
def test_any_namespace_stays_inside_namespaces(store: Path, namespace: str) -> None:
    MemoryManager.init(store).close()
    try:
        mm = MemoryManager(store, namespace=namespace)
        mm.save_interaction("s", "q", "a")
    except (InvalidSessionId, ValidationError):
        return
    written = [p for p in (store / "namespaces").rglob("*.md")]
    assert len(written) == 1
    assert (store / "namespaces").resolve() in written[0].resolve().parents
    mm.close()


# --- very large content --------------------------------------------------------------------

_BIG_SAVE = """
import json, resource, sys, time
from gitmem.manager import MemoryManager

def peak_kb():
    # ru_maxrss carries the parent's peak over fork and exec: reset and read the kernel's
    # own high-water mark where there is one
    try:
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

try:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
except OSError:
    pass
size = int(sys.argv[2])
line = "lorem ipsum dolor sit amet, consectetur adipiscing elit 0123456789\\n"
mm = MemoryManager(sys.argv[1])
base = peak_kb()
content = "".join(line for _ in range(size // len(line) + 1))[:size]
began = time.perf_counter()
sha = mm.save_interaction("big", content, "ok")
saved = time.perf_counter() - began
back = MemoryManager(sys.argv[1]).load_memory("big")
assert back is not None and back.interactions[0].messages[0].content == content
peak = peak_kb()
print(json.dumps({"sha": sha, "base_kb": base, "peak_kb": peak, "save_s": round(saved, 2)}))
"""


def test_a_10_mb_message_is_saved_without_memory_blow_up(
    store: Path, figures: dict[str, Any]
) -> None:
    MemoryManager.init(store).close()
    size = 10 * 1000 * 1000
    done = subprocess.run(
        [sys.executable, "-c", _BIG_SAVE, str(store), str(size)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    grown_mb = (result["peak_kb"] - result["base_kb"]) / 1024
    # the content, and a few copies a save keeps (rendered text, its bytes, the pack) and a
    # load makes: linear in the size, bounded
    assert grown_mb < 25 * size / 1e6, result
    assert git(store, "rev-parse", "HEAD").strip() == result["sha"]
    assert git(store, "status", "--porcelain") == ""
    assert (store / "sessions" / "95" / "big.md").stat().st_size > size
    figures.update(
        message_mb=size / 1e6,
        peak_rss_growth_mb=round(grown_mb),
        peak_rss_mb=round(result["peak_kb"] / 1024),
        save_s=result["save_s"],
    )


def test_a_message_over_the_limit_is_refused_with_the_limit_named(store: Path) -> None:
    assert MAX_MESSAGE_BYTES == 16 * 1024 * 1024
    mm = MemoryManager.init(store)
    mm.max_message_bytes = 1000
    head = mm.head()
    with pytest.raises(ValidationError, match=r"1,500 bytes, over the 1,000-byte limit"):
        mm.save_interaction("s", "é" * 750, "ok")
    mm.save_interaction("s", "x" * 1000, "ok")  # at the limit is fine
    assert mm.head() != head
    head = mm.head()
    session = mm.load_memory("s")
    assert session is not None
    with pytest.raises(ValidationError, match="over the"):
        mm.put_session(
            session.model_copy(
                update={
                    "interactions": [
                        *session.interactions,
                        session.interactions[0].model_copy(
                            update={
                                "id": "big",
                                "messages": [Message(speaker="User", content="y" * 1001)],
                            }
                        ),
                    ]
                }
            )
        )
    assert mm.head() == head
    assert git(store, "status", "--porcelain") == ""
    mm.close()
