"""Time the git merge driver's start: one real invocation per merged session file.

    python benchmarks/bench_driver.py --runs 30 --turns 20
    python benchmarks/bench_driver.py --runs 15 --facts 10000   # a memory file instead

git runs the command registered as ``merge.gitmem.driver`` once per session file that both
sides changed, so a ``git pull`` touching many sessions pays one Python start per file.
Setup: a store with one session of ``--turns`` turns, cloned; each side then saves one more
turn to it, and the three versions (base, ours, theirs) are written to files. With
``--facts N`` the merged file is the memory file instead: N facts, then each side remembers
one fact (theirs also forgets one), as two agents sharing a store do. Timed, round
robin in the same run (wall time of the whole process, start included, and its CPU time,
which a loaded machine inflates less; ``--runs`` times each):

  registered driver     the command a store registers today (``git config merge.gitmem.driver``
                        of a freshly opened store), run through ``sh -c`` as git does
  old registration      ``python -P -m gitmem merge-file``, what stores registered before
                        (still works)
  baseline              with ``--baseline DIR``: the old registration run on the gitmem found
                        in DIR (e.g. ``mkdir /tmp/main && git archive main | tar -x -C
                        /tmp/main``), to compare versions in one run
  python -c pass        this interpreter starting and doing nothing (the floor)
  git merge-file        git's own line merge of the same three files (conflicts: both sides
                        appended a turn at the end)

Prints a Markdown table (median, p95, CPU, ratios of the wall medians to the comparators)
and the load average; the machine is shared, so compare ratios from one run.
``--importtime`` also prints the modules the registered driver imports, slowest first.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gitmem import MemoryManager
from gitmem.format.facts import Fact
from gitmem.store.repository import Housekeeping

START = datetime(2024, 1, 1, tzinfo=timezone.utc)
SESSION = "shared_session"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def prepare(work: Path, turns: int) -> tuple[Path, str, dict[str, Path]]:
    """Two diverged stores; returns (ours' folder, registered driver, {O, A, B} files)."""
    quiet = Housekeeping(enabled=False)
    a = MemoryManager.init(work / "a", agent="alice", housekeeping=quiet)
    with a.batch("Seed the shared session"):
        for t in range(turns):
            a.save_interaction(
                SESSION,
                f"seed question {t}",
                f"seed answer {t} " * 8,
                timestamp=START + timedelta(minutes=t),
            )
    subprocess.run(["git", "clone", "-q", str(work / "a"), str(work / "b")], check=True)
    b = MemoryManager(work / "b", agent="bob", housekeeping=quiet)
    base_sha = git(work / "a", "rev-parse", "HEAD").strip()
    a.save_interaction(SESSION, "alice asks", "alice's answer", timestamp=START + timedelta(days=1))
    b.save_interaction(SESSION, "bob asks", "bob's answer", timestamp=START + timedelta(days=2))
    rel = git(work / "a", "ls-files", "--", "sessions").split()[0]  # whatever the layout
    files = work / "files"
    files.mkdir()
    versions = {
        "O": git(work / "a", "show", f"{base_sha}:{rel}"),
        "A": git(work / "a", "show", f"HEAD:{rel}"),
        "B": git(work / "b", "show", f"HEAD:{rel}"),
    }
    paths = {}
    for key, text in versions.items():
        paths[key] = files / f"{key}.md"
        paths[key].write_text(text)
    paths["P"] = Path(rel)
    driver = git(work / "a", "config", "merge.gitmem.driver").strip()
    return work / "a", driver, paths


def prepare_facts(work: Path, count: int) -> tuple[Path, str, dict[str, Path]]:
    """Like :func:`prepare`, for the memory file of ``count`` facts."""
    quiet = Housekeeping(enabled=False)
    a = MemoryManager.init(work / "a", agent="alice", housekeeping=quiet)
    facts = [
        Fact(id=f"f{n:07x}", text=f"Fact {n} about topic {n % 97}.", section=f"Topic {n % 12}")
        for n in range(count)
    ]
    a.change_facts(lambda m: m.with_facts([*m.facts, *facts]), op="remember", subject="Seed")
    subprocess.run(["git", "clone", "-q", str(work / "a"), str(work / "b")], check=True)
    b = MemoryManager(work / "b", agent="bob", housekeeping=quiet)
    base_sha = git(work / "a", "rev-parse", "HEAD").strip()
    a.remember("Alice likes green tea.", section="Topic 3")
    b.remember("Bob speaks Dutch.", section="Topic 5")
    b.forget(facts[count // 2].id)
    rel = git(work / "a", "ls-files", "--", "memory").split()[0]
    files = work / "files"
    files.mkdir()
    paths = {}
    for key, (store, rev) in {"O": ("a", base_sha), "A": ("a", "HEAD"), "B": ("b", "HEAD")}.items():
        paths[key] = files / f"{key}.md"
        paths[key].write_text(git(work / store, "show", f"{rev}:{rel}"))
    paths["P"] = Path(rel)
    driver = git(work / "a", "config", "merge.gitmem.driver").strip()
    return work / "a", driver, paths


def expand(template: str, paths: dict[str, Path], ours: Path) -> str:
    """The driver line with git's placeholders filled in (as git does before ``sh -c``)."""
    values = {"%O": str(paths["O"]), "%A": str(ours), "%B": str(paths["B"]), "%P": str(paths["P"])}
    for key, value in values.items():
        template = template.replace(key, shlex.quote(value))
    return template


def timed(
    argv: list[str], cwd: Path, ours: Path, original: Path, check: bool
) -> tuple[float, float]:
    """(wall ms, CPU ms of the child and its children) of one run on a fresh copy of ours."""
    shutil.copyfile(original, ours)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True)
    took = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check and done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}): {done.stderr.decode()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took * 1000, cpu * 1000


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def importtime(cwd: Path, line: str, ours: Path, original: Path) -> None:
    shutil.copyfile(original, ours)
    done = subprocess.run(
        ["sh", "-c", line],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    rows = []  # "import time: self | cumulative | name", microseconds
    for entry in done.stderr.splitlines():
        fields = entry.removeprefix("import time:").split("|")
        if len(fields) == 3 and fields[0].strip().isdigit():
            rows.append((int(fields[0]), fields[2].strip()))
    gitmem = sorted(name for _, name in rows if name.startswith("gitmem"))
    print(f"\nregistered driver imports {len(rows)} modules; gitmem ones: {', '.join(gitmem)}")
    print(
        "slowest (self, ms):",
        ", ".join(f"{name} {us / 1000:.1f}" for us, name in sorted(rows, reverse=True)[:12]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="invocations of each command")
    parser.add_argument("--turns", type=int, default=20, help="turns in the shared session")
    parser.add_argument("--facts", type=int, help="merge a memory file of this many facts")
    parser.add_argument("--baseline", type=Path, help="a source tree of gitmem to compare")
    parser.add_argument("--importtime", action="store_true", help="list the driver's imports")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.facts:
            store, driver, paths = prepare_facts(work, args.facts)
        else:
            store, driver, paths = prepare(work, args.turns)
        ours = work / "files" / "ours.md"
        old = f"{shlex.quote(sys.executable)} -P -m gitmem merge-file %O %A %B %P"
        commands = {
            "registered driver": ["sh", "-c", expand(driver, paths, ours)],
            "old registration": ["sh", "-c", expand(old, paths, ours)],
            "python -c pass": [sys.executable, "-c", "pass"],
            "git merge-file": [
                "git",
                "merge-file",
                "-L",
                "ours",
                "-L",
                "base",
                "-L",
                "theirs",
                str(ours),
                str(paths["O"]),
                str(paths["B"]),
            ],
        }
        if args.baseline:  # PYTHONPATH comes before the installed gitmem on sys.path
            where = shlex.quote(str(args.baseline.resolve()))
            commands["baseline"] = ["sh", "-c", f"PYTHONPATH={where} " + expand(old, paths, ours)]
            commands = {
                name: commands[name]
                for name in (
                    "registered driver",
                    "old registration",
                    "baseline",
                    "python -c pass",
                    "git merge-file",
                )
            }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for name, argv in commands.items():  # warm the page cache and .pyc files once
            timed(argv, store, ours, paths["A"], check=name.endswith(("driver", "registration")))
        merged = ours.read_bytes()
        for _ in range(args.runs):
            for name, argv in commands.items():
                times[name].append(timed(argv, store, ours, paths["A"], check=False))
        load = os.getloadavg()
        size = paths["A"].stat().st_size
        print(f"driver: `{driver}`")
        what = (
            f"memory file: {args.facts} facts"
            if args.facts
            else f"session file: {args.turns}+1 turns"
        )
        print(
            f"{what}, {size} bytes; merged {len(merged)} bytes; "
            f"{args.runs} runs each; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
            f"on {os.cpu_count()} cores\n"
        )
        floor = statistics.median(wall for wall, _ in times["python -c pass"])
        text = statistics.median(wall for wall, _ in times["git merge-file"])
        print(
            "| command | median ms | p95 ms | CPU median ms | / python -c pass | / git merge-file |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for name, values in times.items():
            walls = [wall for wall, _ in values]
            med = statistics.median(walls)
            cpu = statistics.median(c for _, c in values)
            print(
                f"| {name} | {med:.1f} | {p95(walls):.1f} | {cpu:.1f} | {med / floor:.2f} | "
                f"{med / text:.1f} |"
            )
        if args.importtime:
            importtime(store, expand(driver, paths, ours), ours, paths["A"])


if __name__ == "__main__":
    main()
