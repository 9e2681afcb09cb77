"""Time ``purge --text`` on a long store against git filter-repo and git filter-branch, in one run.

    python benchmarks/bench_purge.py                      # 10,000 commits, 3 runs each
    python benchmarks/bench_purge.py --commits 1000 --runs 1

The store: a gitmem store, then commits made with ``git fast-import`` in gitmem's layout
(200 sessions, each commit appends a turn to one of them, with gitmem's message and
trailers). The text to purge is in the first turn and its commit message, so every commit
after it is rewritten (the worst case). Each tool runs on its own copy of the store:

- gitmem: ``MemoryManager.purge(text=...)``: the rewrite, the purge commit and record, the
  reflogs and caches dropped and ``git gc --prune=now``; the rewrite alone (a dry run) is a
  row of its own;
- git filter-repo (``--replace-text`` and ``--replace-message``; it repacks too), when it is
  installed (``pip install --target DIR git-filter-repo``; ``--filter-repo PATH``);
- git filter-branch (``--tree-filter`` with sed, ``--msg-filter``): minutes per thousand
  commits, so it runs on ``--filter-branch-commits`` (1,000) and its time is scaled to the
  store's size (say so in the table).

Then the purge travels: a bare remote holds the store, one clone purges and pushes, and a
second clone, made before the purge and holding 10 turns of its own that were never pushed,
runs ``sync`` (it applies the purge to its own history and pushes). Its comparator is what
the filter tools ask of every other clone: a fresh ``git clone`` of the purged remote (which
loses the unpushed turns).

Medians of ``--runs``; absolute times drift on a shared machine, the ratios are the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gitmem import MemoryManager
from gitmem.format.paths import session_path

SECRET = "X-PASSPORT-7731"
SESSIONS = 200


def _session_text(sid: str, turns: list[str]) -> str:
    head = (
        f"# Session: {sid}\n\n## Metadata\n- **Session ID**: {sid}\n"
        "- **Created**: 2026-01-01T00:00:00+00:00\n- **Last active**: 2026-01-01T00:00:00+00:00\n"
        "- **Participants**: User, Assistant\n\n## Conversation\n"
    )
    return head + "".join(turns)


def build(path: Path, commits: int) -> None:
    """A gitmem store with ``commits`` more commits made by fast-import."""
    MemoryManager.init(path).close()
    turns: dict[str, list[str]] = {}
    out = ["feature done\n"]
    for n in range(commits):
        sid = f"s{n % SESSIONS}"
        words = f"my passport is {SECRET}" if n == 0 else f"question {n} about the project"
        turn = (
            f"\n### 2026-01-01T00:00:00+00:00 {{#i{n:08x}}}\n**User**:\n> {words}\n\n"
            f"**Assistant**:\n> answer {n}\n"
        )
        turns.setdefault(sid, []).append(turn)
        data = _session_text(sid, turns[sid]).encode()
        message = (
            f"Save turn in {sid}: {words}\n\nGitmem-Op: save\nGitmem-Session: {sid}\n"
            f"Gitmem-Agent: bench\nGitmem-Interaction: i{n:08x}\n"
        ).encode()
        when = 1767225600 + n
        out.append("commit refs/heads/main\n")
        out.append(f"committer bench <bench@example.com> {when} +0000\n")
        out.append(f"data {len(message)}\n")
        out.append(message.decode() + "\n")
        if n == 0:
            out.append("from refs/heads/main^0\n")
        out.append(f"M 100644 inline {session_path(sid)}\ndata {len(data)}\n")
        out.append(data.decode() + "\n")
    out.append("done\n")
    subprocess.run(
        ["git", "fast-import", "--quiet", "--force"],
        cwd=path,
        input="".join(out).encode(),
        check=True,
    )
    subprocess.run(["git", "reset", "--hard", "-q"], cwd=path, check=True)
    subprocess.run(["git", "gc", "-q"], cwd=path, check=True)


def _copy(template: Path, where: Path) -> Path:
    if where.exists():
        shutil.rmtree(where)
    shutil.copytree(template, where, symlinks=True)
    return where


def _timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=env)
    return time.perf_counter() - started


def gitmem_purge(store: Path, dry_run: bool) -> float:
    mm = MemoryManager(store)
    started = time.perf_counter()
    report = mm.purge(text=SECRET, dry_run=dry_run)
    took = time.perf_counter() - started
    assert report.commits, "nothing purged"
    mm.close()
    return took


def filter_repo(store: Path, script: str) -> float:
    expressions = store.parent / "expressions.txt"
    expressions.write_text(f"{SECRET}==>[purged]\n")
    command = [sys.executable, script, "--force", "--quiet"]
    command += ["--replace-text", str(expressions), "--replace-message", str(expressions)]
    return _timed(command, store)


def filter_branch(store: Path) -> float:
    env = dict(os.environ, FILTER_BRANCH_SQUELCH_WARNING="1")
    sed = f"s/{SECRET}/[purged]/g"
    tree = f"grep -rlF '{SECRET}' . --exclude-dir=.git | xargs -r sed -i '{sed}'"
    command = ["git", "filter-branch", "-f", "--tree-filter", tree, "--msg-filter"]
    command += [f"sed '{sed}'", "--", "--all"]
    return _timed(command, store, env)


def propagation(template: Path, top: Path, run: int) -> tuple[float, float]:
    """(``sync`` of a stale clone with 10 unpushed turns, fresh ``git clone``) after a purge
    pushed to a bare remote."""
    remote = top / f"remote{run}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(template), str(remote)], check=True)
    purger = MemoryManager.clone(remote.as_uri(), top / f"purger{run}")
    stale = MemoryManager.clone(remote.as_uri(), top / f"stale{run}")
    for n in range(10):
        stale.save_interaction("stale-own", f"unpushed turn {n}", "ok")
    purger.purge(text=SECRET)
    purger.push()
    purger.close()
    started = time.perf_counter()
    result = stale.sync()
    took = time.perf_counter() - started
    assert result.purges and result.pushed, "the stale clone did not apply the purge"
    stale.close()
    fresh = _timed(["git", "clone", "-q", remote.as_uri(), str(top / f"fresh{run}")], top)
    return took, fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--filter-branch-commits", type=int, default=1_000)
    parser.add_argument("--filter-branch-runs", type=int, default=1)
    parser.add_argument("--filter-repo", default=shutil.which("git-filter-repo"))
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="bench-purge-"))
    try:
        started = time.perf_counter()
        template = top / "template"
        build(template, args.commits)
        print(f"built {args.commits} commits in {time.perf_counter() - started:.1f}s")
        rows: dict[str, list[float]] = {"gitmem purge": [], "gitmem rewrite (dry run)": []}
        for run in range(args.runs):
            rows["gitmem rewrite (dry run)"].append(
                gitmem_purge(_copy(template, top / f"dry{run}"), True)
            )
            rows["gitmem purge"].append(gitmem_purge(_copy(template, top / f"g{run}"), False))
            if args.filter_repo:
                store = _copy(template, top / f"fr{run}")
                rows.setdefault("git filter-repo", []).append(filter_repo(store, args.filter_repo))
        for run in range(args.runs):
            synced, cloned = propagation(template, top, run)
            rows.setdefault("clone: gitmem sync applying the purge (10 own turns kept)", []).append(
                synced
            )
            rows.setdefault("clone: fresh git clone of the purged remote", []).append(cloned)
        small = top / "small"
        build(small, args.filter_branch_commits)
        scale = args.commits / args.filter_branch_commits
        fb = f"git filter-branch ({args.filter_branch_commits} commits, x{scale:g})"
        for run in range(args.filter_branch_runs):
            rows.setdefault(fb, []).append(filter_branch(_copy(small, top / f"fb{run}")) * scale)
        ours = statistics.median(rows["gitmem purge"])
        print(f"\n{args.commits} commits, median of {args.runs} run(s)\n")
        print("| tool | median s | time / gitmem purge |")
        print("|---|---|---|")
        for name, samples in rows.items():
            median = statistics.median(samples)
            print(f"| {name} | {median:.2f} | {median / ours:.2f}x |")
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
