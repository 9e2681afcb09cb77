"""What offline consolidation writes, on the shared LoCoMo dev conversations: floors.

``benchmarks/bench_memory_quality.py`` imports each conversation into its own namespace,
consolidates and summarizes it offline and measures the memory file and the summaries (see
its docstring). The asserts are floors a little under the figures measured when the
extractor was written (docs/facts-consolidation.md), so they cannot slip unnoticed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]
SCRIPT = _REPO / "benchmarks" / "bench_memory_quality.py"
# the checkout sits beside ``shared/`` (main) or one folder deeper (a worktree under wt/)
_FOUND = [
    p
    for p in (
        Path(os.environ.get("GITMEM_LOCOMO", "/nonexistent")),
        *(
            b / "shared" / "data" / "locomo" / "locomo-dev.json"
            for b in (_REPO.parent, _REPO.parent.parent)
        ),
    )
    if p.is_file()
]
DATA = _FOUND[0] if _FOUND else Path("locomo-dev.json")


@pytest.mark.skipif(not DATA.is_file(), reason="the shared LoCoMo dev data is not here")
def test_offline_memory_reads_like_notes_and_keeps_answers() -> None:
    env = {**os.environ, "GITMEM_EMBED_MODEL": ""}
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(DATA), "--convs", "0-2", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    print(json.dumps(result, indent=1))
    for row in result["rows"]:
        where = row["conversation"]
        assert row["status"] == "committed", where
        assert row["tokens"] <= 2500, where
        assert row["questions"] == 0 and row["prefixed"] == 0, where
        assert row["first_person"] <= 0.05, where
        assert row["misfiled"] == 0, where
    assert result["mean"]["terms_pooled"] >= 0.29
