"""``gitmem demo``: the whole lifecycle on built-in defaults, offline, in a fresh store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gitmem.errors import GitmemError
from gitmem.manager import MemoryManager

_START = datetime(2024, 4, 15, 15, 30, 22, tzinfo=timezone(timedelta(hours=8)))

_ASYNCIO_TURNS = [
    (
        "Recommend some books on Python asyncio.",
        "Try 'Using Asyncio in Python' (Caleb Hattingh) and chapters 18-21 of 'Fluent Python'.",
    ),
    ("Who wrote Fluent Python?", "Luciano Ramalho."),
    (
        "I prefer short books, under 200 pages.",
        "Then start with 'Using Asyncio in Python': about 160 pages.",
    ),
    (
        "I'm writing a web crawler with aiohttp for my thesis, due in June.",
        "Then read its chapter on aiohttp first.",
    ),
]

_ZH_TURNS = [
    (
        "Python装饰器是什么？",
        "装饰器是一个接收函数并返回新函数的可调用对象，常用于日志、缓存和权限检查。",
    ),
    (
        "能举个缓存的例子吗？",
        "可以用 functools.lru_cache 装饰一个函数，重复调用时直接返回缓存结果。",
    ),
    ("我在给公司的订单服务加Redis缓存。", "那可以先缓存订单详情，再设置过期时间。"),
]


def run_demo(path: Path, echo: Callable[[str], None] = print) -> None:
    """Build a demo store at ``path`` (a new or empty folder) and walk through saving,
    reading and auditing it."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        # demo turns and facts must never land in a real store, nor twice in one
        raise GitmemError(
            f"{path}: not an empty folder; the demo builds its own store "
            "(give a new folder, or none for a temporary one)"
        )
    echo(f"== gitmem demo in {path}")
    with MemoryManager.init(path, agent="demo-agent", model="offline") as mm:
        echo("\n== 1. Save turns: every save is one git commit")
        for n, (user, assistant) in enumerate(_ASYNCIO_TURNS):
            sha = mm.save_interaction(
                "python-asyncio",
                user,
                assistant,
                timestamp=_START + timedelta(minutes=5 * n),
                tags=["python", "books"],
            )
            echo(f"  saved turn {n + 1} -> commit {sha[:12] if sha else '-'}")
        zh = MemoryManager(path, agent="demo-agent", language="zh")
        with zh.batch("Import a Chinese session") as result:
            for n, (user, assistant) in enumerate(_ZH_TURNS):
                zh.save_interaction(
                    "装饰器-讨论", user, assistant, timestamp=_START + timedelta(days=1, minutes=n)
                )
        echo(f"  batch of {len(_ZH_TURNS)} turns in one commit -> {(result.commit or '-')[:12]}")

        echo("\n== 2. The session file is plain Markdown")
        shown = next((mm.path / "sessions").glob("**/python-asyncio.md"))  # sessions/<xx>/
        text = shown.read_text(encoding="utf-8")
        echo("\n".join("  | " + line for line in text.splitlines()[:24]))

        echo("\n== 3. List and load")
        for session in mm.list_sessions():
            echo(f"  {session.id}: {len(session.interactions)} turns, tags {session.tags}")
        loaded = mm.load_memory("python-asyncio")
        assert loaded is not None
        echo(f"  last turn: {loaded.interactions[-1].messages[0].content!r}")

        echo("\n== 4. Search (keyword + fuzzy, CJK-aware) and a context within a token budget")
        for query in ("short asyncio book", "Python装饰器 缓存"):
            hits = mm.search(query, k=2)
            echo(f"  {query!r}:")
            for hit in hits:
                echo(
                    f"    {hit.score:.2f} {hit.session_id}#{hit.interaction_id}: "
                    f"{hit.snippet[:60]!r}"
                )
        context = mm.retrieve_context("python-asyncio", "who wrote it?", max_tokens=200)
        echo(f"  retrieve_context: {len(context)} chat messages within 200 tokens")

        echo("\n== 5. Summarize offline: the summary is its own commit")
        sha = mm.summarize("python-asyncio", offline=True)
        summarized = mm.load_memory("python-asyncio")
        assert summarized is not None and summarized.summary is not None
        echo(f"  summary commit {sha[:12]} by {summarized.summary.model}:")
        echo("\n".join("  | " + line for line in summarized.summary.text.splitlines()))

        echo("\n== 6. Curated facts: what the agent knows across sessions, with provenance")
        learned = mm.consolidate(offline=True)
        person = mm.remember("The user reads on a Kindle.", section="Preferences", by_hand=True)
        echo(
            f"  consolidate offline -> {learned.status}, {len(learned.changes)} facts from "
            f"turns and summaries; remember -> fact {person.id}, written by hand"
        )
        memory = (mm.path / mm.facts_path).read_text(encoding="utf-8")
        echo("\n".join("  | " + line for line in memory.splitlines()[:16]))
        context = mm.retrieve_context("python-asyncio", "which book should I read?", max_tokens=300)
        opening = context[0]["content"].splitlines() if context else ["(no context)"]
        echo("  retrieve_context('which book should I read?') opens with the facts that matter:")
        echo("\n".join("  | " + line for line in opening[:4]))

        echo("\n== 7. Undo the summary commit; the turns saved after it stay")
        mm.save_interaction(
            "python-asyncio",
            "Is there an audiobook?",
            "Not that I know of.",
            timestamp=_START + timedelta(minutes=30),
        )
        undo = mm.revert(sha)
        after = mm.load_memory("python-asyncio")
        assert after is not None
        echo(
            f"  revert commit {(undo or '-')[:12]}: summary now "
            f"{'gone' if after.summary is None else 'present'}, "
            f"{len(after.interactions)} turns kept"
        )
        before = mm.at(sha + "~1").load_memory("python-asyncio")
        echo(
            f"  as of the commit before the summary: {len(before.interactions) if before else 0}"
            " turns"
        )
        for rev in mm.history("python-asyncio", limit=3):
            echo(f"  {rev.sha[:12]} {rev.op or '-':10} {rev.subject}")

        echo("\n== 8. Validate every file (gitmem check)")
        problems = mm.check()
        echo("  " + ("\n  ".join(str(p) for p in problems) if problems else "all files clean"))

        echo("\n== 9. The audit trail is git itself")
        log = mm.repository.git("log", "--format=%h %an: %s%n    %(trailers:separator=; )")
        echo("\n".join("  " + line for line in log.splitlines()))
        status = mm.repository.git("status", "--porcelain")
        echo(f"\n  git status --porcelain: {status or 'clean'}")
    echo("\n== done")
    echo(f"  see it in a browser: gitmem --repo {path} web   (needs the web extra)")
