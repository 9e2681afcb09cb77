"""The gitmem files one save runs through, in the order it first enters each.

    python benchmarks/trace_save.py            # a warm save into a store of a few sessions
    python benchmarks/trace_save.py --calls    # every function entered, in order

A reader's map of the save path: which file to open next when following
``MemoryManager.save_interaction`` down to the branch's ref update. The store and the
manager are warmed by one save first, so lazy set-up does not show as part of a save.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import gitmem
from gitmem import MemoryManager

ROOT = Path(gitmem.__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", action="store_true", help="list every function entered")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        mm = MemoryManager.init(Path(folder) / "store")
        for n in range(3):
            mm.save_interaction(f"s{n}", "warm up", "ok")
        files: list[str] = []
        calls: list[str] = []

        def trace(frame: FrameType, event: str, arg: Any) -> None:
            if event != "call":
                return
            path = Path(frame.f_code.co_filename)
            if ROOT not in path.parents:
                return
            name = str(path.relative_to(ROOT.parent))
            if name not in files:
                files.append(name)
            calls.append(f"{name}:{frame.f_code.co_qualname}")

        sys.setprofile(trace)
        try:
            mm.save_interaction("s1", "Where do I keep the spare key?", "Under the blue pot.")
        finally:
            sys.setprofile(None)
        mm.close()
    shown = calls if args.calls else files
    for n, line in enumerate(shown, 1):
        print(f"{n:3d}  {line}")
    print(f"{len(files)} files, {len(calls)} function calls")


if __name__ == "__main__":
    main()
