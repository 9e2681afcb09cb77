"""The LoCoMo retrieval benchmark script through real stores, on a tiny synthetic file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_locomo_import import locomo_file  # noqa: F401 (a fixture)

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_locomo.py"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITMEM_EMBED_MODEL": ""}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env
    )


def test_bench_scores_search_through_real_stores(locomo_file: Path, tmp_path: Path) -> None:  # noqa: F811
    out = _bench(str(locomo_file), "--store", "--convs", "0-1", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["conversations"] == ["conv-a", "conv-b"]
    rows = {row["category"]: row for row in result["rows"]}
    overall = rows["overall"]
    assert overall["n"] == 6  # 2 x (2 single-hop + 1 multi-hop); category 5 and no-evidence out
    assert rows["4 single-hop"]["R@5"] == 100.0
    assert rows["4 single-hop"]["S@1"] == 100.0
    assert 0 <= overall["R@5"] <= overall["R@10"] <= overall["R@25"] <= 100
    assert overall["ms/query"] > 0
    text = _bench(str(locomo_file), "--store", "--convs", "1", "--workdir", str(tmp_path / "s"))
    assert text.returncode == 0, text.stderr
    assert "| overall | 3 |" in text.stdout and "offline" in text.stdout
    assert (tmp_path / "s" / "store-1").is_dir()
    usage = _bench(str(locomo_file), "--store", "--convs", "7")
    assert usage.returncode == 1 and "--convs" in usage.stderr
