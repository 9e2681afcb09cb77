"""Time the start of the ``gitmem`` CLI against ``python -c "import click"``.

    python benchmarks/bench_cli_start.py --runs 15

Each command runs as a fresh ``python`` process, round robin, ``--runs`` times: ``gitmem
--version`` (the group and nothing else), ``gitmem save --help`` and ``gitmem capture
--help`` (a command's module loaded, the store not opened; capture is skipped where the
CLI has no such command), ``gitmem mcp`` refusing a too short token (it exits 1 before
serving), and the floor every click program pays, ``import click``. Prints
a Markdown table of medians and p95 (ms) and each median's ratio to the floor's: the
machine is shared, so compare ratios from one run. ``--importtime`` also prints the ten
slowest imports of ``gitmem --version`` (``python -X importtime``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from functools import partial

from timing import median_p95_ms, timed

COMMANDS = {
    "import click": ["-c", "import click"],
    "gitmem --version": ["-m", "gitmem", "--version"],
    "gitmem save --help": ["-m", "gitmem", "save", "--help"],
    "gitmem capture --help": ["-m", "gitmem", "capture", "--help"],
}
STORE = tempfile.gettempdir() + "/gitmem-bench-cli-start-store"  # never created: refused first
REFUSED = {
    "gitmem mcp, bind refused": [
        *("-m", "gitmem", "--repo", STORE, "mcp"),
        *("--transport", "streamable-http", "--token", "short"),
    ],
}


def _run(args: list[str]) -> int:
    return subprocess.run([sys.executable, *args], capture_output=True, check=False).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    commands = {name: argv for name, argv in COMMANDS.items() if _run(argv) == 0}
    commands |= {name: argv for name, argv in REFUSED.items() if _run(argv) == 1}
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            samples[name].append(timed(partial(_run, argv)))
    floor = median_p95_ms(samples["import click"])[0]
    print("| command | median ms | p95 ms | ratio to import click |")
    print("|---|---|---|---|")
    for name, taken in samples.items():
        median, p95 = median_p95_ms(taken)
        print(f"| {name} | {median:.0f} | {p95:.0f} | {median / floor:.2f} |")
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.importtime:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "gitmem", "--version"],
            capture_output=True,
            text=True,
            check=False,
        )
        rows = [line.split("|") for line in done.stderr.splitlines()[1:] if "|" in line]
        rows.sort(key=lambda row: -int(row[1]))
        print("\nslowest imports of gitmem --version (cumulative us):")
        for row in rows[:10]:
            print(f"  {row[1].strip():>8} {row[2].rstrip()}")


if __name__ == "__main__":
    main()
