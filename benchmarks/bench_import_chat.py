"""Read and import generated chat transcripts: speed and peak memory of ``gitmem import chat``.

    python benchmarks/bench_import_chat.py                  # a ~200 MB JSONL, a 20 MB store import
    python benchmarks/bench_import_chat.py --mb 20 --store-mb 2   # a quick run

Rows (each measured in this run, on files generated into a temporary folder):

* the reader alone (``gitmem.importers.chat.read_chat``, no store) over a ~``--mb`` MB JSONL
  and over the same conversations as one JSON array on one line (ChatGPT's export is one
  such array), against ``json.loads`` of every line (the floor: parsing alone, no sessions);
* its peak traced memory (``tracemalloc``, a second pass) against ``json.load`` of the
  whole array (what a reader that is not streaming holds), both on a ``--compare-mb`` file;
* ``import_chat`` into a fresh store (one commit) of a ``--store-mb`` MB JSONL.

The machine is shared: the load average is printed, and the ratios are the figures to read.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from gitmem import MemoryManager
from gitmem.importers.chat import import_chat, read_chat
from gitmem.store.repository import Housekeeping

_WORD_LINE = (
    "memory git commit agent session summary python search merge branch token "
    "answer question import export stream file line turn user assistant"
)
WORDS = _WORD_LINE.split()


def conversation(rng: random.Random, n: int) -> dict[str, object]:
    """One conversation of 3-6 turns (a system prompt, user/assistant pairs)."""
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are helpful."}]
    for _ in range(rng.randint(3, 6)):
        messages.append({"role": "user", "content": " ".join(rng.choices(WORDS, k=25))})
        messages.append({"role": "assistant", "content": " ".join(rng.choices(WORDS, k=60))})
    return {
        "id": f"conv-{n}",
        "created": 1700000000 + 60 * n,
        "title": f"Talk {n}",
        "messages": messages,
    }


def generate(folder: Path, mb: float) -> tuple[Path, Path, int]:
    """A JSONL file of about ``mb`` MB and the same conversations as a one-line array."""
    rng = random.Random(14)
    lines, array = folder / f"chat-{mb:g}.jsonl", folder / f"chat-{mb:g}.json"
    count = 0
    with lines.open("w") as one, array.open("w") as other:
        other.write("[")
        while one.tell() < mb * 1e6:
            text = json.dumps(conversation(rng, count))
            one.write(text + "\n")
            other.write(("," if count else "") + text)
            count += 1
        other.write("]")
    return lines, array, count


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    found = fn()
    return time.perf_counter() - start, found


def peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def count_sessions(path: Path) -> int:
    return sum(1 for _ in read_chat(path))


def count_turns(path: Path) -> int:
    return sum(len(c.session.interactions) for c in read_chat(path))


def parse_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if json.loads(line))


def load_whole(path: Path) -> int:
    with path.open("rb") as handle:
        return len(json.load(handle))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=200, help="size of the JSONL read (MB)")
    parser.add_argument(
        "--compare-mb",
        type=float,
        default=20,
        help="size of the file for the memory comparison with json.load",
    )
    parser.add_argument(
        "--store-mb", type=float, default=20, help="size of the JSONL imported into a store (MB)"
    )
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores, shared)", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-chat-") as temp:
        folder = Path(temp)
        lines, array, count = generate(folder, args.mb)
        size = lines.stat().st_size / 1e6
        print(f"generated {count} conversations, {size:.0f} MB", file=sys.stderr)
        read_s, turns = timed(lambda: count_turns(lines))
        array_s, _ = timed(lambda: count_sessions(array))
        floor_s, _ = timed(lambda: parse_lines(lines))
        _small_lines, small_array, small_count = generate(folder, args.compare_mb)
        lines_peak = peak(lambda: count_sessions(lines))
        array_peak = peak(lambda: count_sessions(array))
        small_peak = peak(lambda: count_sessions(small_array))
        whole_peak = peak(lambda: load_whole(small_array))
        store_lines, _, store_count = generate(folder, args.store_mb)
        # no background housekeeping: it would still be writing while the folder is removed
        mm = MemoryManager.init(folder / "store", housekeeping=Housekeeping(enabled=False))
        store_s, store_turns = timed(lambda: len(import_chat(mm, store_lines).added))
        mm.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print("| operation | input | seconds | conversations/s | turns/s | comparator | ratio |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| read_chat JSONL | {size:.0f} MB, {count} conv | {read_s:.1f} | {count / read_s:,.0f} "
        f"| {turns / read_s:,.0f} | json.loads per line {floor_s:.1f} s "
        f"| {read_s / floor_s:.1f}x |"
    )
    print(
        f"| read_chat JSON array (one line) | {size:.0f} MB | {array_s:.1f} "
        f"| {count / array_s:,.0f} | {turns / array_s:,.0f} | read_chat JSONL "
        f"| {array_s / read_s:.2f}x |"
    )
    print(
        f"| import_chat into a store (1 commit) | {args.store_mb:g} MB, {store_count} conv "
        f"| {store_s:.1f} | {store_count / store_s:,.0f} | {store_turns / store_s:,.0f} "
        f"| | |"
    )
    print()
    print("| peak traced memory | input | MB | comparator | ratio |")
    print("|---|---|---|---|---|")
    print(f"| read_chat JSONL | {size:.0f} MB | {lines_peak / 1e6:.2f} | | |")
    print(f"| read_chat JSON array | {size:.0f} MB | {array_peak / 1e6:.2f} | | |")
    print(
        f"| read_chat JSON array | {args.compare_mb:g} MB, {small_count} conv "
        f"| {small_peak / 1e6:.2f} | json.load of it {whole_peak / 1e6:.0f} MB "
        f"| {small_peak / whole_peak:.3f}x |"
    )


if __name__ == "__main__":
    main()
